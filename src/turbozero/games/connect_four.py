"""Connect Four: pgx's 6x7 game, with the `bitbully` solver as its perfect player and labeller.

The solver (the `solvers` extra) scores every legal move of a position: a positive score is a
forced win for the player to move, 0 a draw, a negative one a forced loss, and a larger magnitude
a faster win (a slower loss). Its opening books ship with the package, so positions of any depth
solve in milliseconds to a fraction of a second on a CPU.

The solver runs on the host. `PerfectConnectFourPolicy` reaches it from compiled matches through
`jax.pure_callback`, one round trip per move of the batch; answers are cached by position. The
network may also read each cell's open lines of four (`network.line_features`, from `Board.line`).
"""

from __future__ import annotations

import dataclasses
import functools
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import jax
import jax.numpy as jnp
import numpy as np

from turbozero.arena.accuracy import (
    CACHE_VERSION,
    PositionSet,
    cache_dir,
    save_cached,
    solver_metrics,
)
from turbozero.arena.agents import AgentOutput, legal_mask, make_agent, uniform_over_best
from turbozero.config import register_preset
from turbozero.gamespec import (
    ILLEGAL_SCORE,
    Board,
    GameSpec,
    Judge,
    grid_cells,
    register_game,
)
from turbozero.io.errors import MissingExtraError
from turbozero.types import Params, PRNGKey, PyTree

if TYPE_CHECKING:
    from turbozero.arena.accuracy import PositionSet
    from turbozero.arena.agents import Agent, AgentOutput
    from turbozero.envs.core import Env

ROWS, COLUMNS = 6, 7


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
        env.name.removeprefix("pgx:") != "connect_four"
        or env.num_actions != COLUMNS
        or tuple(env.observation_shape) != (ROWS, COLUMNS, 2)
    ):
        raise ValueError(
            f"the perfect Connect Four agent supports only connect_four (7 actions, observation "
            f"[6, 7, 2]), got {env!r}"
        )
    require_bitbully()

    return make_agent(PerfectConnectFourPolicy(env), None, name=name)


def labelled_positions(
    num_positions: int = 1000,
    *,
    seed: int = 0,
    min_ply: int = 8,
    max_ply: int = 24,
    cache: Path | None = None,
) -> PositionSet:
    """Connect Four positions from random legal play, labelled by `bitbully` (cached).

    Each position plays a ply count drawn uniformly from `[min_ply, max_ply]` of uniformly random
    legal moves; games that end on the way, and positions already drawn, are drawn again.

    Raises:
        ValueError: for counts out of range.
        MissingExtraError: if `bitbully` is not installed.
    """

    if not 1 <= num_positions <= 100_000:
        raise ValueError(f"num_positions must be in [1, 100000], got {num_positions}")
    if not 0 <= min_ply <= max_ply <= 40:
        raise ValueError(f"need 0 <= min_ply <= max_ply <= 40, got {min_ply}, {max_ply}")
    phases = {"plies 8-12": (8, 12), "plies 13-18": (13, 18), "plies 19-24": (19, 24)}
    name = f"connect_four-n{num_positions}-seed{seed}-plies{min_ply}-{max_ply}-v{CACHE_VERSION}"
    path = (cache or cache_dir()) / f"{name}.npz"
    if path.exists():
        try:
            with np.load(path) as data:
                moves, scores = data["moves"], data["scores"]
            if moves.shape == (num_positions, max_ply) and scores.shape == (num_positions, 7):
                return PositionSet("connect_four", moves, scores, phases)
        except (OSError, ValueError, KeyError):
            pass  # a damaged cache file is made again
    bitbully = require_bitbully("labelling Connect Four positions")
    rng = np.random.default_rng(seed)
    seen: set[int] = set()
    moves = np.full((num_positions, max_ply), -1, np.int32)
    scores = np.zeros((num_positions, 7), np.float32)
    i = 0
    while i < num_positions:
        ply = int(rng.integers(min_ply, max_ply + 1))
        board, played = bitbully.Board(), list[int]()
        while len(played) < ply and not board.is_game_over():
            column = int(rng.choice(board.legal_moves()))
            board.play(column)
            played.append(column)
        if board.is_game_over() or board.uid() in seen:
            continue
        seen.add(board.uid())
        moves[i, :ply] = played
        scores[i] = _scores_of(board)
        i += 1
    save_cached(path, moves=moves, scores=scores)
    return PositionSet("connect_four", moves, scores, phases)


def _positions(env: Env, num_positions: int, seed: int) -> PositionSet:
    del env
    return labelled_positions(num_positions, seed=seed)


GAME = register_game(
    GameSpec(
        name="connect_four",
        description="Connect Four, 6x7 (2 players, 7 actions)",
        draws=True,
        board=Board(  # pgx draws 35-unit cells, 6 rows x 7 columns from (17.5, 17.5)
            label=lambda action: f"column {action + 1}",
            cells=lambda: grid_cells(6, 7, origin=17.5, cell=35.0, column_actions=True),
            line=(6, 7, 4),
            symmetry=("horizontal", 7),
            marks=("black", "white"),
            coordinates=True,
        ),
        perfect=perfect_connect_four_agent,
        judge=Judge("a solver", _positions, solver_metrics),
    )
)


register_preset(
    "connect_four",
    "Connect Four, ResNet 2x32 reading each cell's open lines with a win/draw/loss value head, "
    "32 simulations (512 at play, by the weights' moving average) valuing an unvisited move at "
    "the network's value, self-play beside the gradient steps on one device, 30 minutes of "
    "training on CPU",
    algorithm="alphazero",
    settings={
        "env": "connect_four",
        "num_games": 128,
        # (line features: each cell's open lines of four for each side, KataGo-style inputs)
        # (the value as win/draw/loss probabilities, learnt by cross-entropy)
        "network": {
            "kind": "resnet",
            "num_blocks": 2,
            "num_channels": 32,
            "line_features": True,
            "value_bins": 3,
        },
        # (an unvisited move's Q: the network's value of its node, not 0, a draw)
        "search": {"num_simulations": 32, "max_nodes": 64, "fpu": "network"},
        "temperature_moves": 42,  # every move sampled: positions off the best line get targets
        "root_value_weight": 0.75,  # value target: a quarter outcome, 3/4 the search's root value
        "max_episode_steps": 42,
        "memory_capacity": 1024,  # about 64 epochs of play kept, each position drawn ~4 times
        "augment": True,
        "learning_rate": 2e-3,
        "ema_decay": 0.9995,  # the weights' moving average (about the last 2,000 steps) plays ...
        "ema_selfplay": False,  # ... evaluations and the saved agent; self-play the trained weights
        "train_batch_size": 512,
        "warmup_steps": 16,
        "collection_steps_per_epoch": 16,
        "train_steps_per_epoch": 32,
        "num_epochs": 1000,
        "max_wall_seconds": 1800.0,
        "overlap": None,  # one device: self-play beside the gradient steps (1.5x the epochs on CPU)
        "eval_every": 10,
        # evaluations (about 25 s each) kept to a tenth of the clock: 1.23x the epochs in 30
        # minutes, the same accuracy at the end (docs/benchmarks.md)
        "eval_share": 0.1,
        # plays (evaluation, eval, play) with 16x self-play's search: the network's misjudged
        # openings are what a deeper search corrects
        "eval_simulations": 512,
        "eval_games": 32,
        "eval_opponents": ("random",),
        "eval_accuracy": True,
    },
)
