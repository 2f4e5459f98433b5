"""Move quality in backgammon, judged by gnubg: the analogue of Connect Four's solver accuracy.

A fixed set of positions (`quality_positions`) comes from games gnubg plays against itself at
0 ply with one play in ten chosen at random (so the set also holds positions strong play avoids),
taken at the start of a turn with two or more legal plays (a forced move says nothing), from a
seed. gnubg scores every legal play of every position once, at a stated ply (the cubeless money
equity of the position the play leaves), and the scores are cached under
`$TURBOZERO_CACHE/positions` like the Connect Four set.

An agent then plays its whole turn in each position, one pgx action at a time as in a game
(`move_quality`). Reported, as gnubg's analysis reports a player:

- `error_rate`: the mean equity the agent's play gives up against gnubg's best, in
  millipoints per move (1000 x (best equity - the play's equity); gnubg's "error rate"),
- `best_share`: the share of positions where the agent's play is gnubg's best,

overall and for contact positions and races apart. pgx lets a player play fewer dice than the
rules of backgammon ask; such a play is scored by gnubg like any other position it leaves (and
counts as no loss where gnubg scores it above the best legal play).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from turbozero.arena.accuracy import cache_dir, save_cached
from turbozero.arena.agents import Agent
from turbozero.engines.backgammon import (
    NO_OP,
    Play,
    is_backgammon,
    is_race,
    micro_step,
    turn_plays,
)
from turbozero.engines.gnubg import MAX_PLY, equities, require_gnubg
from turbozero.engines.players import TurnPlanner
from turbozero.envs.core import Env
from turbozero.types import PRNGKey

CACHE_VERSION = 1
RANDOM_PLAY_SHARE = 0.1  # plays chosen at random while the set's games are played
TAKE_SHARE = 0.15  # turn starts taken into the set (the rest are played through)
GAMES = 16  # games played side by side to find the positions


@dataclasses.dataclass(frozen=True)
class QualityPositions:
    """Positions at the start of a turn with every legal play scored by gnubg.

    Attributes:
        states: pgx states, leaves `[N, ...]` (numpy).
        boards: `[N, 28]` int8, pgx's `_board` (from the mover's side).
        race: `[N]` bool, no contact left (`turbozero.engines.backgammon.is_race`).
        offsets: `[N + 1]`, position `i`'s plays are rows `offsets[i]:offsets[i + 1]`.
        afters: `[M, 28]` int8, the position each play leaves.
        equity: `[M]` float64, gnubg's equity of each play for the mover.
        ply: the ply gnubg evaluated at.
    """

    states: Any
    boards: np.ndarray
    race: np.ndarray
    offsets: np.ndarray
    afters: np.ndarray
    equity: np.ndarray
    ply: int

    @property
    def num_positions(self) -> int:
        return int(self.boards.shape[0])

    def best(self, i: int) -> float:
        """Position `i`'s best equity."""
        return float(self.equity[self.offsets[i] : self.offsets[i + 1]].max())

    def equity_of(self, i: int, after: np.ndarray) -> float | None:
        """The equity of the play of position `i` that leaves `after`, or None if none does."""
        rows = self.afters[self.offsets[i] : self.offsets[i + 1]]
        hit = np.flatnonzero((rows == np.asarray(after, np.int8)).all(axis=1))
        return float(self.equity[self.offsets[i] + hit[0]]) if hit.size else None


@dataclasses.dataclass(frozen=True)
class MoveQuality:
    """An agent's plays judged by gnubg (see the module docstring)."""

    num_positions: int
    ply: int
    error_rate: float  # millipoints per move
    best_share: float
    phases: dict[str, dict[str, float]]  # "contact", "race" -> the same figures and counts


def _chooser(rng: np.random.Generator):
    """gnubg's best play at 0 ply, or a random one in `RANDOM_PLAY_SHARE` of turns."""

    def choose(board: np.ndarray, plays: list[Play]) -> tuple[int, float]:
        if rng.random() < RANDOM_PLAY_SHARE:
            return int(rng.integers(len(plays))), 0.0
        scores = equities([np.frombuffer(p.after, np.int8) for p in plays], ply=0)
        return int(np.argmax(scores)), float(scores.max())

    return choose


@functools.lru_cache(maxsize=8)
def _batched(env: Env) -> tuple[Any, Any]:
    """`env`'s `init(keys)` and `step(states, actions, keys)` over a batch, compiled once per
    game and process (each evaluation during training measures again)."""
    init = jax.jit(jax.vmap(lambda k: env.init(k)[0]))
    step = jax.jit(jax.vmap(lambda s, a, k: env.step(s, a, k)[0]))
    return init, step


