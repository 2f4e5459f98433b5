"""Hex: pgx's 11x11 game, its drawing of hexagons, its move names and its preset."""

from __future__ import annotations

import math

import jax.numpy as jnp

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


#: the channel of pgx's hex observation `[11, 11, 4]` (own stones, the opponent's, colour, swap
#: allowed) that says which pair of edges the player to move connects (0: left-right)
COLOUR = 2


def _half_turn(board):
    return jnp.flip(board, axis=(0, 1))


def _transpose(board):
    return jnp.swapaxes(board, 0, 1)


def _symmetry(move, swaps_edges: bool, n: int):
    """`(observation [n, n, 4], policy [n*n+1], mask [n*n+1])`, all moved by `move` (a map of
    `[n, n, ...]` boards); the swap action stays last. A move that turns one player's edges into
    the other's also flips the colour plane: the same stones, owned by the player to move, now
    have to connect the other pair of edges."""

    def fn(obs, policy, mask):
        def actions(v):
            return jnp.concatenate([move(v[: n * n].reshape(n, n)).reshape(-1), v[n * n :]])

        out = move(obs)
        if swaps_edges:
            colour = out[..., COLOUR]
            out = out.at[..., COLOUR].set((1 - colour.astype(jnp.int32)).astype(out.dtype))
        return out, actions(policy), actions(mask)

    return fn


def hex_symmetries(n: int = SIZE) -> list:
    """The 3 non-identity symmetries of Hex on pgx's `n x n` rhombus: the half turn (each
    player keeps their edges), and the mirror through either long diagonal (the transposes of
    the board, which give each player's edges to the other, so the colour plane flips). All
    three keep pgx's six neighbours of a cell as neighbours and commute with the swap move
    (which is itself the transpose)."""
    return [
        _symmetry(_half_turn, False, n),
        _symmetry(_transpose, True, n),
        _symmetry(lambda b: _half_turn(_transpose(b)), True, n),
    ]


GAME = register_game(
    GameSpec(
        name="hex",
        description="Hex, 11x11 (2 players, 122 actions incl. swap)",
        board=Board(
            label=square_label(SIZE, {SIZE * SIZE: "swap"}),
            cells=hex_cells,
            coordinates=True,
            symmetry=hex_symmetries,
        ),
    )
)


register_preset(
    "hex",
    "Hex 11x11 on the default recipe: ResNet 4x32, 32 simulations, 30 minutes on a 2-core CPU; "
    "evaluated against random, 100-simulation rollout MCTS and its own earlier networks (Elo)",
    algorithm="alphazero",
    base="board",
    settings={"env": "hex", "max_episode_steps": 122},
)
