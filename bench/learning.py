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
  wall-clock, the first epoch's compilation included), `recipe` (`candidate` or `baseline`), `seed`;
- `evaluations` and `eval_seconds`: the evaluations made during training and their seconds in
  all (part of `seconds`).

The baseline is the recipe the presets had before the strength work (`BASELINES`: the overrides
that turn today's preset back into it), so every change to a preset is judged side by side, on
the same machine, with the same budget.

    python bench/learning.py [--preset tic_tac_toe] [--budget 60] [--seeds 1] [--first-seed 0]
        [--set KEY=VALUE ...] [--no-baseline] [--keep DIR] [--dry-run]
    python bench/learning.py --full   # connect_four, 1800 s each (one hour in all; make check)
    python bench/learning.py --judge RUN [RUN ...] [--play-simulations 128,256]
        [--play-c-puct 1.25,2] [--play-weights playing,trained]
        [--play-fpu zero,node,network] [--play-fpu-reduction 0,0.2] [--play-positions 10000]

`--judge RUN ...` trains nothing: the latest network of each existing run directory (or the
checkpoint a `RUN/checkpoints/N` path names) is asked again, once per play setting (every
combination of the listed simulation counts, PUCT constants and weights; default:
the run's own), one JSON line each, on the same positions and key, so what a network plays
with can be tuned apart from training. `--play-weights trained` asks a run with `ema_decay`
for its trained weights instead of their moving average; `--play-fpu` sets PUCT's
value of an unvisited move (`search.fpu`: zero, a draw; node, the node's backed-up value;
network, the network's value of the node) and `--play-fpu-reduction` what is subtracted from
it (`search.fpu_reduction`); `--play-positions N` asks Connect Four's labelled
set of N positions (drawn with the same seed, so its first ones are the run's own set) and
adds the accuracy on the positions beyond the run's own set (`fresh_*`), on which no choice of
the recipe was measured. With several
RUNs, a last line per setting gives the mean accuracies over the networks and their summed
mistakes and positions: a paired comparison.

`--dry-run` trains nothing: one line per run with the resolved config it would train. The
judge's play settings are `turbozero eval --accuracy`'s (`--weights`, `--set
search.c_puct=...`), over a grid. Default (`make bench`): tic_tac_toe, 60 s per run, one seed.
Run it alone: it uses every core.
"""

from __future__ import annotations

import turbozero

turbozero.configure()  # before any JAX computation (pgx's import starts JAX)

import argparse
import itertools
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import jax

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import emit, machine
from turbozero.alphazero import SearchConfig, train
from turbozero.arena.accuracy import (
    PositionSet,
    accuracy_of_actions,
    agent_actions,
    move_accuracy,
    positions_for,
)
from turbozero.config import SEED_MAX, get_preset
from turbozero.games import game_spec

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
        "network.value_bins=0",
        "overlap=false",
        "ema_decay=0",
        "search.fpu=zero",
    ],
}


def accuracy_fields(acc: Any) -> dict[str, Any]:
    """A row's accuracy figures (`turbozero.arena.accuracy`'s result, rounded)."""
    return {
        "accuracy_result": round(acc.result, 5),
        "accuracy_best": round(acc.best, 5),
        "mistakes": round((1 - acc.result) * acc.num_positions),
        "positions": acc.num_positions,
        "phases": acc.phases,
        "by_result": acc.by_result,
    }


def recipe_config(preset: str, overrides: list[str], budget: float, seed: int) -> Any:
    """The resolved config of `preset` with `overrides`, trained for at most `budget` seconds."""
    config = get_preset(preset).make()
    config = config.with_overrides([*overrides, f"max_wall_seconds={budget}", f"seed={seed}"])
    return config.resolved()


def run_recipe(
    preset: str, overrides: list[str], budget: float, seed: int, out: Path
) -> dict[str, Any]:
    """Train `preset` with `overrides` for at most `budget` seconds; its accuracy row."""
    config = recipe_config(preset, overrides, budget, seed)
    summary = train(config, out, preset=preset, progress=False)
    loaded = turbozero.load_agent(out, which="latest")
    positions = positions_for(preset, num_positions=config.eval_accuracy_positions)
    acc = move_accuracy(loaded.env, loaded.agent, positions, jax.random.PRNGKey(seed))
    return {
        "preset": preset,
        "seed": seed,
        **accuracy_fields(acc),
        "epochs": summary["epochs"],
        "env_steps": summary["env_steps"],
        "seconds": round(summary["wall_seconds"], 1),
        **evaluation_fields(out / "metrics.jsonl"),
        "simulations": config.eval_simulations or config.search.num_simulations,
    }


def evaluation_fields(metrics: Path) -> dict[str, Any]:
    """How many evaluations a run made during training and the seconds they took in all (its
    `metrics.jsonl` rows with `eval_seconds`)."""
    rows = [json.loads(line) for line in metrics.read_text().splitlines() if line.strip()]
    seconds = [row["eval_seconds"] for row in rows if "eval_seconds" in row]
    return {"evaluations": len(seconds), "eval_seconds": round(sum(seconds), 1)}


def judge_run(
    run: Path,
    simulations: list[int] | None,
    c_pucts: list[float] | None,
    seed: int = 0,
    weights: list[str] | None = None,
    first_plays: list[str] | None = None,
    num_positions: int | None = None,
    reductions: list[float] | None = None,
) -> list[dict[str, Any]]:
    """The accuracy rows of `run`'s latest network (or of the checkpoint `run` names) searching
    with each combination of settings: simulations, PUCT constant, which weights play
    (`load_agent`'s `weights`) and the value of unvisited moves (`search.fpu`, less
    `search.fpu_reduction`: `load_agent`'s `search`); on `num_positions` positions where given
    (the run's own count otherwise)."""
    first = turbozero.load_agent(run, which="latest")
    cfg, game = first.config, first.env.name
    own = cfg.eval_accuracy_positions
    judge = getattr(game_spec(game), "judge", None)
    if num_positions is not None and not (judge is not None and judge.sized):
        raise SystemExit(f"--play-positions: {run} plays {game}, whose set is fixed")
    positions = positions_for(game, num_positions=num_positions or own)
    fresh = PositionSet(
        positions.game, positions.moves[own:], positions.scores[own:], positions.phases
    )
    asked = {"c_puct": c_pucts, "fpu": first_plays, "fpu_reduction": reductions}
    grid = itertools.product(
        weights or ["playing"],
        simulations or [cfg.eval_simulations or cfg.search.num_simulations],
        *(values or [None] for values in asked.values()),
    )
    rows = []
    for which_weights, sims, *values in grid:
        play = {k: v for k, v in zip(asked, values, strict=True) if v is not None}
        try:
            loaded = turbozero.load_agent(
                run, sims, which="latest", weights=which_weights, search=play
            )
        except ValueError as err:
            raise SystemExit(f"{run}: {err}") from None
        search = loaded.config.search
        actions = agent_actions(loaded.env, loaded.agent, positions, jax.random.PRNGKey(seed))
        acc = accuracy_of_actions(positions, actions)
        beyond = accuracy_of_actions(fresh, actions[own:]) if len(fresh) else None
        rows.append(
            {
                "run": str(run),
                "epoch": loaded.epoch,
                "simulations": sims,
                "c_puct": search.c_puct,
                "weights": which_weights,
                "fpu": search.fpu,
                "fpu_reduction": search.fpu_reduction,
                **accuracy_fields(acc),
                **(
                    {
                        "fresh_accuracy_result": round(beyond.result, 5),
                        "fresh_mistakes": round((1 - beyond.result) * len(fresh)),
                        "fresh_positions": len(fresh),
                    }
                    if beyond
                    else {}
                ),
            }
        )
    return rows


def judge_summary(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per play setting, over the judged networks (the paired comparison's line): the mean
    accuracies, the summed mistakes and the summed positions."""
    settings: dict[tuple, list[dict[str, Any]]] = {}
    for row in rows:
        key = (
            row["simulations"],
            row["c_puct"],
            row["weights"],
            row["fpu"],
            row["fpu_reduction"],
        )
        settings.setdefault(key, []).append(row)
    return [
        {
            "summary": True,
            "simulations": sims,
            "c_puct": c,
            "weights": w,
            "fpu": fpu,
            "fpu_reduction": reduction,
            "networks": len(same),
            "accuracy_result": round(sum(r["accuracy_result"] for r in same) / len(same), 5),
            "accuracy_best": round(sum(r["accuracy_best"] for r in same) / len(same), 5),
            "mistakes": sum(r["mistakes"] for r in same),
            "positions": sum(r["positions"] for r in same),
            **(
                {
                    "fresh_accuracy_result": round(
                        sum(r["fresh_accuracy_result"] for r in same) / len(same), 5
                    ),
                    "fresh_mistakes": sum(r["fresh_mistakes"] for r in same),
                    "fresh_positions": sum(r["fresh_positions"] for r in same),
                }
                if all("fresh_positions" in r for r in same)
                else {}
            ),
        }
        for (sims, c, w, fpu, reduction), same in settings.items()
    ]


def _numbers(kind: type) -> Any:
    def parse(text: str) -> list:
        return [kind(x) for x in text.split(",")]

    return parse


def _choices(*allowed: str) -> Any:
    def parse(text: str) -> list[str]:
        picked = text.split(",")
        for item in picked:
            if item not in allowed:
                raise argparse.ArgumentTypeError(
                    f"{item!r} is not one of {', '.join(allowed)} (comma-separated)"
                )
        return picked

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
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="train nothing: one line per run with the resolved config it would train",
    )
    parser.add_argument(
        "--judge",
        type=Path,
        nargs="+",
        help="no training: each RUN's latest network (or the checkpoint RUN names), asked again",
    )
    parser.add_argument("--play-simulations", type=_numbers(int), help="with --judge: e.g. 128,256")
    parser.add_argument("--play-c-puct", type=_numbers(float), help="with --judge: e.g. 1.25,2")
    parser.add_argument(
        "--play-weights", type=_choices("playing", "trained"), help="with --judge: playing,trained"
    )
    parser.add_argument(
        "--play-fpu",
        type=_choices("zero", "node", "network"),
        help="with --judge: zero,node,network (the value of a node's unvisited moves)",
    )
    parser.add_argument(
        "--play-fpu-reduction",
        type=_numbers(float),
        help="with --judge: e.g. 0,0.2 (subtracted from an unvisited move's value, in [0, 2])",
    )
    parser.add_argument(
        "--play-positions",
        type=int,
        help="with --judge, Connect Four: the size of the labelled set (default: the run's)",
    )
    args = parser.parse_args(argv)
    try:  # each play value in its setting's range before anything is judged
        for c in args.play_c_puct or []:
            SearchConfig(c_puct=c)
        for reduction in args.play_fpu_reduction or []:
            SearchConfig(fpu_reduction=reduction)
    except ValueError as err:
        parser.error(str(err))
    if args.play_positions is not None and not 1 <= args.play_positions <= 100_000:
        parser.error("--play-positions must be in [1, 100000]")
    if args.judge is not None:
        emit({"machine": machine(), "judge": [str(run) for run in args.judge]})
        rows = []
        for run in args.judge:
            for row in judge_run(
                run,
                args.play_simulations,
                args.play_c_puct,
                weights=args.play_weights,
                first_plays=args.play_fpu,
                num_positions=args.play_positions,
                reductions=args.play_fpu_reduction,
            ):
                emit(row)
                rows.append(row)
        if len(args.judge) > 1:
            for row in judge_summary(rows):
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
                if args.dry_run:
                    config = recipe_config(args.preset, overrides, budget, seed)
                    emit({"recipe": name, "seed": seed, "config": config.to_dict()})
                    continue
                row = run_recipe(args.preset, overrides, budget, seed, where / f"{name}{seed}")
                emit({"recipe": name, "overrides": overrides, **row})


if __name__ == "__main__":
    main()
