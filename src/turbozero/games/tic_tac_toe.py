"""Tic-tac-toe: pgx's 3x3 game, drawn with X and O, with a perfect player and every position
labelled.

The perfect player plays from an exhaustive minimax table, built here. Positions are encoded from
the mover's point of view: cell `k` (row-major, the same index as the action that marks it)
holds 0 when empty, 1 for the mover's mark, 2 for the opponent's, and the position's index is
`sum(code[k] * 3**k)`, one of 3^9 = 19683. The table is solved once on the host with numpy
(unreachable encodings are solved too; they are never queried) and handed to the agent as its
`params`, so it lives on the device as a `[19683, 9]` array. Values are from the mover's
perspective: +1 a forced win, 0 a draw, -1 a forced loss.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import TYPE_CHECKING

import jax
import jax.numpy as jnp
import numpy as np

from turbozero.arena.accuracy import PositionSet, solver_metrics
from turbozero.arena.agents import AgentOutput, legal_mask, make_agent, uniform_over_best
from turbozero.config import register_preset
from turbozero.gamespec import (
    ILLEGAL_SCORE,
    Board,
    GameSpec,
    Judge,
    grid_cells,
    register_game,
    square_label,
)
from turbozero.types import Array, Params, PRNGKey, PyTree

if TYPE_CHECKING:
    from turbozero.arena.accuracy import PositionSet
    from turbozero.arena.agents import Agent, AgentOutput
    from turbozero.envs.core import Env

NUM_POSITIONS = 3**9
ILLEGAL = -2.0  # table entry of an occupied cell
LINES = np.array(
    [[0, 1, 2], [3, 4, 5], [6, 7, 8], [0, 3, 6], [1, 4, 7], [2, 5, 8], [0, 4, 8], [2, 4, 6]]
)
POWERS = 3 ** np.arange(9)


@functools.lru_cache(maxsize=1)
def solve_tic_tac_toe() -> np.ndarray:
    """Minimax action values of every position.

    Returns:
        `[19683, 9]` float32: entry `[p, k]` is the value for the mover of marking cell `k` in
        position `p` (encoded as in the module docstring), or `ILLEGAL` (-2) if `k` is occupied.
    """
    index = np.arange(NUM_POSITIONS)
    digits = (index[:, None] // POWERS) % 3  # [N, 9]
    swapped = np.where(digits == 0, 0, 3 - digits)  # the opponent's point of view
    swapped_index = swapped @ POWERS
    opponent_won = np.all(digits[:, LINES] == 2, axis=-1).any(axis=-1)
    mover_won = np.all(digits[:, LINES] == 1, axis=-1).any(axis=-1)
    full = ~(digits == 0).any(axis=-1)
    terminal = opponent_won | mover_won | full
    terminal_value = np.where(opponent_won, -1.0, np.where(mover_won, 1.0, 0.0))

    # After the mover marks k, the opponent is to move in `swapped` with a 2 at k.
    children = swapped_index[:, None] + 2 * POWERS[None, :]  # [N, 9]
    empty = digits == 0
    children = np.where(empty, children, 0)  # occupied cells have no child
    value = np.zeros(NUM_POSITIONS)
    q = np.full((NUM_POSITIONS, 9), ILLEGAL)
    num_empty = empty.sum(axis=-1)
    for e in range(10):  # children have one empty cell fewer: solve them first
        rows = np.flatnonzero(num_empty == e)
        if e > 0:
            child_values = -value[children[rows]]
            q[rows] = np.where(empty[rows] & ~terminal[rows, None], child_values, ILLEGAL)
        best = q[rows].max(axis=-1)
        value[rows] = np.where(terminal[rows], terminal_value[rows], best)
    return (q + 0.0).astype(np.float32)  # no negative zeros


def encode_observations(observations: Array) -> Array:
    """`[B]` int32 position indices from pgx tic-tac-toe observations `[B, 3, 3, 2]`.

    Channel 0 holds the mover's marks and channel 1 the opponent's.
    """
    flat = observations.reshape(observations.shape[0], 9, 2).astype(jnp.int32)
    codes = flat[..., 0] + 2 * flat[..., 1]
    return jnp.sum(codes * jnp.asarray(POWERS, jnp.int32), axis=-1)


@dataclasses.dataclass(frozen=True)
class PerfectPolicy:
    """Uniform among the legal moves of highest minimax value; `params` is the table."""

    env: Env

    def __call__(self, params: Params, states: PyTree, key: PRNGKey) -> AgentOutput:
        observations = jax.vmap(self.env.observe)(states)
        q = params[encode_observations(observations)]  # [B, 9]
        action, weights, value = uniform_over_best(q, legal_mask(self.env, states), key)
        value = jnp.clip(value, -1.0, 1.0)  # terminal rows (all cells full) have no legal move
        return AgentOutput(action, weights, value)


def perfect_tic_tac_toe_agent(env: Env, *, name: str = "perfect") -> Agent:
    """A perfect tic-tac-toe agent (see the module docstring).

    Raises:
        ValueError: if `env` is not tic-tac-toe with 9 actions and `[3, 3, 2]` observations.
    """
    if (
        env.name.removeprefix("pgx:") != "tic_tac_toe"
        or env.num_actions != 9
        or tuple(env.observation_shape) != (3, 3, 2)
    ):
        raise ValueError(
            "perfect_agent supports only tic_tac_toe (9 actions, observation [3, 3, 2]), "
            f"got {env!r}"
        )

    return make_agent(PerfectPolicy(env), jnp.asarray(solve_tic_tac_toe()), name=name)


def all_positions() -> PositionSet:
    """All 4,520 reachable non-terminal tic-tac-toe positions, each reached by one move order,
    scored by the minimax table (+1 win, 0 draw, -1 loss for the mover)."""

    table = solve_tic_tac_toe()
    seen: dict[tuple[int, ...], list[int]] = {}

    def visit(board: list[int], moves: list[int]) -> None:
        # board: 0 empty, 1 first player, 2 second player
        if any(board[a] == board[b] == board[c] != 0 for a, b, c in LINES) or 0 not in board:
            return
        key = tuple(board)
        if key in seen:
            return
        seen[key] = list(moves)
        mover = 1 + len(moves) % 2
        for cell in range(9):
            if board[cell] == 0:
                board[cell] = mover
                visit(board, [*moves, cell])
                board[cell] = 0

    visit([0] * 9, [])
    boards = np.array(list(seen), np.int64)  # [N, 9]
    movers = 1 + np.array([len(m) for m in seen.values()]) % 2
    # the table's encoding: 1 the mover's mark, 2 the opponent's
    mine = boards == movers[:, None]
    codes = np.where(boards == 0, 0, np.where(mine, 1, 2))
    q = table[codes @ POWERS]
    scores = np.where(q <= -2.0, ILLEGAL_SCORE, q).astype(np.float32)
    moves = np.full((len(seen), 9), -1, np.int32)
    for i, m in enumerate(seen.values()):
        moves[i, : len(m)] = m
    return PositionSet(
        "tic_tac_toe",
        moves,
        scores,
        {"plies 0-2": (0, 2), "plies 3-5": (3, 5), "plies 6-8": (6, 8)},
    )


def _positions(env: Env, num_positions: int, seed: int) -> PositionSet:
    del env, num_positions, seed  # (all of them, always)
    return all_positions()


GAME = register_game(
    GameSpec(
        name="tic_tac_toe",
        description="Tic-tac-toe, 3x3 (2 players, 9 actions)",
        draws=True,
        board=Board(  # pgx draws 60-unit cells from (30, 30)
            label=square_label(3),
            cells=lambda: grid_cells(3, 3, origin=30.0, cell=60.0),
            line=(3, 3, 3),
            symmetry=("square", 3),
            marks=("X", "O"),
            coordinates=True,
        ),
        perfect=perfect_tic_tac_toe_agent,
        judge=Judge("a solver", _positions, solver_metrics, sized=False),
    )
)


# Every position counts alike in the accuracy measure, so self-play samples every move at
# temperature 3: the network sees the odd positions bad play leads to (docs/benchmarks.md,
# "Strength per hour", has the ablation)
register_preset(
    "tic_tac_toe",
    "Tic-tac-toe, MLP, 64 simulations (128 in play), under a minute of training on a CPU",
    algorithm="alphazero",
    settings={
        "env": "tic_tac_toe",
        "num_games": 64,
        "temperature": 3.0,
        "temperature_moves": 9,
        "max_episode_steps": 9,
        "memory_capacity": 64,
        "augment": True,
        "learning_rate": 3e-3,
        "train_batch_size": 256,
        "warmup_steps": 9,
        "collection_steps_per_epoch": 9,
        "train_steps_per_epoch": 48,
        "num_epochs": 80,
        "eval_every": 10,
        "eval_games": 64,
        "eval_simulations": 128,
        "eval_opponents": ("random", "perfect"),
        "eval_accuracy": True,
        # (measured before the defaults became the Connect Four recipe; kept as measured)
        "network": {"kind": "mlp", "hidden": (64, 64), "value_bins": 0},
        "search": {"num_simulations": 64, "max_nodes": 80, "c_puct": 1.25, "fpu": "zero"},
        "root_value_weight": 0.0,
        "ema_decay": 0.0,
        "overlap": False,
    },
)
