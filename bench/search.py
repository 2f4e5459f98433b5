"""Search throughput: our batched MCTS against mctx on the same game, network, batch and budget.

Both searches use the pgx game itself as the model (through our environment adapter) and the same
`eval_fn`; both get `max_nodes = simulations + 1`. Peers: `muzero_puct` and `puct` against
`mctx.muzero_policy`, `gumbel` against `mctx.gumbel_muzero_policy`. The floor is the work no
search can avoid: the roots' `eval_fn` call, then `simulations` iterations of one vmapped
`env.step` and one `eval_fn` call on the batch, in a `lax.fori_loop` under `jit`, with no tree
around them (the same `simulations + 1` network calls and `simulations` steps as a search).

One JSON row per (game, net, batch, selector, simulations). `*_sims_per_s` is
`batch * simulations / seconds` of one compiled call (compile excluded, best of `--repeats`);
`ours_max_depth` is the mean over the batch of the deepest node each game's search reached (each
simulation's walk lasts as many levels as the deepest path among the batch's games);
`ratio` is ours / mctx. `ours_cost_growth` and `mctx_cost_growth` are the cost per simulation at
this budget divided by the cost per simulation at the smallest budget of the same group.

    python bench/search.py [--quick] [--games connect_four othello] [--batch 64 256]
        [--sims 32 64 128] [--nets tiny resnet2x16 resnet6x64]
        [--selectors puct muzero_puct gumbel] [--positions 6] [--repeats 3]
"""

from __future__ import annotations

import turbozero

turbozero.configure()  # before any JAX computation (pgx's import starts JAX)

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import mctx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import (
    SELECTOR_RULES,
    emit,
    fastest_floor,
    floor_programs,
    floor_simulations,
    interleaved_best_times,
    machine,
)
from turbozero import envs
from turbozero.envs.core import Env
from turbozero.nets import AZResnet, AZResnetConfig, PolicyValueMLP, init_params, make_eval_fn
from turbozero.search import compiler_options, make_search
from turbozero.types import Array, EvalFn, Params, PRNGKey, PyTree

GAMES = ("connect_four", "othello")
NETS = ("tiny", "resnet2x16", "resnet6x64")
SELECTORS = tuple(SELECTOR_RULES)
PEER = {"puct": "muzero", "muzero_puct": "muzero", "gumbel": "gumbel"}
PEER_NAME = {"muzero": "mctx.muzero_policy", "gumbel": "mctx.gumbel_muzero_policy"}
QUICK = dict(
    games=["connect_four"],
    batch=[64],
    sims=[32, 64],
    nets=["tiny", "resnet2x16"],
    selectors=["muzero_puct", "gumbel"],
    repeats=3,
)


def make_net(name: str, env: Env, key: PRNGKey) -> tuple[EvalFn, Params]:
    """The benchmark's networks: a tiny MLP and the AlphaZero ResNet at two sizes."""
    A = env.num_actions
    if name == "tiny":
        module: Any = PolicyValueMLP(num_actions=A, hidden=(32, 32))
    elif name.startswith("resnet"):
        blocks, channels = (int(x) for x in name.removeprefix("resnet").split("x"))
        module = AZResnet(
            AZResnetConfig(policy_head_out_size=A, num_blocks=blocks, num_channels=channels)
        )
    else:
        raise ValueError(f"net must be one of {NETS} or resnet<blocks>x<channels>, got {name!r}")
    example = env.observe(env.init(jax.random.PRNGKey(0))[0])
    return make_eval_fn(module), init_params(module, example, key)


#: The issue's speed targets (docs/benchmarks.md, "Targets").
TINY_RATIO, RESNET_RATIO, RESNET_FLOOR, COST_GROWTH = 2.0, 1.0, 1.15, 1.3


def missed_targets(row: dict[str, Any], base_sims: int) -> list[str]:
    """The speed targets `row` (one JSON row of this script) misses, each as a short text:
    the tiny network at least `TINY_RATIO` x mctx; a ResNet at least mctx's speed and within
    `RESNET_FLOOR` x the floor; the cost per simulation at 128 simulations within
    `COST_GROWTH` x that at 32 (judged on 128-simulation rows whose group started at
    `base_sims` = 32)."""
    missed = []
    if row["net"] == "tiny" and row["ratio"] < TINY_RATIO:
        missed.append(f"ours/mctx {row['ratio']:.2f} < {TINY_RATIO}")
    if row["net"].startswith("resnet"):
        if row["ratio"] < RESNET_RATIO:
            missed.append(f"ours/mctx {row['ratio']:.2f} < {RESNET_RATIO}")
        floor_ratio = row["floor_sims_per_s"] / row["ours_sims_per_s"]
        if floor_ratio > RESNET_FLOOR:
            missed.append(f"floor/ours {floor_ratio:.2f} > {RESNET_FLOOR}")
    growth = row["ours_cost_growth"]
    if row["simulations"] == 128 and base_sims == 32 and growth > COST_GROWTH:
        missed.append(f"cost growth {growth:.2f} > {COST_GROWTH}")
    return missed


