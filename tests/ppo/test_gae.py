"""GAE against values worked by hand: termination stops bootstrapping, truncation does not."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from turbozero.ppo.gae import truncated_gae

# One environment, three steps; step 1 ends an episode whose final observation is worth 4.0.
REWARDS = jnp.array([[1.0], [2.0], [3.0]])
VALUES = jnp.array([[0.5], [1.0], [1.5]])
NEXT_VALUES = jnp.array([[1.0], [4.0], [2.0]])
GAMMA, LAMBDA = 0.9, 0.5
NO = jnp.zeros((3, 1), bool)
AT_1 = jnp.array([[False], [True], [False]])


def test_termination_does_not_bootstrap_and_stops_the_recursion():
    adv, targets = truncated_gae(
        REWARDS, VALUES, NEXT_VALUES, AT_1, NO, gamma=GAMMA, gae_lambda=LAMBDA
    )
    # delta0 = 1 + .9 * 1 - .5 = 1.4; delta1 = 2 - 1 = 1 (no bootstrap); delta2 = 3 + 1.8 - 1.5
    # A2 = 3.3; A1 = 1.0 (the next step belongs to a new episode); A0 = 1.4 + .45 * 1.0
    np.testing.assert_allclose(adv[:, 0], [1.85, 1.0, 3.3], rtol=1e-6)
    np.testing.assert_allclose(targets[:, 0], [2.35, 2.0, 4.8], rtol=1e-6)


def test_truncation_bootstraps_from_the_true_final_observation():
    adv, _ = truncated_gae(REWARDS, VALUES, NEXT_VALUES, NO, AT_1, gamma=GAMMA, gae_lambda=LAMBDA)
    # delta1 = 2 + .9 * 4.0 - 1 = 4.6; A1 = 4.6 (no carry from the next episode); A0 = 1.4 + .45*4.6
    np.testing.assert_allclose(adv[:, 0], [3.47, 4.6, 3.3], rtol=1e-6)


def test_without_episode_ends_lambda_one_gives_discounted_return_minus_value():
    adv, targets = truncated_gae(
        REWARDS, VALUES, jnp.array([[1.0], [1.5], [2.0]]), NO, NO, gamma=GAMMA, gae_lambda=1.0
    )
    g2 = 3 + 0.9 * 2.0
    g1 = 2 + 0.9 * g2
    g0 = 1 + 0.9 * g1
    np.testing.assert_allclose(targets[:, 0], [g0, g1, g2], rtol=1e-6)
    np.testing.assert_allclose(adv[:, 0], np.array([g0, g1, g2]) - VALUES[:, 0], rtol=1e-6)


def test_environments_in_the_batch_are_independent():
    rewards = jnp.concatenate([REWARDS, 2 * REWARDS], axis=1)
    values = jnp.concatenate([VALUES, VALUES], axis=1)
    nxt = jnp.concatenate([NEXT_VALUES, NEXT_VALUES], axis=1)
    term = jnp.concatenate([AT_1, NO], axis=1)
    adv, _ = truncated_gae(
        rewards, values, nxt, term, jnp.zeros_like(term), gamma=GAMMA, gae_lambda=LAMBDA
    )
    single, _ = truncated_gae(
        REWARDS, VALUES, NEXT_VALUES, AT_1, NO, gamma=GAMMA, gae_lambda=LAMBDA
    )
    np.testing.assert_allclose(adv[:, :1], single, rtol=1e-6)
    # and the second, never terminated, is not cut by the first one's termination
    other, _ = truncated_gae(
        2 * REWARDS, VALUES, NEXT_VALUES, NO, NO, gamma=GAMMA, gae_lambda=LAMBDA
    )
    np.testing.assert_allclose(adv[:, 1:], other, rtol=1e-6)
    assert not np.allclose(other, single)
