"""Move accuracy against a perfect solver: how often an agent's move keeps the game's result.

A `PositionSet` holds positions as the moves that reach them from the start, with a solver's
score of every move `[N, A]`. The measure asks an agent for one move in each position:

- `result`: the share of positions where the move keeps the game-theoretic result (win, draw or
  loss for the mover); a move is a mistake when another has a strictly better result. This is
  the error rate AlphaZero.jl reports on Pascal Pons' Connect Four test sets.
- `best`: the share where the move has the solver's best score. Connect Four's solver also
  prefers faster wins and slower losses, which an undiscounted agent has no reason to; for
  tic-tac-toe (win/draw/loss values only) the two are the same.

Both are also reported by game phase (plies played) and by the position's own result for the
mover (won, drawn, lost), which says where an agent's mistakes sit.

Sets (`positions_for`):
- tic-tac-toe: all 4,520 reachable non-terminal positions, labelled by the minimax table;
- Connect Four: random legal play of 8 to 24 plies from the start (non-terminal, deduplicated,
  a fixed seed), labelled by `bitbully` and cached under `$TURBOZERO_CACHE/positions` (default
  `~/.cache/turbozero/positions`), since labelling takes about a minute.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import functools
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from turbozero.arena.agents import Agent, action_program
from turbozero.envs.core import Env
from turbozero.gamespec import ILLEGAL_SCORE, all_games, game_spec
from turbozero.types import Array, PRNGKey

CACHE_VERSION = 1


@dataclasses.dataclass(frozen=True, eq=False)
class PositionSet:
    """Positions with the solver's score of every move (host arrays).

    Attributes:
        game: the game's name (`tic_tac_toe`, `connect_four`).
        moves: `[N, L]` int32, the actions from the start that reach each position, padded
            with -1.
        scores: `[N, A]` float32, the solver's score of each move for the player to move
            (positive a win, 0 a draw, negative a loss), `ILLEGAL_SCORE` on illegal moves.
        phases: `{name: (first ply, last ply)}`, the game phases reported apart.
    """

    game: str
    moves: np.ndarray
    scores: np.ndarray
    phases: dict[str, tuple[int, int]]

    def __len__(self) -> int:
        return int(self.moves.shape[0])

    @property
    def plies(self) -> np.ndarray:
        """`[N]` number of moves played to reach each position."""
        return (self.moves >= 0).sum(axis=1)

    @property
    def legal(self) -> np.ndarray:
        """`[N, A]` bool legal moves."""
        return self.scores > ILLEGAL_SCORE

    @property
    def results(self) -> np.ndarray:
        """`[N]` the position's game-theoretic result for the player to move: 1 a win, 0 a
        draw, -1 a loss (the best result among its moves)."""
        return np.where(self.legal, np.sign(self.scores), -2.0).max(axis=1)

    @property
    def keeps_result(self) -> np.ndarray:
        """`[N, A]` bool: the move keeps the position's game-theoretic result."""
        return self.legal & (np.sign(self.scores) == self.results[:, None])

    @property
    def is_best(self) -> np.ndarray:
        """`[N, A]` bool: the move has the best score."""
        return self.legal & (self.scores == self.scores.max(axis=1, keepdims=True))


@dataclasses.dataclass(frozen=True)
class Accuracy:
    """An agent's move accuracy on a `PositionSet` (shares in [0, 1]).

    `phases` splits it by plies played, `by_result` by the position's own result for the mover
    (`"win"`, `"draw"`, `"loss"`; in a lost position every move keeps the result, so its share
    is 1): each entry `{"result", "best", "positions"}`, a class with no position left out.
    """

    result: float
    best: float
    num_positions: int
    phases: dict[str, dict[str, float]]
    by_result: dict[str, dict[str, float]]

    @property
    def mistakes(self) -> int:
        """Positions whose move lost the result (what a share at one decimal hides)."""
        return round((1.0 - self.result) * self.num_positions)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _shares(positions: PositionSet, keeps: np.ndarray, best: np.ndarray) -> Accuracy:
    """`keeps`, `best`: `[N]` float per position (hit or expected hit)."""

    def split(selections: dict[str, np.ndarray]) -> dict[str, dict[str, float]]:
        return {
            name: {
                "result": float(keeps[sel].mean()),
                "best": float(best[sel].mean()),
                "positions": int(sel.sum()),
            }
            for name, sel in selections.items()
            if sel.any()
        }

    plies, results = positions.plies, positions.results
    phases = split({n: (plies >= lo) & (plies <= hi) for n, (lo, hi) in positions.phases.items()})
    by_result = split({n: results == v for n, v in (("win", 1), ("draw", 0), ("loss", -1))})
    return Accuracy(float(keeps.mean()), float(best.mean()), len(positions), phases, by_result)


