"""Animal shogi: pgx's 3x4 game and its preset."""

from __future__ import annotations

from typing import TYPE_CHECKING

from turbozero.config import register_preset
from turbozero.games.core import GameSpec, register_game

if TYPE_CHECKING:
    from turbozero.alphazero.config import AlphaZeroConfig


GAME = register_game(
    GameSpec(name="animal_shogi", description="Animal shogi, 3x4 (2 players)", draws=True)
)


@register_preset(
    "animal_shogi",
    "Animal shogi 3x4 on the default recipe: ResNet 4x32, 32 simulations, 30 minutes on a 2-core "
    "CPU; evaluated against random, 100-simulation rollout MCTS and its own earlier networks (Elo)",
    algorithm="alphazero",
)
def preset() -> AlphaZeroConfig:
    from turbozero.alphazero.config import AlphaZeroConfig, NetworkConfig, SearchConfig

    return AlphaZeroConfig(
        env="animal_shogi",
        num_games=64,
        network=NetworkConfig(kind="resnet", num_blocks=4, num_channels=32),
        search=SearchConfig(num_simulations=32, max_nodes=64),
        max_episode_steps=256,
        truncation="bootstrap",
        train_batch_size=512,
        warmup_steps=16,
        num_epochs=100_000,
        max_wall_seconds=1800.0,  # the budget the preset is measured at (bench/transfer.py)
        eval_every=10,
        eval_games=32,
        eval_opponents=("random", "mcts:100"),
        elo_pool_size=4,
    )
