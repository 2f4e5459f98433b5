"""Golden outputs of today's PPO learner, the guard rail for restructuring it: a discrete and a
continuous environment, both losses, observation normalisation on and off, seeds and a grid of
hyperparameters under `vmap`, a named device axis, restart states drawn ahead and inside the
rollout, greedy and sampled evaluation; fixed keys.

`python -m tests.ppo.golden` rewrites `data/golden_ppo.npz` (only when the learner's behaviour is
meant to change: say so in the CHANGELOG); `test_golden.py` requires today's learner to
reproduce it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

PATH = Path(__file__).resolve().parent / "data" / "golden_ppo.npz"
SMALL = dict(
    num_envs=4,
    rollout_length=16,
    num_updates=4,
    num_updates_per_eval=2,
    epochs=2,
    num_minibatches=2,
    actor_hidden=(16,),
    critic_hidden=(16,),
    eval_episodes=3,
    eval_max_steps=24,
)
#: name -> (config changes, how the members are mapped: "seeds", "grid" or "devices")
CASES: dict[str, tuple[dict[str, Any], str]] = {
    # CartPole, clipped surrogate, linear decay, advantages standardised, two seeds
    "cartpole_clip_seeds": (dict(env="gymnax:CartPole-v1", loss="clip"), "seeds"),
    # Pendulum (Gaussian head), KL penalty, observation normalisation with warm-up, constant
    # rate, no advantage standardisation, sampled evaluation, two hyperparameter members
    "pendulum_kl_norm_grid": (
        dict(
            env="gymnax:Pendulum-v1",
            loss="kl_penalty",
            normalize_observations=True,
            obs_norm_warmup_steps=3,
            lr_schedule="constant",
            standardize_advantages=False,
            reward_scale=0.1,
            value_clip_eps=0.0,
            eval_greedy=False,
        ),
        "grid",
    ),
    # CartPole on a named axis of two members (gradient, statistics and advantage averaging);
    # num_seeds this large sends the rollout's restart states inside its loop
    "cartpole_norm_devices_inside": (
        dict(
            env="gymnax:CartPole-v1",
            normalize_observations=True,
            obs_norm_warmup_steps=2,
            num_seeds=10**6,
        ),
        "devices",
    ),
}
CALLS = 2  # compiled `update` calls per case (each runs num_updates_per_eval updates)
MEMBERS = 2


def _named_leaves(prefix: str, tree: Any) -> dict[str, np.ndarray]:
    import jax

    leaves = jax.tree_util.tree_flatten_with_path(tree)[0]
    return {f"{prefix}{jax.tree_util.keystr(path)}": np.asarray(leaf) for path, leaf in leaves}


def run_case(name: str) -> dict[str, np.ndarray]:
    """`{name: array}`: the state after `init`, the metrics of each `update` call, the state
    after the last one and an evaluation of its parameters, for `MEMBERS` members."""
    import dataclasses

    import jax

    from turbozero.ppo import PPOConfig, make_ppo, stack_hyperparams

    changes, mapping = CASES[name]
    cfg = dataclasses.replace(PPOConfig(**SMALL), **changes)  # type: ignore[arg-type]
    key = jax.random.PRNGKey(7)
    args: tuple[Any, ...] = ()  # the stacked hyperparameters of a grid
    if mapping == "devices":
        ppo = make_ppo(cfg, axis_name="device")
        named = dict(axis_name="device", axis_size=MEMBERS)
        init = jax.jit(jax.vmap(ppo.init, in_axes=None, **named))
        state = init(key)
        update = jax.jit(jax.vmap(ppo.update, axis_name="device"))
    else:
        ppo = make_ppo(cfg)
        state = jax.jit(jax.vmap(ppo.init))(jax.random.split(key, MEMBERS))
        update = jax.jit(jax.vmap(ppo.update))
        if mapping == "grid":
            members = [ppo.hyperparams, ppo.hyperparams._replace(actor_lr=1e-2, kl_coef=1.0)]
            args = (stack_hyperparams(members),)
    out = _named_leaves("init/", state)
    for call in range(CALLS):
        state, metrics = update(state, *args)
        out.update({f"metrics{call}/{k}": np.asarray(v) for k, v in metrics.items()})
    out.update(_named_leaves("final/", state))
    eval_keys = jax.random.split(jax.random.PRNGKey(11), MEMBERS)
    stats = jax.jit(jax.vmap(ppo.evaluate))(state.params, state.obs_stats, eval_keys)
    out.update({f"eval/{k}": np.asarray(v) for k, v in stats.items()})
    act = jax.jit(jax.vmap(ppo.act, in_axes=(0, 0, None, None)))
    observations = np.asarray(state.env_state.observation)[0]
    out["act/sampled"] = np.asarray(act(state.params, state.obs_stats, observations, key))
    return out


def main() -> None:
    import turbozero

    turbozero.configure()
    arrays = {}
    for name in CASES:
        for field, value in run_case(name).items():
            arrays[f"{name}/{field}"] = value
    PATH.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(PATH, **arrays)
    print(f"wrote {len(arrays)} arrays to {PATH}")


if __name__ == "__main__":
    main()
