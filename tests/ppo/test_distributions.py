"""The action heads' distributions against closed forms (scipy) and numerical integration:
tanh-squashed Gaussian, scaled Beta, multi-discrete categoricals."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import integrate, stats

from turbozero.ppo.distributions import (
    BETA_EPS,
    Categorical,
    DiagGaussian,
    MultiCategorical,
    ScaledBeta,
    TanhGaussian,
    log_tanh_derivative,
    pad_component_logits,
    ravel_components,
    squash_to_bounds,
)

LOW, HIGH = -2.0, 3.0  # an asymmetric box: the affine part of each Jacobian matters


def _tanh_gaussian(mean: float, std: float) -> TanhGaussian:
    return TanhGaussian(
        jnp.array([[mean]], jnp.float32),
        jnp.log(jnp.array([std], jnp.float32)),
        jnp.array([LOW], jnp.float32),
        jnp.array([HIGH], jnp.float32),
    )


def _tanh_density(a: float, mean: float, std: float) -> float:
    """The bounded action's density by the change of variables, in float64."""
    y = 2 * (a - LOW) / (HIGH - LOW) - 1  # tanh(u)
    u = math.atanh(y)
    return stats.norm.pdf(u, mean, std) / ((HIGH - LOW) / 2 * (1 - y * y))


def test_tanh_log_derivative_is_the_naive_one_where_that_is_finite_and_finite_beyond():
    u = jnp.array([-3.0, -0.5, 0.0, 0.7, 4.0])
    np.testing.assert_allclose(
        log_tanh_derivative(u), np.log(1 - np.tanh(np.asarray(u, np.float64)) ** 2), rtol=1e-5
    )
    # at |u| = 50, 1 - tanh(u)^2 is 0 in float32: the naive form is -inf, the stable one
    # 2 * (log 2 - |u|)
    far = log_tanh_derivative(jnp.array([-50.0, 50.0]))
    np.testing.assert_allclose(far, 2 * (np.log(2.0) - 50.0), rtol=1e-6)


