"""One game between a human and a trained agent, kept apart from the page that shows it.

`Game` holds the position and its history, checks every human move against the legal mask of
the position it holds, and plays the agent's replies; `turbozero.play.server` serves it over HTTP.
The snapshot `Game` answers with is the page's JSON API (see `turbozero.play.server`).

Two-player games are the human against the agent. In a one-player game (2048) the human plays,
and the agent plays a move in the human's place when asked (`Game.agent_move`), to watch it.
Games with chance (`Env.chance`: 2048's tiles, backgammon's dice) are stepped through their
split so that each outcome is known and shown as it falls (`turbozero.play.games`).
"""

from __future__ import annotations

import dataclasses
import secrets
import threading
import time
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import numpy as np

from turbozero import envs
from turbozero.arena.agents import runs_search
from turbozero.arena.opponents import make_opponent
from turbozero.envs.chance import step_with_outcome
from turbozero.envs.core import Env
from turbozero.gamespec import board_cells, move_label, outcome_label, winning_line
from turbozero.play.games import (
    agent_turn_marks,
    chance_cell,
    game_view,
    move_choices,
    move_text,
)
from turbozero.search import compiler_options
from turbozero.types import PyTree, StepMetadata

TOP_MOVES = 5  # moves shown with their search weights in the agent's reply
MAX_AGENT_MOVES = 10_000  # agent moves in a row before we call the game broken


class IllegalMoveError(ValueError):
    """A request the game refuses (illegal or malformed move, nothing to undo); HTTP 400."""


class Ply(NamedTuple):
    """One position of the game and how it was reached."""

    state: PyTree  # the environment state (on device)
    meta: StepMetadata  # its metadata, as host numpy arrays
    action: int | None  # the move that led here; None at the start
    mover: str | None  # "human" or "agent"; None at the start
    reply: dict[str, Any] | None  # the agent's analysis when mover == "agent"
    label: str | None = None  # the move's name where it was played (backgammon's hits)
    outcome: int | None = None  # the chance outcome that followed the move; None: no draw


def result_text(human: float, agent: float) -> tuple[str, str]:
    """`(winner, sentence)` of a two-player game's returns: "human", "agent" or "draw", with
    the points won where a game scores more than one (backgammon's gammons: "The agent wins (2
    points).")."""
    points = abs(human) if abs(human) not in (0.0, 1.0) else None
    by = f" ({points:g} points)" if points is not None else ""
    if human > agent:
        return "human", f"You win{by}!"
    if agent > human:
        return "agent", f"The agent wins{by}."
    return "draw", "Draw."


def _compiled_policy(loaded: Any) -> tuple[Callable[..., Any], tuple[Any, ...]]:
    """`(fn, args)`: `fn(*args, states [1, ...], key) -> AgentOutput`, one `jax.jit` function.

    The agent (a pytree) is an argument rather than a constant, so its parameters are not baked
    into the program.
    """
    agent = getattr(loaded, "agent", None)
    if agent is not None and hasattr(agent, "policy_fn"):
        policy = jax.jit(
            lambda agent, states, key: agent.policy(states, key),
            compiler_options=compiler_options() if runs_search(agent.policy_fn) else None,
        )
        return policy, (agent,)
    return jax.jit(loaded.policy), ()


@dataclasses.dataclass(frozen=True)
class EngineSide:
    """An engine in the agent's seat of a `Game` (`engine_side`): the game and the engine's
    agent, as `turbozero.load_agent` gives a run's."""

    env: Env
    agent: Any
    name: str


def fresh_seed() -> int:
    """A new seed in [0, 2**31) from the operating system's randomness: a play session started
    without one deals other dice and tiles than the last."""
    return secrets.randbelow(2**31)


def engine_side(game: str, engine: str) -> EngineSide:
    """The engine `engine` (an opponent name: `pubeval`, `gnubg:0`, `gnugo:1`, `gtp:COMMAND`,
    `mcts:N`, `random`, `perfect`) playing `game` (a registered game's id), for `Game`.

    Raises:
        ValueError: an unknown game, an opponent name of no known form, or an engine that does
            not play this game (named in the message).
        MissingExtraError, FileNotFoundError: the engine is not installed.
    """

    env = envs.make(game)
    return EngineSide(env, make_opponent(env, engine), engine)


