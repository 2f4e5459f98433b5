"""Perfect Connect Four through the `bitbully` solver (the `solvers` extra).

The solver scores every legal move of a position: a positive score is a forced win for the
player to move, 0 a draw, a negative one a forced loss, and a larger magnitude a faster win (a
slower loss). Its opening books ship with the package, so positions of any depth solve in
milliseconds to a fraction of a second on a CPU.

The solver runs on the host. `PerfectConnectFourPolicy` reaches it from compiled matches through
`jax.pure_callback`, one round trip per move of the batch; answers are cached by position.
"""

from __future__ import annotations

import dataclasses
import functools
import threading
from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from turbozero.arena.agents import (
    Agent,
    AgentOutput,
    legal_mask,
    make_agent,
    uniform_over_best,
)
from turbozero.envs.core import Env
from turbozero.io.errors import MissingExtraError
from turbozero.types import Params, PRNGKey, PyTree

ROWS, COLUMNS = 6, 7
ILLEGAL_SCORE = -1000.0  # score of a full column (below every real score, which lie in [-21, 21])
NAMES = ("connect_four", "pgx:connect_four")


def require_bitbully(feature: str = "Connect Four's perfect player") -> Any:
    """The `bitbully` module, or a `MissingExtraError` naming the extra that installs it."""
    try:
        import bitbully
    except ImportError:
        raise MissingExtraError(feature, "solvers", "bitbully") from None
    return bitbully


_SOLVER_LOCK = threading.Lock()


@functools.lru_cache(maxsize=1)
def _solver() -> Any:
    """One solver per process, with its opening book loaded (about 0.2 s)."""
    return require_bitbully().BitBully()


def _scores_of(board: Any) -> np.ndarray:
    """`[7]` float32 scores of `board`'s moves (a `bitbully.Board`), `ILLEGAL_SCORE` on full
    columns."""
    out = np.full(COLUMNS, ILLEGAL_SCORE, np.float32)
    with _SOLVER_LOCK:  # (one solver and its tables; `agent_actions` asks from several threads)
        scores = _solver().score_all_moves(board)
    for column, score in scores.items():
        out[column] = score
    return out


def score_moves(moves: Sequence[int]) -> np.ndarray:
    """`[7]` float32 solver scores of every move after the columns `moves` were played from the
    empty board (`ILLEGAL_SCORE` on full columns).

    Raises:
        ValueError: if a move is not a legal column or the game ended before the last move.
    """
    bitbully = require_bitbully()
    board = bitbully.Board()
    for i, m in enumerate(moves):
        if board.is_game_over() or not board.is_legal_move(int(m)):
            raise ValueError(f"moves[{i}]={m} is not a legal move after {list(moves[:i])}")
        board.play(int(m))
    if board.is_game_over():
        raise ValueError(f"the game is over after {list(moves)}: no move to score")
    return _scores_of(board)


@functools.lru_cache(maxsize=1 << 16)
def _scores_of_cells(cells: bytes) -> np.ndarray:
    """`_scores_of` a pgx board given as `[42]` int8 bytes; `ILLEGAL_SCORE` everywhere when the
    game is over (a finished game in the batch has no move to score)."""
    bitbully = require_bitbully()
    grid = np.frombuffer(cells, np.int8).reshape(ROWS, COLUMNS).astype(int) + 1
    board = bitbully.Board.from_array(grid.tolist())
    if board.is_game_over():
        return np.full(COLUMNS, ILLEGAL_SCORE, np.float32)
    return _scores_of(board)


def score_boards(boards: np.ndarray) -> np.ndarray:
    """Solver scores `[B, 7]` float32 of pgx Connect Four boards `[B, 42]` (row-major, top row
    first, as `bitbully.Board.from_array` reads them; -1 empty, 0 the first player's stone, 1
    the second's), for the player to move. Finished or full boards score `ILLEGAL_SCORE`."""
    boards = np.asarray(boards, np.int8).reshape(-1, ROWS * COLUMNS)
    return np.stack([_scores_of_cells(cells.tobytes()) for cells in boards])


@dataclasses.dataclass(frozen=True)
class PerfectConnectFourPolicy:
    """A move of the best solver score, ties broken uniformly; `weights` is uniform over the
    best moves and `value` the game-theoretic result (+1, 0, -1) for the player to move."""

    env: Env

    def __call__(self, params: Params, states: PyTree, key: PRNGKey) -> AgentOutput:
        del params
        boards = states._x.board  # [B, 42] int32: pgx's Connect Four state (its game data)
        spec = jax.ShapeDtypeStruct((boards.shape[0], COLUMNS), jnp.float32)
        scores = jax.pure_callback(score_boards, spec, boards, vmap_method="broadcast_all")
        action, weights, top = uniform_over_best(scores, legal_mask(self.env, states), key)
        value = jnp.where(top > ILLEGAL_SCORE, jnp.sign(top), 0.0).astype(jnp.float32)
        return AgentOutput(action, weights, value)


def perfect_connect_four_agent(env: Env, *, name: str = "perfect") -> Agent:
    """A perfect Connect Four agent (see the module docstring).

    Raises:
        ValueError: if `env` is not pgx's Connect Four (7 actions, `[6, 7, 2]` observations).
        MissingExtraError: if `bitbully` is not installed.
    """
    if (
        env.name not in NAMES
        or env.num_actions != COLUMNS
        or tuple(env.observation_shape) != (ROWS, COLUMNS, 2)
    ):
        raise ValueError(
            f"the perfect Connect Four agent supports only connect_four (7 actions, observation "
            f"[6, 7, 2]), got {env!r}"
        )
    require_bitbully()
    return make_agent(PerfectConnectFourPolicy(env), None, name=name)
