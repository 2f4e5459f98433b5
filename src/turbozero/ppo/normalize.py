"""Running mean and variance (Welford / Chan et al. parallel merge) for observation normalisation.

`RunningStats` holds a count, a mean and the sum of squared deviations `m2`; two of them merge
exactly into the statistics of the union of their data:

    n = n_a + n_b,  delta = mean_b - mean_a
    mean = mean_a + delta * n_b / n
    m2 = m2_a + m2_b + delta**2 * n_a * n_b / n

`update` merges a batch into running statistics and, with `axis_name`, first combines the batches of
every member of a named axis (`vmap`/`shard_map` over devices) with `psum`, so each device ends with
the same statistics. Counts are float32 (exact up to 2**24 samples per merge, then approximately
weighted, which is harmless for normalisation).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import jax
import jax.numpy as jnp

from turbozero.types import Array


class RunningStats(NamedTuple):
    """Statistics of the observations seen so far.

    Attributes:
        count: `[]` float32 number of samples.
        mean: `[*S]` running mean.
        m2: `[*S]` sum of squared deviations from the mean.
    """

    count: Array  # type: ignore[assignment]  # shadows `tuple.count` (a NamedTuple field)
    mean: Array
    m2: Array

    @property
    def variance(self) -> Array:
        """`[*S]` population variance (one where no samples have been seen)."""
        count = jnp.reshape(
            self.count, jnp.shape(self.count) + (1,) * (self.m2.ndim - jnp.ndim(self.count))
        )
        return jnp.where(count > 0, self.m2 / jnp.maximum(count, 1.0), 1.0)


def init_stats(shape: Sequence[int]) -> RunningStats:
    """Empty statistics for samples of `shape`."""
    shape = tuple(shape)
    return RunningStats(
        jnp.float32(0.0), jnp.zeros(shape, jnp.float32), jnp.zeros(shape, jnp.float32)
    )


def batch_stats(batch: Array, *, sample_ndim: int) -> RunningStats:
    """Statistics of `batch [*batch_dims, *S]`, where `S` has `sample_ndim` dimensions."""
    batch = batch.astype(jnp.float32)
    axes = tuple(range(batch.ndim - sample_ndim))
    count = jnp.float32(_prod(batch.shape[: len(axes)]))
    mean = jnp.mean(batch, axis=axes)
    m2 = jnp.sum(jnp.square(batch - mean), axis=axes)
    return RunningStats(count, mean, m2)


def _prod(shape: Sequence[int]) -> int:
    out = 1
    for d in shape:
        out *= int(d)
    return out


def merge(a: RunningStats, b: RunningStats) -> RunningStats:
    """The statistics of the union of the data summarised by `a` and `b`."""
    count = a.count + b.count
    safe = jnp.maximum(count, 1.0)
    delta = b.mean - a.mean
    mean = a.mean + delta * (b.count / safe)
    m2 = a.m2 + b.m2 + jnp.square(delta) * (a.count * b.count / safe)
    return RunningStats(count, mean, m2)


def all_reduce(stats: RunningStats, axis_name: str | Sequence[str]) -> RunningStats:
    """Merge the statistics held by every member of the named axis (or axes)."""
    count = jax.lax.psum(stats.count, axis_name)
    safe = jnp.maximum(count, 1.0)
    mean = jax.lax.psum(stats.count * stats.mean, axis_name) / safe
    m2 = jax.lax.psum(stats.m2 + stats.count * jnp.square(stats.mean - mean), axis_name)
    return RunningStats(count, mean, m2)


def update(
    stats: RunningStats, batch: Array, *, axis_name: str | Sequence[str] | None = None
) -> RunningStats:
    """Merge `batch [*batch_dims, *S]` (from every member of `axis_name`, if given) into `stats`."""
    new = batch_stats(batch, sample_ndim=stats.mean.ndim)
    if axis_name is not None:
        new = all_reduce(new, axis_name)
    return merge(stats, new)


def normalize(stats: RunningStats, x: Array, *, clip: float = 10.0, eps: float = 1e-8) -> Array:
    """`(x - mean) / sqrt(var + eps)`, clipped to `[-clip, clip]`; `x` is `[..., *S]`."""
    z = (x.astype(jnp.float32) - stats.mean) / jnp.sqrt(stats.variance + eps)
    return jnp.clip(z, -clip, clip)