def random_accuracy(positions: PositionSet) -> Accuracy:
    """The expected accuracy of a uniformly random legal move: per position, the share of its
    legal moves that keep the result (have the best score), averaged over positions."""
    legal = positions.legal.sum(axis=1)
    return _shares(
        positions,
        positions.keeps_result.sum(axis=1) / legal,
        positions.is_best.sum(axis=1) / legal,
    )


def accuracy_of_actions(positions: PositionSet, actions: np.ndarray) -> Accuracy:
    """The accuracy of the moves `actions` `[N]` chosen in `positions` (an illegal move is a
    mistake)."""
    actions = np.asarray(actions).astype(np.int64)
    rows = np.arange(len(positions))
    inside = (actions >= 0) & (actions < positions.scores.shape[1])
    safe = np.where(inside, actions, 0)
    keeps = (positions.keeps_result[rows, safe] & inside).astype(np.float64)
    best = (positions.is_best[rows, safe] & inside).astype(np.float64)
    return _shares(positions, keeps, best)


@functools.lru_cache(maxsize=16)
def _replay_program(env: Env) -> Callable[[Array], Any]:
    """Compiled `moves [B, L] -> states [B]`: each row's moves played from `env.init`."""

    def replay(moves: Array) -> Any:
        B = moves.shape[0]
        keys = jax.random.split(jax.random.PRNGKey(0), B)
        states, _ = jax.vmap(env.init)(keys)

        def play(states: Any, move: Array) -> tuple[Any, None]:
            stepped, _ = jax.vmap(env.step)(states, jnp.maximum(move, 0), keys)
            keep = move >= 0
            states = jax.tree_util.tree_map(
                lambda n, o: jnp.where(keep.reshape((-1,) + (1,) * (n.ndim - 1)), n, o),
                stepped,
                states,
            )
            return states, None

        states, _ = jax.lax.scan(play, states, moves.T)
        return states

    return jax.jit(replay)


def side_by_side() -> int:
    """How many of an agent's batches to run at once: one per CPU core this process may use on
    a CPU (XLA:CPU runs a search's small loops on one thread, so one program keeps about one
    core busy, and two batches side by side take half the time on two cores), else 1."""
    if jax.default_backend() != "cpu":
        return 1
    cores = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None
    return max(1, len(cores) if cores else (os.cpu_count() or 1))


