"""Auto-reset over an `Env`, with episode statistics and the true final observation.

The `Env` contract keeps a finished game frozen; PPO's rollouts want every environment to start a
new episode at once. `make_autoreset(env)` gives single-environment functions (callers `vmap` them):

    init(key) -> AutoResetState
    step(state, action, key) -> (AutoResetState, StepOutput)
    step_from(state, action, step_key, fresh) -> (AutoResetState, StepOutput)

`step` draws the state a finished episode restarts from with `env.init`; `step_from` takes it
(`fresh`, an `env.init` state) and the step's key, so that a rollout can draw all of them in bulk
ahead of its loop (on CPU every random draw inside a loop is a small loop of its own).

After a step that ends an episode (terminated or truncated), the returned state already holds a
fresh episode, and `StepOutput.next_observation` holds the TRUE final observation of the old one,
from which the value of a truncated episode is bootstrapped (see `turbozero.ppo.gae`).
`episode_return` / `episode_length` are those of the episode that just ended where `done` is True.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp

from turbozero.envs.core import Env
from turbozero.types import Array, PRNGKey, PyTree


class AutoResetState(NamedTuple):
    """One environment with its running episode statistics.

    Attributes:
        env_state: the wrapped environment's state (never finished).
        observation: `[*O]` observation of `env_state`.
        episode_return: `[]` float32 undiscounted return of the running episode.
        episode_length: `[]` int32 steps of the running episode.
    """

    env_state: PyTree
    observation: Array
    episode_return: Array
    episode_length: Array


class StepOutput(NamedTuple):
    """What one auto-reset step reports.

    Attributes:
        reward: `[]` float32 reward of the step (player 0's).
        terminated: `[]` bool, the episode ended by its rules.
        truncated: `[]` bool, the episode was cut by a time limit (and did not terminate).
        next_observation: `[*O]` the true observation reached by the step (the final one when the
            episode ended; otherwise equal to the new state's observation).
        episode_return: `[]` float32 return of the finished episode (valid where done).
        episode_length: `[]` int32 length of the finished episode (valid where done).
    """

    reward: Array
    terminated: Array
    truncated: Array
    next_observation: Array
    episode_return: Array
    episode_length: Array

    @property
    def done(self) -> Array:
        return self.terminated | self.truncated


class AutoResetEnv(NamedTuple):
    """Pure single-environment functions with auto-reset (see the module docstring)."""

    init: Callable[[PRNGKey], AutoResetState]
    step: Callable[[AutoResetState, Array, PRNGKey], tuple[AutoResetState, StepOutput]]
    step_from: Callable[[AutoResetState, Array, PRNGKey, PyTree], tuple[AutoResetState, StepOutput]]


def make_autoreset(env: Env) -> AutoResetEnv:
    """Wrap a one-player `Env` so that finished episodes restart immediately.

    Raises:
        ValueError: when `env` is not a one-player environment.
    """
    if env.num_players != 1:
        raise ValueError(
            f"env must have num_players == 1 for PPO, got {env.num_players} ({env.name})"
        )

    def init(key: PRNGKey) -> AutoResetState:
        state, _ = env.init(key)
        return AutoResetState(
            state, env.observe(state).astype(jnp.float32), jnp.float32(0.0), jnp.int32(0)
        )

    def step(
        state: AutoResetState, action: Array, key: PRNGKey
    ) -> tuple[AutoResetState, StepOutput]:
        step_key, reset_key = jax.random.split(key)
        fresh, _ = env.init(reset_key)
        return step_from(state, action, step_key, fresh)

    def step_from(
        state: AutoResetState, action: Array, step_key: PRNGKey, fresh: PyTree
    ) -> tuple[AutoResetState, StepOutput]:
        stepped, md = env.step(state.env_state, action, step_key)
        reward = md.rewards[0].astype(jnp.float32)
        terminated = jnp.asarray(md.terminated, jnp.bool_)
        truncated = jnp.asarray(md.truncated, jnp.bool_) & ~terminated
        done = terminated | truncated
        final_obs = env.observe(stepped).astype(jnp.float32)
        ep_return = state.episode_return + reward
        ep_length = state.episode_length + 1
        env_state = jax.tree.map(lambda r, s: jnp.where(done, r, s), fresh, stepped)
        new = AutoResetState(
            env_state=env_state,
            observation=jnp.where(done, env.observe(fresh).astype(jnp.float32), final_obs),
            episode_return=jnp.where(done, 0.0, ep_return),
            episode_length=jnp.where(done, 0, ep_length),
        )
        out = StepOutput(reward, terminated, truncated, final_obs, ep_return, ep_length)
        return new, out

    return AutoResetEnv(init, step, step_from)