def _play_for_positions(env: Env, num_positions: int, seed: int) -> list[tuple[Any, np.ndarray]]:
    """`(pgx state, board)` at `num_positions` distinct turn starts of the set's games."""
    rng = np.random.default_rng(seed)
    planner = TurnPlanner(_chooser(rng))
    init, step = _batched(env)
    key = jax.random.PRNGKey(seed)
    key, sub = jax.random.split(key)
    states = init(jax.random.split(sub, GAMES))
    found: list[tuple[Any, np.ndarray]] = []
    seen: set[bytes] = set()
    while len(found) < num_positions:
        boards = np.asarray(states._board).astype(np.int8)
        playable = np.asarray(states._playable_dice)
        done = np.asarray(states.terminated)
        fresh = np.asarray(states._played_dice_num) == 0
        for i in range(GAMES):
            if done[i] or not fresh[i] or rng.random() >= TAKE_SHARE:
                continue
            dice = [int(d) + 1 for d in playable[i] if d >= 0]
            if boards[i].tobytes() in seen or len(turn_plays(boards[i], dice)) < 2:
                continue
            seen.add(boards[i].tobytes())
            found.append(
                (jax.tree_util.tree_map(lambda x, i=i: np.asarray(x[i]), states), boards[i])
            )
        actions, _ = planner.batch(boards, playable, done)
        key, k_step, k_new = jax.random.split(key, 3)
        stepped = step(states, jnp.asarray(actions), jax.random.split(k_step, GAMES))
        restart = jnp.asarray(np.asarray(stepped.terminated))
        new = init(jax.random.split(k_new, GAMES))
        states = jax.tree_util.tree_map(
            lambda n, o: jnp.where(restart.reshape((-1,) + (1,) * (o.ndim - 1)), n, o), new, stepped
        )
    return found[:num_positions]


def quality_positions(
    env: Env,
    num_positions: int = 200,
    *,
    ply: int = 0,
    seed: int = 0,
    cache: Path | None = None,
) -> QualityPositions:
    """The scored position set (made once, then read from the cache).

    Args:
        env: pgx's backgammon (`turbozero.envs.make("backgammon")`).
        num_positions: in [1, 10000].
        ply: gnubg's ply for the scores, 0 to 2 (0: its network alone; 1 and 2 look ahead
            over the dice, and take far longer).
        seed: chooses the games the positions come from.

    Raises:
        ValueError: for an argument out of range or another game.
        MissingExtraError: without the `engines` extra (gnubg).
    """
    if not is_backgammon(env.name):
        raise ValueError(f"move quality is judged by gnubg in backgammon only, not {env.name!r}")
    if not isinstance(num_positions, int) or not 1 <= num_positions <= 10_000:
        raise ValueError(f"num_positions must be an int in [1, 10000], got {num_positions!r}")
    if not isinstance(ply, int) or not 0 <= ply <= MAX_PLY:
        raise ValueError(f"ply must be an int in [0, {MAX_PLY}], got {ply!r}")
    require_gnubg("judging backgammon moves with gnubg")
    example = jax.eval_shape(lambda k: env.init(k)[0], jax.random.PRNGKey(0))
    treedef = jax.tree_util.tree_structure(example)
    name = f"backgammon-quality-n{num_positions}-seed{seed}-ply{ply}-v{CACHE_VERSION}"
    path = (cache or cache_dir()) / f"{name}.npz"
    loaded = _read(path, treedef, example, num_positions, ply)
    if loaded is not None:
        return loaded
    found = _play_for_positions(env, num_positions, seed)
    boards = np.stack([b for _, b in found])
    offsets, afters, scores = [0], [], []
    for state, board in found:
        dice = [int(d) + 1 for d in state._playable_dice if d >= 0]
        plays = [np.frombuffer(p.after, np.int8) for p in turn_plays(board, dice)]
        afters.extend(plays)
        scores.append(equities(plays, ply=ply))
        offsets.append(offsets[-1] + len(plays))
    per_state = [jax.tree_util.tree_leaves(state) for state, _ in found]
    leaves = [np.stack(xs) for xs in zip(*per_state, strict=True)]
    out = QualityPositions(
        states=jax.tree_util.tree_unflatten(treedef, leaves),
        boards=boards,
        race=np.array([is_race(b) for b in boards]),
        offsets=np.asarray(offsets, np.int64),
        afters=np.stack(afters).astype(np.int8),
        equity=np.concatenate(scores),
        ply=ply,
    )
    _write(path, out, leaves)
    return out


def _read(path: Path, treedef: Any, example: Any, n: int, ply: int) -> QualityPositions | None:
    """The cached set at `path`, or None where it is missing, damaged or of other shapes."""
    if not path.exists():
        return None
    try:
        with np.load(path) as data:
            leaves = [data[f"leaf_{k}"] for k in range(treedef.num_leaves)]
            fields = {k: data[k] for k in ("boards", "race", "offsets", "afters", "equity")}
    except (OSError, ValueError, KeyError):
        return None  # made again
    shapes = [(n, *x.shape) for x in jax.tree_util.tree_leaves(example)]
    if [x.shape for x in leaves] != shapes or fields["offsets"].shape != (n + 1,):
        return None
    return QualityPositions(states=jax.tree_util.tree_unflatten(treedef, leaves), ply=ply, **fields)


