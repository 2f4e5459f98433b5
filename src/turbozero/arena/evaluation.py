"""A loaded run's agent evaluated, as `turbozero eval` reports it: a match against an opponent
(two-player games), its mean return (one-player games), or its accuracy on positions a solver
or an engine judges. One path for every algorithm: the agent arrives loaded (`load_agent`), and
a run directory named as the opponent is loaded by the `load_opponent` the caller gives.

The checks name the command's flags, since the command is who calls them."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import jax
import numpy as np

from turbozero.arena.accuracy import judged_games, solver_report
from turbozero.arena.agents import Agent
from turbozero.arena.match import play_match, points_interval
from turbozero.arena.opponents import make_opponent, parse_opponent
from turbozero.config import INT32_MAX, SEED_MAX, SEED_MIN, ConfigError
from turbozero.envs.core import Env
from turbozero.gamespec import game_spec
from turbozero.io import outside
from turbozero.search.search import MAX_NODES
from turbozero.types import PRNGKey

MAX_EVAL_GAMES = 1 << 20  # games of one evaluation, played as one batch


def check_eval_counts(
    *,
    simulations: int | None,
    games: int,
    opening_moves: int | None,
    max_steps: int | None,
    seed: int,
) -> None:
    """The counts and the seed in range, before anything loads.

    Raises:
        ConfigError: naming the flag and its range.
    """
    # (counts reach the compiled match as int32; games are a batch held in memory at once)
    for flag, value, low, high in (
        ("--simulations", simulations, 1, MAX_NODES - 1),
        ("--games", games, 1, MAX_EVAL_GAMES),
        ("--opening-moves", opening_moves, 0, INT32_MAX),
        ("--max-steps", max_steps, 1, INT32_MAX),
    ):
        if value is not None and not low <= value <= high:
            raise ConfigError(f"{flag} must be in [{low}, {high}], got {value}")
    if not SEED_MIN <= seed <= SEED_MAX:
        raise ConfigError(f"--seed must be in [{SEED_MIN}, {SEED_MAX}], got {seed}")


def check_accuracy_flags(
    *,
    accuracy: bool,
    vs: str | None,
    max_steps: int | None,
    opening_moves: int | None,
    positions: int | None,
) -> None:
    """The games' flags without `--accuracy`, and `--positions` with it only.

    Raises:
        ConfigError: naming the flag that does not belong.
    """
    if accuracy:
        for flag, value in (
            ("--vs", vs),
            ("--max-steps", max_steps),
            ("--opening-moves", opening_moves),
        ):
            if value is not None:
                raise ConfigError(f"{flag} is for games; --accuracy plays none")
        if positions is not None and not 1 <= positions <= 100_000:
            raise ConfigError(f"--positions must be in [1, 100000], got {positions}")
    elif positions is not None:
        raise ConfigError("--positions is the size of --accuracy's position set; add --accuracy")


def evaluate_run(
    loaded: Any,
    *,
    run: str,
    seed: int = 0,
    vs: str | None = None,
    games: int = 100,
    max_steps: int | None = None,
    opening_moves: int | None = None,
    accuracy: bool = False,
    positions: int | None = None,
    weights: str = "playing",
    search: Mapping[str, Any] | None = None,
    load_opponent: Callable[[str], Any] | None = None,
) -> dict[str, Any]:
    """The figures of `loaded`'s agent (a `load_agent` result), by name, in the order shown.

    Args:
        loaded: the agent with its `env`, `epoch` and `config` (AlphaZero, PPO or TD).
        run: the run directory it came from, as given (recorded in the result).
        seed: the seed of the games or of the position set's sampling.
        vs: the opponent of a two-player game (default random), a name
            `turbozero.arena.opponents` parses or a run directory.
        games: games played at once (even in two-player games: sides are swapped).
        max_steps, opening_moves: the games' cut and random first moves (default 2, fewer
            when `max_steps` leaves no move).
        accuracy: judge the agent's moves on solved positions (or by gnubg) instead.
        positions: the size of the position set (default: the run's own).
        weights, search: the weights and the search's play settings it plays with, recorded.
        load_opponent: a run directory to its loaded agent, for `vs` naming one.

    Raises:
        ConfigError: a setting this game or opponent does not allow.
    """
    key = jax.random.PRNGKey(seed)
    with outside.ending_those_started():  # (an engine opponent ends with the evaluation)
        if accuracy:
            return _eval_accuracy(loaded, key, run, positions, weights, dict(search or {}))
        if loaded.env.num_players == 1:
            return _eval_one_player(loaded, key, run, vs, games, max_steps, opening_moves)
        return _eval_two_players(
            loaded, key, run, vs, games, max_steps, opening_moves, load_opponent
        )


def _opponent(spec: str, env: Env, load_run: Callable[[str], Any] | None) -> Agent:
    """The agent `--vs spec` names: a run directory's (loaded by `load_run`) or a fixed one's."""
    if load_run is not None and Path(spec).exists():
        other = load_run(spec)
        if other.env.name != env.name:
            raise ConfigError(f"{spec} plays {other.env.name!r}, not {env.name!r}")
        return other.agent
    try:
        parse_opponent(spec, what="--vs")
    except ValueError as err:
        raise ConfigError(f"{err}, or a run directory") from None
    return make_opponent(env, spec)


def _eval_accuracy(
    loaded: Any,
    key: PRNGKey,
    run: str,
    positions: int | None,
    weights: str,
    search: dict[str, Any],
) -> dict[str, Any]:
    """How the game's judge (a solver, an engine) rates the agent's moves (`Judge.report`)."""
    env = loaded.env
    spec = game_spec(env.name)
    judge = None if spec is None else spec.judge
    if judge is None:
        raise ConfigError(
            f"--accuracy needs a solver or an engine to judge moves, which exist for "
            f"{', '.join(judged_games())}; {env.name!r} has neither"
        )
    if not judge.sized and positions is not None:
        raise ConfigError(
            f"--positions chooses the size of a sampled position set; {env.name}'s set is all "
            f"of its positions"
        )
    # the set the run's own evaluations used, unless asked for another size
    default = getattr(getattr(loaded, "config", None), "eval_accuracy_positions", 1000)
    judged = judge.positions(env, positions or default, 0)
    report = judge.report or solver_report
    return {
        "run": run,
        "agent": loaded.agent.name,
        "env": env.name,
        "epoch": loaded.epoch,
        "weights": weights,
        "search": search,
        **report(env, loaded.agent, judged, key),
    }


def _eval_one_player(
    loaded: Any,
    key: PRNGKey,
    run: str,
    vs: str | None,
    games: int,
    max_steps: int | None,
    opening_moves: int | None,
) -> dict[str, Any]:
    """A one-player game: the agent's mean and median return over `games` games, the game's
    own figures' means (2048: the share of games reaching each tile) and the time a move took
    (games in parallel: the wall time over every game's moves)."""
    env = loaded.env
    if vs is not None:
        raise ConfigError(f"--vs is for two-player games; {env.name!r} has one player")
    if opening_moves:
        raise ConfigError(f"--opening-moves is for two-player games; {env.name!r} has one player")
    start = time.perf_counter()
    r = play_match(env, loaded.agent, None, key, num_games=games, max_steps=max_steps)
    seconds = time.perf_counter() - start
    return {
        "run": run,
        "agent": loaded.agent.name,
        "env": env.name,
        "games": r.num_games,
        "mean_return": r.mean_return_a,
        "median_return": float(np.median(np.asarray(r.returns)[:, 0])),
        **{name: float(np.mean(values)) for name, values in r.stats.items()},
        "mean_length": r.mean_length,
        "ms_per_move": 1000 * seconds / max(1, int(np.sum(r.lengths))),
        # ended by a time limit (the environment's, e.g. Pendulum's 200 steps, or --max-steps)
        "truncated": r.num_truncated,
    }


def _eval_two_players(
    loaded: Any,
    key: PRNGKey,
    run: str,
    vs: str | None,
    games: int,
    max_steps: int | None,
    opening_moves: int | None,
    load_opponent: Callable[[str], Any] | None,
) -> dict[str, Any]:
    """A two-player game: a match against `vs` with its intervals."""
    env = loaded.env
    if games % 2:
        raise ConfigError(f"--games must be even (sides are swapped), got {games}")
    vs = vs or "random"
    opp = _opponent(vs, env, load_opponent)
    if opening_moves is None:  # the default leaves the agent at least one move
        opening_moves = 2 if max_steps is None else min(2, max_steps - 1)
    elif max_steps is not None and opening_moves >= max_steps:
        raise ConfigError(
            f"--opening-moves ({opening_moves}) must be below --max-steps "
            f"({max_steps}): every move played would be random"
        )
    start = time.perf_counter()
    r = play_match(
        env,
        loaded.agent,
        opp,
        key,
        num_games=games,
        max_steps=max_steps,
        opening_moves=opening_moves,
    )
    seconds = time.perf_counter() - start
    return {
        "run": run,
        "agent": loaded.agent.name,
        "env": env.name,
        "vs": vs,
        "games": r.num_games,
        "opening_moves": opening_moves,  # random moves: even "perfect" can lose
        "wins": r.wins,
        "draws": r.draws,
        "losses": r.losses,
        "score": r.score,
        "score_ci95": [round(r.score_low, 4), round(r.score_high, 4)],
        # the game's own points (backgammon: 1, 2 for a gammon, 3 for a backgammon)
        "points_per_game": round(float(r.mean_return_a), 4),
        "points_per_game_ci95": [round(x, 4) for x in points_interval(r)],
        "as_first": list(r.as_first),  # [wins, draws, losses]
        "as_second": list(r.as_second),
        "illegal_moves": r.illegal_moves,  # both sides'
        "agent_illegal_moves": r.illegal_moves_a,
        "mean_length": r.mean_length,
        "ms_per_move": 1000 * seconds / max(1, int(np.sum(r.lengths))),
        # ended by a time limit (the environment's or --max-steps), not by the game: draws
        "truncated": r.num_truncated,
    }


#: what a figure of `evaluate_run` counts, said after its value where the name alone does not
NOTES = {
    "opening_moves": "random moves opening each game, for games that differ (--opening-moves)",
    "mean_length": "actions a game, as the environment counts them",
    "illegal_moves": "both sides', each replaced by a random legal move",
    "agent_illegal_moves": "the agent's own",
    "error_rate": "millipoints of equity lost a move, at the judge's ply",
    "score": "points a game: a win 1, a draw 0.5",
    "ms_per_move": "wall time over every move (both sides' in a match) of the games played at once",
}


def verdict(out: Mapping[str, Any]) -> str | None:
    """The result in one sentence, before the figures: a match's score against its opponent
    with its 95% interval and what the interval says; a one-player game's mean return; a
    judge's share of value-keeping moves or its error rate. None for anything else."""
    if "score" in out and "score_ci95" in out:
        low, high = out["score_ci95"]
        side = "ahead of" if low > 0.5 else "behind" if high < 0.5 else "level with"
        return (
            f"{side} {out['vs']}: score {out['score']:.3f} [{low:.3f}, {high:.3f}] over "
            f"{out['games']} games (W/D/L {out['wins']}/{out['draws']}/{out['losses']})"
        )
    if "mean_return" in out:
        median = f" (median {_figure(out['median_return'])})" if "median_return" in out else ""
        return f"mean return {_figure(out['mean_return'])}{median} over {out['games']} games"
    if "accuracy_result" in out:
        return (
            f"keeps the game's value in {out['accuracy_result']:.2%} of {out['positions']:,} "
            f"positions (the solver's best move in {out['accuracy_best']:.1%})"
        )
    if "error_rate" in out:
        return (
            f"error rate {out['error_rate']:.1f} millipoints a move over {out['positions']:,} "
            f"positions (lower is better)"
        )
    return None


def _figure(x: float) -> str:
    """A return as a person reads it: whole and grouped from 1,000 up (2048's 33,261), else
    four significant digits."""
    return f"{x:,.0f}" if abs(x) >= 1000 else f"{x:.4g}"


def eval_lines(out: Mapping[str, Any]) -> Iterator[str]:
    """`evaluate_run`'s result as text: its verdict first (`verdict`), then one aligned line per
    figure, with what it counts where its name does not say (`NOTES`)."""
    said = verdict(out)
    if said is not None:
        yield said
    width = max(map(len, out))
    for k, v in out.items():
        if k in ("as_first", "as_second"):
            v = "{} wins, {} draws, {} losses".format(*v)
        elif k == "truncated" and "mean_return" in out and v:
            v = (
                f"{v} of {out['games']} (ended by the time limit, not by the game: in a "
                "balancing task such as CartPole, kept up to the end)"
            )
        elif k in ("phases", "by_result"):
            v = "; ".join(f"{name}: {_phase_line(p)}" for name, p in v.items())
        elif k == "search":
            v = ", ".join(f"{name}={x}" for name, x in v.items())
        elif k in NOTES:
            v = f"{v}  ({NOTES[k]})"
        yield f"{k:>{width}}: {v}"


def _phase_line(p: dict[str, Any]) -> str:
    """One phase's figures: a solver's (result, best) or gnubg's (error rate, best share)."""
    if "error_rate" in p:
        return (
            f"error rate {p['error_rate']:.1f} millipoints a move, gnubg's best "
            f"{p['best_share']:.3f} "
            f"({p['positions']} positions)"
        )
    return f"result {p['result']:.3f}, best {p['best']:.3f} ({p['positions']} positions)"
