"""Matches between two agents: many games in parallel as one compiled program.

`play_match` runs `num_games` games at once in a `lax.while_loop` over moves. Each move both
agents are queried on the whole batch and the mover's action is taken per game, so a match costs
two policy calls per move however the games are split between the agents.

Rules (one test each in tests/arena/test_match.py):
- Sides are swapped: agent A moves first in the even-numbered games and second in the odd ones
  (the first mover is the player to move after `env.init`).
- An action outside `[0, A)` or masked illegal is counted against the agent that chose it and
  replaced by a uniformly random legal action; the game goes on.
- Continuous-action environments (`env.continuous`, one player only) take the agent's float
  actions `[G, D]` as they are (the environment clips them to its bounds if it does); nothing
  is illegal there, and `opening_moves` must be 0.
- `opening_moves` random legal moves start every game (for both sides, not counted as illegal).
  The default is 0: stochastic agents (random, sampled, perfect) already play diverse games.
  Deterministic agents (argmax networks) on deterministic games replay the same two games over and
  over; give them `opening_moves > 0` (e.g. 2 in tic-tac-toe, 4 in connect four).
- In two-player games, games `2k` and `2k + 1` are a pair: the same environment randomness and
  the same random opening moves, with the seats swapped, so that an opening (or a dice
  sequence) that favours one side is played once from each seat.
- A game ends when the environment terminates or truncates it, or after `max_steps` moves (then
  it counts as truncated). With `max_steps=None` the loop runs until every game ends, which needs
  an environment that always ends (every pgx board game does).
- Agent A's outcome in a game compares the rewards summed over the game for A's player and B's
  player: higher is a win, equal a draw, lower a loss. In one-player games only agent A plays
  (`agent_b` is None) and the result holds the returns; wins/draws/losses are zero.
- The score rate is (wins + draws / 2) / games, with a 95% Wilson score interval that counts a
  draw as half a win (slightly wider than the exact interval when there are draws).

Programs are cached per (env, policy functions, num_games, max_steps): a second match with new
params (e.g. a later checkpoint) reuses the compiled program.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from turbozero.arena.agents import Agent, PolicyFn, propose, random_agent, runs_search
from turbozero.envs.core import Env
from turbozero.io.main_thread import serve_main_thread
from turbozero.io.resources import check_fits_in_memory
from turbozero.search import compiler_options
from turbozero.struct import pytree_bytes
from turbozero.types import Array, Params, PRNGKey, StepMetadata

Z95 = 1.959963984540054  # two-sided 95% normal quantile


class Record(NamedTuple):
    """Wins, draws and losses of one agent over some games."""

    wins: int
    draws: int
    losses: int

    @property
    def games(self) -> int:
        return self.wins + self.draws + self.losses

    @property
    def score(self) -> float:
        """(wins + draws / 2) / games; NaN without games."""
        return (self.wins + 0.5 * self.draws) / self.games if self.games else math.nan


@dataclasses.dataclass(frozen=True, eq=False)
class MatchResult:
    """The outcome of `play_match` from agent A's side, computed on the host.

    Attributes:
        name_a, name_b: the agents' names (`name_b` is "" in one-player games).
        num_games: games played (`G`).
        wins, draws, losses: agent A's record over all games.
        as_first, as_second: agent A's record in the games where it moved first / second.
        score: (wins + draws / 2) / num_games for agent A.
        score_low, score_high: 95% Wilson score interval of `score`.
        illegal_moves_a, illegal_moves_b: illegal actions each agent chose (replaced by random
            legal ones); 0 for a correct agent.
        mean_length: mean number of moves per game.
        num_truncated: games cut off (by the environment or by `max_steps`).
        mean_return_a: mean over games of agent A's summed rewards.
        returns: `[G, P]` float rewards summed over each game, per player id.
        player_a: `[G]` int player id agent A played in each game.
        a_first: `[G]` bool, agent A moved first.
        lengths: `[G]` int moves per game.
        actions: `[T, G]` int actions taken (after replacing illegal ones; -1 once the game is
            over), `T` = `max_steps`; None when `max_steps` is None. Continuous environments:
            `[T, G, D]` float actions (0 once the game is over).
        game_keys: `[G, 2]` uint32 per-game keys from which `records.replay_game` rebuilds the
            environment's randomness.
        stats: `env.episode_stats` of each game's last state, `{name: [G] float}`; empty when
            the environment has none.
    """

    name_a: str
    name_b: str
    num_games: int
    wins: int
    draws: int
    losses: int
    as_first: Record
    as_second: Record
    score: float
    score_low: float
    score_high: float
    illegal_moves_a: int
    illegal_moves_b: int
    mean_length: float
    num_truncated: int
    mean_return_a: float
    returns: np.ndarray
    player_a: np.ndarray
    a_first: np.ndarray
    lengths: np.ndarray
    actions: np.ndarray | None
    game_keys: np.ndarray
    stats: dict[str, np.ndarray] = dataclasses.field(default_factory=dict)

    @property
    def illegal_moves(self) -> int:
        return self.illegal_moves_a + self.illegal_moves_b

    def __repr__(self) -> str:
        return (
            f"MatchResult({self.name_a!r} vs {self.name_b!r}: +{self.wins} ={self.draws} "
            f"-{self.losses} of {self.num_games}, score {self.score:.3f} "
            f"[{self.score_low:.3f}, {self.score_high:.3f}], first {tuple(self.as_first)}, "
            f"second {tuple(self.as_second)}, illegal {self.illegal_moves}, "
            f"length {self.mean_length:.1f})"
        )


def points_interval(result: MatchResult, *, z: float = Z95) -> tuple[float, float]:
    """95% normal interval of agent A's mean points per game (its summed rewards: backgammon's
    1, 2 or 3 a game), from the spread of its games' points."""
    points = np.asarray(result.returns)[np.arange(result.num_games), np.asarray(result.player_a)]
    mean = float(points.mean())
    if points.size < 2:
        return mean, mean
    half = z * float(points.std(ddof=1)) / math.sqrt(points.size)
    return mean - half, mean + half


