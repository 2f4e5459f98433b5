"""Auto-reset keeps the true final observation and reports finished episodes; env adapters."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from turbozero import envs
from turbozero.envs.core import Env
from turbozero.ppo.autoreset import make_autoreset
from turbozero.types import StepMetadata


def _counter_env(*, terminate_at: int) -> Env:
    """Counts up by the action + 1; terminates at `terminate_at`, truncates after 4 steps."""

    def md(count, reward, step):
        return StepMetadata(
            rewards=jnp.reshape(reward, (1,)).astype(jnp.float32),
            action_mask=jnp.ones(2, bool),
            terminated=count >= terminate_at,
            cur_player_id=jnp.int32(0),
            step=step,
            truncated=(step >= 4) & (count < terminate_at),
        )

    def init(key):
        return (jnp.int32(0), jnp.int32(0)), md(jnp.int32(0), 0.0, jnp.int32(0))

    def step(state, action, key):
        count, t = state[0] + action + 1, state[1] + 1
        return (count, t), md(count, 1.0, t)

    def observe(state):
        return jnp.array([state[0]], jnp.float32)

    return envs.from_functions(init_fn=init, step_fn=step, observe_fn=observe, name="counter")


def _run(env, actions):
    auto = make_autoreset(env)
    state = auto.init(jax.random.PRNGKey(0))
    outs, observations = [], []
    for i, a in enumerate(actions):
        state, out = auto.step(state, jnp.int32(a), jax.random.PRNGKey(i))
        outs.append(out)
        observations.append(float(state.observation[0]))
    return outs, observations


def test_termination_resets_and_keeps_the_true_final_observation():
    outs, observations = _run(_counter_env(terminate_at=3), [1, 0, 0, 0])
    assert [bool(o.terminated) for o in outs] == [False, True, False, False]
    assert float(outs[1].next_observation[0]) == 3.0  # the final observation, not the reset one
    assert observations[:2] == [2.0, 0.0]  # the state already holds a new episode
    assert float(outs[1].episode_return) == 2.0 and int(outs[1].episode_length) == 2


def test_truncation_is_reported_separately_from_termination():
    outs, observations = _run(_counter_env(terminate_at=100), [0, 0, 0, 0, 0])
    assert [bool(o.truncated) for o in outs] == [False, False, False, True, False]
    assert not any(bool(o.terminated) for o in outs)
    assert float(outs[3].next_observation[0]) == 4.0 and observations[3] == 0.0
    assert int(outs[3].episode_length) == 4


def test_autoreset_refuses_two_player_games(tic_tac_toe):
    with pytest.raises(ValueError, match="num_players"):
        make_autoreset(tic_tac_toe)


def test_gymnax_pendulum_is_continuous_and_truncated_at_its_time_limit():
    env = envs.make("gymnax:Pendulum-v1")
    assert env.continuous and env.action_shape == (1,) and env.num_actions == 1
    np.testing.assert_allclose(env.action_low, [-2.0])
    state, _ = env.init(jax.random.PRNGKey(0))

    def body(s, k):
        s, md = env.step(s, jnp.zeros(1), k)
        return s, (md.terminated, md.truncated, md.rewards[0])

    _, (term, trunc, rewards) = jax.lax.scan(
        body, state, jax.random.split(jax.random.PRNGKey(1), 201)
    )
    assert not bool(term.any())
    assert np.flatnonzero(np.asarray(trunc)).tolist()[0] == 199  # the 200th step
    assert float(rewards[-1]) == 0.0  # a finished episode stays frozen with zero reward


def test_gymnax_cartpole_passes_the_conformance_check():
    env = envs.make("gymnax:CartPole-v1")
    assert not env.continuous and env.num_actions == 2 and env.observation_shape == (4,)
    envs.check(env, batch_size=2, num_steps=30)


def test_jumanji_observation_is_flattened():
    """The flat observation is jumanji's own observation fields (the action mask apart),
    raveled in order; the mask is jumanji's."""
    import jumanji
    import numpy as np

    env = envs.make("jumanji:Snake-v1")
    state, md = env.init(jax.random.PRNGKey(0))
    assert env.observe(state).shape == env.observation_shape and len(env.observation_shape) == 1
    assert md.action_mask.shape == (env.num_actions,)
    _, ts = jumanji.make("Snake-v1").reset(jax.random.PRNGKey(0))
    fields = [
        np.ravel(np.asarray(leaf, np.float32))
        for path, leaf in jax.tree_util.tree_leaves_with_path(ts.observation)
        if getattr(path[-1], "name", None) != "action_mask"
    ]
    np.testing.assert_array_equal(np.asarray(env.observe(state)), np.concatenate(fields))
    np.testing.assert_array_equal(
        np.asarray(md.action_mask), np.asarray(ts.observation.action_mask)
    )
