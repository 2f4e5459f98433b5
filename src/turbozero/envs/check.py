"""Conformance check: run any `Env` through the contract's rules and name every violation."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from turbozero.envs.core import Env
from turbozero.validate import check_count

# Stable names of the rules `check` verifies.
RULES = {
    "init_not_jittable": "init(key) must trace and run under jit and vmap",
    "step_not_jittable": "step(state, action, key) must trace and run under jit and vmap",
    "observe_not_jittable": "observe(state) must trace and run under jit and vmap",
    "metadata_not_jittable": "metadata(state) must trace and run under jit and vmap",
    "metadata_shapes": (
        "rewards [P] float, action_mask [A] bool, scalar terminated/truncated/player"
    ),
    "observation_shape": "observe(state) must have env.observation_shape",
    "unstable_state": "state shapes and dtypes must not change across steps",
    "step_not_counted": "metadata step must grow by one on every step of a game not over",
    "state_changed_after_end": "a game that is over must keep its position (its observation)",
    "reward_after_termination": (
        "rewards must be zero on steps taken after the game is over (terminated or truncated)"
    ),
    "no_legal_action": "a game that is not over must have at least one legal action",
    "player_out_of_range": "cur_player_id must be in [0, num_players)",
    "metadata_mismatch": "env.metadata(state) must equal what init/step returned",
}


class EnvCheckError(ValueError):
    """Raised by `check` with every violated rule in `violations`."""

    def __init__(self, name: str, violations: dict[str, str]):
        self.violations = violations
        lines = "\n".join(f"  - {k}: {RULES[k]} ({v})" for k, v in violations.items())
        super().__init__(f"environment {name!r} violates the contract:\n{lines}")


def _sig(tree):
    return jax.tree_util.tree_map(lambda x: (tuple(x.shape), str(x.dtype)), tree)


def _random_actions(env: Env, action_mask: jax.Array, key: jax.Array) -> jax.Array:
    """`[B]` int32 legal moves (uniform over each row's mask; any move where none is legal), or
    for a continuous space `[B, *action_shape]` float32 actions, uniform within the bounds where
    they are finite and standard normal where they are not."""
    B = action_mask.shape[0]
    if not env.continuous:
        logits = jnp.where(action_mask, 0.0, -jnp.inf)
        logits = jnp.where(action_mask.any(-1, keepdims=True), logits, 0.0)
        return jax.random.categorical(key, logits).astype(jnp.int32)
    shape = (B, *(env.action_shape or ()))
    low = jnp.broadcast_to(
        jnp.asarray(-jnp.inf if env.action_low is None else env.action_low, jnp.float32), shape
    )
    high = jnp.broadcast_to(
        jnp.asarray(jnp.inf if env.action_high is None else env.action_high, jnp.float32), shape
    )
    k_u, k_n = jax.random.split(key)
    bounded = jnp.isfinite(low) & jnp.isfinite(high)
    uniform = jax.random.uniform(
        k_u, shape, jnp.float32, jnp.where(bounded, low, 0.0), jnp.where(bounded, high, 1.0)
    )
    normal = jnp.clip(jax.random.normal(k_n, shape, jnp.float32), low, high)
    return jnp.where(bounded, uniform, normal)


def check(env: Env, *, batch_size: int = 4, num_steps: int = 64, seed: int = 0) -> None:
    """Run `batch_size` random games for `num_steps` steps and check the contract.

    Discrete games get uniformly random legal moves; continuous spaces get float actions of
    `env.action_shape` within `env.action_low` / `env.action_high`.

    Raises:
        EnvCheckError: listing each violated rule by its stable name (see `RULES`).
    """
    batch_size = check_count("batch_size", batch_size, low=1)
    num_steps = check_count("num_steps", num_steps, low=1)
    v: dict[str, str] = {}
    key = jax.random.PRNGKey(seed)
    try:
        init = jax.jit(jax.vmap(env.init))
        state, md = init(jax.random.split(key, batch_size))
    except Exception as e:
        raise EnvCheckError(env.name, {"init_not_jittable": f"{type(e).__name__}: {e}"}) from e
    try:
        step = jax.jit(jax.vmap(env.step))
        jax.eval_shape(
            step,
            state,
            _random_actions(env, md.action_mask, key),
            jax.random.split(key, batch_size),
        )
    except Exception as e:
        raise EnvCheckError(env.name, {"step_not_jittable": f"{type(e).__name__}: {e}"}) from e
    for name, fn in (("observe", env.observe), ("metadata", env.metadata)):
        try:
            jax.eval_shape(jax.vmap(fn), state)
        except Exception as e:
            rule = f"{name}_not_jittable"
            raise EnvCheckError(env.name, {rule: f"{type(e).__name__}: {e}"}) from e
    observe = jax.jit(jax.vmap(env.observe))
    meta = jax.jit(jax.vmap(env.metadata))
    sig0 = _sig(state)
    P, A = env.num_players, env.num_actions
    done_before = np.zeros(batch_size, bool)
    prev_steps = np.zeros(batch_size, np.int64)
    prev_seen = np.zeros((batch_size, 0))
    for t in range(num_steps + 1):
        shapes = {
            "rewards": (md.rewards.shape, (batch_size, P)),
            "action_mask": (md.action_mask.shape, (batch_size, A)),
            "terminated": (md.terminated.shape, (batch_size,)),
            "truncated": (md.truncated.shape, (batch_size,)),
            "cur_player_id": (md.cur_player_id.shape, (batch_size,)),
        }
        bad = [f"{k} {got} != {want}" for k, (got, want) in shapes.items() if got != want]
        if md.action_mask.dtype != jnp.bool_:
            bad.append(f"action_mask dtype {md.action_mask.dtype}")
        if bad:
            v.setdefault("metadata_shapes", "; ".join(bad))
            break
        obs = observe(state)
        if tuple(obs.shape[1:]) != tuple(env.observation_shape):
            v.setdefault("observation_shape", f"{tuple(obs.shape[1:])} != {env.observation_shape}")
        if _sig(state) != sig0:
            v.setdefault("unstable_state", f"after step {t}")
        steps = np.asarray(md.step)
        if t > 0 and np.any(~done_before & (steps != prev_steps + 1)):
            v.setdefault("step_not_counted", f"step {prev_steps.tolist()} -> {steps.tolist()}")
        prev_steps = steps
        seen = np.asarray(obs, np.float64).reshape(batch_size, -1)
        if t > 0 and seen.shape == prev_seen.shape:
            moved = ~np.all((seen == prev_seen) | (np.isnan(seen) & np.isnan(prev_seen)), -1)
            if np.any(done_before & moved):
                v.setdefault("state_changed_after_end", f"at step {t}")
        prev_seen = seen
        rewards = np.asarray(md.rewards)
        if np.any(done_before & np.any(rewards != 0, axis=-1)):
            v.setdefault("reward_after_termination", f"at step {t}")
        over = np.asarray(md.terminated | md.truncated)
        mask = np.asarray(md.action_mask)
        if np.any(~over & ~mask.any(-1)):
            v.setdefault("no_legal_action", f"at step {t}")
        player = np.asarray(md.cur_player_id)
        if np.any(~over & ((player < 0) | (player >= P))):
            hint = (
                " (the game has 1 player; for two, return rewards of shape [2], from which "
                "from_functions reads the player count, or pass num_players=2)"
                if P == 1
                else ""
            )
            v.setdefault(
                "player_out_of_range", f"cur_player_id={player.tolist()} at step {t}{hint}"
            )
        md2 = meta(state)
        same = jax.tree_util.tree_all(
            jax.tree_util.tree_map(lambda a, b: bool(jnp.array_equal(a, b)), md, md2)
        )
        if not same:
            v.setdefault("metadata_mismatch", f"at step {t}")
        if t == num_steps:
            break
        done_before |= np.asarray(md.terminated | md.truncated)
        key, k_act, k_step = jax.random.split(key, 3)
        action = _random_actions(env, md.action_mask, k_act)
        state, md = step(state, action, jax.random.split(k_step, batch_size))
    if v:
        raise EnvCheckError(env.name, v)
