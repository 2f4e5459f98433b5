"""Games with chance: a preset trained for a fixed CPU budget, then its agent measured.

2048 (`--game 2048`): the run's latest network plays `--games` games four ways, each game with
the same keys: the search with chance nodes (the preset's setting), the same search budget with
chance sampled inside the tree (`search.chance=sampled`: one outcome per edge, the baseline), the
network's most likely legal move (no search), and uniformly random legal moves. Per agent:
`score` (mean return) with its 95% interval `score_low`/`score_high` (normal approximation over
games), `max_tile` (mean of each game's largest tile) and `largest_tile`, `reached_1024` and
`reached_2048` (shares of games), `length`. Then `nodes_minus_sampled` with its 95% interval
(Welch's normal approximation) and `trained_vs_random`, the chance-node agent's mean score over
the random policy's (the issue's bar: 10). The chance-node agent opens outcomes as the run's
`search.chance_widening` says; each `--widening W` adds an agent `nodes_wW` searching with W
instead, with its own `nodes_wW_minus_sampled` (an ablation on the same network and games).

Backgammon (`--game backgammon`): the latest network with its search plays `--games` games
against the random player and against the network alone (sides swapped every other game):
`win_vs_random` with its Wilson 95% interval, `win_vs_network` likewise (the issue's bar: 0.9
against random after at most an hour of training).

Every row also has `epochs`, `env_steps`, `minutes` (training wall-clock, compilation excluded),
`simulations` (the run's evaluation count unless `--simulations`), `games`, `seed`.

    python bench/chance.py [--game 2048] [--game backgammon] [--budget SECONDS] [--games 128]
        [--seed 0] [--set KEY=VALUE ...] [--keep DIR] [--run DIR] [--simulations N]
        [--widening W ...]

Default: both games at their presets' own `max_wall_seconds`. `--run DIR` measures an existing
run directory of one game instead of training (give `--game` with it). Run it alone: it uses
every core.

Pooling sets of games (2048): `--pool FILE ...` trains and plays nothing; it reads the 2048 rows
that earlier runs of this script printed (their output files, one JSON line per row) and prints
one row that treats the sets as one larger, independent sample: each agent's `score` and
`nodes_minus_sampled` are means weighted by the sets' games, with 95% intervals from the sets'
standard errors (each recovered from its row's interval), and `trained_vs_random` is the pooled
chance-node mean over the pooled random mean. The rows must share `simulations` (the budget the
comparison is at):

    python bench/chance.py --game 2048 --run DIR --games 256 --seed 1 --simulations 256 > a.jsonl
    python bench/chance.py --pool a.jsonl b.jsonl
"""

from __future__ import annotations

import turbozero

turbozero.configure()  # before any JAX computation

import argparse
import math
import sys
import tempfile
from pathlib import Path
from typing import Any

import jax
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import emit, machine
from turbozero.arena import network_agent, play_match, random_agent
from turbozero.arena.search_agents import alphazero_agent
from turbozero.config import get_preset
from turbozero.envs.chance import without_chance

GAMES = ("2048", "backgammon")
PRESETS = {"2048": "2048_alphazero", "backgammon": "backgammon_alphazero"}
Z95 = 1.959964


def mean_interval(values: np.ndarray) -> tuple[float, float, float]:
    """Mean and its 95% normal-approximation interval."""
    m = float(values.mean())
    half = Z95 * float(values.std(ddof=1)) / math.sqrt(len(values)) if len(values) > 1 else 0.0
    return m, m - half, m + half


