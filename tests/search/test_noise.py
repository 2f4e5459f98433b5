"""The root noise's Gamma and Dirichlet samplers follow their distributions."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.stats

from turbozero.search import noise
from turbozero.search.selector import dirichlet_mix


@pytest.mark.parametrize("alpha", [0.03, 0.3, 1.0, 2.5])
def test_gamma_samples_follow_the_gamma_distribution(alpha):
    logs = jax.jit(lambda k: noise.log_gamma(k, alpha, (50_000,)))(jax.random.PRNGKey(0))
    x = np.exp(np.asarray(logs, np.float64))
    assert np.all(np.isfinite(np.asarray(logs)))  # no underflow to log(0), even for alpha 0.03
    # Kolmogorov-Smirnov at the 0.1% level for 50,000 samples: D < 1.95 / sqrt(n)
    assert scipy.stats.kstest(x, scipy.stats.gamma(alpha).cdf).statistic < 1.95 / np.sqrt(x.size)
    assert abs(x.mean() - alpha) < 4 * np.sqrt(alpha / x.size)  # four standard errors


def test_elements_that_reject_every_first_proposal_are_drawn_again(monkeypatch):
    # One proposal per round: about 3% of the elements (shape 2.5) reject the first round and
    # must come from the fallback loop, with the right distribution.
    monkeypatch.setattr(noise, "CANDIDATES", 1)
    key, n, alpha = jax.random.PRNGKey(1), 200_000, 2.5
    d = alpha - 1 / 3
    first, accepted = noise._proposals(jax.random.split(key, 3)[0], d, 1 / np.sqrt(9 * d), (n,))
    accepted = np.asarray(accepted)
    x = np.exp(np.asarray(noise.log_gamma(key, alpha, (n,)), np.float64))
    assert 0.01 < 1 - accepted.mean() < 0.1  # the case under test happens
    np.testing.assert_allclose(x[accepted], np.asarray(first)[accepted], rtol=1e-5)
    assert not np.any(np.isclose(x[~accepted], np.asarray(first)[~accepted]))  # redrawn
    assert scipy.stats.kstest(x, scipy.stats.gamma(alpha).cdf).statistic < 1.95 / np.sqrt(n)


def test_dirichlet_is_zero_off_the_mask_and_sums_to_one():
    mask = jnp.array([[True, False, True, True], [False, True, False, False], [False] * 4])
    x = dirichlet_mix(jnp.zeros(mask.shape), mask, jax.random.PRNGKey(2), alpha=0.3, fraction=1.0)
    assert np.all(np.asarray(x)[~np.asarray(mask)] == 0.0)
    np.testing.assert_allclose(np.asarray(x.sum(-1)), [1.0, 1.0, 0.0], atol=1e-6)


def test_dirichlet_marginals_have_the_beta_means_and_variances():
    A, alpha = 5, 0.3
    mask = jnp.ones((40_000, A), jnp.bool_)
    x = np.asarray(
        dirichlet_mix(
            jnp.zeros(mask.shape), mask, jax.random.PRNGKey(3), alpha=alpha, fraction=1.0
        ),
        np.float64,
    )
    total = A * alpha
    var = (1 / A) * (1 - 1 / A) / (total + 1)
    np.testing.assert_allclose(x.mean(0), 1 / A, atol=0.01)
    np.testing.assert_allclose(x.var(0), var, rtol=0.05)


def test_noise_mix_keeps_illegal_actions_at_zero():
    probs = jnp.array([[0.5, 0.0, 0.5]])
    mask = jnp.array([[True, False, True]])
    mixed = dirichlet_mix(probs, mask, jax.random.PRNGKey(4), alpha=0.3, fraction=0.25)
    assert float(mixed[0, 1]) == 0.0
    assert float(mixed.sum()) == pytest.approx(1.0, abs=1e-6)


def test_bad_alpha_is_refused():
    with pytest.raises(ValueError, match="alpha"):
        noise.log_gamma(jax.random.PRNGKey(0), 0.0, (3,))
