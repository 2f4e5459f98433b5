"""Cost per simulation against the node capacity: our search at a fixed budget with `max_nodes`
64, 256 and 1024 (the issue's rule: a search whose per-simulation cost grows with `max_nodes`
runs about 10x slower at 1024 nodes than at 64; ours must not).

Workload as `bench/search.py` (random positions, the pgx game as the model, the tiny network by
default, empty trees). A call builds its empty trees, which costs O(`max_nodes`) once per call, so
the per-simulation figure is the marginal one: two programs that differ only in their budget
(`--sims A B`, default 16 and 48, both below every capacity so that no tree fills), timed in
turns, and `(seconds(B) - seconds(A)) / (B - A)`. The whole call's seconds per simulation at `B`
are reported beside it.

One JSON row per (game, selector, max_nodes): `{"game", "batch", "selector", "net",
"max_nodes", "sims", "us_per_sim" (marginal, microseconds per simulation of the whole batch),
"call_us_per_sim" (the call at the larger budget / its simulations), "growth" (us_per_sim / that
of the smallest capacity in the group; null if that one is not positive)}`. A marginal figure is
a difference of two timings and spreads more than either between runs.

    python bench/nodes.py [--games connect_four othello] [--selectors puct gumbel]
        [--nodes 64 256 1024] [--sims 16 48] [--batch 64] [--net tiny] [--repeats 7]
"""

from __future__ import annotations

import turbozero

turbozero.configure()  # before any JAX computation (pgx's import starts JAX)

import argparse
import sys
from pathlib import Path

import jax

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import emit, interleaved_best_times, machine
from search import SELECTORS, make_net, make_ours, random_positions
from turbozero import envs


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--games", nargs="+", default=["connect_four", "othello"])
    parser.add_argument("--selectors", nargs="+", default=["puct", "gumbel"], choices=SELECTORS)
    parser.add_argument("--nodes", nargs="+", type=int, default=[64, 256, 1024])
    parser.add_argument("--sims", nargs=2, type=int, default=[16, 48])
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--net", default="tiny")
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args(argv)
    low, high = args.sims
    args.nodes = sorted(set(args.nodes))  # growth is against the smallest capacity
    if not 1 <= low < high:
        parser.error("--sims A B needs 1 <= A < B")
    if min(args.nodes) < high + 1:
        parser.error(f"every --nodes value must be >= B + 1 = {high + 1} (no tree may fill)")
    if min(args.batch, args.repeats) < 1:
        parser.error("--batch and --repeats must be >= 1")
    print(f"# machine: {machine()}", file=sys.stderr)
    key = jax.random.PRNGKey(1)
    for game in args.games:
        env = envs.make(game)
        eval_fn, params = make_net(args.net, env, jax.random.PRNGKey(0))
        states = random_positions(env, args.batch, 6, jax.random.PRNGKey(2))
        for selector in args.selectors:
            calls = {
                (nodes, sims): make_ours(
                    env,
                    eval_fn,
                    selector=selector,
                    num_simulations=sims,
                    batch=args.batch,
                    max_nodes=nodes,
                )
                for nodes in args.nodes
                for sims in (low, high)
            }
            best = interleaved_best_times(
                {name: (lambda fn=fn: fn(params, states, key)) for name, fn in calls.items()},
                args.repeats,
            )
            first = None
            for nodes in args.nodes:
                marginal = (best[nodes, high] - best[nodes, low]) / (high - low) * 1e6
                first = marginal if first is None else first
                if marginal <= 0:
                    print(
                        f"# warning: {game} {selector} {nodes} nodes: the larger budget did not "
                        "take longer (noise); raise --repeats or widen --sims",
                        file=sys.stderr,
                    )
                emit(
                    {
                        "game": game,
                        "batch": args.batch,
                        "selector": selector,
                        "net": args.net,
                        "max_nodes": nodes,
                        "sims": [low, high],
                        "us_per_sim": round(marginal, 1),
                        "call_us_per_sim": round(best[nodes, high] / high * 1e6, 1),
                        "growth": round(marginal / first, 3) if first > 0 else None,
                    }
                )


if __name__ == "__main__":
    main()
