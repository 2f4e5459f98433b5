"""Backgammon against the engines players know: pubeval and GNU Backgammon (the `engines` extra).

The engine ladder (always): each pairing below plays `--games` games with colours alternating and
the dice of each game drawn from `--seed`, one JSON row per pairing: `wins`, `losses`, `score`
(the share won) with its Wilson 95% interval `score_low`/`score_high`, `points_per_game` (the
money-game points pgx scores, 1, 2 for a gammon, 3 for a backgammon; no cube) with its normal
95% interval, `seconds`, `mean_length` (single-die actions a game) and `ms_per_move` (the wall
time over every action of the games played at once):

    pubeval vs random, gnubg:0 vs random, gnubg:0 vs pubeval, gnubg:1 vs gnubg:0

Move quality (always): on `--positions` positions scored by gnubg at 0 ply
(`turbozero.engines.quality`, the set `turbozero eval --accuracy` and training use), the error
rate (millipoints of equity given up a move against gnubg's best) and the share of gnubg's best
plays of random play, pubeval and gnubg:0 itself (0 and 1 by construction: a check of the
bridge), one row each (`measure: "quality"`).

With `--run DIR` (a backgammon run directory, TD or AlphaZero), its best network plays
`--run-games` games (default `--games`) against `pubeval` and against `gnubg:0`, a row each
(`agent`, `algorithm`, `epochs` and `minutes` of its training added), and gets a quality row. A
TD run plays at each of `--depths` (default 0: each play chosen by its value network; 1: by the
opponent's best reply to each roll, `turbozero.td.lookahead`), a row set each (`depth`;
`--gnubg-only` leaves pubeval out); an AlphaZero run with its evaluation search
(`--simulations N` to change the count), and also gets quality rows of its network's policy
alone (`a: "network alone"`) and of its search at each of `--quality-simulations` counts
(default: the count its matches use). The issue's bars: a preset trained for at most an hour
wins more than half its games against pubeval, and more than half its points against gnubg:0
(each interval above 0.5).

    python bench/engines.py [--games 100] [--seed 0] [--positions 200] [--run DIR]
        [--run-games N] [--simulations N] [--quality-simulations N [N ...]]
        [--depths 0 1] [--gnubg-only] [--no-ladder]

`--no-ladder` leaves out the engine ladder and the engines' quality rows.

Go (`--go-run DIR`, instead of everything above): a Go run's best network with its evaluation
search (or `--simulations N`) plays `--games` games against GNU Go at each of `--go-levels`
(default 1; Debian's `gnugo`), colours alternating and `--opening-moves` random moves (default
2) opening each game, since both players are deterministic; one row per level.

    python bench/engines.py --go-run DIR [--go-levels 1 10] [--games 20] [--opening-moves 2]

Run it alone: the matches use every core.
"""

from __future__ import annotations

import turbozero

turbozero.configure()  # before any JAX computation

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import jax
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import emit, machine
from turbozero.arena import network_agent, play_match
from turbozero.arena.match import points_interval
from turbozero.arena.opponents import make_opponent
from turbozero.engines.quality import move_quality, quality_positions

LADDER = (
    ("pubeval", "random"),
    ("gnubg:0", "random"),
    ("gnubg:0", "pubeval"),
    ("gnubg:1", "gnubg:0"),
)


def row(a: Any, b: Any, env: Any, games: int, seed: int, opening_moves: int = 0) -> dict[str, Any]:
    """One match of `games` games of agent `a` against agent `b`, summarised."""
    start = time.perf_counter()
    key = jax.random.PRNGKey(seed)
    r = play_match(env, a, b, key, num_games=games, opening_moves=opening_moves)
    seconds = time.perf_counter() - start
    low, high = points_interval(r)
    return {
        "a": a.name,
        "b": b.name,
        "games": r.num_games,
        "wins": r.wins,
        "losses": r.losses,
        "score": round(r.score, 4),
        "score_low": round(r.score_low, 4),
        "score_high": round(r.score_high, 4),
        "points_per_game": round(float(r.mean_return_a), 4),
        "points_low": round(low, 4),
        "points_high": round(high, 4),
        "seconds": round(seconds, 1),
        # single-die actions a game (both sides'), and the wall time over every action of the
        # games played at once: a TD run's depths against one engine differ by the search's cost
        "mean_length": round(float(r.mean_length), 1),
        "ms_per_move": round(1000 * seconds / max(1, int(np.sum(r.lengths))), 3),
        "seed": seed,
    }