def test_tanh_gaussian_log_prob_is_the_change_of_variables_density():
    dist = _tanh_gaussian(0.3, 0.8)
    # worked by hand at u = 0: N(0; 0.3, 0.8) = exp(-0.3^2 / (2 * 0.64)) / (0.8 sqrt(2 pi))
    #   = 0.464819; da/du = (3 - -2) / 2 * (1 - tanh(0)^2) = 2.5; density 0.464819 / 2.5
    np.testing.assert_allclose(
        float(dist.log_prob(jnp.array([[0.0]]))[0]), math.log(0.464819 / 2.5), rtol=1e-5
    )
    # and against the density of the action a(u) in float64 over the range of u
    u = np.linspace(-3.0, 3.0, 25)
    actions = LOW + (HIGH - LOW) * (np.tanh(u) + 1) / 2
    want = [math.log(_tanh_density(a, 0.3, 0.8)) for a in actions]
    ours = dist.log_prob(jnp.asarray(u, jnp.float32)[:, None])
    np.testing.assert_allclose(ours, want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(
        dist.action(jnp.asarray(u, jnp.float32)[:, None])[:, 0], actions, 1e-5
    )
    # the reference density is one: it integrates to 1 over the box
    total, _ = integrate.quad(lambda a: _tanh_density(a, 0.3, 0.8), LOW, HIGH)
    np.testing.assert_allclose(total, 1.0, rtol=1e-6)


def test_tanh_gaussian_entropy_estimate_averages_to_the_numerical_entropy():
    mean, std = 0.3, 0.8
    entropy, _ = integrate.quad(
        lambda a: -_tanh_density(a, mean, std) * math.log(_tanh_density(a, mean, std)),
        LOW + 1e-9,
        HIGH - 1e-9,
        limit=200,
    )
    n = 200_000
    dist = TanhGaussian(
        jnp.full((n, 1), mean), jnp.log(jnp.array([std])), jnp.array([LOW]), jnp.array([HIGH])
    )
    noise = jax.random.normal(jax.random.PRNGKey(0), (n, 1))
    estimates = np.asarray(dist.entropy(noise), np.float64)
    # the Monte Carlo mean is within 4 standard errors of the integral
    assert abs(estimates.mean() - entropy) < 4 * estimates.std() / math.sqrt(n) + 1e-4
    # without noise it is the point estimate at the mean, above the entropy (Jensen)
    assert float(dist.entropy()[0]) > entropy


def test_tanh_gaussian_entropy_gradient_flows_through_the_sample():
    """The log-determinant is taken at mean + std * noise: its gradient moves the mean
    towards the box's centre (where the squash stretches least)."""
    noise = jnp.array([[0.4]])

    def entropy(mean):
        dist = TanhGaussian(mean, jnp.zeros(1), jnp.array([-1.0]), jnp.array([1.0]))
        return dist.entropy(noise)[0]

    grad = jax.grad(entropy)(jnp.array([[1.5]]))
    # d/dm log(1 - tanh(m + 0.4)^2) = -2 tanh(1.9)
    np.testing.assert_allclose(grad[0, 0], -2 * np.tanh(1.9), rtol=1e-5)


def test_tanh_gaussian_mode_sample_and_kl():
    dist = _tanh_gaussian(0.3, 0.8)
    np.testing.assert_allclose(dist.action(dist.mode()), squash_to_bounds(0.3, LOW, HIGH))
    key = jax.random.PRNGKey(1)
    np.testing.assert_allclose(
        dist.sample(key), dist.sample_with(jax.random.normal(key, (1, 1))), rtol=1e-6
    )
    other = _tanh_gaussian(-0.2, 1.1)
    np.testing.assert_allclose(
        dist.kl(other), DiagGaussian(dist.mean, dist.log_std).kl(other.gaussian), rtol=1e-6
    )


def _beta(alpha, beta) -> ScaledBeta:
    return ScaledBeta(
        jnp.asarray(alpha, jnp.float32),
        jnp.asarray(beta, jnp.float32),
        jnp.array([LOW, 0.0], jnp.float32),
        jnp.array([HIGH, 1.0], jnp.float32),
    )


def test_scaled_beta_log_prob_and_entropy_match_scipy():
    alpha, beta = np.array([[1.5, 3.0]]), np.array([[2.5, 1.2]])
    dist = _beta(alpha, beta)
    x = jnp.array([[0.2, 0.9]])
    loc, scale = np.array([LOW, 0.0]), np.array([HIGH - LOW, 1.0])
    want = stats.beta.logpdf(loc + scale * np.asarray(x), alpha, beta, loc=loc, scale=scale)
    np.testing.assert_allclose(dist.log_prob(x), want.sum(-1), rtol=1e-5)
    want_h = stats.beta.entropy(alpha, beta, loc=loc, scale=scale)
    np.testing.assert_allclose(dist.entropy(), want_h.sum(-1), rtol=1e-5)
    np.testing.assert_allclose(dist.action(x), loc + scale * np.asarray(x), rtol=1e-6)


def test_scaled_beta_kl_matches_numerical_integration():
    p, q = _beta([[1.5, 3.0]], [[2.5, 1.2]]), _beta([[2.0, 1.1]], [[2.0, 4.0]])
    want = 0.0
    for a1, b1, a2, b2 in [(1.5, 2.5, 2.0, 2.0), (3.0, 1.2, 1.1, 4.0)]:

        def integrand(x, a1=a1, b1=b1, a2=a2, b2=b2):
            return stats.beta.pdf(x, a1, b1) * (
                stats.beta.logpdf(x, a1, b1) - stats.beta.logpdf(x, a2, b2)
            )

        want += integrate.quad(integrand, 0, 1)[0]
    np.testing.assert_allclose(p.kl(q), [want], rtol=1e-4)
    np.testing.assert_allclose(p.kl(p), [0.0], atol=1e-6)


def test_scaled_beta_samples_stay_inside_and_have_the_beta_mean():
    n = 50_000
    dist = ScaledBeta(
        jnp.full((n, 1), 1.0), jnp.full((n, 1), 3.0), jnp.array([LOW]), jnp.array([HIGH])
    )
    x = np.asarray(dist.sample(jax.random.PRNGKey(2)))
    assert (x >= BETA_EPS).all() and (x <= 1 - BETA_EPS).all()
    np.testing.assert_allclose(x.mean(), 0.25, atol=0.01)  # alpha / (alpha + beta)
    assert np.isfinite(np.asarray(dist.log_prob(jnp.asarray(x)))).all()
    # mode (alpha - 1) / (alpha + beta - 2), and 0.5 for the uniform alpha = beta = 1
    modes = _beta([[3.0, 1.0]], [[2.0, 1.0]]).mode()
    np.testing.assert_allclose(modes, [[2.0 / 3.0, 0.5]], rtol=1e-6)


def test_multi_categorical_sums_its_components_log_probs_entropies_and_kls():
    # components of 2 and 3 choices; the first padded to 3 with a choice never taken
    logits = pad_component_logits(jnp.log(jnp.array([[0.25, 0.75, 0.5, 0.3, 0.2]])), (2, 3))
    dist = MultiCategorical(logits)
    assert logits.shape == (1, 2, 3)
    # action (1, 0): log 0.75 + log 0.5
    np.testing.assert_allclose(
        dist.log_prob(jnp.array([[1, 0]])), [np.log(0.75) + np.log(0.5)], rtol=1e-6
    )
    h = stats.entropy([0.25, 0.75]) + stats.entropy([0.5, 0.3, 0.2])
    np.testing.assert_allclose(dist.entropy(), [h], rtol=1e-6)
    other = MultiCategorical(pad_component_logits(jnp.zeros((1, 5)), (2, 3)))
    kl = stats.entropy([0.25, 0.75], [0.5, 0.5]) + stats.entropy([0.5, 0.3, 0.2], [1 / 3] * 3)
    np.testing.assert_allclose(dist.kl(other), [kl], rtol=1e-5)
    masked = dist._replace(mask=jnp.ones((1, 2, 3), bool))  # all legal: the same numbers
    joint = np.exp(np.asarray(masked.joint_log_probs()))
    np.testing.assert_allclose(joint, [np.outer([0.25, 0.75], [0.5, 0.3, 0.2]).ravel()], 1e-6)
    np.testing.assert_allclose(masked.entropy(jnp.array([[1, 0]])), [h], rtol=1e-6)
    many = MultiCategorical(jnp.broadcast_to(logits, (4000, 2, 3)))
    drawn = np.asarray(many.sample(jax.random.PRNGKey(5)))
    assert drawn[:, 0].max() <= 1  # the padding is never drawn
    np.testing.assert_allclose(np.mean(drawn[:, 0] == 1), 0.75, atol=0.03)
    np.testing.assert_array_equal(
        many.sample(jax.random.PRNGKey(5)),
        many.sample_with(jax.random.gumbel(jax.random.PRNGKey(5), (4000, 2, 3))),
    )


@pytest.mark.parametrize("sizes", [(3, 4), (2, 3, 2), (5,)])
def test_components_ravel_row_major_like_numpy(sizes):
    grid = np.stack(np.meshgrid(*[np.arange(n) for n in sizes], indexing="ij"), -1)
    components = grid.reshape(-1, len(sizes))
    want = np.ravel_multi_index(tuple(components.T), sizes)
    np.testing.assert_array_equal(ravel_components(jnp.asarray(components), sizes), want)


def test_a_masked_multi_categorical_masks_each_component_given_the_earlier_ones():
    """2 x 3 with legal flat actions 1 = (0, 1) and 5 = (1, 2), a mask that is no product of the
    components' masks: the row is free, the column then forced."""
    mask = jnp.zeros((1, 6), bool).at[0, jnp.array([1, 5])].set(True).reshape(1, 2, 3)
    logits = pad_component_logits(jnp.log(jnp.array([[0.25, 0.75, 0.5, 0.3, 0.2]])), (2, 3))
    dist = MultiCategorical(logits, mask)
    # log P(0, 1) = log 0.25 + log 1 (the only legal column of row 0)
    np.testing.assert_allclose(dist.log_prob(jnp.array([[0, 1]])), [np.log(0.25)], atol=1e-6)
    np.testing.assert_array_equal(dist.mode(), [[1, 2]])
    np.testing.assert_allclose(
        np.exp(dist.joint_log_probs()), [[0, 0.25, 0, 0, 0, 0.75]], atol=1e-6
    )
    # entropy and KL given the action's row: the row's, plus 0 for the forced column
    np.testing.assert_allclose(
        dist.entropy(jnp.array([[0, 1]])), [stats.entropy([0.25, 0.75])], rtol=1e-6
    )
    other = MultiCategorical(pad_component_logits(jnp.zeros((1, 5)), (2, 3)), mask)
    np.testing.assert_allclose(
        dist.kl(other, jnp.array([[1, 2]])), [stats.entropy([0.25, 0.75], [0.5, 0.5])], 1e-5
    )
    many = MultiCategorical(
        jnp.broadcast_to(logits, (2000, 2, 3)), jnp.broadcast_to(mask, (2000, 2, 3))
    )
    drawn = np.asarray(many.sample(jax.random.PRNGKey(6)))
    flat = np.asarray(ravel_components(jnp.asarray(drawn), (2, 3)))
    assert set(np.unique(flat)) == {1, 5}  # always legal
    np.testing.assert_allclose(np.mean(flat == 5), 0.75, atol=0.03)


def test_categorical_is_the_one_component_multi_categorical():
    logits = jax.random.normal(jax.random.PRNGKey(3), (5, 4))
    cat, multi = Categorical(logits), MultiCategorical(logits[:, None, :])
    action = jnp.array([0, 1, 2, 3, 1])
    np.testing.assert_allclose(multi.log_prob(action[:, None]), cat.log_prob(action), 1e-6)
    np.testing.assert_allclose(multi.entropy(), cat.entropy(), rtol=1e-6)