def random_positions(env: Env, batch: int, moves: int, key: PRNGKey) -> PyTree:
    """`[batch]` states after `moves` uniformly random legal moves (so the rows differ)."""

    def play(key):
        k_init, k_moves = jax.random.split(key)
        state, md = env.init(k_init)

        def body(i, carry):
            state, md = carry
            k_act, k_step = jax.random.split(jax.random.fold_in(k_moves, i))
            action = jax.random.categorical(k_act, jnp.where(md.action_mask, 0.0, -jnp.inf))
            return env.step(state, action, k_step)

        return jax.lax.fori_loop(0, moves, body, (state, md))[0]

    return jax.jit(jax.vmap(play))(jax.random.split(key, batch))


def make_ours(
    env: Env,
    eval_fn: EvalFn,
    *,
    selector: str,
    num_simulations: int,
    batch: int,
    levels_per_iteration: int | None = None,
    options: bool = True,
    max_nodes: int | None = None,
):
    """`fn(params, states, key) -> (action, weights, max_depth)`: our search from empty trees,
    compiled (`max_depth [B]`: the deepest node each game's search reached), with
    `compiler_options()` unless `options` is False; `max_nodes` defaults to
    `num_simulations + 1` (mctx's fixed size)."""
    rule = SELECTOR_RULES[selector]()
    search = make_search(
        env,
        eval_fn,
        selector=rule,
        num_simulations=num_simulations,
        max_nodes=num_simulations + 1 if max_nodes is None else max_nodes,
        levels_per_iteration=levels_per_iteration,
    )

    def run(params, states, key):
        _, out = search.search(search.init(batch), params, states, key)
        return out.action, out.action_weights, out.max_depth

    return jax.jit(run, compiler_options=compiler_options() if options else None)


def make_mctx(env: Env, eval_fn: EvalFn, *, peer: str, num_simulations: int):
    """`fn(params, states, key) -> (action, weights)`: mctx over the same game and network.

    Two-player zero-sum: the reward is the mover's, the discount is -1 (0 after the end), and a
    terminal state's value is 0, as in our search.
    """

    def prior(logits: Array, mask: Array) -> Array:
        logits = logits - jnp.max(logits, axis=-1, keepdims=True)
        return jnp.where(mask, logits, jnp.finfo(jnp.float32).min)

    def recurrent_fn(params, key, action, states):
        B = action.shape[0]
        mover = jax.vmap(env.metadata)(states).cur_player_id
        states, md = jax.vmap(env.step)(states, action, jax.random.split(key, B))
        logits, value = eval_fn(params, jax.vmap(env.observe)(states), key)
        out = mctx.RecurrentFnOutput(
            reward=md.rewards[jnp.arange(B), mover],
            discount=jnp.where(md.terminated, 0.0, -1.0),
            prior_logits=prior(logits, md.action_mask),
            value=jnp.where(md.terminated, 0.0, value),
        )
        return out, states

    policy = mctx.muzero_policy if peer == "muzero" else mctx.gumbel_muzero_policy

    def run(params, states, key):
        k_root, k_search = jax.random.split(key)
        md = jax.vmap(env.metadata)(states)
        logits, value = eval_fn(params, jax.vmap(env.observe)(states), k_root)
        root = mctx.RootFnOutput(
            prior_logits=prior(logits, md.action_mask), value=value, embedding=states
        )
        out = policy(
            params,
            k_search,
            root,
            recurrent_fn,
            num_simulations,
            invalid_actions=~md.action_mask,
        )
        return out.action, out.action_weights

    return jax.jit(run, compiler_options=compiler_options())


