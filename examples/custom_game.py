"""A custom two-player game in one file: Nim with one heap (take 1-3 stones; taking the last wins).

Run it: `python examples/custom_game.py` — it checks the game against the contract and lets a
small search play it, which finds the winning strategy (leave a multiple of 4).

The file is also all turbozero needs to know the game everywhere: its `register()` adds the
game's `GameSpec` (how to build it, how its moves are named and its position drawn) and a
preset. Name the file on the command line and turbozero imports it and calls `register()`:

    turbozero train nim --game examples/custom_game.py --out runs/nim
    turbozero eval runs/nim --trust-run
    turbozero play runs/nim --trust-run

(the run records the file, which `eval`, `play` and `--resume` import again: `--trust-run`, as
for any code a run names). docs/own-game.md walks through it.
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


def render_svg(state) -> str:
    """The heap as a row of stones, for the play page and the game records."""
    stones = int(state["stones"])
    circles = "".join(
        f'<circle cx="{20 + 30 * i}" cy="30" r="12" fill="#555"/>' for i in range(stones)
    )
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{30 * HEAP + 10}" height="60">'
        f"{circles}</svg>"
    )


def make_env():
    """The game as a turbozero environment (what `train(..., rebuild={"env": ...})` names)."""
    return envs.from_functions(
        init_fn=init_fn,
        step_fn=step_fn,
        observe_fn=observe_fn,
        name="nim",
        render_svg=render_svg,
    )


def preset():
    """A few seconds of AlphaZero on Nim: a small MLP, 16 simulations."""
    from turbozero.alphazero import AlphaZeroConfig, NetworkConfig, SearchConfig

    return AlphaZeroConfig(
        env="nim",
        num_games=16,
        network=NetworkConfig(kind="mlp", hidden=(32,)),
        search=SearchConfig(num_simulations=16, max_nodes=20),
        temperature_moves=HEAP,
        max_episode_steps=HEAP,
        memory_capacity=32,
        train_batch_size=64,
        warmup_steps=0,
        collection_steps_per_epoch=HEAP,
        train_steps_per_epoch=8,
        num_epochs=4,
        eval_every=2,
        eval_games=8,
        eval_simulations=16,
        eval_opponents=("random",),
        eval_record_games=2,
    )


def register() -> None:
    """Make the game and its preset known to turbozero (once per process; again is a no-op).

    Importing the file registers nothing: turbozero calls this (`--game`,
    `turbozero.gamespec.load_game_module`), and other code may import the file freely.
    """
    from turbozero.config import PRESETS, register_preset
    from turbozero.games import Board, GameSpec, game_spec, register_game

    if game_spec("nim") is None:
        register_game(
            GameSpec(
                name="nim",
                description=f"Nim, one heap of {HEAP} (2 players, take 1 to 3 stones)",
                make_env=make_env,
                board=Board(label=lambda action: f"take {action + 1}"),
            )
        )
    if "nim" not in PRESETS:
        register_preset("nim", "Nim, MLP, 16 simulations, seconds on a CPU", algorithm="alphazero")(
            preset
        )


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
