"""Othello: pgx's 8x8 game, its drawing and move names, its symmetries and its preset."""

from __future__ import annotations

from turbozero.config import register_preset
from turbozero.gamespec import Board, GameSpec, Page, grid_cells, register_game, square_label

GAME = register_game(
    GameSpec(
        name="othello",
        description="Othello, 8x8 (2 players, 65 actions incl. pass)",
        draws=True,
        board=Board(  # pgx draws 30-unit cells, 8x8 from (15, 15); action 64 is pass
            label=square_label(8, {64: "pass"}),
            cells=lambda: grid_cells(8, 8, origin=15.0, cell=30.0),
            symmetry=("square", 8),
            coordinates=True,
        ),
        page=Page(draw_eagerly=True),  # (pgx's drawing turns the board with `lax.cond`)
    )
)


register_preset(
    "othello",
    "Othello 8x8 on the default recipe with 15 sampled moves and 256 positions of memory per "
    "game: ResNet 4x32, 32 simulations, 30 minutes on a 2-core CPU; evaluated against random, "
    "100-simulation rollout MCTS and its own earlier networks (Elo)",
    algorithm="alphazero",
    base="board",
    settings={
        "env": "othello",
        "max_episode_steps": 80,
        # the recipe's every-move sampling and 64-epoch memory did not transfer to othello: with
        # these two kept from the first preset it beat the first recipe 0.95 over 200 games,
        # without them 0.26 (bench/transfer.py, docs/benchmarks.md)
        "temperature_moves": 15,
        "memory_capacity": 256,
        "augment": True,
    },
)
