"""Work side by side on a CPU, against the same work in sequence, in the same run.

XLA:CPU runs one search program on about one core (its small loops run as single-threaded
kernels) and a gradient step on little more, so on a CPU with several cores two programs run
side by side in about the time of one. Two places use that:

- `epoch`: a preset trained `--epochs` epochs in sequence (self-play, then the gradient steps)
  and with `overlap=true` (self-play on a second thread beside the gradient steps); the median
  seconds per epoch of each, evaluations and checkpoints left out of the timed epochs;
- `accuracy`: the move-accuracy measure (`turbozero.arena.accuracy.agent_actions`) of the
  overlapped run's network on `--positions` labelled positions, its batches asked one at a
  time and side by side (`side_by_side()` threads; the moves are checked to be the same).

One JSON row each, with `ratio` = sequential / side by side (> 1: side by side faster).

    python bench/overlap.py [--preset connect_four] [--epochs 16] [--positions 1000]

Run it alone: it uses every core. Connect Four's positions need the `solvers` extra.
"""

from __future__ import annotations

import turbozero

turbozero.configure()  # before any JAX computation (pgx's import starts JAX)

import argparse
import functools
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import jax
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import emit, machine
from turbozero.alphazero import train_alphazero as train  # (also registers the presets)
from turbozero.arena import accuracy
from turbozero.config import get_preset
from turbozero.io.rundir import RunDir

SKIPPED = 4  # the first epochs: the memory fills and the sequential warm-up runs


def seconds_per_epoch(preset: str, epochs: int, overlap: bool, out: Path) -> float:
    """Median wall-clock seconds of an epoch after the first `SKIPPED`."""
    config: Any = (
        get_preset(preset)
        .make()
        .with_overrides(
            [
                f"num_epochs={epochs}",
                f"overlap={str(overlap).lower()}",
                "max_wall_seconds=0",
                f"eval_every={epochs + 1}",  # (no evaluation but the last, after the timed ones)
                f"checkpoint_every={epochs}",
            ]
        )
    )
    train(config, out, progress=False)
    walls = [r["wall_seconds"] for r in RunDir(out).read_metrics() if "wall_seconds" in r]
    return statistics.median(np.diff(walls[SKIPPED:-1]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--preset", default="connect_four")
    parser.add_argument("--epochs", type=int, default=16)
    parser.add_argument("--positions", type=int, default=1000)
    args = parser.parse_args()
    if args.epochs < SKIPPED + 3:
        parser.error(f"--epochs must be at least {SKIPPED + 3}")
    emit({"machine": machine(), "preset": args.preset})
    with tempfile.TemporaryDirectory() as tmp:
        runs = {overlap: Path(tmp) / f"overlap_{overlap}" for overlap in (False, True)}
        per_epoch = {o: seconds_per_epoch(args.preset, args.epochs, o, r) for o, r in runs.items()}
        emit(
            {
                "part": "epoch",
                "preset": args.preset,
                "epochs_timed": args.epochs - SKIPPED - 2,
                "sequential_s": round(per_epoch[False], 3),
                "overlapped_s": round(per_epoch[True], 3),
                "ratio": round(per_epoch[False] / per_epoch[True], 3),
            }
        )
        loaded = turbozero.load_agent(runs[True], which="latest")
        env, agent = loaded.env, loaded.agent
        if env.name.removeprefix("pgx:") not in accuracy.solved_games():
            return
        positions = accuracy.positions_for(env.name, num_positions=args.positions)
        key = jax.random.PRNGKey(0)
        threads = accuracy.side_by_side()
        timed, moves = {}, {}
        for label, n in (("one_at_a_time", 1), ("side_by_side", threads)):
            accuracy.side_by_side = functools.partial(int, n)  # type: ignore[assignment]
            accuracy.agent_actions(env, agent, positions, key)  # (compiled, then timed)
            t = time.perf_counter()
            moves[label] = accuracy.agent_actions(env, agent, positions, key)
            timed[label] = time.perf_counter() - t
        assert np.array_equal(moves["one_at_a_time"], moves["side_by_side"])
        emit(
            {
                "part": "accuracy",
                "positions": len(positions),
                "threads": threads,
                "one_at_a_time_s": round(timed["one_at_a_time"], 3),
                "side_by_side_s": round(timed["side_by_side"], 3),
                "ratio": round(timed["one_at_a_time"] / timed["side_by_side"], 3),
            }
        )


if __name__ == "__main__":
    main()