def match_row(name: str, result: MatchResult, *, points: bool = False) -> dict[str, float]:
    """A match's entries in a metric row: `eval/NAME/win`, `/draw` and `/loss` (shares of its
    games); with `points`, the game's points a game `/points` and its 95% interval
    `/points_low`, `/points_high` (`points_interval`)."""
    games = result.num_games
    row = {
        f"eval/{name}/win": result.wins / games,
        f"eval/{name}/draw": result.draws / games,
        f"eval/{name}/loss": result.losses / games,
    }
    if points:
        row[f"eval/{name}/points"] = float(result.mean_return_a)
        row[f"eval/{name}/points_low"], row[f"eval/{name}/points_high"] = points_interval(result)
    return row


def solo_row(result: MatchResult, seconds: float) -> dict[str, float]:
    """A one-player evaluation's entries in a metric row: the mean return `eval/return` (also
    `eval/score`, what ranks the best network), the median `eval/return_median`, the wall time
    over every move of the games played at once `eval/ms_per_move` (`seconds` the match's), and
    the game's own figures' means and maxima, `eval/NAME/mean` and `/max` (2048's tiles)."""
    returns = np.asarray(result.returns)[:, 0]
    row = {
        "eval/return": float(result.mean_return_a),
        "eval/score": float(result.mean_return_a),
        "eval/return_median": float(np.median(returns)),
        "eval/ms_per_move": 1000 * seconds / max(1, int(np.sum(result.lengths))),
    }
    for name, values in result.stats.items():
        row[f"eval/{name}/mean"] = float(np.mean(values))
        row[f"eval/{name}/max"] = float(np.max(values))
    return row


