"""Strength per wall-clock second: a preset trained for a fixed budget, then its move accuracy
against a perfect solver, beside a named baseline recipe trained in the same script.

Each run trains the preset (`turbozero.train`) with `max_wall_seconds` set to the budget (the
preset's own `num_epochs` still stops it earlier), then asks its latest network, searching with
the preset's own evaluation simulation count, for a move in every labelled position
(`turbozero.arena.accuracy`: tic-tac-toe's 4,520 reachable non-terminal positions, or 1,000
Connect Four positions 8 to 24 plies deep labelled by `bitbully`). One JSON line per run:

- `accuracy_result`: share of positions where the move keeps the game-theoretic result;
- `accuracy_best`: share where it has the solver's best score;
- `mistakes`: positions where the move loses value; `positions`, `epochs`, `seconds` (training
  wall-clock, compilation excluded), `recipe` (`candidate` or `baseline`), `seed`.

The baseline is the recipe the presets had before the strength work (`BASELINES`: the overrides
that turn today's preset back into it), so every change to a preset is judged side by side, on
the same machine, with the same budget.

    python bench/learning.py [--preset tic_tac_toe] [--budget 60] [--seeds 1] [--first-seed 0]
        [--set KEY=VALUE ...] [--no-baseline] [--keep DIR]
    python bench/learning.py --full   # connect_four, 1800 s each (one hour in all; make check)
    python bench/learning.py --judge RUN [--play-simulations 128,256] [--play-c-puct 1.25,2]

`--judge RUN` trains nothing: the latest network of an existing run directory is asked again,
once per play setting (every pair of the listed simulation counts and PUCT constants; default:
the run's own), one JSON line each, so the search it plays with can be tuned apart from training.

Default (`make bench`): tic_tac_toe, 60 s per run, one seed. Run it alone: it uses every core.
"""

from __future__ import annotations

import turbozero

turbozero.configure()  # before any JAX computation (pgx's import starts JAX)

import argparse
import sys
import tempfile
from pathlib import Path
from typing import Any

import jax

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import emit, machine
from turbozero.arena.accuracy import move_accuracy, positions_for
from turbozero.config import SEED_MAX, get_preset

#: overrides that turn today's preset into the recipe it had before the strength work
BASELINES: dict[str, list[str]] = {
    "tic_tac_toe": [
        "temperature=1",
        "temperature_moves=4",
        "search.num_simulations=32",
        "search.max_nodes=48",
        "eval_simulations=0",
        "train_steps_per_epoch=24",
        "num_epochs=30",
        "eval_every=5",
    ],
    "connect_four": [
        "temperature_moves=10",
        "root_value_weight=0",
        "memory_capacity=128",
        "learning_rate=1e-3",
        "eval_simulations=0",
        "network.line_features=false",
        "overlap=false",
    ],
}


def run_recipe(
    preset: str, overrides: list[str], budget: float, seed: int, out: Path
) -> dict[str, Any]:
    """Train `preset` with `overrides` for at most `budget` seconds; its accuracy row."""
    from turbozero.alphazero.train import train

    config = (
        get_preset(preset)
        .make()
        .with_overrides([*overrides, f"max_wall_seconds={budget}", f"seed={seed}"])
    )
    summary = train(config, out, preset=preset, progress=False)
    loaded = turbozero.load_agent(out, which="latest")
    positions = positions_for(preset, num_positions=config.eval_accuracy_positions)
    acc = move_accuracy(loaded.env, loaded.agent, positions, jax.random.PRNGKey(seed))
    return {
        "preset": preset,
        "seed": seed,
        "accuracy_result": round(acc.result, 5),
        "accuracy_best": round(acc.best, 5),
        "mistakes": round((1 - acc.result) * acc.num_positions),
        "positions": acc.num_positions,
        "phases": acc.phases,
        "by_result": acc.by_result,
        "epochs": summary["epochs"],
        "env_steps": summary["env_steps"],
        "seconds": round(summary["wall_seconds"], 1),
        "simulations": config.eval_simulations or config.search.num_simulations,
    }


