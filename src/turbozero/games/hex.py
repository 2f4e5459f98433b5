"""Hex: pgx's 11x11 game, its drawing of hexagons, its move names and its preset."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from turbozero.config import register_preset
from turbozero.games.core import Board, Cell, GameSpec, register_game, square_label

if TYPE_CHECKING:
    from turbozero.alphazero.config import AlphaZeroConfig


SIZE = 11


def hex_cells(n: int = SIZE, side: float = 15.0) -> list[Cell]:
    """Hexagons of side 15 in a rhombus from (60, 45), as pgx draws them; action 121 is swap."""
    return [
        (
            r * n + c,
            60.0 + (c + r / 2) * side * math.sqrt(3),
            45.0 + r * side * 1.5,
            side * math.sqrt(3) / 2,
        )
        for r in range(n)
        for c in range(n)
    ]


GAME = register_game(
    GameSpec(
        name="hex",
        description="Hex, 11x11 (2 players, 122 actions incl. swap)",
        board=Board(
            label=square_label(SIZE, {SIZE * SIZE: "swap"}), cells=hex_cells, coordinates=True
        ),
    )
)


@register_preset(
    "hex",
    "Hex 11x11, ResNet 4x32, 32 simulations, gumbel",
    algorithm="alphazero",
)
def preset() -> AlphaZeroConfig:
    from turbozero.alphazero.config import AlphaZeroConfig, NetworkConfig, SearchConfig

    return AlphaZeroConfig(
        env="hex",
        num_games=64,
        network=NetworkConfig(kind="resnet", num_blocks=4, num_channels=32),
        search=SearchConfig(selector="gumbel", num_simulations=32, max_nodes=33),
        temperature_moves=0,
        max_episode_steps=122,
        memory_capacity=256,
        train_batch_size=512,
        num_epochs=100,
        eval_every=5,
        eval_opponents=("random", "best"),
    )