def pool_2048(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """One row for independent sets of 2048 games (`--pool`).

    Args:
        rows: 2048 rows of this script, at one simulation count.

    Returns:
        Per agent present in every row, the pooled `score` with `score_low`/`score_high`;
        `nodes_minus_sampled` with its interval; `trained_vs_random`; `games` (the total) and
        `sets` (the rows' games and seeds).
    """
    if not rows:
        raise ValueError("--pool: no 2048 rows in the given files")
    sims = {r["simulations"] for r in rows}
    if len(sims) != 1:
        found = sorted(sims)
        raise ValueError(f"--pool: the rows were searched with different simulations {found}")
    sets = [(r.get("run"), r.get("seed"), r["games"]) for r in rows]
    if any(run and sets.count((run, seed, g)) > 1 for run, seed, g in sets):
        raise ValueError("--pool: the same run, seed and games appear twice (one set, not two)")
    n = np.array([r["games"] for r in rows], dtype=np.float64)
    weights = n / n.sum()

    def pooled(means: list[float], lows: list[float], highs: list[float]) -> dict[str, float]:
        se = (np.array(highs) - np.array(lows)) / (2 * Z95)
        mean = float(weights @ np.array(means))
        half = Z95 * float(np.sqrt(((weights * se) ** 2).sum()))
        return {"mean": mean, "low": mean - half, "high": mean + half}

    agents = [a for a in ("nodes", "sampled", "network", "random") if all(a in r for r in rows)]
    row: dict[str, Any] = {"simulations": sims.pop()}
    for a in agents:
        p = pooled(*([r[a][k] for r in rows] for k in ("score", "score_low", "score_high")))
        row[a] = {"score": round(p["mean"], 1), "score_low": round(p["low"], 1)}
        row[a]["score_high"] = round(p["high"], 1)
    keys = ("nodes_minus_sampled", "nodes_minus_sampled_low", "nodes_minus_sampled_high")
    if all(k in r for r in rows for k in keys):
        p = pooled(*([r[k] for r in rows] for k in keys))
        row["nodes_minus_sampled"] = round(p["mean"], 1)
        row["nodes_minus_sampled_low"] = round(p["low"], 1)
        row["nodes_minus_sampled_high"] = round(p["high"], 1)
    if "nodes" in agents and "random" in agents:
        ratio = row["nodes"]["score"] / max(row["random"]["score"], 1e-9)
        row["trained_vs_random"] = round(ratio, 2)
    row["games"] = int(n.sum())
    row["sets"] = [{"games": r["games"], "seed": r.get("seed"), "run": r.get("run")} for r in rows]
    return row


def read_rows(paths: list[Path]) -> list[dict[str, Any]]:
    """The 2048 result rows in this script's output files."""
    import json

    rows = []
    for path in paths:
        for line in path.read_text().splitlines():
            if line.startswith("{"):
                row = json.loads(line)
                if row.get("game") == "2048":
                    rows.append(row)
    return rows


def train_or_load(game: str, args: argparse.Namespace, out: Path) -> tuple[Any, dict[str, Any]]:
    """The run's loaded agent (training it first unless `--run`), and its training figures."""
    import json

    from turbozero.alphazero.train import train_alphazero as train
    from turbozero.io.rundir import RunDir

    if args.run is None:
        preset = PRESETS[game]
        config = (
            get_preset(preset).make().with_overrides([*args.set, f"seed={args.seed}"]).resolved()
        )
        if args.budget is not None:
            config = config.with_overrides([f"max_wall_seconds={args.budget}"])
        summary = train(config, out, preset=preset, progress=False)
        path = out
    else:
        path = args.run
        summary = json.loads(RunDir(path).summary_path.read_text())
    loaded = turbozero.load_agent(path, which="latest")
    figures = {
        "epochs": summary.get("epochs"),
        "env_steps": summary.get("env_steps"),
        "minutes": round(float(summary.get("wall_seconds", 0.0)) / 60, 2),
    }
    return loaded, figures


def measure_2048(
    loaded: Any, games: int, seed: int, sims: int | None, widenings: tuple[float, ...] = ()
) -> dict[str, Any]:
    env, cfg = loaded.env, loaded.config
    sims = sims or cfg.eval_simulations or cfg.search.num_simulations
    selector = loaded.agent.policy_fn.search.selector

    def nodes(widening: float) -> Any:
        return alphazero_agent(
            env,
            loaded.az.eval_fn,
            loaded.params,
            num_simulations=sims,
            selector=selector,
            chance_widening=widening,
            discount=cfg.search.discount,
        )

    agents = {
        "nodes": nodes(cfg.search.chance_widening),
        **{f"nodes_w{w:g}": nodes(w) for w in widenings},
        "sampled": alphazero_agent(
            without_chance(env),
            loaded.az.eval_fn,
            loaded.params,
            num_simulations=sims,
            selector=selector,
            discount=cfg.search.discount,
        ),
        "network": network_agent(env, loaded.az.eval_fn, loaded.params, name="network"),
        "random": random_agent(env),
    }
    key = jax.random.PRNGKey(20_000 + seed)
    row: dict[str, Any] = {"simulations": sims, "widening": cfg.search.chance_widening}
    scores = {}
    for name, agent in agents.items():
        r = play_match(env, agent, None, key, num_games=games, max_steps=cfg.max_episode_steps)
        scores[name] = r.returns[:, 0].astype(np.float64)
        mean, low, high = mean_interval(scores[name])
        row[name] = {
            "score": round(mean, 1),
            "score_low": round(low, 1),
            "score_high": round(high, 1),
            "max_tile": round(float(r.stats["max_tile"].mean()), 1),
            "largest_tile": int(r.stats["max_tile"].max()),
            "reached_1024": round(float(r.stats["reached_1024"].mean()), 4),
            "reached_2048": round(float(r.stats["reached_2048"].mean()), 4),
            "length": round(r.mean_length, 1),
            "truncated": r.num_truncated,
        }
    b = scores["sampled"]
    for name, a in scores.items():
        if not name.startswith("nodes"):
            continue
        diff = float(a.mean() - b.mean())
        half = Z95 * math.sqrt(a.var(ddof=1) / len(a) + b.var(ddof=1) / len(b))
        row[f"{name}_minus_sampled"] = round(diff, 1)
        row[f"{name}_minus_sampled_low"] = round(diff - half, 1)
        row[f"{name}_minus_sampled_high"] = round(diff + half, 1)
    a = scores["nodes"]
    row["trained_vs_random"] = round(float(a.mean()) / max(float(scores["random"].mean()), 1e-9), 2)
    return row


def measure_backgammon(loaded: Any, games: int, seed: int, sims: int | None) -> dict[str, Any]:
    env, cfg = loaded.env, loaded.config
    if sims is not None:
        loaded = turbozero.load_agent(loaded.path, sims, which="latest")
    games += games % 2  # sides swap every other game
    network = network_agent(env, loaded.az.eval_fn, loaded.params, name="network")
    row: dict[str, Any] = {
        "simulations": sims or cfg.eval_simulations or cfg.search.num_simulations
    }
    for i, (name, opponent) in enumerate((("random", random_agent(env)), ("network", network))):
        key = jax.random.PRNGKey(30_000 + 10 * seed + i)
        r = play_match(env, loaded.agent, opponent, key, num_games=games, max_steps=None)
        row[f"win_vs_{name}"] = round(r.wins / r.num_games, 4)
        row[f"win_vs_{name}_low"] = round(r.score_low, 4) if r.draws == 0 else None
        row[f"win_vs_{name}_high"] = round(r.score_high, 4) if r.draws == 0 else None
        row[f"score_vs_{name}"] = round(r.score, 4)
        row[f"length_vs_{name}"] = round(r.mean_length, 1)
    return row


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--game", action="append", choices=GAMES, help="(repeatable)")
    parser.add_argument("--budget", type=float, help="seconds of training (default: preset's)")
    parser.add_argument("--games", type=int, default=128, help="evaluation games per agent")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--set", action="append", default=[], help="config override")
    parser.add_argument("--keep", type=Path, help="keep the run directories here")
    parser.add_argument("--run", type=Path, help="measure this run directory (no training)")
    parser.add_argument("--simulations", type=int, help="searches' simulations (default: run's)")
    parser.add_argument(
        "--pool", type=Path, nargs="+", help="2048: pool the rows in these output files"
    )
    parser.add_argument(
        "--widening",
        type=float,
        action="append",
        default=[],
        help="2048: also search with this search.chance_widening (repeatable)",
    )
    args = parser.parse_args(argv)
    if args.pool is not None:
        missing = [str(p) for p in args.pool if not p.is_file()]
        if missing:
            parser.error(f"--pool: no such file {', '.join(missing)}")
        try:
            emit({"game": "2048", "pooled": True, **pool_2048(read_rows(args.pool))})
        except ValueError as err:
            parser.error(str(err))
        return
    if (args.budget is not None and args.budget <= 0) or args.games < 2:
        parser.error("--budget must be > 0 and --games >= 2")
    if args.simulations is not None and args.simulations < 1:
        parser.error("--simulations must be >= 1")
    if any(not 0.0 <= w <= 1.0 for w in args.widening):
        parser.error("--widening must be in [0, 1]")
    games = args.game or list(GAMES)
    if args.run is not None and len(games) != 1:
        parser.error("--run measures one run: give the game it is of with --game")
    emit({"machine": machine(), "games": games, "budget_seconds": args.budget})
    with tempfile.TemporaryDirectory() as tmp:
        where = args.keep or Path(tmp)
        for game in games:
            loaded, figures = train_or_load(game, args, where / f"{game}{args.seed}")
            if game == "2048":
                row = measure_2048(
                    loaded, args.games, args.seed, args.simulations, tuple(args.widening)
                )
            else:
                row = measure_backgammon(loaded, args.games, args.seed, args.simulations)
            emit(
                {
                    "game": game,
                    **row,
                    **figures,
                    "games": args.games,
                    "seed": args.seed,
                    "overrides": args.set,
                    "run": str(args.run or ""),
                }
            )


if __name__ == "__main__":
    main()
