"""Adapter for gymnax environments (single-agent control, MinAtar, bsuite, ...).

gymnax environments auto-reset inside `env.step`; the contract does not, so the adapter calls the
environment's own transition (`step_env`) and keeps a finished episode frozen: further steps leave
the state unchanged and report zero reward, like pgx. Callers that want auto-reset wrap the adapter
(for PPO: `turbozero.ppo.autoreset`), which also keeps the true final observation.

Termination and truncation are reported separately. gymnax >= 1.0 returns the termination flag from
`step_env` and the time limit from `is_truncated`; gymnax 0.0.x (needed by rejax 0.1.3) folds the
time limit into `done`, so there the adapter splits it again by comparing `state.time` with
`params.max_steps_in_episode` (a step that both terminates and hits the limit counts as truncated).

Discrete action spaces give `num_actions = n`; `Box` action spaces give a continuous `Env` with
`action_shape = (D,)` (a scalar box becomes `(1,)`; a box of several dimensions is flattened
row-major, and reshaped back before stepping), `num_actions = D` and the box bounds.
"""

from __future__ import annotations

import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike

from turbozero import struct
from turbozero.envs.core import Env, check_discrete_action, hold_finished
from turbozero.types import Array, PRNGKey, PyTree, StepMetadata


@struct.dataclass
class GymnaxState(struct.Struct):
    """A gymnax environment state with what the last `init`/`step` produced.

    Attributes:
        inner: the gymnax `EnvState`.
        observation: `[*observation_shape]` float32 observation of `inner`.
        metadata: what the last `init`/`step` reported.
    """

    inner: PyTree
    observation: Array
    metadata: StepMetadata


def _metadata(
    reward: ArrayLike,
    num_actions: int,
    terminated: ArrayLike,
    truncated: ArrayLike,
    step: ArrayLike,
) -> StepMetadata:
    return StepMetadata(
        rewards=jnp.reshape(jnp.asarray(reward, jnp.float32), (1,)),
        action_mask=jnp.ones((num_actions,), jnp.bool_),
        terminated=jnp.asarray(terminated, jnp.bool_),
        cur_player_id=jnp.int32(0),
        step=jnp.asarray(step, jnp.int32),
        truncated=jnp.asarray(truncated, jnp.bool_),
    )


def _load_gymnax(
    name: str,
) -> tuple[Any, Any, int, tuple[int, ...] | None, np.ndarray | None, np.ndarray | None]:
    """`(env, params, num_actions, action_shape, low, high)` of a gymnax id: a discrete space
    (`action_shape` None) or a box flattened to `(D,)` with its bounds; an unknown id (with
    close matches), a missing gymnax or another space is refused."""
    try:
        import gymnax
        from gymnax.environments import spaces
    except ImportError as e:  # pragma: no cover - depends on the installation
        raise ImportError(
            "gymnax environments need the 'gymnax' package: pip install 'turbozero[envs]'"
        ) from e
    if name not in gymnax.registered_envs:
        import difflib

        close = difflib.get_close_matches(name, list(gymnax.registered_envs), n=3, cutoff=0.4)
        hint = f" Did you mean {' or '.join(map(repr, close))}?" if close else ""
        raise ValueError(f"unknown gymnax environment {name!r}.{hint}")
    env, params = gymnax.make(name)
    space = env.action_space(params)
    action_shape: tuple[int, ...] | None
    low = high = None
    if isinstance(space, spaces.Discrete):
        action_shape = None
        num_actions = int(space.n)
    elif isinstance(space, spaces.Box):
        # flat `(D,)` for the policy; a `[D1, D2, ...]` box is reshaped back when stepping
        box = tuple(int(d) for d in np.shape(np.zeros(space.shape))) or (1,)
        action_shape = (math.prod(box),)
        num_actions = action_shape[0]
        low = np.broadcast_to(np.asarray(space.low, np.float32), box).ravel().copy()
        high = np.broadcast_to(np.asarray(space.high, np.float32), box).ravel().copy()
    else:
        raise ValueError(
            f"gymnax environment {name!r} has action space {type(space).__name__}; only Discrete "
            f"and Box are supported"
        )
    return env, params, num_actions, action_shape, low, high


