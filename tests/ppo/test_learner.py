"""The compiled learner: one compile per shape, per-seed results under vmap, both losses."""

from __future__ import annotations

import dataclasses
import functools

import jax
import numpy as np
import pytest

from turbozero.ppo import PPOConfig, make_ppo

TINY = PPOConfig(
    num_envs=4,
    rollout_length=8,
    num_updates=4,
    num_updates_per_eval=2,
    epochs=1,
    num_minibatches=2,
    actor_hidden=(16,),
    critic_hidden=(16,),
    normalize_observations=True,
    obs_norm_warmup_steps=2,
    eval_episodes=2,
    eval_max_steps=20,
    absolute_eval_factor=2,
)


@pytest.fixture(scope="module")
def ppo():
    return make_ppo(TINY)


@pytest.fixture(scope="module")
def traced(ppo):
    """A jitted update that counts its traces, and the state after one call."""
    count = {"traces": 0}

    def counted(state):
        count["traces"] += 1
        return ppo.update(state)

    update = jax.jit(counted)
    state = jax.jit(ppo.init)(jax.random.PRNGKey(0))
    after, metrics = update(state)
    return update, count, state, after, metrics


def test_update_does_not_compile_again_on_the_second_call(traced):
    update, count, _, after, _ = traced
    again, metrics = update(after)
    jax.block_until_ready(metrics)
    assert count["traces"] == 1
    assert update._cache_size() == 1
    assert int(again.update_step) == 2 * TINY.num_updates_per_eval


def test_one_call_runs_num_updates_per_eval_updates(traced):
    _, _, state, after, metrics = traced
    assert int(state.update_step) == 0 and int(after.update_step) == TINY.num_updates_per_eval
    for name in ("actor_loss", "value_loss", "entropy", "approx_kl", "episode_return"):
        assert metrics[name].shape == (TINY.num_updates_per_eval,)
        assert np.all(np.isfinite(np.asarray(metrics[name])))


def test_observation_statistics_live_in_the_state_and_grow_by_one_batch_per_update(traced):
    _, _, state, after, _ = traced
    warmup = TINY.num_envs * (TINY.obs_norm_warmup_steps + 1)
    assert float(state.obs_stats.count) == warmup
    assert float(after.obs_stats.count) == warmup + TINY.num_updates_per_eval * TINY.batch_size


def test_vmap_over_seeds_gives_independent_per_seed_results(ppo, traced):
    *_, single_metrics = traced
    keys = jax.random.split(jax.random.PRNGKey(0), 2).at[0].set(jax.random.PRNGKey(0))
    states = jax.vmap(ppo.init)(keys)
    states, metrics = jax.jit(jax.vmap(ppo.update))(states)
    assert metrics["actor_loss"].shape == (2, TINY.num_updates_per_eval)
    leaves = jax.tree.leaves(states.params)
    assert any(not np.allclose(leaf[0], leaf[1]) for leaf in leaves)  # seeds differ
    # seed 0 of the batch is the same agent as the unbatched run from the same key
    np.testing.assert_allclose(
        metrics["value_loss"][0], single_metrics["value_loss"], rtol=1e-3, atol=1e-4
    )


def test_evaluate_reports_episode_statistics(ppo, traced):
    _, _, _, after, _ = traced
    stats = jax.jit(ppo.evaluate)(after.params, after.obs_stats, jax.random.PRNGKey(3))
    assert set(stats) == {
        "return_mean",
        "return_std",
        "return_min",
        "return_max",
        "length_mean",
        "finished",
    }
    assert 0 < float(stats["length_mean"]) <= TINY.eval_max_steps
    # CartPole pays 1 per step: the returns are the lengths
    np.testing.assert_allclose(float(stats["return_mean"]), float(stats["length_mean"]))
    assert float(stats["return_min"]) <= float(stats["return_mean"]) <= float(stats["return_max"])


@pytest.mark.parametrize(("max_steps", "finished"), [(1, 0.0), (600, 1.0)])
def test_evaluation_says_how_many_episodes_ended_within_its_step_limit(max_steps, finished):
    """No CartPole episode ends in one step; every one ends within 600 (its own limit is 500):
    an episode cut by `eval_max_steps` is reported as unfinished, its return partial."""
    ppo = make_ppo(dataclasses.replace(TINY, eval_max_steps=max_steps))
    state = ppo.init(jax.random.PRNGKey(0))
    stats = jax.jit(ppo.evaluate)(state.params, state.obs_stats, jax.random.PRNGKey(3))
    assert float(stats["finished"]) == finished


