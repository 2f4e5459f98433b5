"""Self-play throughput: positions collected per second, the share spent in search, the floor.

ResNet 2x16, `max_nodes` 64, `puct` by default (the connect_four and othello presets' rule),
subtree reuse on as in training: `make_selfplay` + `make_search` + `make_episode_buffer`, one
compiled `collect(..., num_steps=k)`.
The games are first played for `k` steps so that the timed states are mid-game.

- `positions_per_s`: `batch * k / seconds` of one compiled `collect` (compile excluded, best of
  `--repeats` rounds that time collect, search and floor in turn).
- `search_share`: `k` x the time of one compiled search on the same batch, states and trees,
  divided by the time of `collect`.
- `floor_positions_per_s`: the same number of batched network calls and environment steps with
  no search and no memory: per move, `simulations` x (vmapped `env.step` + `eval_fn`) and one
  `env.step` for the move played, as a `lax.fori_loop` under `jit`.

    python bench/selfplay.py [--quick] [--games connect_four othello] [--batch 64 256]
        [--sims 32 64] [--steps 8] [--selector puct] [--repeats 3]
"""

from __future__ import annotations

import turbozero

turbozero.configure()  # before any JAX computation (pgx's import starts JAX)

import argparse
import sys
from pathlib import Path

import jax
import jax.numpy as jnp

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
from turbozero.alphazero.selfplay import make_selfplay
from turbozero.envs.core import Env
from turbozero.memory import make_episode_buffer
from turbozero.nets import AZResnet, AZResnetConfig, init_params, make_eval_fn
from turbozero.search import compiler_options, make_search
from turbozero.types import EvalFn

GAMES = ("connect_four", "othello")
MAX_NODES = 64
QUICK = dict(games=["connect_four"], batch=[64], sims=[32], steps=4, repeats=3)


def make_floor(env: Env, eval_fn: EvalFn, *, num_simulations: int, num_steps: int):
    """`{name: fn(params, states, key)}`: per move, `num_simulations` x (env.step + eval_fn)
    from the current states, then one env.step with the best legal move of the last call.

    The simulations are `common.floor_simulations`, as in `bench/search.py`; the programs are
    `common.floor_programs` (time them all and keep the fastest)."""

    def run(params, states, key):
        B = jax.vmap(env.metadata)(states).action_mask.shape[0]
        env_keys = jax.random.split(key, (num_steps, num_simulations + 1, B))

        def move(t, carry):
            states, logits, total = carry
            mask = jax.vmap(env.metadata)(states).action_mask

            keys = env_keys[t]
            logits, total = floor_simulations(
                env, eval_fn, params, states, mask, logits, total, keys[:num_simulations], key
            )
            action = jnp.argmax(jnp.where(mask, logits, -jnp.inf), axis=-1)
            states, _ = jax.vmap(env.step)(states, action, keys[num_simulations])
            return states, logits, total

        A = env.num_actions
        init = (states, jnp.zeros((B, A), jnp.float32), jnp.zeros((B,), jnp.float32))
        return jax.lax.fori_loop(0, num_steps, move, init)[1:]

    return floor_programs(run)


def setup(game: str, batch: int, sims: int, steps: int, selector: str):
    """The benchmark's self-play, compiled and played `steps` moves in (so that the timed
    positions are mid-game with trees kept by reuse): `(env, eval_fn, params, search, collect,
    state)`."""
    env = envs.make(game)
    module = AZResnet(
        AZResnetConfig(policy_head_out_size=env.num_actions, num_blocks=2, num_channels=16)
    )
    eval_fn = make_eval_fn(module)
    params = init_params(
        module, env.observe(env.init(jax.random.PRNGKey(0))[0]), jax.random.PRNGKey(0)
    )
    search = make_search(
        env,
        eval_fn,
        selector=SELECTOR_RULES[selector](),
        num_simulations=sims,
        max_nodes=MAX_NODES,
    )
    memory = make_episode_buffer(
        num_games=batch, capacity=256, sample_size=batch, num_players=env.num_players
    )
    selfplay = make_selfplay(search, memory, batch_size=batch, max_episode_steps=256)
    collect = jax.jit(
        selfplay.collect, static_argnames="num_steps", compiler_options=compiler_options()
    )
    state = selfplay.init(jax.random.PRNGKey(1))
    state, _ = collect(state, params, jax.random.PRNGKey(2), num_steps=steps)
    return env, eval_fn, params, search, collect, state


def bench(game: str, batch: int, sims: int, steps: int, selector: str, repeats: int) -> dict:
    env, eval_fn, params, search, collect, state = setup(game, batch, sims, steps, selector)
    key = jax.random.PRNGKey(3)
    search_fn = jax.jit(search.search, compiler_options=compiler_options())
    floor = make_floor(env, eval_fn, num_simulations=sims, num_steps=steps)
    calls = {
        "collect": lambda: collect(state, params, key, num_steps=steps),
        "search": lambda: search_fn(state.tree, params, state.env_states, key, 1.0),
        **{name: (lambda fn=fn: fn(params, state.env_states, key)) for name, fn in floor.items()},
    }
    best = interleaved_best_times(calls, repeats)
    t_collect, t_search = best["collect"], best["search"]
    floor_name, t_floor = fastest_floor(best)
    positions = batch * steps
    return {
        "game": game,
        "batch": batch,
        "simulations": sims,
        "positions_per_s": round(positions / t_collect, 1),
        "floor_positions_per_s": round(positions / t_floor, 1),
        "search_share": round(steps * t_search / t_collect, 3),
        "floor_ratio": round(t_collect / t_floor, 3),
        "floor_program": floor_name,
        "selector": selector,
        "max_nodes": MAX_NODES,
        "steps": steps,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help=f"a small subset: {QUICK}")
    parser.add_argument("--games", nargs="+", default=list(GAMES))
    parser.add_argument("--batch", nargs="+", type=int, default=[64, 256])
    parser.add_argument("--sims", nargs="+", type=int, default=[32, 64])
    parser.add_argument("--steps", type=int, default=8, help="moves per compiled collect call")
    parser.add_argument("--selector", default="puct", choices=sorted(SELECTOR_RULES))
    parser.add_argument(
        "--repeats", type=int, default=3, help="timed rounds (collect, search, floor in turn)"
    )
    args = parser.parse_args(argv)
    if args.quick:
        for name, value in QUICK.items():
            setattr(args, name, value)
    if any(v < 1 for v in args.batch + args.sims) or args.steps < 1 or args.repeats < 1:
        parser.error("--batch, --sims, --steps and --repeats must be >= 1")
    print(f"# machine: {machine()}", file=sys.stderr, flush=True)
    for game in args.games:
        for batch in args.batch:
            for sims in args.sims:
                emit(bench(game, batch, sims, args.steps, args.selector, args.repeats))


if __name__ == "__main__":
    main()