def _ending(
    env: Any, params: Any, inner: Any, done: Array, new_api: bool, max_steps: int | None
) -> tuple[Array, Array]:
    """`(terminated, truncated)` of a gymnax step: gymnax >= 1.0 says which; before it `done`
    includes the time limit, read off the state's `time`."""
    if new_api:
        terminated = jnp.asarray(done, jnp.bool_)
        truncated = jnp.logical_and(
            jnp.asarray(env.is_truncated(inner, params), jnp.bool_), ~terminated
        )
        return terminated, truncated
    done = jnp.asarray(done, jnp.bool_)
    hit_limit = (
        jnp.asarray(inner.time >= max_steps, jnp.bool_)
        if max_steps is not None and hasattr(inner, "time")
        else jnp.bool_(False)
    )
    return done & ~hit_limit, done & hit_limit


def make_gymnax(name: str) -> Env:
    """A gymnax environment by its gymnax id (``"CartPole-v1"``, ``"Pendulum-v1"``, ...).

    Args:
        name: the id given to `gymnax.make`.

    Returns:
        A one-player `Env` named ``"gymnax:<name>"`` whose states are `GymnaxState`. Observations
        are float32 with the environment's own shape.

    Raises:
        ImportError: when gymnax is not installed.
        ValueError: for an id gymnax does not know or an unsupported action space.
    """
    env, params, num_actions, action_shape, low, high = _load_gymnax(name)
    space = env.action_space(params)
    env_action_shape = tuple(int(d) for d in getattr(space, "shape", ()) or ())
    new_api = hasattr(env, "is_truncated")  # gymnax >= 1.0
    max_steps = getattr(params, "max_steps_in_episode", None)

    def _observation(obs) -> Array:
        return jnp.asarray(obs, jnp.float32)

    obs_shape = tuple(
        int(d)
        for d in jax.eval_shape(
            lambda k: _observation(env.reset(k, params)[0]), jax.random.PRNGKey(0)
        ).shape
    )

    def init(key: PRNGKey) -> tuple[GymnaxState, StepMetadata]:
        obs, inner = env.reset(key, params)
        md = _metadata(0.0, num_actions, False, False, 0)
        return GymnaxState(inner, _observation(obs), md), md

    def _env_action(action: Array) -> Array:
        if action_shape is None:
            check_discrete_action(f"gymnax:{name}", action)
            return jnp.asarray(action, jnp.int32)
        a = jnp.broadcast_to(jnp.asarray(action, jnp.float32), action_shape)
        return jnp.reshape(a, env_action_shape)

    def step(state: GymnaxState, action: Array, key: PRNGKey) -> tuple[GymnaxState, StepMetadata]:
        obs, inner, reward, done, _ = env.step_env(key, state.inner, _env_action(action), params)
        terminated, truncated = _ending(env, params, inner, done, new_api, max_steps)
        old = state.metadata
        md = _metadata(reward, num_actions, terminated, truncated, old.step + 1)
        stepped = GymnaxState(inner, _observation(obs), md)
        new = hold_finished(state, stepped)
        return new, new.metadata

    def observe(state: GymnaxState) -> Array:
        return state.observation

    def metadata(state: GymnaxState) -> StepMetadata:
        return state.metadata

    return Env(
        name=f"gymnax:{name}",
        num_players=1,
        num_actions=num_actions,
        observation_shape=obs_shape,
        init=init,
        step=step,
        observe=observe,
        metadata=metadata,
        deterministic=False,
        raw=(env, params),
        action_shape=action_shape,
        action_low=low,
        action_high=high,
    )