def make_floor(env: Env, eval_fn: EvalFn, *, num_simulations: int) -> dict[str, Callable]:
    """`{name: fn(params, states, key)}`: one `eval_fn` call on the given states (the roots),
    then `num_simulations` x (vmapped env.step + eval_fn), no tree (`common.floor_simulations`),
    compiled by `common.floor_programs` (time them all and keep the fastest)."""

    def run(params, states, key):
        mask = jax.vmap(env.metadata)(states).action_mask
        B = mask.shape[0]
        env_keys = jax.random.split(key, (num_simulations, B))  # drawn ahead, as a search can
        # The roots' evaluation, which every search here makes before its first simulation (ours
        # and mctx's alike): `simulations + 1` network calls in all. Its logits pick the first
        # iteration's moves, so it cannot be dropped.
        logits, value = eval_fn(params, jax.vmap(env.observe)(states), key)
        logits = jnp.where(mask, logits.astype(jnp.float32), -1e9)
        return floor_simulations(
            env, eval_fn, params, states, mask, logits, value.astype(jnp.float32), env_keys, key
        )

    return floor_programs(run)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help=f"a small subset: {QUICK}")
    parser.add_argument("--games", nargs="+", default=list(GAMES))
    parser.add_argument("--batch", nargs="+", type=int, default=[64, 256])
    parser.add_argument("--sims", nargs="+", type=int, default=[32, 64, 128])
    parser.add_argument("--nets", nargs="+", default=list(NETS))
    parser.add_argument("--selectors", nargs="+", default=list(SELECTORS), choices=SELECTORS)
    parser.add_argument("--positions", type=int, default=6, help="random moves before the roots")
    parser.add_argument(
        "--repeats",
        type=int,
        default=3,
        help="timed rounds (ours, mctx, floor in turn) after a warm-up",
    )
    args = parser.parse_args(argv)
    if args.quick:
        for name, value in QUICK.items():
            setattr(args, name, value)
    for name in ("batch", "sims"):
        if any(v < 1 for v in getattr(args, name)):
            parser.error(f"--{name} values must be >= 1, got {getattr(args, name)}")
    if args.repeats < 1 or args.positions < 0:
        parser.error("--repeats must be >= 1 and --positions >= 0")
    print(f"# machine: {machine()}", file=sys.stderr, flush=True)

    sims_sorted = sorted(set(args.sims))
    rows = misses = 0
    for game in args.games:
        env = envs.make(game)
        for net in args.nets:
            eval_fn, params = make_net(net, env, jax.random.PRNGKey(0))
            for batch in args.batch:
                states = random_positions(env, batch, args.positions, jax.random.PRNGKey(2))
                key = jax.random.PRNGKey(1)
                peers: dict[tuple[str, int], Callable] = {}
                floors: dict[int, dict[str, Callable]] = {}
                for selector in args.selectors:
                    peer = PEER[selector]
                    base: dict[str, float] = {}
                    for sims in sims_sorted:
                        if sims not in floors:
                            floors[sims] = make_floor(env, eval_fn, num_simulations=sims)
                        if (peer, sims) not in peers:
                            peers[peer, sims] = make_mctx(
                                env, eval_fn, peer=peer, num_simulations=sims
                            )
                        ours = make_ours(
                            env, eval_fn, selector=selector, num_simulations=sims, batch=batch
                        )
                        fns = {"ours": ours, "mctx": peers[peer, sims], **floors[sims]}
                        seconds = interleaved_best_times(
                            {
                                name: (lambda fn=fn: fn(params, states, key))
                                for name, fn in fns.items()
                            },
                            args.repeats,
                        )
                        t_ours, t_mctx = seconds["ours"], seconds["mctx"]
                        floor_name, t_floor = fastest_floor(seconds)
                        depth = ours(params, states, jax.random.PRNGKey(1))[2]
                        per_sim = {"ours": t_ours / sims, "mctx": t_mctx / sims}
                        base = base or per_sim
                        work = batch * sims
                        row = {
                            "game": game,
                            "batch": batch,
                            "simulations": sims,
                            "selector": selector,
                            "net": net,
                            "ours_sims_per_s": round(work / t_ours, 1),
                            "mctx_sims_per_s": round(work / t_mctx, 1),
                            "floor_sims_per_s": round(work / t_floor, 1),
                            "ratio": round(t_mctx / t_ours, 3),
                            "ours_cost_growth": round(per_sim["ours"] / base["ours"], 3),
                            "mctx_cost_growth": round(per_sim["mctx"] / base["mctx"], 3),
                            "peer": PEER_NAME[peer],
                            "ours_max_depth": round(float(jnp.mean(depth)), 2),
                            "floor_program": floor_name,
                        }
                        row["missed_targets"] = missed_targets(row, sims_sorted[0])
                        rows, misses = rows + 1, misses + bool(row["missed_targets"])
                        emit(row)
    print(f"# {rows - misses} of {rows} rows meet every target", file=sys.stderr, flush=True)


if __name__ == "__main__":
    main()
