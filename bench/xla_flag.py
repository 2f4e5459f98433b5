"""The small-loop XLA flag (`turbozero.xla_flags`) on and off: our search alone, on
`bench/search.py`'s workload (empty trees, `max_nodes = simulations + 1`, compiled as
`bench/search.make_ours` does), each setting in a process of its own (XLA reads `XLA_FLAGS` when
JAX starts), the two settings alternating for `--rounds` rounds. "Off" is XLA's default bound
(`xla_cpu_small_while_loop_byte_threshold=1024`); "on" is what `import turbozero` sets. Each
process times `--repeats` calls after a warm-up and reports its best; the outputs (actions,
weights, depths) of the two settings are compared (a warning on stderr if they differ).

One JSON row per cell: `{"game", "batch", "simulations", "selector", "net", "on_sims_per_s"
[rounds], "off_sims_per_s" [rounds], "ratio"}`, `ratio` = best on / best off.

    python bench/xla_flag.py [--games connect_four othello] [--batch 64] [--sims 32]
        [--nets tiny] [--selectors muzero_puct] [--rounds 2] [--repeats 15]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from common import best_time, emit

OFF = "--xla_backend_extra_options=xla_cpu_small_while_loop_byte_threshold=1024"


def child(game: str, batch: int, sims: int, net: str, selector: str, repeats: int) -> None:
    """Time our search in this process; print one JSON object (rate and a digest of outputs)."""
    import hashlib

    import jax
    import numpy as np

    import search as bench_search
    import turbozero
    from turbozero import envs

    turbozero.configure()  # the option, unless this child's XLA_FLAGS chose otherwise

    env = envs.make(game)
    eval_fn, params = bench_search.make_net(net, env, jax.random.PRNGKey(0))
    states = bench_search.random_positions(env, batch, 6, jax.random.PRNGKey(2))
    fn = bench_search.make_ours(env, eval_fn, selector=selector, num_simulations=sims, batch=batch)
    key = jax.random.PRNGKey(1)
    out = jax.device_get(fn(params, states, key))
    best = best_time(lambda: fn(params, states, key), repeats=repeats)
    digest = hashlib.sha256(b"".join(np.asarray(x).tobytes() for x in out)).hexdigest()
    print(json.dumps({"sims_per_s": round(batch * sims / best, 1), "digest": digest}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--games", nargs="+", default=["connect_four", "othello"])
    parser.add_argument("--batch", nargs="+", type=int, default=[64])
    parser.add_argument("--sims", nargs="+", type=int, default=[32])
    parser.add_argument("--nets", nargs="+", default=["tiny"])
    parser.add_argument("--selectors", nargs="+", default=["muzero_puct"])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--child", nargs=6, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        game, batch, sims, net, selector, repeats = args.child
        child(game, int(batch), int(sims), net, selector, int(repeats))
        return
    if min(args.rounds, args.repeats, *args.batch, *args.sims) < 1:
        parser.error("--rounds, --repeats, --batch and --sims must be >= 1")
    base = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    settings = {"on": base, "off": dict(base, XLA_FLAGS=OFF)}
    for game in args.games:
        for net in args.nets:
            for batch in args.batch:
                for selector in args.selectors:
                    for sims in args.sims:
                        cell = [game, str(batch), str(sims), net, selector, str(args.repeats)]
                        rates: dict[str, list[float]] = {"on": [], "off": []}
                        digests = set()
                        for _ in range(args.rounds):
                            for name, env in settings.items():
                                proc = subprocess.run(
                                    [sys.executable, __file__, "--child", *cell],
                                    env=env,
                                    capture_output=True,
                                    text=True,
                                    check=True,
                                )
                                row = json.loads(proc.stdout.strip().splitlines()[-1])
                                rates[name].append(row["sims_per_s"])
                                digests.add(row["digest"])
                        if len(digests) > 1:
                            print(
                                f"# warning: outputs differ ({game}, {selector})", file=sys.stderr
                            )
                        emit(
                            {
                                "game": game,
                                "batch": batch,
                                "simulations": sims,
                                "selector": selector,
                                "net": net,
                                "on_sims_per_s": rates["on"],
                                "off_sims_per_s": rates["off"],
                                "ratio": round(max(rates["on"]) / max(rates["off"]), 3),
                            }
                        )


if __name__ == "__main__":
    main()
