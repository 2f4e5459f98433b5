"""A custom two-player game in one file: Nim with one heap (take 1-3 stones; taking the last wins).

Run it: `python examples/custom_game.py` — it checks the game against the contract and lets a
small search play it, which finds the winning strategy (leave a multiple of 4).
"""

from __future__ import annotations

import turbozero

turbozero.configure()  # before any JAX computation, and before pgx's import starts JAX

import jax
import jax.numpy as jnp

from turbozero import StepMetadata, envs
from turbozero.search import make_search, puct

HEAP = 10


def init_fn(key):
    state = {"stones": jnp.int32(HEAP), "player": jnp.int32(0), "step": jnp.int32(0)}
    return state, metadata(state, jnp.zeros(2), jnp.bool_(False))


def metadata(state, rewards, terminated):
    take = jnp.arange(1, 4)
    return StepMetadata(
        rewards=rewards,
        action_mask=(take <= state["stones"]) & ~terminated,
        terminated=terminated,
        cur_player_id=state["player"],
        step=state["step"],
    )


def step_fn(state, action):
    """The tutorial's two-argument step: action 0, 1, 2 takes 1, 2, 3 stones."""
    over_before = state["stones"] == 0
    stones = jnp.maximum(state["stones"] - (action + 1), 0)
    won = (stones == 0) & ~over_before
    mover = state["player"]
    rewards = jnp.where(won, jnp.where(jnp.arange(2) == mover, 1.0, -1.0), 0.0)
    new = {
        "stones": jnp.where(over_before, state["stones"], stones),
        "player": jnp.where(over_before, mover, 1 - mover),
        "step": state["step"] + 1,
    }
    return new, metadata(new, rewards, over_before | won)


def observe_fn(state):
    return jax.nn.one_hot(state["stones"], HEAP + 1)


def make_env():
    """The game as a turbozero environment (what `train(..., rebuild={"env": ...})` names)."""
    return envs.from_functions(init_fn=init_fn, step_fn=step_fn, observe_fn=observe_fn, name="nim")


def main() -> int:
    env = make_env()
    envs.check(env)

    def uniform(params, obs, key):
        return jnp.zeros((obs.shape[0], 3)), jnp.zeros((obs.shape[0],))

    search = make_search(
        env, uniform, selector=puct(dirichlet_fraction=0.0), num_simulations=400, max_nodes=401
    )
    states, _ = jax.vmap(env.init)(jax.random.split(jax.random.PRNGKey(0), 1))
    _, out = jax.jit(search.search)(search.init(1), None, states, jax.random.PRNGKey(1))
    take = int(out.action[0]) + 1
    print(f"{env}: from {HEAP} stones the search takes {take} (leaving {HEAP - take})")
    return 0 if (HEAP - take) % 4 == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
