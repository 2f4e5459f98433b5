"""Where a compiled program spends its time: one call under `jax.profiler.trace`, with the
profiler's events summed per XLA operation (the figures the benchmark notes quote come from
summaries like this one).

    python bench/profile.py search --game othello --net tiny --selector muzero_puct --sims 32
    python bench/profile.py selfplay --game othello --batch 256 --sims 32
    python bench/profile.py ppo --envs 64
    python bench/profile.py train --preset connect_four   # one gradient step of a preset

Each line: milliseconds summed over the call, how many times the operation ran, its name.
Operations inside a `while` loop are listed on their own and inside the loop's own total.
"""

from __future__ import annotations

import turbozero

turbozero.configure()  # before any JAX computation (pgx's import starts JAX)

import argparse
import collections
import gzip
import json
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax

sys.path.insert(0, str(Path(__file__).resolve().parent))


def summarize(fn: Callable[[], Any], top: int) -> list[tuple[float, int, str]]:
    """Run `fn` to compile, then once under the profiler: `(ms, count, name)`, largest first."""
    jax.block_until_ready(fn())
    with tempfile.TemporaryDirectory() as folder:
        with jax.profiler.trace(folder, create_perfetto_trace=True):
            jax.block_until_ready(fn())
        (trace,) = Path(folder).rglob("*.trace.json.gz")
        data = json.loads(gzip.decompress(trace.read_bytes()))
    events = data["traceEvents"] if isinstance(data, dict) else data
    total: collections.Counter[str] = collections.Counter()
    count: collections.Counter[str] = collections.Counter()
    for e in events:
        name = e.get("name", "")
        if e.get("ph") != "X" or name.startswith(("$", "end:")) or "ThunkExecutor" in name:
            continue
        total[name] += e.get("dur", 0)
        count[name] += 1
    return [(us / 1000, count[name], name) for name, us in total.most_common(top)]


def search_call(args: argparse.Namespace) -> Callable[[], Any]:
    import search as bench_search
    from turbozero import envs

    env = envs.make(args.game)
    eval_fn, params = bench_search.make_net(args.net, env, jax.random.PRNGKey(0))
    states = bench_search.random_positions(env, args.batch, 6, jax.random.PRNGKey(2))
    fn = bench_search.make_ours(
        env, eval_fn, selector=args.selector, num_simulations=args.sims, batch=args.batch
    )
    return lambda: fn(params, states, jax.random.PRNGKey(1))


def selfplay_call(args: argparse.Namespace) -> Callable[[], Any]:
    import selfplay as bench_selfplay

    _, _, params, _, collect, state = bench_selfplay.setup(
        args.game, args.batch, args.sims, 8, args.selector
    )
    return lambda: collect(state, params, jax.random.PRNGKey(3), num_steps=8)


def train_call(args: argparse.Namespace) -> Callable[[], Any]:
    """One of the preset's gradient steps, on a memory filled by three epochs of self-play."""
    import turbozero.alphazero.config  # noqa: F401  (registers the presets)
    from turbozero.alphazero import make_alphazero
    from turbozero.config import get_preset

    config = get_preset(args.preset).make()
    az = make_alphazero(config)
    state = jax.jit(az.init)(jax.random.PRNGKey(0))
    collect = jax.jit(az.collect, static_argnums=1)
    for _ in range(3):
        state, _ = collect(state, config.collection_steps_per_epoch)
    step = jax.jit(az.train_steps, static_argnums=1)
    return lambda: step(state, 1)


def ppo_call(args: argparse.Namespace) -> Callable[[], Any]:
    from turbozero.ppo import make_ppo

    ppo = make_ppo(
        env="gymnax:CartPole-v1",
        num_envs=args.envs,
        rollout_length=128,
        epochs=4,
        num_minibatches=4,
        num_updates=40,
        num_updates_per_eval=10,
        actor_hidden=(64, 64),
        critic_hidden=(64, 64),
    )
    update = jax.jit(ppo.update)
    state = jax.jit(ppo.init)(jax.random.PRNGKey(0))
    return lambda: update(state)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("target", choices=("search", "selfplay", "ppo", "train"))
    parser.add_argument("--game", default="connect_four")
    parser.add_argument("--net", default="resnet2x16")
    parser.add_argument("--selector", default="puct")
    parser.add_argument("--sims", type=int, default=32)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--envs", type=int, default=64)
    parser.add_argument("--preset", default="connect_four", help="train: the preset")
    parser.add_argument("--top", type=int, default=40)
    args = parser.parse_args()
    targets = {
        "search": search_call,
        "selfplay": selfplay_call,
        "ppo": ppo_call,
        "train": train_call,
    }
    call = targets[args.target](args)
    for ms, n, name in summarize(call, args.top):
        print(f"{ms:10.2f} ms {n:7d}  {name}")


if __name__ == "__main__":
    main()