def play_opponents(
    env: Env,
    agent: Agent,
    opponents: Mapping[str, Agent],
    key: PRNGKey,
    *,
    games: int,
    judge: Any = None,
    positions: Any = None,
    max_steps: int | None = None,
) -> tuple[dict[str, float], dict[str, MatchResult]]:
    """An evaluation: `agent` against each of `opponents` (`games` games each, colours
    alternating; cut off after `max_steps` moves, which records the moves for `records_page`),
    and the `judge`'s move-quality figures on `positions` where both are given
    (`turbozero.gamespec.Judge`).

    Returns:
        The metric row (`match_row` with points, and the judge's figures) and each opponent's
        `MatchResult` (for the game records, `records_page`).
    """
    row: dict[str, float] = {}
    results: dict[str, MatchResult] = {}
    for i, (name, opponent) in enumerate(opponents.items()):
        result = play_match(
            env, agent, opponent, jax.random.fold_in(key, i), num_games=games, max_steps=max_steps
        )
        row.update(match_row(name, result, points=True))
        results[name] = result
    if judge is not None and positions is not None:
        row.update(judge.measure(env, agent, positions, jax.random.fold_in(key, 1000)))
    return row, results


def random_scores(
    env: Env,
    opponents: Mapping[str, Agent],
    key: PRNGKey,
    play: Callable[[Agent, Agent, PRNGKey], MatchResult],
) -> dict[str, float]:
    """`{eval/NAME/random_score: score}`: what random play scores against each opponent but
    random play itself, in matches `play(agent, opponent, key)` as the evaluation plays its
    own: the baseline an evaluation's line and plot carry beside the agent's score."""
    randomly = random_agent(env)
    return {
        f"eval/{name}/random_score": play(randomly, opponent, jax.random.fold_in(key, i)).score
        for i, (name, opponent) in enumerate(opponents.items())
        if name != "random"
    }


