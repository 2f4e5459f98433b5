"""Hex: pgx's 11x11 game, its drawing of hexagons, its move names and its preset."""

from __future__ import annotations

import math

from turbozero.config import register_preset
from turbozero.gamespec import Board, Cell, GameSpec, register_game, square_label

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


register_preset(
    "hex",
    "Hex 11x11 on the default recipe with 8 gradient steps an epoch (each position sampled 4 "
    "times) and evaluations held to a tenth of the clock: ResNet 4x32, 32 simulations, 30 "
    "minutes on a 2-core CPU; evaluated against random, 100-simulation rollout MCTS and its own "
    "earlier networks (Elo)",
    algorithm="alphazero",
    base="board",
    settings={
        "env": "hex",
        "max_episode_steps": 122,
        # the recipe's 32 steps an epoch spent four fifths of hex's clock on gradient steps:
        # with 8, 158 epochs in 30 minutes against 62 and 0.26 against mcts:100 over 200 games
        # against 0.07 (docs/benchmarks.md); shorter epochs need the evaluations held
        "train_steps_per_epoch": 8,
        "eval_share": 0.1,
    },
)
