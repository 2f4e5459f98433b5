"""Animal shogi: pgx's 3x4 game and its preset."""

from __future__ import annotations

from typing import TYPE_CHECKING

from turbozero.config import register_preset
from turbozero.games.core import GameSpec, register_game

if TYPE_CHECKING:
    from turbozero.alphazero.config import AlphaZeroConfig


GAME = register_game(GameSpec(name="animal_shogi", description="Animal shogi, 3x4 (2 players)"))


@register_preset(
    "animal_shogi",
    "Animal shogi 3x4, ResNet 4x32, 32 simulations",
    algorithm="alphazero",
)
def preset() -> AlphaZeroConfig:
    from turbozero.alphazero.config import AlphaZeroConfig, NetworkConfig, SearchConfig

    return AlphaZeroConfig(
        env="animal_shogi",
        num_games=64,
        network=NetworkConfig(kind="resnet", num_blocks=4, num_channels=32),
        search=SearchConfig(num_simulations=32, max_nodes=64),
        temperature_moves=10,
        max_episode_steps=256,
        memory_capacity=256,
        truncation="bootstrap",
        train_batch_size=512,
        num_epochs=100,
        eval_every=5,
        eval_opponents=("random", "mcts:64"),
    )
