"""PPO's action heads in the learner: which head fits which actions (and the refusals), what the
rollout stores and what the environment receives for each head, and a multi-discrete policy that
learns a tiny task with masked components."""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from tests.ppo.multi_env import COLS, LENGTH, ROWS, make_pick_cell
from turbozero import envs
from turbozero.config import ConfigError
from turbozero.ppo import PPOConfig, learner, make_ppo
from turbozero.ppo.distributions import ScaledBeta, TanhGaussian

SMALL = PPOConfig(
    env="gymnax:Pendulum-v1",
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
def pendulum():
    return envs.make("gymnax:Pendulum-v1")


def test_auto_keeps_the_categorical_and_gaussian_heads(pendulum):
    cartpole = envs.make("gymnax:CartPole-v1")
    assert learner.resolve_action_head("auto", cartpole) == "categorical"
    assert learner.resolve_action_head("auto", pendulum) == "gaussian"
    assert learner.resolve_action_head("auto", make_pick_cell()) == "categorical"


@pytest.mark.parametrize(
    ("head", "env_name", "match"),
    [
        ("categorical", "pendulum", "actions are continuous: use 'auto' or one of 'gaussian'"),
        ("tanh_gaussian", "cartpole", "actions are discrete: use 'auto' or one of 'categorical'"),
        ("multi_discrete", "cartpole", "needs an environment whose actions are made of compon"),
        ("beta", "half_open", "needs finite action bounds"),
        ("tanh_gaussian", "unbounded", "needs finite action bounds"),
        ("beta", "empty_box", "needs action_low < action_high"),
    ],
)
def test_a_head_that_does_not_fit_the_actions_is_refused_naming_what_does(
    pendulum, head, env_name, match
):
    env = {
        "pendulum": pendulum,
        "cartpole": envs.make("gymnax:CartPole-v1"),
        "half_open": dataclasses.replace(pendulum, action_high=np.inf),
        "unbounded": dataclasses.replace(pendulum, action_low=None, action_high=None),
        "empty_box": dataclasses.replace(pendulum, action_low=1.0, action_high=1.0),
    }[env_name]
    with pytest.raises(ConfigError, match=f"action_head={head!r}" if head != "beta" else head):
        make_ppo(SMALL, env=env, action_head=head)
    with pytest.raises(ConfigError, match=match):
        learner.resolve_action_head(head, env)


def test_multi_discrete_is_offered_where_the_actions_have_components():
    with pytest.raises(ConfigError, match="'categorical', 'multi_discrete'"):
        learner.resolve_action_head("gaussian", make_pick_cell())


def _rollout(config: PPOConfig, env=None):
    config, env = learner.validate_ppo_args(config, env, {})
    spec = learner.make_learner_spec(config, env)
    start = jax.jit(functools.partial(learner.init, spec))(jax.random.PRNGKey(0))
    run = jax.jit(functools.partial(learner.rollout, spec))
    _, traj = run(start.params, start.obs_stats, start.env_state, jax.random.PRNGKey(1))
    return spec, start, traj


@pytest.mark.parametrize("head", ["tanh_gaussian", "beta"])
def test_bounded_heads_store_their_raw_sample_and_step_inside_the_bounds(head):
    cfg = dataclasses.replace(
        SMALL, action_head=head, loss="kl_penalty", normalize_observations=True
    )
    spec, start, traj = _rollout(cfg)
    T, E = cfg.rollout_length, cfg.num_envs
    assert traj.action.shape == (T, E, 1)
    # the stored log-probability is the acting policy's at the stored raw action
    obs = traj.obs.reshape(T * E, -1)
    dist = spec.network.policy(start.params.actor, obs)
    assert isinstance(dist, TanhGaussian if head == "tanh_gaussian" else ScaledBeta)
    np.testing.assert_allclose(
        dist.log_prob(traj.action.reshape(T * E, 1)), traj.log_prob.reshape(-1), rtol=1e-5
    )
    actions = np.asarray(learner.env_action(spec, traj.action))
    assert ((actions >= -2.0) & (actions <= 2.0)).all()  # Pendulum's torque bounds
    assert (traj.action_noise is not None) == (head == "tanh_gaussian")
    # the acting distribution, per sample, for the KL penalty: every field [T, E, D]
    assert all(x.shape == (T, E, 1) for x in traj.old_policy)
    if head == "beta":
        assert ((np.asarray(traj.action) > 0) & (np.asarray(traj.action) < 1)).all()


def test_the_gaussian_head_draws_and_stores_what_it_did_before_heads_existed():
    """`auto` and `gaussian` are one head: the same program, the same numbers."""
    _, _, auto = _rollout(SMALL)
    _, _, named = _rollout(dataclasses.replace(SMALL, action_head="gaussian"))
    for a, b in zip(jax.tree.leaves(auto), jax.tree.leaves(named), strict=True):
        np.testing.assert_array_equal(a, b)
    assert auto.action_noise is None


@pytest.mark.parametrize("head", ["tanh_gaussian", "beta"])
def test_bounded_heads_act_greedily_at_the_squashed_mean_or_the_mode(pendulum, head):
    ppo = make_ppo(SMALL, action_head=head)
    state = ppo.init(jax.random.PRNGKey(0))
    obs = jax.vmap(pendulum.observe)(jax.vmap(pendulum.init)(jax.random.split(state.key, 5))[0])
    dist = ppo.network.policy(state.params.actor, obs)
    greedy = ppo.act(state.params, state.obs_stats, obs, jax.random.PRNGKey(2), greedy=True)
    np.testing.assert_allclose(greedy, dist.action(dist.mode()), rtol=1e-6)
    sampled = ppo.act(state.params, state.obs_stats, obs, jax.random.PRNGKey(2))
    assert sampled.shape == (5, 1) and ((sampled >= -2.0) & (sampled <= 2.0)).all()


PICK = PPOConfig(
    env="pick_cell",
    num_envs=8,
    rollout_length=16,
    num_updates=60,
    num_updates_per_eval=60,
    epochs=4,
    num_minibatches=2,
    actor_hidden=(32,),
    critic_hidden=(32,),
    actor_lr=3e-3,
    critic_lr=3e-3,
    action_head="multi_discrete",
    loss="kl_penalty",
    eval_episodes=16,
    eval_max_steps=LENGTH,
)


@pytest.fixture(scope="module")
def picked():
    ppo = make_ppo(PICK, env=make_pick_cell())
    start = jax.jit(ppo.init)(jax.random.PRNGKey(0))
    state, metrics = jax.jit(ppo.update)(start)
    return ppo, start, state, metrics


def test_the_multi_discrete_head_learns_to_point_at_the_target(picked):
    """A random legal pick scores 4 / 9 per episode of 4 steps; 60 updates of 128 steps
    learn to pick the target (one categorical for the row, one for the column)."""
    ppo, start, state, metrics = picked
    evaluate = jax.jit(ppo.evaluate)
    before = evaluate(start.params, start.obs_stats, jax.random.PRNGKey(1))
    after = evaluate(state.params, state.obs_stats, jax.random.PRNGKey(1))
    assert float(before["return_mean"]) < 2.0 and float(after["return_mean"]) >= 3.5
    assert np.isfinite(np.asarray(metrics["kl"])).all()


def test_the_multi_discrete_head_never_picks_a_masked_component(picked):
    """The last column is illegal in every row: sampled and greedy flat actions never land in
    it."""
    ppo, start, _, _ = picked
    env = ppo.env
    states, md = jax.vmap(env.init)(jax.random.split(jax.random.PRNGKey(3), 256))
    obs = jax.vmap(env.observe)(states)
    for greedy in (False, True):
        flat = np.asarray(
            ppo.act(
                start.params,
                start.obs_stats,
                obs,
                jax.random.PRNGKey(4),
                greedy=greedy,
                action_mask=md.action_mask,
            )
        )
        assert flat.shape == (256,) and flat.min() >= 0 and flat.max() < ROWS * COLS
        assert not (flat % COLS == COLS - 1).any()


def test_multi_discrete_rollouts_keep_the_components_and_their_masks():
    spec, start, traj = _rollout(dataclasses.replace(PICK, num_envs=2), env=make_pick_cell())
    T = PICK.rollout_length
    assert traj.action.shape == (T, 2, 2) and traj.action.dtype == jnp.int32
    assert traj.action_mask.shape == (T, 2, ROWS, COLS)  # the joint mask by components
    assert not np.asarray(traj.action_mask[..., COLS - 1]).any()
    assert (np.asarray(traj.action[..., 0]) < ROWS).all()  # the rows' padding never drawn
    assert (np.asarray(traj.action[..., 1]) < COLS - 1).all()  # nor the illegal column