def quality_row(agent: Any, env: Any, positions: Any, seed: int) -> dict[str, Any]:
    """The agent's gnubg error rate and share of gnubg's best plays on `positions`."""
    start = time.perf_counter()
    q = move_quality(env, agent, positions, jax.random.PRNGKey(seed))
    return {
        "measure": "quality",
        "a": agent.name,
        "positions": q.num_positions,
        "gnubg_ply": q.ply,
        "error_rate": round(q.error_rate, 2),
        "best_share": round(q.best_share, 4),
        "phases": q.phases,
        "seconds": round(time.perf_counter() - start, 1),
    }


def go_rows(args: argparse.Namespace) -> None:
    """`--go-run`: the run's agent against GNU Go at each level, a row each."""
    loaded = turbozero.load_agent(args.go_run, args.simulations)
    meta = json.loads((Path(args.go_run) / "summary.json").read_text())
    trained = {"epochs": meta.get("epochs"), "minutes": round(meta.get("wall_seconds", 0) / 60, 1)}
    emit({"bench": "engines", "game": loaded.env.name, **machine()})
    for level in args.go_levels:
        engine = make_opponent(loaded.env, f"gnugo:{level}")
        out = row(loaded.agent, engine, loaded.env, args.games, args.seed, args.opening_moves)
        emit({**out, "agent": args.go_run, "opening_moves": args.opening_moves, **trained})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--games", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--run", help="a backgammon run directory: its agent against the engines")
    parser.add_argument("--simulations", type=int, default=None)
    parser.add_argument("--run-games", type=int, default=None, help="the run's games (--games)")
    parser.add_argument("--positions", type=int, default=200)
    parser.add_argument("--quality-simulations", type=int, nargs="*", default=None)
    parser.add_argument("--go-run", help="a Go run directory: its agent against GNU Go only")
    parser.add_argument("--go-levels", type=int, nargs="+", default=[1])
    parser.add_argument("--opening-moves", type=int, default=2)
    parser.add_argument("--depths", type=int, nargs="+", default=[0], help="a TD run's, each")
    parser.add_argument("--gnubg-only", action="store_true", help="the run against gnubg:0 only")
    parser.add_argument("--no-ladder", action="store_true", help="the run's rows only")
    args = parser.parse_args()
    if args.go_run:
        go_rows(args)
        return
    env = turbozero.envs.make("backgammon")
    emit({"bench": "engines", **machine()})
    positions = quality_positions(env, args.positions)
    if not args.no_ladder:
        for a, b in LADDER:
            emit(row(make_opponent(env, a), make_opponent(env, b), env, args.games, args.seed))
        for name in ("random", "pubeval", "gnubg:0"):
            emit(quality_row(make_opponent(env, name), env, positions, args.seed))
    if args.run:
        run_rows(args, env, positions)


def run_rows(args: argparse.Namespace, env: Any, positions: Any) -> None:
    """`--run`: the run's best agent against pubeval and gnubg:0 (`--run-games` games each) and
    its move quality; an AlphaZero run's also with its network alone and other search counts."""
    from turbozero.loading import run_algorithm

    _, algorithm = run_algorithm(args.run)
    loaded = turbozero.load_agent(args.run, args.simulations)
    meta = json.loads((Path(args.run) / "summary.json").read_text())
    trained = {
        "algorithm": algorithm,
        "epochs": meta.get("epochs"),
        "minutes": round(meta.get("wall_seconds", 0) / 60, 1),
    }
    games = args.run_games or args.games
    if algorithm == "td":
        for depth in args.depths:
            agent = turbozero.load_agent(args.run, depth=depth).agent
            played = {"agent": args.run, "depth": depth, **trained}
            for engine in ("gnubg:0", "pubeval")[: 1 if args.gnubg_only else 2]:
                emit({**row(agent, make_opponent(env, engine), env, games, args.seed), **played})
            emit({**quality_row(agent, env, positions, args.seed), **played})
        return
    for engine in ("pubeval", "gnubg:0"):
        out = row(loaded.agent, make_opponent(env, engine), env, games, args.seed)
        emit({**out, "agent": args.run, **trained})
    alone = network_agent(env, loaded.az.eval_fn, loaded.params, name="network alone")
    emit({**quality_row(alone, env, positions, args.seed), "agent": args.run, **trained})
    for sims in args.quality_simulations or [None]:
        searched = turbozero.load_agent(args.run, sims).agent if sims else loaded.agent
        out = quality_row(searched, env, positions, args.seed)
        emit({**out, "agent": args.run, "simulations": sims, **trained})


if __name__ == "__main__":
    main()