class Game:
    """One game between a human and `loaded` (a `turbozero.load_agent` result), with history.

    Thread-safe: every public method holds the game's lock. `human_first` says who moves first
    in new games of two players (a one-player game is always the human's to play, the agent
    moving in the human's place when asked: `agent_move`); `seed` fixes the keys given to
    `init`, `step` and the agent.
    """

    def __init__(self, loaded: Any, *, human_first: bool = True, seed: int = 0) -> None:
        env: Env = loaded.env  # one or two players (`Env` has no others)
        if env.continuous:
            raise ValueError(f"play needs discrete actions; {env.name!r} has continuous ones")
        self.env = env
        self.one_player = env.num_players == 1
        inner = getattr(loaded, "agent", None)
        self.agent_name = str(getattr(loaded, "name", None) or getattr(inner, "name", "agent"))
        self.human_first = bool(human_first) or self.one_player
        self.cells = board_cells(env.name)
        # Compiled once for a batch of one; `compiled_policy._cache_size()` counts compilations.
        self.compiled_policy, self._policy_args = _compiled_policy(loaded)
        agent = getattr(loaded, "agent", None)
        #: whether the agent's move weights are a search's visits (else its policy's own)
        self.searches = runs_search(getattr(agent, "policy_fn", None))
        #: what the agent's value measures: "points" (a TD agent's expected points a game), else
        #: "outcome" (-1 loses, +1 wins; a one-player game's return)
        self.value_unit = str(getattr(getattr(agent, "policy_fn", None), "value_unit", "outcome"))
        self._init = jax.jit(env.init)
        self._step = jax.jit(step_with_outcome(env))
        self._key = jax.random.PRNGKey(seed)
        self._lock = threading.RLock()
        self._plies: list[Ply] = []
        self.human_player = 0
        self._warm = False  # warm_up() has compiled the policy and the step
        self.new(human_first)

    # -- public, locked -------------------------------------------------------------------

    def new(self, human_first: bool | None = None) -> dict[str, Any]:
        """Start a new game (the agent moves at once if it goes first); the snapshot.

        `human_first` None keeps the last choice; a one-player game ignores it.
        """
        with self._lock:
            before = (self.human_first, self.human_player, self._plies)
            if human_first is not None:
                self.human_first = bool(human_first) or self.one_player
            state, meta = self._init(self._next_key())
            meta = jax.device_get(meta)
            first = int(meta.cur_player_id)
            self.human_player = first if self.human_first else 1 - first
            self._plies = [Ply(state, meta, None, None, None)]
            try:
                self._agent_replies()
            except Exception:
                # the agent failed to open the new game: the game before it stays as it was
                self.human_first, self.human_player, self._plies = before
                raise
            return self.snapshot()

    def move(self, action: Any) -> dict[str, Any]:
        """Play the human's `action`, then the agent's replies; the snapshot.

        Raises:
            IllegalMoveError: `action` is not an int, not legal here, or it is not the human's turn.
        """
        with self._lock:
            if isinstance(action, bool) or not isinstance(action, int):
                raise IllegalMoveError(f"action must be an integer, got {action!r}")
            if self.over:
                raise IllegalMoveError("the game is over; start a new one")
            if self.to_move != "human":
                raise IllegalMoveError("it is not your turn")
            if not 0 <= action < self.env.num_actions:
                raise IllegalMoveError(
                    f"action must be in [0, {self.env.num_actions}), got {action}"
                )
            if not bool(self._plies[-1].meta.action_mask[action]):
                legal = self.legal_actions()
                shown = legal if len(legal) <= 12 else f"{len(legal)} moves"
                raise IllegalMoveError(
                    f"illegal move {action} ({move_label(self.env.name, action)}); legal: {shown}"
                )
            before = len(self._plies)
            self._play(action, "human", None)
            try:
                self._agent_replies()
            except Exception:
                # the agent failed to reply: take the human's move back too, so the game is
                # left at the human's turn (not stuck at the agent's) and the move can be retried
                del self._plies[before:]
                raise
            return self.snapshot()

    def agent_move(self) -> dict[str, Any]:
        """Let the agent play the next move of a one-player game in the human's place (to watch
        it play, a move at a time); the snapshot.

        Raises:
            IllegalMoveError: a two-player game (where the agent replies by itself), or the game
                is over.
        """
        with self._lock:
            if not self.one_player:
                raise IllegalMoveError(
                    "the agent moves for you in one-player games only; "
                    f"in {self.env.name} it replies to your moves by itself"
                )
            if self.over:
                raise IllegalMoveError("the game is over; start a new one")
            self._agent_play()
            return self.snapshot()

    def undo(self) -> dict[str, Any]:
        """Take back the human's last move and the agent's replies to it (in a one-player game
        the last move, the human's or the agent's played when asked); the snapshot."""
        with self._lock:
            movers = ("human", "agent") if self.one_player else ("human",)
            last = max((i for i, p in enumerate(self._plies) if p.mover in movers), default=None)
            if last is None:
                raise IllegalMoveError("nothing to undo")
            del self._plies[last:]
            return self.snapshot()

    def warm_up(self) -> float:
        """Compile the agent's policy and the step on the current position; the seconds spent."""
        with self._lock:
            start = time.perf_counter()
            ply = self._plies[-1]
            batched = jax.tree_util.tree_map(lambda x: x[None], ply.state)
            jax.block_until_ready(self._policy(batched, jax.random.PRNGKey(0)))
            legal = np.flatnonzero(ply.meta.action_mask)
            if legal.size and not self.over:
                jax.block_until_ready(self._step(ply.state, int(legal[0]), jax.random.PRNGKey(0)))
            self._warm = True
            return time.perf_counter() - start

    def snapshot(self) -> dict[str, Any]:
        """The game as JSON-ready data: every answer of the page's API (`turbozero.play.server`)."""
        with self._lock:
            ply = self._plies[-1]
            state = jax.device_get(ply.state)
            name = self.env.name
            over = self.over
            legal = [] if over else self.legal_actions()
            svg = None if self.env.render_svg is None else self.env.render_svg(state)
            replies = [p.reply for p in self._plies if p.reply is not None]
            return {
                "env": name,
                "agent": self.agent_name,
                "players": self.env.num_players,
                "num_actions": self.env.num_actions,
                "human_player": self.human_player,
                "human_first": self.human_first,
                "current_player": int(ply.meta.cur_player_id),
                "to_move": None if over else self.to_move,
                "svg": svg,
                "cells": self.cells,
                "legal": legal,
                "moves": move_choices(name, state, legal),
                "history": [
                    {
                        "action": p.action,
                        "label": p.label,
                        "by": p.mover,
                        "outcome": p.outcome,
                        "chance": self._outcome_text(p),
                    }
                    for p in self._plies[1:]
                ],
                "score": self.returns()[0] if self.one_player else None,
                "chance": self._chance(ply),
                **game_view(name, state, human_player=self.human_player),
                "last_move": ply.action,
                "last_cell": self._last_cell(),
                "agent_arrows": agent_turn_marks(name, self._agent_turn()),
                "winning_cells": self._winning_cells() if over else [],
                "reply": replies[-1] if replies else None,
                "can_undo": any(p.mover == "human" for p in self._plies),
                "over": over,
                "result": self.result() if over else None,
            }

    # -- reading the position (callers hold the lock or accept a racy read) ---------------

    def _chance(self, ply: Ply) -> dict[str, Any] | None:
        """The chance outcome that followed `ply`'s move (`{"outcome", "label", "cell"}`: its
        id, its name, and for 2048 the new tile's `[x, y, r]` on the drawing), or None."""
        if ply.outcome is None:
            return None
        return {
            "outcome": ply.outcome,
            "label": self._outcome_text(ply),
            "cell": chance_cell(self.env.name, ply.outcome),
        }

    def _outcome_text(self, ply: Ply) -> str | None:
        """The name of the chance outcome after `ply`'s move; in a two-player game with the
        player it fell for, the one to move next ("the agent rolled 6-3")."""
        if ply.outcome is None:
            return None
        text = outcome_label(self.env.name, ply.outcome)
        if self.one_player:
            return text
        whose = "you" if int(ply.meta.cur_player_id) == self.human_player else "the agent"
        return f"{whose} {text}"

    def _agent_turn(self) -> list[tuple[Any, int]]:
        """`(state before, action)` of each move of the agent's last turn (its last run of
        moves, however many of the human's moves followed), in order; [] before its first."""
        last = max((i for i, p in enumerate(self._plies) if p.mover == "agent"), default=None)
        if last is None:
            return []
        first = last
        while first > 1 and self._plies[first - 1].mover == "agent":
            first -= 1
        moves = []
        for i in range(first, last + 1):
            action = self._plies[i].action
            assert action is not None  # every ply after the first was reached by a move
            moves.append((jax.device_get(self._plies[i - 1].state), action))
        return moves

    def _board(self, index: int) -> list[int] | None:
        """Ply `index`'s board as row-major marks (-1 empty), for games that keep one."""
        board = getattr(getattr(self._plies[index].state, "_x", None), "board", None)
        return None if board is None else [int(v) for v in np.asarray(board).ravel()]

    def _last_cell(self) -> list[float] | None:
        """`[x, y, r]` of the cell the last move filled (for Connect Four, the disc's cell)."""
        action = self._plies[-1].action
        if action is None or self.cells is None:
            return None
        mine = [c for c in self.cells if c[0] == action]
        if len(mine) == 1:
            return list(mine[0][1:])
        before, after = self._board(-2), self._board(-1)
        if before is None or after is None or len(after) != len(self.cells):
            return None
        placed = [i for i, (b, a) in enumerate(zip(before, after, strict=True)) if b == -1 != a]
        return list(self.cells[placed[0]][1:]) if len(placed) == 1 else None

    def _winning_cells(self) -> list[list[float]]:
        """`[[x, y], ...]` of the line that won the game, where the game is won by one."""
        board = self._board(-1)
        if board is None or self.cells is None:
            return []
        return [list(self.cells[i][1:3]) for i in winning_line(self.env.name, board)]

    @property
    def over(self) -> bool:
        meta = self._plies[-1].meta
        return bool(meta.terminated) or bool(meta.truncated)

    @property
    def to_move(self) -> str:
        current = int(self._plies[-1].meta.cur_player_id)
        return "human" if current == self.human_player else "agent"

    def legal_actions(self) -> list[int]:
        return [int(a) for a in np.flatnonzero(self._plies[-1].meta.action_mask)]

    def returns(self) -> list[float]:
        """Each player's summed rewards over the game so far `[P]`."""
        total = np.zeros(self.env.num_players, np.float64)
        for p in self._plies:
            total += np.asarray(p.meta.rewards, np.float64)
        return [float(r) for r in total]

    def result(self) -> dict[str, Any]:
        """Who won, by the environment's rewards (returns per player id); a one-player game's
        score (its return; winner None)."""
        returns = self.returns()
        if self.one_player:
            text = f"Game over: score {returns[0]:g}."
            if not bool(self._plies[-1].meta.terminated):
                text += " (move limit)"
            return {"winner": None, "text": text, "returns": returns}
        human, agent = returns[self.human_player], returns[1 - self.human_player]
        winner, text = result_text(human, agent)
        if not bool(self._plies[-1].meta.terminated):
            text += " (move limit)"
        return {"winner": winner, "text": text, "returns": returns}

    # -- internals ------------------------------------------------------------------------

    def _policy(self, states: PyTree, key: jax.Array) -> Any:
        return self.compiled_policy(*self._policy_args, states, key)

    def _next_key(self) -> jax.Array:
        self._key, key = jax.random.split(self._key)
        return key

    def _play(self, action: int, mover: str, reply: dict[str, Any] | None) -> None:
        before = self._plies[-1].state
        label = move_text(self.env.name, before, action)
        state, meta, outcome, drawn = self._step(before, action, self._next_key())
        meta, outcome, drawn = jax.device_get((meta, outcome, drawn))
        drawn_outcome = int(outcome) if bool(drawn) else None
        self._plies.append(Ply(state, meta, action, mover, reply, label, drawn_outcome))

    def _agent_replies(self) -> None:
        for _ in range(MAX_AGENT_MOVES):
            if self.over or self.to_move != "agent":
                return
            self._agent_play()
        raise RuntimeError(f"the agent moved {MAX_AGENT_MOVES} times in a row")

    def _agent_play(self) -> None:
        """The agent's move in the current position, played with its analysis (`reply`)."""
        if not self._warm:  # its compilation is not thinking time
            self.warm_up()
        ply = self._plies[-1]
        start = time.perf_counter()
        batched = jax.tree_util.tree_map(lambda x: x[None], ply.state)
        out = jax.device_get(self._policy(batched, self._next_key()))
        seconds = time.perf_counter() - start
        action = int(out.action[0])
        if not (0 <= action < self.env.num_actions and bool(ply.meta.action_mask[action])):
            raise RuntimeError(f"the agent chose the illegal action {action}")
        weights = np.asarray(out.weights[0], np.float64)
        top = [int(a) for a in np.argsort(-weights, kind="stable")[:TOP_MOVES]]
        reply = {
            "action": action,
            "label": move_text(self.env.name, ply.state, action),
            "value": float(out.value[0]),
            "seconds": round(seconds, 4),
            "searched": self.searches,
            "value_unit": self.value_unit,
            "top": [
                {
                    "action": a,
                    "label": move_text(self.env.name, ply.state, a),
                    "weight": float(weights[a]),
                }
                for a in top
                if weights[a] > 0
            ],
        }
        self._play(action, "agent", reply)
