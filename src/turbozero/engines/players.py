"""Engines as agents of compiled matches: `pubeval` and `gnubg:PLY` for backgammon,
`gnugo:LEVEL` and `gtp:COMMAND` for Go (at the end).

An engine chooses a whole turn; pgx plays it one checker at a time. At the first decision of a
turn the engine scores every legal play (`turn_plays`) and its choice is kept as a plan: the
pgx action for each position the play passes through, keyed by that position and the dice left
to play. The next decisions of the turn are read from the plan. The agent's policy reaches the
host through `jax.pure_callback`, as the Connect Four solver is reached.
"""

from __future__ import annotations

import dataclasses
import shlex
import threading
from collections.abc import Callable
from typing import ClassVar

import jax
import jax.numpy as jnp
import numpy as np

from turbozero.arena.agents import Agent, AgentOutput, make_agent
from turbozero.engines.backgammon import NO_OP, Play, is_backgammon, micro_step, turn_plays
from turbozero.engines.gnubg import MAX_PLY as MAX_GNUBG_PLY
from turbozero.engines.gtp import MAX_GNUGO_LEVEL, GTPEngine, gnugo_command
from turbozero.envs.core import Env
from turbozero.gamespec import Engine, game_spec
from turbozero.types import Array, Params, PRNGKey, PyTree
from turbozero.validate import is_digits

#: `choose(board, plays) -> (index of the play, value for the mover)`
Chooser = Callable[[np.ndarray, list[Play]], tuple[int, float]]
NUM_ACTIONS = 156  # pgx backgammon: 26 sources x 6 dice
_PLAN_LIMIT = 1 << 18  # planned positions kept before the plan book is cleared


def pubeval_chooser(board: np.ndarray, plays: list[Play]) -> tuple[int, float]:
    """pubeval's choice (the race weights when the position before the turn is a race)."""
    from turbozero.engines.pubeval import pubeval_choice

    afters = [np.frombuffer(p.after, np.int8) for p in plays]
    return pubeval_choice(board, afters), 0.0


def gnubg_chooser(ply: int) -> Chooser:
    """gnubg's choice at `ply` plies: the play of highest equity for the mover."""
    from turbozero.engines import gnubg

    gnubg.require_gnubg()

    def choose(board: np.ndarray, plays: list[Play]) -> tuple[int, float]:
        scores = gnubg.equities([np.frombuffer(p.after, np.int8) for p in plays], ply=ply)
        best = int(np.argmax(scores))
        return best, float(scores[best])

    return choose