def _write(path: Path, positions: QualityPositions, leaves: list[np.ndarray]) -> None:
    arrays: dict[str, Any] = {f"leaf_{k}": x for k, x in enumerate(leaves)}
    arrays.update(
        boards=positions.boards,
        race=positions.race,
        offsets=positions.offsets,
        afters=positions.afters,
        equity=positions.equity,
    )
    save_cached(path, **arrays)


def agent_plays(env: Env, agent: Agent, positions: QualityPositions, key: PRNGKey) -> np.ndarray:
    """`[N, 28]` int8: the position the agent's whole turn leaves in each position (from the
    mover's side), played one pgx action at a time as in a game."""
    policy = jax.jit(agent.policy_fn)  # (jit's cache is the policy function's: traced once)
    _, step = _batched(env)
    states = jax.tree_util.tree_map(jnp.asarray, positions.states)
    boards = positions.boards.copy()
    active = np.ones(positions.num_positions, bool)
    for _ in range(4):  # a turn is at most four checker moves
        key, k_act, k_step = jax.random.split(key, 3)
        actions = np.asarray(policy(agent.params, states, k_act).action)
        for i in np.flatnonzero(active):
            if actions[i] == NO_OP:
                active[i] = False
            else:
                boards[i] = micro_step(boards[i], int(actions[i]))
        keys = jax.random.split(k_step, positions.num_positions)
        stepped = step(states, jnp.asarray(actions, jnp.int32), keys)
        ended = np.asarray(stepped._turn != states._turn) | np.asarray(stepped.terminated)
        active &= ~ended
        states = stepped
        if not active.any():
            break
    return boards


def move_quality(env: Env, agent: Agent, positions: QualityPositions, key: PRNGKey) -> MoveQuality:
    """The agent's error rate and share of gnubg's best plays on `positions` (see the module
    docstring); `key` drives the agent's own randomness, if it has any."""
    boards = agent_plays(env, agent, positions, key)
    loss = np.empty(positions.num_positions)
    best = np.empty(positions.num_positions, bool)
    for i in range(positions.num_positions):
        top = positions.best(i)
        mine = positions.equity_of(i, boards[i])
        if mine is None:  # fewer dice than the rules ask: gnubg scores what it leaves
            mine = float(equities([boards[i]], ply=positions.ply)[0])
        loss[i] = max(top - mine, 0.0)
        best[i] = mine >= top - 1e-9
    phases = {}
    for name, rows in (("contact", ~positions.race), ("race", positions.race)):
        if rows.any():
            phases[name] = {
                "error_rate": float(1000 * loss[rows].mean()),
                "best_share": float(best[rows].mean()),
                "positions": int(rows.sum()),
            }
    return MoveQuality(
        num_positions=positions.num_positions,
        ply=positions.ply,
        error_rate=float(1000 * loss.mean()),
        best_share=float(best.mean()),
        phases=phases,
    )


# -- gnubg as a game's judge (`turbozero.gamespec.Judge`) --------------------------------------

#: `plots/strength.png`'s panels of gnubg's figures
PANELS = {
    "gnubg error rate (millipoints a move)": {"error rate": "eval/gnubg/error_rate"},
    "gnubg's best play": {"share of positions": "eval/gnubg/best"},
}


def judged_positions(env: Env, num_positions: int, seed: int) -> QualityPositions:
    """`Judge.positions`: `quality_positions` of `env`."""
    return quality_positions(env, num_positions, seed=seed)


def metrics(env: Env, agent: Agent, positions: QualityPositions, key: PRNGKey) -> dict[str, float]:
    """`Judge.measure`: gnubg's error rate of the agent's plays, their share of gnubg's best and
    the positions judged, named as the training log names them (`eval/gnubg/...`)."""
    q = move_quality(env, agent, positions, key)
    return {
        "eval/gnubg/error_rate": q.error_rate,
        "eval/gnubg/best": q.best_share,
        "eval/gnubg/positions": q.num_positions,
    }


def report(env: Env, agent: Agent, positions: QualityPositions, key: PRNGKey) -> dict[str, Any]:
    """`Judge.report`, what `eval --accuracy` prints: the error rate in millipoints a move (as
    gnubg reports it), the share of gnubg's best plays, by phase of the game."""
    q = move_quality(env, agent, positions, key)
    return {
        "positions": q.num_positions,
        "gnubg_ply": q.ply,
        "error_rate": round(q.error_rate, 2),
        "gnubg_best": q.best_share,
        "phases": q.phases,
    }


def log_text(row: Mapping[str, float]) -> str | None:
    """`Judge.log_text`: the training log's words for gnubg's figures in `row`."""
    if "eval/gnubg/error_rate" not in row:
        return None
    return (
        f"gnubg error rate {row['eval/gnubg/error_rate']:.1f} "
        f"(best play {row['eval/gnubg/best']:.1%})"
    )