def wilson_interval(successes: float, n: int, *, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval of a proportion `successes / n` (NaNs when `n` is 0)."""
    if n <= 0:
        return math.nan, math.nan
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def _random_legal(key: PRNGKey, mask: Array, *, paired: bool = False) -> Array:
    """`[B]` uniformly random legal actions; any action where a row has none. `paired`: rows
    `2k` and `2k + 1` share one uniform draw, so that equal masks give equal actions."""
    B = mask.shape[0]
    mask = jnp.where(mask.any(axis=-1, keepdims=True), mask, True)
    if not paired:
        return jax.random.categorical(key, jnp.where(mask, 0.0, -jnp.inf)).astype(jnp.int32)
    u = jax.random.uniform(key, ((B + 1) // 2,))[jnp.arange(B) // 2]
    count = jnp.sum(mask, axis=-1)
    k = jnp.minimum((u * count).astype(jnp.int32), count - 1)  # the k-th legal action
    return jnp.argmax(jnp.cumsum(mask, axis=-1) > k[:, None], axis=-1).astype(jnp.int32)


def _select(done: Array, old: Any, new: Any) -> Any:
    """Keep `old` where the game `done` `[B]`, take `new` elsewhere (leaves batched on axis 0)."""

    def pick(o, n):
        return jnp.where(done.reshape(done.shape + (1,) * (n.ndim - 1)), o, n)

    return jax.tree_util.tree_map(pick, old, new)


def _checked_moves(
    proposed: Array, mask: Array, done: Array, opening: Array, key: PRNGKey, *, paired: bool
) -> tuple[Array, Array]:
    """`(actions [B] int32, illegal [B] bool)`: the agents' proposed moves where legal; a
    uniformly random legal move in the opening (the same for paired games with `paired`) and
    in place of an illegal one, which is counted unless the game is over or in its opening."""
    A = mask.shape[-1]
    proposed = proposed.astype(jnp.int32)
    in_range = (proposed >= 0) & (proposed < A)
    picked = jnp.take_along_axis(mask, jnp.clip(proposed, 0, A - 1)[:, None], -1)
    legal = in_range & picked[:, 0]
    illegal = ~legal & ~done & ~opening
    key_open, key_random = jax.random.split(key)
    random_move = jnp.where(
        opening,
        _random_legal(key_open, mask, paired=paired),
        _random_legal(key_random, mask),
    )
    return jnp.where(opening | ~legal, random_move, proposed), illegal


def _first_carry(
    env: Env, state: Any, md: StepMetadata, key: PRNGKey, num_games: int, max_steps: int | None
) -> dict[str, Any]:
    """The match loop's carry before the first move: the `num_games` games just set up
    (`state`, `md`), nothing scored yet, and with `max_steps` a `[T, B, ...]` record of the
    moves (-1, or zeros for float actions, after a game ends)."""
    B, P, T = num_games, env.num_players, max_steps
    carry = dict(
        t=jnp.int32(0),
        state=state,
        mask=md.action_mask,
        player=md.cur_player_id,
        done=md.terminated | md.truncated,
        truncated=md.truncated,
        returns=jnp.zeros((B, P), jnp.float32),
        lengths=jnp.zeros(B, jnp.int32),
        illegal_a=jnp.int32(0),
        illegal_b=jnp.int32(0),
        key=key,
    )
    if T is not None and env.continuous:
        assert env.action_shape is not None  # (a continuous game's)
        carry["actions"] = jnp.zeros((T, B, *env.action_shape), jnp.float32)
    elif T is not None:
        carry["actions"] = jnp.full((T, B), -1, jnp.int32)
    return carry


@functools.lru_cache(maxsize=64)
def _match_program(
    env: Env,
    policy_a: PolicyFn,
    policy_b: PolicyFn | None,
    num_games: int,
    max_steps: int | None,
) -> Callable[[Params, Params, PRNGKey, Array], dict[str, Array]]:
    """The compiled match for one configuration (cached; params, key and openings are data)."""
    two_players = env.num_players == 2
    continuous = env.continuous
    B = num_games
    T = max_steps

    def run(params_a, params_b, key, opening_moves):
        key_games, key = jax.random.split(key)
        if two_players:  # pairs of games with the seats swapped share their randomness
            game_keys = jax.random.split(key_games, (B + 1) // 2)[jnp.arange(B) // 2]
        else:
            game_keys = jax.random.split(key_games, B)

        def keys_at(t):  # per-game environment keys for move t (init is t = 0)
            return jax.vmap(jax.random.fold_in, (0, None))(game_keys, t)

        state, md = jax.vmap(env.init)(keys_at(0))
        a_first = jnp.arange(B) % 2 == 0
        first = md.cur_player_id
        player_a = jnp.where(a_first, first, 1 - first) if two_players else jnp.zeros_like(first)
        carry = _first_carry(env, state, md, key, B, T)

        def cond(c):
            going = ~jnp.all(c["done"])
            return going if T is None else going & (c["t"] < T)

        def body(c):
            t = c["t"]
            key, key_a, key_b, key_random = jax.random.split(c["key"], 4)
            a_moves = c["player"] == player_a
            going = ~c["done"]
            proposed = propose(policy_a, params_a, c["state"], key_a, a_moves & going).action
            if two_players:
                action_b = propose(policy_b, params_b, c["state"], key_b, ~a_moves & going)
                action_b = action_b.action
                proposed = jnp.where(a_moves, proposed, action_b)
            if continuous:  # one player, float actions: nothing to check or replace
                action = proposed.astype(jnp.float32).reshape(B, *env.action_shape)
                illegal = jnp.zeros(B, bool)
            else:
                opening = t < opening_moves
                action, illegal = _checked_moves(
                    proposed, c["mask"], c["done"], opening, key_random, paired=two_players
                )
            state, md = jax.vmap(env.step)(c["state"], action, keys_at(t + 1))
            done = c["done"]
            new = dict(
                t=t + 1,
                state=_select(done, c["state"], state),
                mask=_select(done, c["mask"], md.action_mask),
                player=_select(done, c["player"], md.cur_player_id),
                done=done | md.terminated | md.truncated,
                truncated=c["truncated"] | (~done & md.truncated),
                returns=c["returns"] + jnp.where(done[:, None], 0.0, md.rewards),
                lengths=c["lengths"] + (~done).astype(jnp.int32),
                illegal_a=c["illegal_a"] + jnp.sum(illegal & a_moves, dtype=jnp.int32),
                illegal_b=c["illegal_b"] + jnp.sum(illegal & ~a_moves, dtype=jnp.int32),
                key=key,
            )
            if T is not None:
                finished = done.reshape(done.shape + (1,) * (action.ndim - 1))
                new["actions"] = (
                    c["actions"]
                    .at[t]
                    .set(jnp.where(finished, jnp.zeros_like(action) if continuous else -1, action))
                )
            return new

        c = jax.lax.while_loop(cond, body, carry)
        out = {k: c[k] for k in ("returns", "lengths", "illegal_a", "illegal_b", "truncated")}
        out["truncated"] = out["truncated"] | ~c["done"]
        out.update(player_a=player_a, a_first=a_first, game_keys=game_keys)
        if env.episode_stats is not None:
            out["stats"] = jax.vmap(env.episode_stats)(c["state"])
        if T is not None:
            out["actions"] = c["actions"]
        return out

    searches = runs_search(policy_a) or runs_search(policy_b)
    return jax.jit(run, compiler_options=compiler_options() if searches else None)


#: copies of the games' states a match works with at once (the carry, the moves' new states,
#: the selection between them and the agents' inputs)
STATE_COPIES = 4


def match_memory_bytes(env: Env, agents: list[Agent], num_games: int) -> int:
    """Bytes a match of `num_games` games works in, from shapes alone: the games' states and
    what each agent's policy works in per call (its `memory_bytes(states)` where it has one: a
    search's trees, a TD agent's listed plays)."""
    one = jax.eval_shape(env.init, jax.ShapeDtypeStruct((2,), jnp.uint32))
    states = jax.tree_util.tree_map(
        lambda x: jax.ShapeDtypeStruct((num_games, *x.shape), x.dtype), one[0]
    )
    total = STATE_COPIES * num_games * pytree_bytes(one)
    for agent in agents:
        memory_bytes = getattr(agent.policy_fn, "memory_bytes", None)
        if memory_bytes is not None:
            total += int(memory_bytes(states))
    return total


def check_match_fits(env: Env, agents: list[Agent], num_games: int, what: str = "") -> None:
    """Refuse a match whose arrays would not fit in this machine's memory, before it compiles.

    Raises:
        TooLargeError: with the estimate and the settings to lower.
    """
    names = " against ".join(a.name for a in agents)
    check_fits_in_memory(
        match_memory_bytes(env, agents, num_games),
        what or f"a match of {num_games:,} games ({names})",
        lower="play fewer games at once (--games, eval_games) or search less (--simulations, "
        "eval_simulations, search.max_nodes, mcts:N)",
    )


def play_match(
    env: Env,
    agent_a: Agent,
    agent_b: Agent | None,
    key: PRNGKey,
    *,
    num_games: int,
    max_steps: int | None = None,
    opening_moves: int = 0,
) -> MatchResult:
    """Play `num_games` games of `agent_a` against `agent_b` in parallel; see the module rules.

    Args:
        env: the game.
        agent_a: the agent whose results are reported.
        agent_b: its opponent; None (or ignored) in one-player games.
        key: consumed; the same key and agents replay the same games.
        num_games: >= 1, even in two-player games (half with each agent moving first).
        max_steps: >= 1, cut every game off after this many moves (and record the actions);
            None plays until every game ends and records no actions.
        opening_moves: >= 0 random legal moves at the start of each game (see the module rules).

    Returns:
        A `MatchResult` of Python numbers and numpy arrays.

    Raises:
        ValueError: for an out-of-range argument, or a missing `agent_b` in a two-player game.
        TooLargeError: the match would not fit in this machine's memory (`check_match_fits`).

    Example:
        ```python
        env = turbozero.envs.make("tic_tac_toe")
        result = play_match(env, perfect_agent(env), random_agent(env), jax.random.PRNGKey(0),
                            num_games=64)
        assert result.losses == 0 and result.illegal_moves == 0
        ```
    """
    if not isinstance(num_games, int) or num_games < 1:
        raise ValueError(f"num_games must be an int >= 1, got {num_games!r}")
    if env.num_players == 2 and num_games % 2:
        raise ValueError(
            f"num_games must be even in two-player games (sides swap), got {num_games}"
        )
    if max_steps is not None and (not isinstance(max_steps, int) or max_steps < 1):
        raise ValueError(f"max_steps must be None or an int >= 1, got {max_steps!r}")
    if not isinstance(opening_moves, int) or opening_moves < 0:
        raise ValueError(f"opening_moves must be an int >= 0, got {opening_moves!r}")
    if not isinstance(agent_a, Agent):
        raise ValueError(f"agent_a must be an Agent, got {type(agent_a).__name__}")
    if env.num_players == 2 and not isinstance(agent_b, Agent):
        raise ValueError(f"agent_b must be an Agent in a two-player game, got {agent_b!r}")
    if env.num_players == 1:
        agent_b = None
    if env.continuous and (env.num_players != 1 or opening_moves):
        raise ValueError(
            f"a continuous-action environment ({env.name!r}) plays one-player matches with "
            f"opening_moves=0 (random openings are for discrete moves); got {env.num_players} "
            f"players and opening_moves={opening_moves}"
        )
    if jax.dtypes.issubdtype(jnp.asarray(key).dtype, jax.dtypes.prng_key):
        key = jax.random.key_data(key)

    check_match_fits(env, [a for a in (agent_a, agent_b) if a is not None], num_games)
    program = _match_program(
        env,
        agent_a.policy_fn,
        agent_b.policy_fn if agent_b is not None else None,
        num_games,
        max_steps,
    )
    params_b = agent_b.params if agent_b is not None else None

    def run() -> dict[str, Any]:
        return jax.device_get(program(agent_a.params, params_b, key, jnp.int32(opening_moves)))

    agents = [a for a in (agent_a, agent_b) if a is not None]
    if any(getattr(a.policy_fn, "needs_main_thread", False) for a in agents):
        out = serve_main_thread(run)  # (an engine that runs on the main thread only: gnubg)
    else:
        out = run()
    return _summarise(out, agent_a, agent_b, num_games)


def _summarise(out: dict[str, Any], agent_a: Agent, agent_b: Agent | None, G: int) -> MatchResult:
    returns = np.asarray(out["returns"])
    player_a = np.asarray(out["player_a"])
    a_first = np.asarray(out["a_first"])
    rows = np.arange(G)
    return_a = returns[rows, player_a]
    if agent_b is not None:
        return_b = returns[rows, 1 - player_a]
        win, loss = return_a > return_b, return_a < return_b
        draw = ~win & ~loss
    else:
        win = loss = draw = np.zeros(G, bool)

    def record(games: np.ndarray) -> Record:
        return Record(int(win[games].sum()), int(draw[games].sum()), int(loss[games].sum()))

    overall = record(np.ones(G, bool))
    if agent_b is not None:
        score = overall.score
        low, high = wilson_interval(overall.wins + 0.5 * overall.draws, G)
    else:
        score, low, high = math.nan, math.nan, math.nan
    lengths = np.asarray(out["lengths"])
    return MatchResult(
        name_a=agent_a.name,
        name_b=agent_b.name if agent_b is not None else "",
        num_games=G,
        wins=overall.wins,
        draws=overall.draws,
        losses=overall.losses,
        as_first=record(a_first),
        as_second=record(~a_first),
        score=score,
        score_low=low,
        score_high=high,
        illegal_moves_a=int(out["illegal_a"]),
        illegal_moves_b=int(out["illegal_b"]),
        mean_length=float(lengths.mean()),
        num_truncated=int(np.asarray(out["truncated"]).sum()),
        mean_return_a=float(return_a.mean()),
        returns=returns,
        player_a=player_a,
        a_first=a_first,
        lengths=lengths,
        actions=np.asarray(out["actions"]) if "actions" in out else None,
        game_keys=np.asarray(out["game_keys"]),
        stats={k: np.asarray(v, np.float64) for k, v in out.get("stats", {}).items()},
    )
