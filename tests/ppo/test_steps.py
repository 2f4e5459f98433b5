"""The learner's named steps, called directly with a `LearnerSpec`: argument checks at the edge,
rollout shapes, advantage standardisation, a minibatch step, and `update` as `train_step`
repeated."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from turbozero.config import ConfigError
from turbozero.ppo import PPOConfig, learner

SMALL = PPOConfig(
    num_envs=2,
    rollout_length=8,
    num_updates=2,
    num_updates_per_eval=2,
    epochs=1,
    num_minibatches=2,
    actor_hidden=(8,),
    critic_hidden=(8,),
)


@pytest.fixture(scope="module")
def spec():
    config, env = learner.validate_ppo_args(SMALL, None, {})
    return learner.make_learner_spec(config, env)


@pytest.fixture(scope="module")
def start(spec):
    return jax.jit(functools.partial(learner.init, spec))(jax.random.PRNGKey(0))


@pytest.fixture(scope="module")
def rolled(spec, start):
    run = jax.jit(functools.partial(learner.rollout, spec))
    return run(start.params, start.obs_stats, start.env_state, jax.random.PRNGKey(1))


def test_validate_ppo_args_applies_overrides_and_an_environment_id():
    config, env = learner.validate_ppo_args(SMALL, "gymnax:Pendulum-v1", {"num_envs": 3})
    assert config.env == "gymnax:Pendulum-v1" and config.num_envs == 3
    assert env.continuous and config.rollout_length == SMALL.rollout_length


def test_validate_ppo_args_names_an_unknown_key_and_refuses_a_two_player_game(tic_tac_toe):
    with pytest.raises(ConfigError, match="num_envz"):
        learner.validate_ppo_args(None, None, {"num_envz": 2})
    with pytest.raises(ValueError, match="num_players == 1"):
        learner.validate_ppo_args(SMALL, tic_tac_toe, {})


def test_rollout_stacks_its_steps_over_the_environments(rolled):
    env_state, traj = rolled
    T, E = SMALL.rollout_length, SMALL.num_envs
    assert traj.obs.shape == (T, E, 4) and traj.next_obs is not None
    assert traj.action.shape == (T, E) and traj.action.dtype == jnp.int32
    assert traj.value.shape == traj.log_prob.shape == traj.reward.shape == (T, E)
    assert traj.action_mask is not None and traj.action_mask.shape == (T, E, 2)
    # only what the options need: no raw observations without normalisation, no old policy
    # without the KL penalty
    assert traj.raw_obs is None and traj.old_policy is None
    assert env_state.observation.shape == (E, 4)


def test_standardised_advantages_have_zero_mean_and_unit_variance(spec, start, rolled):
    _, traj = rolled
    hp = learner.hyperparams_of(spec.config)
    advantages, targets = jax.jit(functools.partial(learner.estimate_advantages, spec))(
        start.params.critic, start.obs_stats, traj, hp
    )
    assert advantages.shape == targets.shape == traj.value.shape
    np.testing.assert_allclose(float(jnp.mean(advantages)), 0.0, atol=1e-5)
    np.testing.assert_allclose(float(jnp.std(advantages)), 1.0, atol=1e-3)


def test_a_minibatch_step_at_learning_rate_zero_moves_no_parameter(spec, start, rolled):
    _, traj = rolled
    M = SMALL.minibatch_size
    transitions = jax.tree.map(
        lambda x: learner._flatten_time(x)[:M], traj._replace(raw_obs=None, next_obs=None)
    )
    minibatch = learner.Batch(transitions, jnp.ones((M,)), jnp.ones((M,)))
    hp = learner.hyperparams_of(spec.config)._replace(actor_lr=0.0, critic_lr=0.0)
    carry = learner.EpochCarry(start.params, start.actor_opt_state, start.critic_opt_state)
    after, info = jax.jit(functools.partial(learner.minibatch_step, spec, hp))(carry, minibatch)
    for a, b in zip(jax.tree.leaves(after.params), jax.tree.leaves(start.params), strict=True):
        np.testing.assert_array_equal(a, b)
    assert float(info["actor_grad_norm"]) > 0 and float(info["critic_grad_norm"]) > 0
    assert int(jax.tree.leaves(after.actor_opt_state)[0]) == 1  # the optimizer counted a step


def test_update_is_the_training_step_repeated(spec, start):
    hp = learner.hyperparams_of(spec.config)
    together, metrics = jax.jit(functools.partial(learner.update, spec))(start)
    step = jax.jit(functools.partial(learner.train_step, spec, hp=hp))
    state = start
    for i in range(SMALL.num_updates_per_eval):
        state, each = step(state)
        for name, value in each.items():
            np.testing.assert_allclose(value, metrics[name][i], rtol=1e-6, atol=1e-6)
    assert int(state.update_step) == int(together.update_step) == SMALL.num_updates_per_eval
    for a, b in zip(jax.tree.leaves(state), jax.tree.leaves(together), strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)
