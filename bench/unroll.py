"""Tree levels per loop iteration: our search with one and with two levels per iteration of the
walk's last phase and the backup (`turbozero.search.search.LEVELS_PER_ITERATION`), in one process
on whatever backend JAX picks, on `bench/search.py`'s workload (empty trees, `max_nodes =
simulations + 1`).

Both programs are compiled first, then timed in alternating rounds (best of `--repeats`); with
`--reverse` the two-level program is compiled and timed first. The same program timed against
itself this way differs by up to about 2% on the 2-core CPU machine, so read smaller ratios as
ties, and run both orders.

One JSON row per cell: `{"game", "batch", "simulations", "selector", "net", "backend",
"one_level_sims_per_s", "two_levels_sims_per_s", "ratio"}`, `ratio` = two levels / one level.

    python bench/unroll.py [--games othello] [--batch 1024] [--sims 64] [--nets tiny]
        [--selectors muzero_puct gumbel] [--repeats 4] [--reverse]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import jax

sys.path.insert(0, str(Path(__file__).resolve().parent))
import search as bench_search
from common import best_time, emit, machine
from turbozero import envs
from turbozero.search import search as search_module


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--games", nargs="+", default=["othello"])
    parser.add_argument("--batch", nargs="+", type=int, default=[1024])
    parser.add_argument("--sims", nargs="+", type=int, default=[64])
    parser.add_argument("--nets", nargs="+", default=["tiny"])
    parser.add_argument("--selectors", nargs="+", default=["muzero_puct", "gumbel"])
    parser.add_argument("--positions", type=int, default=6)
    parser.add_argument("--repeats", type=int, default=4)
    parser.add_argument("--reverse", action="store_true", help="two levels compiled first")
    args = parser.parse_args()
    print(f"# machine: {machine()}", file=sys.stderr, flush=True)
    order = (2, 1) if args.reverse else (1, 2)
    for game in args.games:
        env = envs.make(game)
        for net in args.nets:
            eval_fn, params = bench_search.make_net(net, env, jax.random.PRNGKey(0))
            for B in args.batch:
                states = bench_search.random_positions(
                    env, B, args.positions, jax.random.PRNGKey(2)
                )
                for selector in args.selectors:
                    for sims in args.sims:
                        calls = {}
                        for levels in order:
                            search_module.LEVELS_PER_ITERATION = levels  # read when traced
                            fn = bench_search.make_ours(
                                env, eval_fn, selector=selector, num_simulations=sims, batch=B
                            )
                            key = jax.random.PRNGKey(1)
                            jax.block_until_ready(fn(params, states, key))  # compiles
                            calls[levels] = lambda fn=fn, key=key: fn(params, states, key)
                        search_module.LEVELS_PER_ITERATION = None
                        best = dict.fromkeys(order, float("inf"))
                        for _ in range(args.repeats):
                            for levels in order:
                                t = best_time(calls[levels], repeats=1)
                                best[levels] = min(best[levels], t)
                        emit(
                            {
                                "game": game,
                                "batch": B,
                                "simulations": sims,
                                "selector": selector,
                                "net": net,
                                "backend": jax.default_backend(),
                                "one_level_sims_per_s": round(B * sims / best[1], 1),
                                "two_levels_sims_per_s": round(B * sims / best[2], 1),
                                "ratio": round(best[1] / best[2], 3),
                            }
                        )


if __name__ == "__main__":
    main()
