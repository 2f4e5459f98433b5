"""Self-play on several devices: each device searching its own games against XLA's partitioner.

The trainer's compiled `collect` (`Sharder.jit_step`, the state laid out over a one-axis mesh)
built two ways from the same preset: `make_alphazero(cfg, mesh=...)`, whose search runs under
`jax.shard_map` (`turbozero.search.shard_search`: every device searches its games, no
collective inside the search), and `make_alphazero(cfg)`, the same program left to XLA's SPMD
partitioner (the named peer: what the trainer did before). Both are compiled in one process and
timed in turns (best of `--repeats` rounds); each call plays `--steps` moves of every game.

On a CPU the devices are emulated (`--devices N` sets `--xla_force_host_platform_device_count`
before JAX starts; they share the machine's cores, so the absolute figures say little about
real devices, the collectives each program holds do). Rows `{"game", "devices", "batch",
"simulations", "sharded_positions_per_s", "partitioner_positions_per_s", "ratio",
"same_games"}`: `ratio` = sharded / partitioner; `same_games` whether both programs, started
from the same state, collected the same memory (they should: every game draws from its own key).

    python bench/devices.py [--devices 2] [--games tic_tac_toe connect_four] [--batch 64]
        [--sims 32] [--steps 4] [--repeats 3]

`--part train` times the gradient step instead: the preset's own compiled `train_steps(state,
1)` (its batch and replay memory, e.g. connect_four's 262,144 slots) with the state laid out
over `--devices` devices, against the same step on one device, in one process and in turns.
Rows `{"game", "devices", "memory_slots", "train_batch", "step_s", "one_device_step_s",
"ratio"}`: `ratio` = one device's seconds / the mesh's (below 1: the mesh is slower). Beside
them one row `{"part": "ranks", ...}` times the draw-with-replacement's running count over the
memory's slots split over the devices, `jax.lax.associative_scan(jnp.add)` (what the memory
uses) against `jnp.cumsum` (the named peer, what it used before), `ratio` = cumsum's seconds /
the scan's.

    python bench/devices.py --part train [--devices 2] [--games connect_four] [--repeats 3]
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--devices", type=int, default=2, help="devices in the mesh (>= 2)")
    parser.add_argument("--games", nargs="+", default=["tic_tac_toe", "connect_four"])
    parser.add_argument("--batch", nargs="+", type=int, default=[64])
    parser.add_argument("--sims", nargs="+", type=int, default=[32])
    parser.add_argument("--steps", type=int, default=4, help="moves per compiled collect call")
    parser.add_argument("--repeats", type=int, default=3, help="timed rounds (both in turn)")
    parser.add_argument(
        "--part", choices=["collect", "train"], default="collect", help="which program to time"
    )
    args = parser.parse_args(argv)
    if args.devices < 2 or args.steps < 1 or args.repeats < 1:
        parser.error("--devices must be >= 2, --steps and --repeats >= 1")
    if any(b % args.devices for b in args.batch) or any(s < 1 for s in args.sims):
        parser.error("every --batch must be divisible by --devices; --sims >= 1")
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse(argv)
    flag = f"--xla_force_host_platform_device_count={args.devices}"
    os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {flag}".strip()

    import jax
    import numpy as np

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import turbozero
    import turbozero.alphazero.config
    from common import emit, interleaved_best_times, machine
    from turbozero.alphazero import make_alphazero
    from turbozero.alphazero.sharding import Sharder
    from turbozero.config import get_preset
    from turbozero.search import compiler_options

    turbozero.configure()  # before any JAX computation: XLA reads XLA_FLAGS once
    if len(jax.devices()) < args.devices:  # (an accelerator's count is what it is)
        print(
            f"# skipped: {len(jax.devices())} devices visible, {args.devices} asked",
            file=sys.stderr,
        )
        return
    print(f"# machine: {machine()}", file=sys.stderr, flush=True)
    if args.part == "train":
        for game in args.games:
            time_train_step(game, args)
        return
    for game in args.games:
        for batch in args.batch:
            for sims in args.sims:
                cfg = (
                    get_preset(game)
                    .make()
                    .with_overrides(
                        [
                            f"num_games={batch}",
                            f"search.num_simulations={sims}",
                            f"search.max_nodes={sims + 1}",
                            f"devices={args.devices}",
                            f"train_batch_size={batch}",
                        ]
                    )
                )
                sharder = Sharder(cfg)
                systems = {
                    "sharded": make_alphazero(cfg, mesh=sharder.mesh),
                    "partitioner": make_alphazero(cfg),
                }
                start = sharder.jit_init(systems["sharded"].init)(jax.random.PRNGKey(0))
                shape = jax.eval_shape(systems["sharded"].init, jax.random.PRNGKey(0))
                calls, results = {}, {}
                for name, az in systems.items():
                    collect = sharder.jit_step(
                        az.collect, shape, compiler_options=compiler_options()
                    )
                    # collect donates its state: each program plays on from its own copy
                    held = [jax.tree_util.tree_map(lambda x: x.copy(), start)]
                    held[0], _ = collect(held[0], args.steps)
                    results[name] = jax.device_get(held[0].selfplay.memory.experience)

                    def call(collect=collect, held=held):
                        held[0], metrics = collect(held[0], args.steps)
                        return metrics

                    calls[name] = call
                same = all(
                    np.array_equal(a, b)
                    for a, b in zip(
                        jax.tree_util.tree_leaves(results["sharded"]),
                        jax.tree_util.tree_leaves(results["partitioner"]),
                        strict=True,
                    )
                )
                seconds = interleaved_best_times(calls, args.repeats)
                rate = {k: batch * args.steps / v for k, v in seconds.items()}
                emit(
                    {
                        "game": game,
                        "devices": args.devices,
                        "batch": batch,
                        "simulations": sims,
                        "sharded_positions_per_s": round(rate["sharded"], 1),
                        "partitioner_positions_per_s": round(rate["partitioner"], 1),
                        "ratio": round(rate["sharded"] / rate["partitioner"], 3),
                        "same_games": same,
                    }
                )


def time_train_step(game: str, args: argparse.Namespace) -> None:
    """The preset's gradient step on `args.devices` devices against one device (a row), then
    the memory's running count of held slots both ways over the mesh (a row)."""
    import jax
    import jax.numpy as jnp
    from jax.sharding import NamedSharding, PartitionSpec

    from common import emit, interleaved_best_times
    from turbozero.alphazero import make_alphazero
    from turbozero.alphazero.sharding import AXIS, Sharder
    from turbozero.config import get_preset

    preset = get_preset(game).make()
    calls, slots = {}, 0
    for name, count in (("mesh", args.devices), ("one", 1)):
        cfg = preset.with_overrides([f"devices={count}"])
        sharder = Sharder(cfg)
        az = make_alphazero(cfg, mesh=sharder.mesh if count > 1 else None)
        shape = jax.eval_shape(az.init, jax.random.PRNGKey(0))
        held = [sharder.jit_init(az.init)(jax.random.PRNGKey(0))]
        slots = held[0].selfplay.memory.assigned.size
        step = sharder.jit_step(az.train_steps, shape)

        def call(step=step, held=held):
            held[0], metrics = step(held[0], 1)
            return metrics

        calls[name] = call
    seconds = interleaved_best_times(calls, args.repeats)
    emit(
        {
            "game": game,
            "devices": args.devices,
            "memory_slots": slots,
            "train_batch": preset.train_batch_size,
            "step_s": round(seconds["mesh"], 4),
            "one_device_step_s": round(seconds["one"], 4),
            "ratio": round(seconds["one"] / seconds["mesh"], 3),
        }
    )

    mesh = Sharder(preset.with_overrides([f"devices={args.devices}"])).mesh
    split = NamedSharding(mesh, PartitionSpec(AXIS))
    held_slots = jax.device_put(jnp.arange(slots) % 3 != 0, split)  # [slots] bool
    counts = {
        "scan": jax.jit(lambda a: jax.lax.associative_scan(jnp.add, a.astype(jnp.int32))),
        "cumsum": jax.jit(lambda a: jnp.cumsum(a.astype(jnp.int32))),
    }
    same = bool(jnp.array_equal(counts["scan"](held_slots), counts["cumsum"](held_slots)))
    seconds = interleaved_best_times(
        {name: (lambda f=f: f(held_slots)) for name, f in counts.items()}, args.repeats
    )
    emit(
        {
            "part": "ranks",
            "game": game,
            "devices": args.devices,
            "memory_slots": slots,
            "scan_s": round(seconds["scan"], 5),
            "cumsum_s": round(seconds["cumsum"], 5),
            "ratio": round(seconds["cumsum"] / seconds["scan"], 2),
            "same_counts": same,
        }
    )


if __name__ == "__main__":
    main()
