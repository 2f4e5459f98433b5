"""Othello: pgx's 8x8 game, its drawing and move names, its symmetries and its preset."""

from __future__ import annotations

from typing import TYPE_CHECKING

from turbozero.config import register_preset
from turbozero.games.core import Board, GameSpec, grid_cells, register_game, square_label

if TYPE_CHECKING:
    from turbozero.alphazero.config import AlphaZeroConfig


GAME = register_game(
    GameSpec(
        name="othello",
        description="Othello, 8x8 (2 players, 65 actions incl. pass)",
        board=Board(  # pgx draws 30-unit cells, 8x8 from (15, 15); action 64 is pass
            label=square_label(8, {64: "pass"}),
            cells=lambda: grid_cells(8, 8, origin=15.0, cell=30.0),
            symmetry=("square", 8),
            coordinates=True,
        ),
    )
)


@register_preset(
    "othello",
    "Othello 8x8, ResNet 4x32, 32 simulations (the tutorial's game; hours on CPU)",
    algorithm="alphazero",
)
def preset() -> AlphaZeroConfig:
    from turbozero.alphazero.config import AlphaZeroConfig, NetworkConfig, SearchConfig

    return AlphaZeroConfig(
        env="othello",
        num_games=64,
        network=NetworkConfig(kind="resnet", num_blocks=4, num_channels=32),
        search=SearchConfig(num_simulations=32, max_nodes=64),
        temperature_moves=15,
        max_episode_steps=80,
        memory_capacity=256,
        augment=True,
        train_batch_size=512,
        num_epochs=100,
        eval_every=5,
        eval_opponents=("random", "best"),
    )