def agent_actions(
    env: Env, agent: Agent, positions: PositionSet, key: PRNGKey, *, batch_size: int = 512
) -> np.ndarray:
    """The agent's move `[N]` in every position, asked `batch_size` positions at a time (the
    last batch is padded, so one program serves every batch); on a CPU the batches run on
    `side_by_side()` threads. Batch `i` draws from `fold_in(key, i)`, so the moves do not
    depend on how many run at once."""
    n = len(positions)
    batch = max(1, min(int(batch_size), n))
    padded = -(-n // batch) * batch
    moves = np.concatenate([positions.moves, positions.moves[: padded - n]])
    replay, act = _replay_program(env), action_program(agent.policy_fn)

    def ask(i: int) -> np.ndarray:
        states = replay(jnp.asarray(moves[i * batch : (i + 1) * batch]))
        return np.asarray(act(agent.params, states, jax.random.fold_in(key, i)))

    batches = padded // batch
    with concurrent.futures.ThreadPoolExecutor(min(side_by_side(), batches)) as pool:
        out = list(pool.map(ask, range(batches)))
    return np.concatenate(out)[:n]


def move_accuracy(
    env: Env, agent: Agent, positions: PositionSet, key: PRNGKey, *, batch_size: int = 512
) -> Accuracy:
    """The agent's move accuracy on `positions` (see the module docstring).

    Args:
        env: the game the positions belong to (deterministic; its actions index the scores).
        agent: any arena agent; it is asked once per position, `batch_size` at a time.
        positions: from `positions_for`.
        key: consumed by the agent (root noise is off in evaluation agents; ties and sampled
            moves draw from it).
        batch_size: positions per call (bounds the memory of a searching agent's trees; on a
            CPU, `side_by_side()` calls run at once).

    Raises:
        ValueError: if the game or its action count does not match the positions, or
            `batch_size` < 1.
    """
    if env.name.removeprefix("pgx:") != positions.game:
        raise ValueError(f"positions are of {positions.game!r}, the env is {env.name!r}")
    if env.num_actions != positions.scores.shape[1]:
        raise ValueError(
            f"positions score {positions.scores.shape[1]} moves, {env.name!r} has "
            f"{env.num_actions} actions"
        )
    if not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be an int >= 1, got {batch_size!r}")
    return accuracy_of_actions(
        positions, agent_actions(env, agent, positions, key, batch_size=batch_size)
    )


# -- the labelled sets -----------------------------------------------------------------------


def cache_dir() -> Path:
    """Where labelled sets are cached: `$TURBOZERO_CACHE/positions`, default
    `~/.cache/turbozero/positions`."""
    base = os.environ.get("TURBOZERO_CACHE") or Path.home() / ".cache" / "turbozero"
    return Path(base) / "positions"


def save_cached(path: Path, **arrays: Any) -> None:
    """Write `arrays` to the cache file `path` (`.npz`) whole or not at all: through a temporary
    file of this process's (processes may share a cache) that is renamed into place, or removed
    where writing fails (a full disk, Ctrl-C)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp.npz")
    try:
        np.savez(tmp, **arrays)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def solved_games() -> tuple[str, ...]:
    """The games with a labelled position set (their `GameSpec.judge` is a solver)."""
    return tuple(name for name, g in all_games().items() if g.judge and g.judge.by == "a solver")


def judged_games() -> tuple[str, ...]:
    """The games whose moves a solver or an engine judges (`GameSpec.judge`), each named with
    its judge ("connect_four (a solver)")."""
    return tuple(f"{n} ({g.judge.by})" for n, g in all_games().items() if g.judge is not None)


def positions_for(game: str, *, num_positions: int = 1000, seed: int = 0) -> PositionSet:
    """The labelled position set of `game` (a name in `solved_games()`, `pgx:` prefix allowed);
    `num_positions` and `seed` choose the set where the game's judge is sized (Connect Four's;
    tic-tac-toe's is all positions).

    Raises:
        ValueError: if the game has no solver here.
        MissingExtraError: if its solver is not installed.
    """
    spec = game_spec(game)
    if spec is None or spec.judge is None or spec.judge.by != "a solver":
        raise ValueError(
            f"no solver for {game!r}: move accuracy exists for {', '.join(solved_games())}"
        )
    return spec.judge.positions(None, num_positions, seed)  # type: ignore[arg-type]


def solver_metrics(
    env: Env, agent: Agent, positions: PositionSet, key: PRNGKey
) -> dict[str, float]:
    """`Judge.measure` of the solved games: `eval/accuracy/result`, `.../best` and
    `.../positions` of `move_accuracy`."""
    acc = move_accuracy(env, agent, positions, key)
    return {
        "eval/accuracy/result": acc.result,
        "eval/accuracy/best": acc.best,
        "eval/accuracy/positions": acc.num_positions,
    }


def solver_report(env: Env, agent: Agent, positions: PositionSet, key: PRNGKey) -> dict[str, Any]:
    """What `eval --accuracy` prints of a solver's judgement (`Judge.report`'s default): the
    share of positions where the agent keeps the result, its mistakes, the share of the
    solver's best moves, by phase and by result."""
    acc = move_accuracy(env, agent, positions, key)
    return {
        "positions": acc.num_positions,
        "accuracy_result": acc.result,
        "mistakes": acc.mistakes,
        "accuracy_best": acc.best,
        "phases": acc.phases,
        "by_result": acc.by_result,
    }
