"""PPO losses by hand: where clipping is active and inactive, value clipping, KL penalty, DPO's
drift for positive and negative advantages."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from turbozero.ppo.losses import (
    clipped_value_loss,
    dpo_drift,
    dpo_loss,
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


def _dpo(ratio, advantage, alpha=2.0, beta=0.6):
    log_prob = jnp.log(jnp.atleast_1d(jnp.asarray(ratio, jnp.float32)))
    adv = jnp.atleast_1d(jnp.asarray(advantage, jnp.float32))
    return dpo_loss(log_prob, jnp.zeros_like(log_prob), adv, alpha=alpha, beta=beta)


@pytest.mark.parametrize(
    ("ratio", "advantage", "drift"),
    [
        # A >= 0: x = (r - 1) A = 0.5 * 2 = 1; drift = x - alpha tanh(x / alpha)
        #   = 1 - 2 tanh(0.5) = 1 - 0.92423431 = 0.07576569; objective = 1.5 * 2 - drift
        (1.5, 2.0, 0.07576569),
        # A < 0: x = log(r) A = log(0.5) * -1 = 0.69314718; drift = x - beta tanh(x / beta)
        #   = 0.69314718 - 0.6 tanh(1.15524530) = 0.69314718 - 0.49169058 = 0.20145660;
        #   objective = 0.5 * -1 - drift
        (0.5, -1.0, 0.20145660),
        # moves that lower the surrogate carry no drift: (r - 1) A = -0.4 and log(r) A < 0
        (0.8, 2.0, 0.0),
        (1.2, -1.0, 0.0),
    ],
)
def test_dpo_matches_the_drift_worked_by_hand(ratio, advantage, drift):
    loss, info = _dpo(ratio, advantage)
    np.testing.assert_allclose(loss, -(ratio * advantage - drift), rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(info["drift"], drift, rtol=1e-5, atol=1e-7)
    assert float(info["drift_fraction"]) == (1.0 if drift else 0.0)


def test_dpo_averages_the_objective_over_the_minibatch():
    loss, info = _dpo([1.5, 0.5], [2.0, -1.0])
    objective = (3.0 - 0.07576569) + (-0.5 - 0.20145660)
    np.testing.assert_allclose(loss, -objective / 2, rtol=1e-6)
    np.testing.assert_allclose(info["drift_fraction"], 1.0)


@pytest.mark.parametrize(
    ("ratio", "advantage"),
    [(1.0, 2.0), (1.0, -1.5), (0.7, 2.0), (1.3, -1.5)],  # r = 1, and where the drift is 0
)
def test_dpo_gradient_is_the_plain_policy_gradient_where_the_drift_is_zero(ratio, advantage):
    """d/dlogp -(r A) = -r A: the trust region's inside leaves the policy gradient alone."""
    adv = jnp.array([advantage], jnp.float32)

    def dpo(lp):
        return dpo_loss(lp, jnp.zeros(1), adv, alpha=2.0, beta=0.6)[0]

    log_prob = jnp.array([np.log(ratio)], jnp.float32)
    np.testing.assert_allclose(jax.grad(dpo)(log_prob), [-ratio * advantage], rtol=1e-6)
    assert float(dpo_drift(jnp.exp(log_prob), adv, alpha=2.0, beta=0.6)[0]) == 0.0


def test_dpo_objective_levels_off_far_outside_the_trust_region():
    # r = 10, A = 1: objective = 10 - (9 - 2 tanh(4.5)) = 1 + 2 tanh(4.5) = 2.99950642, and
    # its slope in r is A sech(4.5)^2 = 4.935e-4 (the plain surrogate's would be 1)
    loss, _ = _dpo(10.0, 1.0)
    np.testing.assert_allclose(loss, -2.99950642, rtol=1e-6)
    slope = jax.grad(lambda r: _dpo(r, 1.0)[0])(jnp.float32(10.0))
    np.testing.assert_allclose(-slope, 4.935174e-4, rtol=1e-3)


def test_dpo_drift_scales_are_read_per_sign():
    # only alpha moves a positive advantage's drift, only beta a negative one's
    pos = [float(_dpo(1.5, 2.0, alpha=a, beta=0.6)[1]["drift"]) for a in (1.0, 2.0)]
    neg = [float(_dpo(1.5, 2.0, alpha=2.0, beta=b)[1]["drift"]) for b in (0.3, 0.6)]
    assert pos[0] > pos[1] and neg[0] == neg[1]
    neg = [float(_dpo(0.5, -1.0, alpha=2.0, beta=b)[1]["drift"]) for b in (0.3, 0.6)]
    pos = [float(_dpo(0.5, -1.0, alpha=a, beta=0.6)[1]["drift"]) for a in (1.0, 2.0)]
    assert neg[0] > neg[1] and pos[0] == pos[1]
