"""2048 by TD learning over afterstates: the `2048` preset trained for its budget, then its
agent measured as players measure 2048 (issue 84's targets).

The run's best network plays `--games` games at 1 ply (`depth 0`: each move's reward plus its
afterstate's value) and `--deep-games` games with the expectimax over the new tile (`depth 1`),
and the random policy plays `--games` games; every agent's games start from the same keys. Per
agent, one JSON row: `score` (mean) with its 95% interval (normal approximation over games),
`median`, `reached_2048`, `reached_4096` and `reached_8192` (shares of games) each with its Wilson
95% interval, `largest_tile`, `moves` (mean a game) and `ms_per_move` (wall time over every move
of the games played at once, compilation excluded). The trained rows carry `vs_random`, their
mean score over the random policy's from the same run (the baseline). Every row has `minutes`
(training wall clock), `epochs`, `env_steps` and `machine`.

    python bench/afterstates.py [--budget SECONDS] [--games 1000] [--deep-games 200]
        [--seed 0] [--set KEY=VALUE ...] [--keep DIR] [--run DIR]

`--run DIR` measures an existing run directory instead of training. Run it alone: it uses every
core. The issue's bars: at most an hour of training, the 2048 tile in at least 90% of 1,000
games and a mean score of at least 50,000 at 1 ply; the same with the expectimax, with its time
a move.
"""

from __future__ import annotations

import turbozero

turbozero.configure()  # before any JAX computation

import argparse
import json
import math
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import jax
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import emit, machine
from turbozero.arena import play_match, random_agent
from turbozero.arena.match import wilson_interval
from turbozero.config import get_preset
from turbozero.td.train import train_td

Z95 = 1.959964
PRESET = "2048"


def measure(env: Any, agent: Any, games: int, key: Any) -> dict[str, Any]:
    """One agent's row: its scores and tiles over `games` games from `key`."""
    if games > 1:  # (compiled and warmed on two games first: the time is play, not compiling)
        play_match(env, agent, None, jax.random.PRNGKey(99), num_games=2)
    start = time.perf_counter()
    r = play_match(env, agent, None, key, num_games=games)
    seconds = time.perf_counter() - start
    scores = np.asarray(r.returns)[:, 0]
    half = Z95 * float(scores.std(ddof=1)) / math.sqrt(games) if games > 1 else 0.0
    row: dict[str, Any] = {
        "games": games,
        "score": round(float(scores.mean()), 1),
        "score_low": round(float(scores.mean()) - half, 1),
        "score_high": round(float(scores.mean()) + half, 1),
        "median": float(np.median(scores)),
    }
    for tile in (2048, 4096, 8192):
        hits = float(np.sum(r.stats[f"reached_{tile}"]))
        low, high = wilson_interval(hits, games)
        row[f"reached_{tile}"] = round(hits / games, 4)
        row[f"reached_{tile}_ci95"] = [round(low, 4), round(high, 4)]
    row["largest_tile"] = int(np.max(r.stats["max_tile"]))
    row["moves"] = round(float(np.mean(r.lengths)), 1)
    row["ms_per_move"] = round(1000 * seconds / max(1, int(np.sum(r.lengths))), 4)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--budget", type=float, default=None, help="training seconds")
    parser.add_argument("--games", type=int, default=1000)
    parser.add_argument("--deep-games", type=int, default=200, dest="deep_games")
    parser.add_argument(
        "--seed", type=int, default=0, help="the matches' keys (training's: --set seed=N)"
    )
    parser.add_argument("--set", action="append", default=[], help="KEY=VALUE for the preset")
    parser.add_argument("--keep", type=Path, default=None, help="train into this directory")
    parser.add_argument("--run", type=Path, default=None, help="measure this run instead")
    args = parser.parse_args()

    run = args.run
    if run is None:
        config = get_preset(PRESET).make()
        if args.budget is not None:
            config = config.with_overrides([f"max_wall_seconds={args.budget}"])
        config = config.with_overrides(args.set)
        run = args.keep or Path(tempfile.mkdtemp(prefix="afterstates-")) / PRESET
        train_td(config, run, progress=False)
    rows = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    common = {
        "preset": PRESET,
        "run": str(run),
        "minutes": round(rows[-1]["wall_seconds"] / 60, 1),
        "epochs": rows[-1]["epoch"],
        "env_steps": rows[-1]["env_steps"],
        "seed": args.seed,
        "machine": machine(),
    }
    key = jax.random.PRNGKey(args.seed)
    loaded = turbozero.load_agent(run)
    env = loaded.env
    baseline = measure(env, random_agent(env), args.games, key)
    emit({**common, "agent": "random", **baseline})
    for depth, games in ((0, args.games), (1, args.deep_games)):
        if games < 1:
            continue
        agent = loaded.agent if depth == 0 else turbozero.load_agent(run, depth=depth).agent
        row = measure(env, agent, games, key)
        row["vs_random"] = round(row["score"] / max(baseline["score"], 1e-9), 1)
        emit({**common, "agent": f"td depth {depth}", "depth": depth, **row})


if __name__ == "__main__":
    main()
