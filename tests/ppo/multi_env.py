"""A tiny multi-discrete environment for the tests: point at the target cell of a 3 x 4 grid.

Each of the `LENGTH` steps shows a target cell (one-hot `[12]`, and the step as a fraction);
choosing it (the flat index `row * 4 + col`) pays 1. The last column is illegal (a mask that is a
product of the components' masks) and never holds the target. `action_components = (3, 4)`: the
row component is padded to the column's 4 choices.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np

from turbozero.envs import Env, from_functions
from turbozero.types import StepMetadata

ROWS, COLS, LENGTH = 3, 4, 4
MASK = np.arange(ROWS * COLS) % COLS != COLS - 1
TARGETS = np.flatnonzero(MASK)


def _metadata(reward, t):
    return StepMetadata(
        rewards=jnp.reshape(reward, (1,)).astype(jnp.float32),
        action_mask=jnp.asarray(MASK),
        terminated=t >= LENGTH,
        cur_player_id=jnp.int32(0),
    )


def _init(key):
    target = jax.random.choice(key, jnp.asarray(TARGETS))
    return (target, jnp.int32(0)), _metadata(jnp.float32(0.0), jnp.int32(0))


def _step(state, action, key):
    target, t = state
    reward = (action == target).astype(jnp.float32)
    new_target = jax.random.choice(key, jnp.asarray(TARGETS))
    return (new_target, t + 1), _metadata(reward, t + 1)


def _observe(state):
    target, t = state
    return jnp.concatenate([jax.nn.one_hot(target, ROWS * COLS), (t / LENGTH)[None]])


def make_pick_cell() -> Env:
    env = from_functions(
        init_fn=_init, step_fn=_step, observe_fn=_observe, name="pick_cell", num_players=1
    )
    return dataclasses.replace(env, action_components=(ROWS, COLS))
