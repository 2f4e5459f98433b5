"""Tree levels per loop iteration: our search with one level per iteration of the walk's last
phase and the backup against the same search with `--levels` levels per iteration
(`make_search(..., levels_per_iteration=...)`), in one process on whatever backend JAX picks, on
`bench/search.py`'s workload (empty trees, `max_nodes = simulations + 1`), compiled with
`turbozero.search.compiler_options()` (`--plain`: without them; they are empty on the CPU).
The programs' outputs are compared first (a warning on stderr if they differ).

All programs are compiled first, then timed in alternating rounds (best of `--repeats`); with
`--reverse` they are compiled and timed in the opposite order (most levels first). On the 2-core
CPU machine the same program timed against itself this way differed by up to about 2%, and
single runs of this comparison by more (0.88 to 1.07 on one cell): run both orders, more than
once.

One JSON row per cell and compared level count: `{"game", "batch", "simulations", "selector",
"net", "backend", "compiler_options", "levels", "one_level_sims_per_s", "levels_sims_per_s",
"ratio"}`, `ratio` = `levels` levels / one level.

    python bench/unroll.py [--games othello] [--batch 1024] [--sims 64] [--nets tiny]
        [--selectors muzero_puct gumbel] [--levels 2 4] [--repeats 4] [--reverse] [--plain]
"""

from __future__ import annotations

import turbozero

turbozero.configure()  # before any JAX computation (pgx's import starts JAX)

import argparse
import sys
from pathlib import Path

import jax
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import search as bench_search
from common import emit, interleaved_best_times, machine
from turbozero import envs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--games", nargs="+", default=["othello"])
    parser.add_argument("--batch", nargs="+", type=int, default=[1024])
    parser.add_argument("--sims", nargs="+", type=int, default=[64])
    parser.add_argument("--nets", nargs="+", default=["tiny"])
    parser.add_argument(
        "--selectors", nargs="+", default=["muzero_puct", "gumbel"], choices=bench_search.SELECTORS
    )
    parser.add_argument("--positions", type=int, default=6, help="random moves before the search")
    parser.add_argument(
        "--levels", nargs="+", type=int, default=[2, 4], help="level counts compared with one"
    )
    parser.add_argument("--plain", action="store_true", help="without compiler_options()")
    parser.add_argument("--repeats", type=int, default=4)
    parser.add_argument("--reverse", action="store_true", help="most levels compiled first")
    args = parser.parse_args()
    if min(args.repeats, *args.batch, *args.sims) < 1 or args.positions < 0:
        parser.error("--repeats, --batch and --sims must be >= 1, --positions >= 0")
    if min(args.levels) < 2:
        parser.error("--levels must be >= 2 (each is compared with one level)")
    print(f"# machine: {machine()}", file=sys.stderr, flush=True)
    levels_compared = sorted(set(args.levels))
    order = sorted({1, *levels_compared}, reverse=args.reverse)
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
                        calls, outs = {}, {}
                        key = jax.random.PRNGKey(1)
                        for levels in order:
                            fn = bench_search.make_ours(
                                env,
                                eval_fn,
                                selector=selector,
                                num_simulations=sims,
                                batch=B,
                                levels_per_iteration=levels,
                                options=not args.plain,
                            )
                            outs[levels] = jax.device_get(fn(params, states, key))  # compiles
                            calls[levels] = lambda fn=fn: fn(params, states, key)
                        for levels in levels_compared:
                            same = all(
                                np.allclose(a, b, rtol=1e-5, atol=1e-6)
                                for a, b in zip(outs[1], outs[levels], strict=True)
                            )
                            if not same:  # (the suite checks exact equality on the CPU)
                                print(
                                    f"# warning: outputs with 1 and {levels} levels differ",
                                    file=sys.stderr,
                                )
                        best = interleaved_best_times(
                            {levels: calls[levels] for levels in order}, args.repeats
                        )
                        for levels in levels_compared:
                            emit(
                                {
                                    "game": game,
                                    "batch": B,
                                    "simulations": sims,
                                    "selector": selector,
                                    "net": net,
                                    "backend": jax.default_backend(),
                                    "compiler_options": not args.plain,
                                    "levels": levels,
                                    "one_level_sims_per_s": round(B * sims / best[1], 1),
                                    "levels_sims_per_s": round(B * sims / best[levels], 1),
                                    "ratio": round(best[1] / best[levels], 3),
                                }
                            )


if __name__ == "__main__":
    main()