@pytest.mark.parametrize("env", ["gymnax:CartPole-v1", "gymnax:Pendulum-v1"])
def test_kl_penalty_loss_updates_discrete_and_continuous_policies(env):
    # The acting Gaussian's shared log-std [D] used to be stacked over time as [T, D] and
    # flattened to the wrong length (float32[16] vs [16, 1] in DiagGaussian.kl).
    cfg = dataclasses.replace(TINY, env=env, loss="kl_penalty", normalize_observations=False)
    ppo = make_ppo(cfg)
    state, metrics = jax.jit(ppo.update)(jax.jit(ppo.init)(jax.random.PRNGKey(0)))
    assert int(state.update_step) == cfg.num_updates_per_eval
    for name in ("actor_loss", "approx_kl", "value_loss"):
        assert np.all(np.isfinite(np.asarray(metrics[name])))


def test_restart_states_drawn_ahead_equal_those_drawn_inside_the_rollout():
    """Large environment states are drawn inside the rollout loop instead of ahead of it; the
    update must not depend on which (same keys, same states). Rollouts long enough for random
    CartPole episodes to end in them, so restarts happen."""
    from turbozero.ppo import learner

    cfg = dataclasses.replace(TINY, rollout_length=32)
    ppo = make_ppo(cfg)
    spec = learner.make_learner_spec(cfg, ppo.env)
    assert spec.fresh_ahead  # CartPole's states are small
    state = jax.jit(ppo.init)(jax.random.PRNGKey(0))
    after, metrics = jax.jit(ppo.update)(state)
    assert float(np.sum(metrics["episodes"])) > 0
    inside = functools.partial(learner.update, spec._replace(fresh_ahead=False))
    after_inside, metrics_inside = jax.jit(inside)(state)
    for a, b in zip(jax.tree.leaves(after), jax.tree.leaves(after_inside), strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(metrics["episode_return"], metrics_inside["episode_return"])
    assert np.all(np.asarray(metrics["episode_return"]) > 0)  # CartPole pays 1 per step


def test_each_optimisation_option_is_wired_into_the_update():
    """Two epochs of minibatches, and each of advantage standardisation, the learning-rate
    schedule and gradient clipping changes what one update does (an option left unread would
    give the base parameters)."""
    base = dataclasses.replace(TINY, epochs=2, num_updates_per_eval=1, rollout_length=16)

    def params_after(**change):
        ppo = make_ppo(dataclasses.replace(base, **change))
        state = jax.jit(ppo.init)(jax.random.PRNGKey(0))
        after, metrics = jax.jit(ppo.update)(state)
        assert np.all(np.isfinite(np.asarray(metrics["actor_loss"])))
        moved = [
            np.asarray(a) - np.asarray(b)
            for a, b in zip(
                jax.tree.leaves(after.params), jax.tree.leaves(state.params), strict=True
            )
        ]
        return np.concatenate([m.ravel() for m in moved])

    step = params_after()
    assert np.abs(step).max() > 0
    for change in (
        {"standardize_advantages": False},
        {"lr_schedule": "constant"},
        {"max_grad_norm": 1e-6},
        {"epochs": 1},
    ):
        other = params_after(**change)
        assert not np.allclose(other, step), change


@pytest.mark.parametrize("bounds", [(-np.inf, np.inf), (-2.0, np.inf), (-np.inf, 2.0)])
def test_warmup_actions_are_numbers_for_unbounded_action_spaces(bounds):
    """Uniform draws between infinite bounds are NaN: observations, then the statistics, then
    everything would be."""
    from turbozero import envs

    pendulum = envs.make("gymnax:Pendulum-v1")  # it clips torques to [-2, 2] itself
    env = dataclasses.replace(pendulum, action_low=bounds[0], action_high=bounds[1])
    cfg = dataclasses.replace(TINY, env=pendulum.name, normalize_observations=True)
    state = make_ppo(cfg, env=env).init(jax.random.PRNGKey(0))
    leaves = jax.tree.leaves(state.obs_stats)
    assert all(np.isfinite(np.asarray(leaf)).all() for leaf in leaves)
    assert float(np.asarray(state.obs_stats.count)) > 0


def test_episode_statistics_over_devices_are_per_episode_when_few_episodes_end():
    """Members of a named axis (devices) average their episode counts: when fewer episodes end
    than there are members the average is a fraction, and dividing by at least 1 made the mean
    length too small (a quarter of it when one of four members finished an episode). Under
    `jit`, a named `vmap` of `init` must work too (it failed an assertion inside JAX)."""
    cfg = dataclasses.replace(
        TINY,
        num_envs=1,
        num_updates=1,
        num_updates_per_eval=1,
        num_minibatches=1,
        normalize_observations=False,
    )
    named, plain = make_ppo(cfg, axis_name="device"), make_ppo(cfg)
    members = dict(axis_name="device", axis_size=4)
    jax.jit(jax.vmap(make_ppo(TINY, axis_name="device").init, in_axes=None, **members))(
        jax.random.PRNGKey(0)
    )
    state = jax.jit(jax.vmap(named.init, in_axes=None, **members))(jax.random.PRNGKey(1))
    # One update per call, so that the member by member rollouts are the joint ones (the
    # metrics describe the rollout, before learning); calls until few episodes end in one.
    update_named = jax.jit(jax.vmap(named.update, axis_name="device"))
    update_plain = jax.jit(jax.vmap(plain.update))
    checked = 0
    for _ in range(12):
        _, each = update_plain(state)
        state, joint = update_named(state)
        episodes = np.asarray(each["episodes"])[:, 0]
        if not 0 < episodes.sum() < 4:  # wanted: fewer episodes ended than there are members
            continue
        checked += 1
        for name in ("episode_length", "episode_return"):
            per_member = np.asarray(each[name])[:, 0]
            expected = np.sum(per_member * episodes) / episodes.sum()
            np.testing.assert_allclose(np.asarray(joint[name])[:, 0], expected, rtol=1e-5)
    assert checked > 0


def test_a_grid_of_hyperparameters_trains_in_one_program_as_each_would_alone():
    """A `vmap` over stacked `Hyperparams` (and states) trains one agent per member: member i
    ends where a run with member i's numbers alone ends, and members differ."""
    from turbozero.ppo import stack_hyperparams

    cfg = dataclasses.replace(TINY, normalize_observations=False, num_updates_per_eval=2)
    ppo = make_ppo(cfg)
    members = [
        ppo.hyperparams,
        ppo.hyperparams._replace(actor_lr=3e-2, ent_coef=0.05, gamma=0.9),
        ppo.hyperparams._replace(critic_lr=1e-2, clip_eps=0.1, value_clip_eps=0.0),
    ]
    grid = stack_hyperparams(members)
    key = jax.random.PRNGKey(4)
    state = jax.jit(ppo.init)(key)
    states = jax.tree.map(lambda x: np.stack([x] * len(members)), state)  # the same start
    together, _ = jax.jit(jax.vmap(ppo.update))(states, grid)
    update = jax.jit(ppo.update)
    for i, member in enumerate(members):  # alone: its numbers as Python floats, not traced
        alone, _ = jax.jit(functools.partial(ppo.update, hyperparams=member))(state)
        leaves = zip(jax.tree.leaves(alone.params), jax.tree.leaves(together.params), strict=True)
        for a, b in leaves:
            np.testing.assert_allclose(a, b[i], rtol=2e-5, atol=1e-6)
    first = jax.tree.leaves(together.params)
    assert not np.allclose(first[0][0], first[0][1]) and not np.allclose(first[-1][0], first[-1][2])
    # the config's numbers, as Python floats (the default) or as a member: the same agent
    plain, _ = update(state)
    for a, b in zip(jax.tree.leaves(plain.params), jax.tree.leaves(together.params), strict=True):
        np.testing.assert_allclose(a, b[0], rtol=2e-5, atol=1e-6)
    with pytest.raises(ValueError, match="gamma"):
        stack_hyperparams([ppo.hyperparams._replace(gamma=1.5)])
