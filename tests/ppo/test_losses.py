"""PPO losses by hand: where clipping is active and inactive, value clipping, KL penalty."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from turbozero.ppo.losses import (
    clipped_value_loss,
    entropy_bonus,
    ppo_clip_loss,
    ppo_kl_penalty_loss,
)
from turbozero.ppo.networks import Categorical, DiagGaussian


def _clip(ratio: float, advantage: float, eps: float = 0.2):
    log_prob = jnp.array([np.log(ratio)], jnp.float32)
    return ppo_clip_loss(log_prob, jnp.zeros(1), jnp.array([advantage]), clip_eps=eps)


def test_clip_inactive_inside_the_radius_gives_the_plain_surrogate():
    loss, info = _clip(1.1, 2.0)
    np.testing.assert_allclose(loss, -2.2, rtol=1e-6)
    assert float(info["clip_fraction"]) == 0.0


@pytest.mark.parametrize(
    ("ratio", "advantage", "expected"),
    [
        (1.5, 2.0, -2.4),  # positive advantage, ratio above 1 + eps: clipped at 1.2 * 2
        (0.5, -1.0, 0.8),  # negative advantage, ratio below 1 - eps: clipped at 0.8 * -1
    ],
)
def test_clip_active_caps_the_objective_and_zeroes_the_gradient(ratio, advantage, expected):
    loss, info = _clip(ratio, advantage)
    np.testing.assert_allclose(loss, expected, rtol=1e-6)
    assert float(info["clip_fraction"]) == 1.0
    grad = jax.grad(
        lambda lp: ppo_clip_loss(lp, jnp.zeros(1), jnp.array([advantage]), clip_eps=0.2)[0]
    )(jnp.array([np.log(ratio)], jnp.float32))
    assert float(grad[0]) == 0.0


@pytest.mark.parametrize(("ratio", "advantage"), [(0.5, 2.0), (1.5, -1.0)])
def test_clip_keeps_the_pessimistic_unclipped_term(ratio, advantage):
    loss, _ = _clip(ratio, advantage)
    np.testing.assert_allclose(loss, -ratio * advantage, rtol=1e-6)


def test_kl_penalty_loss_adds_beta_times_mean_kl():
    log_prob = jnp.log(jnp.array([1.1, 0.9]))
    loss, info = ppo_kl_penalty_loss(
        log_prob, jnp.zeros(2), jnp.array([1.0, 2.0]), jnp.array([0.1, 0.3]), kl_coef=3.0
    )
    np.testing.assert_allclose(loss, -(1.1 + 1.8) / 2 + 3.0 * 0.2, rtol=1e-6)
    np.testing.assert_allclose(info["kl"], 0.2, rtol=1e-6)


def test_value_clipping_takes_the_worse_of_clipped_and_unclipped():
    values, old, target = jnp.array([3.0]), jnp.array([1.0]), jnp.array([3.0])
    # unclipped error 0; clipped prediction 1 + 0.5 = 1.5, error 1.5**2 = 2.25
    np.testing.assert_allclose(clipped_value_loss(values, old, target, clip_eps=0.5), 1.125)
    np.testing.assert_allclose(clipped_value_loss(values, old, target, clip_eps=0.0), 0.0)
    np.testing.assert_allclose(
        clipped_value_loss(jnp.array([2.0]), old, target, clip_eps=None), 0.5
    )


def test_entropy_bonus_is_negative_scaled_mean_entropy():
    np.testing.assert_allclose(entropy_bonus(jnp.array([1.0, 3.0]), coef=0.01), -0.02)


def test_categorical_and_gaussian_match_closed_forms():
    cat = Categorical(jnp.log(jnp.array([[0.25, 0.75]])))
    np.testing.assert_allclose(cat.log_prob(jnp.array([1])), [np.log(0.75)], rtol=1e-6)
    ent = -(0.25 * np.log(0.25) + 0.75 * np.log(0.75))
    np.testing.assert_allclose(cat.entropy(), [ent], rtol=1e-6)
    np.testing.assert_allclose(cat.kl(cat), [0.0], atol=1e-7)
    g = DiagGaussian(jnp.array([[0.0, 1.0]]), jnp.log(jnp.array([1.0, 2.0])))
    a = jnp.array([[0.5, 0.0]])
    expected = jax.scipy.stats.norm.logpdf(a, g.mean, jnp.exp(g.log_std)).sum(-1)
    np.testing.assert_allclose(g.log_prob(a), expected, rtol=1e-6)
    other = DiagGaussian(jnp.array([[1.0, 1.0]]), jnp.zeros(2))
    # KL(N(0,1) || N(1,1)) = 0.5; KL(N(1,4) || N(1,1)) = 0.5 * (4 - 1) - log 2
    np.testing.assert_allclose(g.kl(other), [0.5 + 1.5 - np.log(2.0)], rtol=1e-6)


def test_sampling_from_drawn_noise_matches_sampling_from_a_key():
    """The rollout draws its action noise ahead; `sample_with` on that noise is `sample(key)`."""
    key = jax.random.PRNGKey(3)
    logits = jax.random.normal(jax.random.PRNGKey(4), (64, 5))
    cat = Categorical(logits)
    np.testing.assert_array_equal(
        cat.sample(key), cat.sample_with(jax.random.gumbel(key, logits.shape))
    )
    gauss = DiagGaussian(logits, jnp.full((5,), -0.5))
    np.testing.assert_allclose(
        gauss.sample(key), gauss.sample_with(jax.random.normal(key, logits.shape)), rtol=1e-6
    )