class TurnPlanner:
    """The engine's next pgx action in each position, planning a whole turn at its first move."""

    def __init__(self, choose: Chooser):
        self.choose = choose
        self._plans: dict[tuple[bytes, tuple[int, ...]], tuple[int, float]] = {}
        self._lock = threading.Lock()

    def action(self, board: np.ndarray, dice: tuple[int, ...]) -> tuple[int, float]:
        """`(pgx action, value)` for the mover of `board` (pgx's `_board`) with `dice` (1..6
        each, the dice left to play)."""
        key = (np.asarray(board, np.int8).tobytes(), tuple(sorted(dice)))
        with self._lock:
            planned = self._plans.get(key)
        if planned is not None:
            return planned
        plays = turn_plays(board, dice)
        if plays[0].actions == (NO_OP,):
            return NO_OP, 0.0
        index, value = (
            self.choose(np.asarray(board, np.int8), plays) if len(plays) > 1 else (0, 0.0)
        )
        plan = {}
        b, left = np.asarray(board, np.int8), list(dice)
        for action in plays[index].actions:
            plan[(b.tobytes(), tuple(sorted(left)))] = (action, value)
            b = micro_step(b, action)
            left.remove(action % 6 + 1)
        with self._lock:
            if len(self._plans) > _PLAN_LIMIT:
                self._plans.clear()
            self._plans.update(plan)
        return plays[index].actions[0], value

    def batch(
        self, boards: np.ndarray, playable: np.ndarray, done: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """`(actions [B] int32, values [B] float32)` for pgx states' `_board` `[B, 28]`,
        `_playable_dice` `[B, 4]` (0..5, -1 none) and `done` `[B]` (finished, or not the
        engine's to move: action 0)."""
        boards, playable, done = np.asarray(boards), np.asarray(playable), np.asarray(done)
        actions = np.zeros(boards.shape[0], np.int32)
        values = np.zeros(boards.shape[0], np.float32)
        for i in range(boards.shape[0]):
            if done[i]:
                continue
            dice = tuple(int(d) + 1 for d in playable[i] if d >= 0)
            actions[i], values[i] = self.action(boards[i], dice)
        return actions, values


def make_planner(spec: str) -> TurnPlanner:
    """A planner for a built-in engine spec (`pubeval` or `gnubg:PLY`): each agent owns its own
    (its plan book is the engine's memory of the turn it is playing).

    Raises:
        ValueError: `spec` names no built-in engine.
        MissingExtraError: `gnubg:PLY` without the `engines` extra.
    """
    if spec == "pubeval":
        return TurnPlanner(pubeval_chooser)
    if spec.startswith("gnubg:") and is_digits(spec.split(":")[1]):
        return TurnPlanner(gnubg_chooser(int(spec.split(":")[1])))
    raise ValueError(f"no engine {spec!r}: pubeval or gnubg:PLY (or your own, `chooser_agent`)")


@dataclasses.dataclass(frozen=True)
class BackgammonEnginePolicy:
    """An engine's move (`spec`: `pubeval`, `gnubg:PLY` or a `chooser_agent`'s name, planned by
    its own `planner`); `weights` one-hot on it, `value` the engine's equity for the mover (0 for
    pubeval, which has none)."""

    #: a match says which games it moves in (`propose`): the engine plans only those
    takes_acting: ClassVar[bool] = True

    env: Env
    spec: str
    planner: TurnPlanner

    @property
    def needs_main_thread(self) -> bool:
        """Whether its engine runs on the main thread only (gnubg looking ahead)."""
        return self.spec.startswith("gnubg:") and self.spec != "gnubg:0"

    def __call__(
        self, params: Params, states: PyTree, key: PRNGKey, acting: Array | None = None
    ) -> AgentOutput:
        del params, key
        batch = states._board.shape[0]
        idle = states.terminated if acting is None else states.terminated | ~acting
        specs = (
            jax.ShapeDtypeStruct((batch,), jnp.int32),
            jax.ShapeDtypeStruct((batch,), jnp.float32),
        )
        action, value = jax.pure_callback(
            self.planner.batch,
            specs,
            states._board,
            states._playable_dice,
            idle,
            vmap_method="broadcast_all",
        )
        weights = jax.nn.one_hot(action, self.env.num_actions, dtype=jnp.float32)
        return AgentOutput(action, weights, value)


def chooser_agent(env: Env, choose: Chooser, *, name: str) -> Agent:
    """An agent playing pgx backgammon with your own engine: `choose(board, plays)` gets the
    position before the turn (pgx's `_board`, from the mover's side) and its legal plays
    (`turn_plays`; each play's `after` is the position it leaves) and returns the index of the
    play to make and a value for the mover. Plays are planned and sent to pgx as the built-in
    engines' are; `name` names it in matches (and keys its plan book: one engine per name).

    Raises:
        ValueError: `env` is not pgx's backgammon, or `name` is a built-in engine's.
    """
    if name == "pubeval" or name.startswith("gnubg:"):
        raise ValueError(f"{name!r} is a built-in engine's name; give yours another")
    _check_backgammon(env, name)
    return make_agent(BackgammonEnginePolicy(env, name, TurnPlanner(choose)), None, name=name)


def backgammon_engine_agent(env: Env, spec: str, *, name: str | None = None) -> Agent:
    """An agent playing pgx backgammon as the engine `spec` (`pubeval` or `gnubg:PLY`) does.

    Raises:
        ValueError: `env` is not pgx's backgammon.
        MissingExtraError: `gnubg:PLY` without the `engines` extra.
    """
    _check_backgammon(env, spec)
    planner = make_planner(spec)  # (a missing gnubg is named here, not inside a compiled match)
    return make_agent(BackgammonEnginePolicy(env, spec, planner), None, name=name or spec)


def _check_backgammon(env: Env, spec: str) -> None:
    if not is_backgammon(env.name) or env.num_actions != NUM_ACTIONS:
        raise ValueError(f"{spec} plays backgammon only, not {env.name!r}")


# ------------------------------------------------------------------------------ Go over GTP


def go_engine(spec: str, size: int) -> GTPEngine:
    """A GTP engine for `spec` (`gnugo:LEVEL` or `gtp:COMMAND`) on a `size` board, owned by the
    agent made with it (`go_engine_agent`); its process starts at its first move and ends when
    the engine is closed or with the process (`turbozero.io.outside.end_all`)."""
    kind, _, rest = spec.partition(":")
    command = gnugo_command(int(rest)) if kind == "gnugo" else shlex.split(rest)
    return GTPEngine(command, size, name=spec)


@dataclasses.dataclass(frozen=True)
class GoEnginePolicy:
    """A GTP engine's move in pgx's Go (`spec`: `gnugo:LEVEL` or `gtp:COMMAND`, played by its
    own `engine`); `weights` one-hot on it, `value` 0 (GTP gives none)."""

    env: Env
    spec: str
    size: int
    engine: GTPEngine

    @property
    def needs_main_thread(self) -> bool:
        """True: its match runs on a helper thread, the main thread waiting in Python, where a
        Ctrl-C reaches it while the engine thinks (waiting inside XLA, it would not)."""
        return True

    def moves(self, boards: np.ndarray, steps: np.ndarray, legal: np.ndarray, done: np.ndarray):
        engine = self.engine
        actions = np.full(boards.shape[0], self.size * self.size, np.int32)  # pass
        for i in range(boards.shape[0]):
            if not done[i]:
                black = int(steps[i]) % 2 == 0
                actions[i] = engine.genmove(boards[i], black, np.asarray(legal[i]))
        return actions

    def __call__(self, params: Params, states: PyTree, key: PRNGKey) -> AgentOutput:
        del params, key
        batch = states.terminated.shape[0]
        action = jax.pure_callback(
            self.moves,
            jax.ShapeDtypeStruct((batch,), jnp.int32),
            states._x.board,
            states._x.step_count,
            states.legal_action_mask,
            states.terminated,
            vmap_method="broadcast_all",
        )
        weights = jax.nn.one_hot(action, self.env.num_actions, dtype=jnp.float32)
        return AgentOutput(action, weights, jnp.zeros((batch,), jnp.float32))


def go_engine_agent(env: Env, spec: str, *, name: str | None = None) -> Agent:
    """An agent playing pgx's Go as the GTP engine `spec` does (`gnugo:LEVEL`, `gtp:COMMAND`).

    Raises:
        ValueError: `env` is not pgx's Go.
        FileNotFoundError: the engine's program is not installed.
    """
    game = game_spec(env.name)
    size = round((env.num_actions - 1) ** 0.5)
    if game is None or "gtp" not in game.engines or size * size + 1 != env.num_actions:
        raise ValueError(f"{spec} plays Go only, not {env.name!r}")
    engine = go_engine(spec, size)  # (a missing program is named here, not in a compiled match)
    return make_agent(GoEnginePolicy(env, spec, size, engine), None, name=name or spec)


# ------------------------------------------------------------------- the engines as opponents


def _between(low: int, high: int) -> Callable[[str], bool]:
    return lambda text: is_digits(text) and low <= int(text) <= high


#: the engines' opponent names and how each is built; the game files list those they play
PUBEVAL = Engine("pubeval", "pubeval", "Tesauro's linear evaluator", backgammon_engine_agent)
GNUBG = Engine(
    "gnubg",
    "gnubg:PLY",
    f"GNU Backgammon looking PLY in [0, {MAX_GNUBG_PLY}] plies ahead, the engines extra",
    backgammon_engine_agent,
    argument=_between(0, MAX_GNUBG_PLY),
)
GNUGO = Engine(
    "gnugo",
    "gnugo:LEVEL",
    f"GNU Go at LEVEL in [1, {MAX_GNUGO_LEVEL}]",
    go_engine_agent,
    argument=_between(1, MAX_GNUGO_LEVEL),
)
GTP = Engine(
    "gtp",
    "gtp:COMMAND",
    "any GTP engine, started with COMMAND",
    go_engine_agent,
    argument=lambda text: bool(text.strip()),
    starts_command=True,
)
