"""Running statistics: the parallel Welford merge reproduces the statistics of the whole batch."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from turbozero.ppo import normalize as rs

DATA = jax.random.normal(jax.random.PRNGKey(0), (3, 40, 5)) * 3.0 + 2.0


def test_merging_batches_equals_the_statistics_of_their_union():
    stats = rs.init_stats((5,))
    for part in (DATA[0], DATA[1, :7], DATA[1, 7:], DATA[2]):
        stats = rs.update(stats, part)
    flat = np.asarray(DATA).reshape(-1, 5)
    assert float(stats.count) == 120
    np.testing.assert_allclose(stats.mean, flat.mean(0), rtol=1e-5)
    np.testing.assert_allclose(stats.variance, flat.var(0), rtol=1e-4)


def test_update_over_a_named_axis_gives_every_member_the_global_statistics():
    stats = rs.init_stats((5,))
    merged = jax.vmap(
        lambda s, x: rs.update(s, x, axis_name="device"), in_axes=(None, 0), axis_name="device"
    )(stats, DATA)
    flat = np.asarray(DATA).reshape(-1, 5)
    for i in range(3):
        np.testing.assert_allclose(merged.mean[i], flat.mean(0), rtol=1e-5)
        np.testing.assert_allclose(merged.variance[i], flat.var(0), rtol=1e-4)


def test_normalize_gives_zero_mean_unit_variance_and_clips():
    stats = rs.update(rs.init_stats((5,)), DATA)
    z = rs.normalize(stats, DATA, clip=100.0)
    np.testing.assert_allclose(jnp.mean(z, axis=(0, 1)), 0.0, atol=1e-4)
    np.testing.assert_allclose(jnp.std(z, axis=(0, 1)), 1.0, rtol=1e-3)
    assert float(jnp.max(jnp.abs(rs.normalize(stats, DATA * 100, clip=2.0)))) <= 2.0


def test_empty_statistics_leave_observations_unchanged():
    z = rs.normalize(rs.init_stats((5,)), DATA[0], clip=1e6)
    np.testing.assert_allclose(z, DATA[0], rtol=1e-6)