def judge_run(
    run: Path, simulations: list[int] | None, c_pucts: list[float] | None, seed: int = 0
) -> list[dict[str, Any]]:
    """The accuracy rows of `run`'s latest network searching with each pair of settings."""
    import dataclasses

    from turbozero.alphazero.trainer import make_selector
    from turbozero.arena.search_agents import alphazero_agent

    loaded = turbozero.load_agent(run, which="latest")
    cfg = loaded.config
    if c_pucts and cfg.search.selector != "puct":
        raise SystemExit(
            f"--play-c-puct is PUCT's constant; {run} searches with {cfg.search.selector}"
        )
    positions = positions_for(loaded.env.name, num_positions=cfg.eval_accuracy_positions)
    rows = []
    for sims in simulations or [cfg.eval_simulations or cfg.search.num_simulations]:
        for c in c_pucts or [cfg.search.c_puct]:
            agent = alphazero_agent(
                loaded.az.selfplay.search.env,
                loaded.az.eval_fn,
                loaded.agent.params,
                num_simulations=sims,
                selector=make_selector(dataclasses.replace(cfg.search, c_puct=c)),
                chance_widening=cfg.search.chance_widening,
            )
            acc = move_accuracy(loaded.env, agent, positions, jax.random.PRNGKey(seed))
            rows.append(
                {
                    "run": str(run),
                    "epoch": loaded.epoch,
                    "simulations": sims,
                    "c_puct": c,
                    "accuracy_result": round(acc.result, 5),
                    "accuracy_best": round(acc.best, 5),
                    "mistakes": round((1 - acc.result) * acc.num_positions),
                    "positions": acc.num_positions,
                    "by_result": acc.by_result,
                }
            )
    return rows


def _numbers(kind: type) -> Any:
    def parse(text: str) -> list:
        return [kind(x) for x in text.split(",")]

    return parse


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--preset", default="tic_tac_toe", choices=sorted(BASELINES))
    parser.add_argument("--budget", type=float, default=None, help="seconds of training per run")
    parser.add_argument("--seeds", type=int, default=1, help="runs per recipe")
    parser.add_argument("--first-seed", type=int, default=0, help="seeds FIRST..FIRST+N-1")
    parser.add_argument("--set", action="append", default=[], help="candidate override")
    parser.add_argument("--no-baseline", action="store_true", help="train the candidate only")
    parser.add_argument("--full", action="store_true", help="connect_four, 1800 s per run")
    parser.add_argument("--keep", type=Path, help="keep the run directories here")
    parser.add_argument("--judge", type=Path, help="no training: RUN's latest network, asked again")
    parser.add_argument("--play-simulations", type=_numbers(int), help="with --judge: e.g. 128,256")
    parser.add_argument("--play-c-puct", type=_numbers(float), help="with --judge: e.g. 1.25,2")
    args = parser.parse_args(argv)
    if args.judge is not None:
        emit({"machine": machine(), "judge": str(args.judge)})
        for row in judge_run(args.judge, args.play_simulations, args.play_c_puct):
            emit(row)
        return
    if args.full:
        args.preset, args.budget = "connect_four", args.budget or 1800.0
    budget = args.budget or 60.0
    if budget <= 0 or args.seeds < 1 or args.first_seed < 0:
        parser.error("--budget must be > 0, --seeds >= 1 and --first-seed >= 0")
    if args.first_seed + args.seeds - 1 > SEED_MAX:
        parser.error(f"--first-seed + --seeds - 1 must be <= {SEED_MAX}")
    emit({"machine": machine(), "preset": args.preset, "budget_seconds": budget})
    recipes = {"candidate": args.set}
    if not args.no_baseline:
        recipes["baseline"] = BASELINES[args.preset]
    with tempfile.TemporaryDirectory() as tmp:
        where = args.keep or Path(tmp)
        for seed in range(args.first_seed, args.first_seed + args.seeds):
            for name, overrides in recipes.items():
                row = run_recipe(args.preset, overrides, budget, seed, where / f"{name}{seed}")
                emit({"recipe": name, "overrides": overrides, **row})


if __name__ == "__main__":
    main()
