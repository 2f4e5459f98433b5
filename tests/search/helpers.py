"""Small networks and positions shared by the search tests."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from tests.games import opening
from turbozero import envs
from turbozero.types import StepMetadata


def uniform_eval_fn(num_actions: int):
    def eval_fn(params, obs, key):
        B = obs.shape[0]
        return jnp.zeros((B, num_actions)), jnp.zeros((B,))

    return eval_fn


def linear_eval_fn(num_actions: int):
    """A fixed random linear network with a bias: params = W [obs_dim + 1, A + 1]."""

    def eval_fn(params, obs, key):
        x = obs.reshape(obs.shape[0], -1).astype(jnp.float32)
        x = jnp.concatenate([x, jnp.ones((x.shape[0], 1))], axis=1)
        out = x @ params
        return out[:, :num_actions], jnp.tanh(out[:, num_actions])

    return eval_fn


def linear_params(env, seed: int = 0, scale: float = 0.5):
    dim = int(np.prod(env.observation_shape))
    return scale * jax.random.normal(jax.random.PRNGKey(seed), (dim + 1, env.num_actions + 1))


@functools.cache
def compiled_steps(env):
    """`env`'s init, step and batched step, each compiled once per game (called op by op, a
    pgx game's step compiles a hundred small programs)."""
    return jax.jit(env.init), jax.jit(env.step), jax.jit(jax.vmap(env.step))


def play(env, actions, batch: int = 1):
    """The state after playing `actions` from the initial position, batched `[batch]`."""
    init, step, _ = compiled_steps(env)
    state, _ = init(jax.random.PRNGKey(0))
    for a in actions:
        state, _ = step(state, jnp.int32(a), jax.random.PRNGKey(0))
    return jax.tree_util.tree_map(lambda x: _repeated(x, batch), state)


def _repeated(x, batch: int):
    """`x` stacked `batch` times, on the host where it can be (a device stack compiles a program
    per leaf shape and batch)."""
    if jax.dtypes.issubdtype(x.dtype, jax.dtypes.extended):
        return jnp.stack([x] * batch)
    return jnp.asarray(np.repeat(np.asarray(x)[None], batch, axis=0))


def assert_same_pytrees(a, b) -> None:
    """Two pytrees (search trees and outputs) with the same structure and equal leaves."""
    assert jax.tree.structure(a) == jax.tree.structure(b)
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


def bandit(rewards):
    """One-player game: pick an arm, receive its reward, game over."""
    rewards = jnp.asarray(rewards, jnp.float32)
    A = rewards.shape[0]

    def init(key):
        return jnp.int32(0), opening(1, A)

    def step(state, action):
        md = StepMetadata(
            rewards=rewards[action][None],
            action_mask=jnp.ones((A,), bool),
            terminated=jnp.bool_(True),
            cur_player_id=jnp.int32(0),
            step=jnp.int32(1),
        )
        return state + 1, md

    return envs.from_functions(
        init_fn=init, step_fn=step, observe_fn=lambda s: jnp.zeros((1,)), name="bandit"
    )
