"""The action distributions of PPO's heads: small named tuples of arrays with pure methods.

Letters: `A` discrete actions, `D` continuous action dimension, `K` components of a multi-discrete
action, `C` the largest component's size; `...` is the batch.

Each distribution is over the *raw* actions its head samples, stores and scores; the learner turns
a raw action into the environment's with `squash_to_bounds`, `scale_to_bounds` or
`ravel_components`:

    head            raw action                       environment action
    categorical     index [...]                       the same
    gaussian        unclipped sample [..., D]         clipped to the bounds by the learner
    tanh_gaussian   pre-squash u [..., D]             low + (high - low) * (tanh(u) + 1) / 2
    beta            x in (0, 1) [..., D]              low + (high - low) * x
    multi_discrete  components [..., K]               their row-major flat index

`log_prob` is the log-density (or log-probability) of the environment action, Jacobians included,
so the bounded heads' densities are over the box `[low, high]`. Every distribution has
`sample(key)`, `sample_with(noise)` (its randomness drawn ahead, see each class), `mode()`,
`log_prob(raw)`, `entropy()` and `kl(other)` (KL(self || other), same class); `mask_policy`
restricts one to the legal actions and `per_sample` batches its fields like its samples.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax.scipy.special import betaln, digamma

from turbozero.types import Array, PRNGKey

MASKED_LOGIT = -1e9  # the logit of a choice that is never taken
BETA_EPS = 1e-6  # Beta samples are kept in [eps, 1 - eps]: their log-density stays finite
LOG_2PI = math.log(2 * math.pi)


class Categorical(NamedTuple):
    """A batch of categorical distributions over `A` actions.

    Attributes:
        logits: `[..., A]` unnormalised log-probabilities.
    """

    logits: Array

    def sample(self, key: PRNGKey) -> Array:
        """`[...]` int32 actions; `key` is consumed."""
        return jax.random.categorical(key, self.logits).astype(jnp.int32)

    def sample_with(self, noise: Array) -> Array:
        """`[...]` int32 actions from standard Gumbel `noise [..., A]` (the Gumbel-max trick;
        `sample(key)` is `sample_with(jax.random.gumbel(key, logits.shape))`)."""
        return jnp.argmax(self.logits + noise, axis=-1).astype(jnp.int32)

    def mode(self) -> Array:
        return jnp.argmax(self.logits, axis=-1).astype(jnp.int32)

    def log_prob(self, action: Array) -> Array:
        logp = jax.nn.log_softmax(self.logits)
        return jnp.take_along_axis(logp, action[..., None].astype(jnp.int32), axis=-1)[..., 0]

    def entropy(self) -> Array:
        logp = jax.nn.log_softmax(self.logits)
        return -jnp.sum(jnp.exp(logp) * logp, axis=-1)

    def kl(self, other: Categorical) -> Array:
        """KL(self || other), `[...]`."""
        logp = jax.nn.log_softmax(self.logits)
        logq = jax.nn.log_softmax(other.logits)
        return jnp.sum(jnp.exp(logp) * (logp - logq), axis=-1)


class DiagGaussian(NamedTuple):
    """A batch of Gaussians with diagonal covariance over `D`-dimensional actions.

    Attributes:
        mean: `[..., D]`.
        log_std: `[..., D]` (or broadcastable to it).
    """

    mean: Array
    log_std: Array

    def sample(self, key: PRNGKey) -> Array:
        """`[..., D]` float32 actions; `key` is consumed."""
        noise = jax.random.normal(key, self.mean.shape, self.mean.dtype)
        return self.mean + jnp.exp(self.log_std) * noise

    def sample_with(self, noise: Array) -> Array:
        """`[..., D]` float32 actions from standard normal `noise [..., D]`."""
        return self.mean + jnp.exp(self.log_std) * noise

    def mode(self) -> Array:
        return self.mean

    def log_prob(self, action: Array) -> Array:
        log_std = jnp.broadcast_to(self.log_std, self.mean.shape)
        z = (action - self.mean) * jnp.exp(-log_std)
        return jnp.sum(-0.5 * z**2 - log_std - 0.5 * LOG_2PI, axis=-1)

    def entropy(self) -> Array:
        log_std = jnp.broadcast_to(self.log_std, self.mean.shape)
        return jnp.sum(log_std + 0.5 * (1.0 + LOG_2PI), axis=-1)

    def kl(self, other: DiagGaussian) -> Array:
        """KL(self || other), `[...]`."""
        ls_p = jnp.broadcast_to(self.log_std, self.mean.shape)
        ls_q = jnp.broadcast_to(other.log_std, other.mean.shape)
        var_ratio = jnp.exp(2 * (ls_p - ls_q))
        diff = (self.mean - other.mean) * jnp.exp(-ls_q)
        return jnp.sum(0.5 * (var_ratio + diff**2 - 1.0) - (ls_p - ls_q), axis=-1)


def squash_to_bounds(u: Array, low: Array, high: Array) -> Array:
    """`low + (high - low) * (tanh(u) + 1) / 2`, elementwise."""
    return low + 0.5 * (high - low) * (jnp.tanh(u) + 1.0)


def log_tanh_derivative(u: Array) -> Array:
    """`log(1 - tanh(u)^2)` in the stable form `2 * (log 2 - u - softplus(-2u))`."""
    return 2.0 * (math.log(2.0) - u - jax.nn.softplus(-2.0 * u))


class TanhGaussian(NamedTuple):
    """A diagonal Gaussian over pre-squash values `u`, squashed by tanh into the box
    `[low, high]`: the action is `squash_to_bounds(u, low, high)`.

    Raw actions are the pre-squash `u [..., D]` (kept so that log-probabilities never invert a
    saturated tanh). `log_prob(u)` is the density of the bounded action, by the change of
    variables: `log N(u; mean, std) - sum(log((high - low) / 2) + log(1 - tanh(u)^2))`.

    The bounded action's entropy has no closed form; `entropy(noise)` estimates it with one
    sample (see there).

    Attributes:
        mean: `[..., D]` mean of `u`.
        log_std: `[..., D]` (or broadcastable) log standard deviation of `u`.
        low, high: `[..., D]` (or broadcastable) finite bounds of the action, `low < high`.
    """

    mean: Array
    log_std: Array
    low: Array
    high: Array

    @property
    def gaussian(self) -> DiagGaussian:
        """The distribution of the pre-squash `u`."""
        return DiagGaussian(self.mean, self.log_std)

    def sample(self, key: PRNGKey) -> Array:
        """`[..., D]` pre-squash values; `key` is consumed."""
        return self.gaussian.sample(key)

    def sample_with(self, noise: Array) -> Array:
        """`[..., D]` pre-squash values from standard normal `noise [..., D]`."""
        return self.gaussian.sample_with(noise)

    def mode(self) -> Array:
        """The Gaussian's mean (squashed, it is the usual greedy action; the bounded density's
        own mode can differ when the spread is large)."""
        return self.mean

    def action(self, u: Array) -> Array:
        """The bounded action `[..., D]` of pre-squash `u`."""
        return squash_to_bounds(u, self.low, self.high)

    def log_det_jacobian(self, u: Array) -> Array:
        """`[...]` log |d action / d u| at `u [..., D]`, summed over `D`."""
        log_half_range = jnp.log(0.5 * (self.high - self.low))
        return jnp.sum(jnp.broadcast_to(log_half_range, u.shape) + log_tanh_derivative(u), -1)

    def log_prob(self, u: Array) -> Array:
        """`[...]` log-density of the bounded action `action(u)`."""
        return self.gaussian.log_prob(u) - self.log_det_jacobian(u)

    def entropy(self, noise: Array | None = None) -> Array:
        """`[...]` one-sample estimate of the bounded action's entropy.

        `H(action) = H(u) + E[log |d action / d u|]`: the pre-squash Gaussian's entropy (exact)
        plus the log-determinant at the reparameterised sample `u = mean + std * noise` of
        standard normal `noise [..., D]`, whose expectation over the noise is exact (and whose
        gradient flows through `u`). Without `noise`, at `u = mean`: a deterministic point
        estimate (biased upwards, by Jensen's inequality).
        """
        u = self.mean if noise is None else self.sample_with(noise)
        return self.gaussian.entropy() + self.log_det_jacobian(u)

    def kl(self, other: TanhGaussian) -> Array:
        """KL(self || other), `[...]`: the pre-squash Gaussians' (an invertible map, the same
        on both sides, leaves KL unchanged)."""
        return self.gaussian.kl(other.gaussian)


def scale_to_bounds(x: Array, low: Array, high: Array) -> Array:
    """`low + (high - low) * x`, elementwise."""
    return low + (high - low) * x


class ScaledBeta(NamedTuple):
    """Independent Beta distributions over `x in (0, 1)`, scaled to the box `[low, high]`: the
    action is `scale_to_bounds(x, low, high)`.

    Raw actions are `x [..., D]` (samples kept in `[BETA_EPS, 1 - BETA_EPS]`). `log_prob(x)` is
    the density of the scaled action: `sum(log Beta(x; alpha, beta) - log(high - low))`. The
    heads make `alpha, beta >= 1` (unimodal, finite density at the bounds).

    Attributes:
        alpha, beta: `[..., D]` concentrations (> 0).
        low, high: `[..., D]` (or broadcastable) finite bounds of the action, `low < high`.
    """

    alpha: Array
    beta: Array
    low: Array
    high: Array

    def sample(self, key: PRNGKey) -> Array:
        """`[..., D]` values in `[BETA_EPS, 1 - BETA_EPS]`; `key` is consumed."""
        x = jax.random.beta(key, self.alpha, self.beta, self.alpha.shape, self.alpha.dtype)
        return jnp.clip(x, BETA_EPS, 1.0 - BETA_EPS)

    def sample_with(self, noise: Array) -> Array:
        """`sample(noise)`: Beta draws need their parameters (gamma variates by rejection), so
        the randomness drawn ahead is a PRNG key."""
        return self.sample(noise)

    def mode(self) -> Array:
        """`(alpha - 1) / (alpha + beta - 2)`, the centre 0.5 where both are 1 (uniform)."""
        a1, b1 = self.alpha - 1.0, self.beta - 1.0
        total = a1 + b1
        safe = total > 1e-12
        return jnp.clip(
            jnp.where(safe, a1 / jnp.where(safe, total, 1.0), 0.5), BETA_EPS, 1.0 - BETA_EPS
        )

    def action(self, x: Array) -> Array:
        """The bounded action `[..., D]` of `x`."""
        return scale_to_bounds(x, self.low, self.high)

    def _log_range(self) -> Array:
        return jnp.broadcast_to(jnp.log(self.high - self.low), self.alpha.shape)

    def log_prob(self, x: Array) -> Array:
        """`[...]` log-density of the scaled action `action(x)`."""
        a, b = self.alpha, self.beta
        logp = (a - 1.0) * jnp.log(x) + (b - 1.0) * jnp.log1p(-x) - betaln(a, b)
        return jnp.sum(logp - self._log_range(), axis=-1)

    def entropy(self) -> Array:
        """`[...]` differential entropy of the scaled action (closed form)."""
        a, b = self.alpha, self.beta
        h = (
            betaln(a, b)
            - (a - 1.0) * digamma(a)
            - (b - 1.0) * digamma(b)
            + (a + b - 2.0) * digamma(a + b)
        )
        return jnp.sum(h + self._log_range(), axis=-1)

    def kl(self, other: ScaledBeta) -> Array:
        """KL(self || other), `[...]` (closed form; the common scaling leaves it unchanged)."""
        a1, b1, a2, b2 = self.alpha, self.beta, other.alpha, other.beta
        kl = (
            betaln(a2, b2)
            - betaln(a1, b1)
            + (a1 - a2) * digamma(a1)
            + (b1 - b2) * digamma(b1)
            + (a2 - a1 + b2 - b1) * digamma(a1 + b1)
        )
        return jnp.sum(kl, axis=-1)


def ravel_components(components: Array, sizes: tuple[int, ...]) -> Array:
    """`[...]` int32 row-major flat index of `components [..., K]` with `sizes (n_1, ..., n_K)`
    (`jnp.ravel_multi_index` over the last axis)."""
    index = jnp.zeros(components.shape[:-1], jnp.int32)
    for k, n in enumerate(sizes):
        index = index * n + components[..., k].astype(jnp.int32)
    return index


def pad_component_logits(flat: Array, sizes: tuple[int, ...]) -> Array:
    """`[..., K, C]` logits from `flat [..., sum(sizes)]`, each component's padded to
    `C = max(sizes)` with `MASKED_LOGIT` (a choice that is never taken)."""
    width = max(sizes)
    offsets = [0, *itertools.accumulate(sizes)]
    rows = [
        jnp.pad(
            flat[..., offsets[k] : offsets[k] + n],
            [(0, 0)] * (flat.ndim - 1) + [(0, width - n)],
            constant_values=MASKED_LOGIT,
        )
        for k, n in enumerate(sizes)
    ]
    return jnp.stack(rows, axis=-2)


class MultiCategorical(NamedTuple):
    """One categorical distribution per component of a multi-discrete action, drawn in order.

    Raw actions are the components `[..., K]` int32; the learner steps the environment with
    their row-major flat index (`ravel_components`). Without a mask the components are
    independent. With the legal joint actions `mask [..., n_1, ..., n_K]`, each component's
    choices are masked given the ones before it: the first to the choices that some legal action
    has, the next to those that a legal action has with the first's choice, and so on, so every
    sample and the mode are legal actions. The log-probability is the sum of the components'
    (masked) log-probabilities; entropy and KL, which then depend on the earlier choices, are
    sums over the components given those of an `action` (a one-sample estimate of the joint's
    when the action is a sample; exact without a mask).

    Attributes:
        logits: `[..., K, C]`; a component with fewer than `C` choices has its padding at a
            logit of -1e9 (never sampled, zero probability).
        mask: None, or `[..., n_1, ..., n_K]` bool, the legal joint actions.
    """

    logits: Array
    mask: Array | None = None

    def _given(self, choose: Callable[[int, Array], Array]) -> tuple[Array, Array]:
        """Walk the components in order: `choose(k, masked_logits [..., C]) -> [...]` picks
        component k; returns the masked logits `[..., K, C]` and the choices `[..., K]`."""
        batch = self.logits.shape[:-2]
        num, width = self.logits.shape[-2:]
        legal = self.mask  # [..., n_k, ..., n_K]: the actions legal with the choices so far
        rows, picks = [], []
        for k in range(num):
            logits = self.logits[..., k, :]
            if legal is not None:
                others = tuple(range(len(batch) + 1, legal.ndim))
                ok = jnp.any(legal, axis=others) if others else legal  # [..., n_k]
                ok = jnp.pad(ok, [(0, 0)] * len(batch) + [(0, width - ok.shape[-1])])
                logits = jnp.where(ok, logits, MASKED_LOGIT)
            pick = choose(k, logits).astype(jnp.int32)
            if legal is not None:
                index = jnp.reshape(pick, batch + (1,) * (legal.ndim - len(batch)))
                legal = jnp.squeeze(
                    jnp.take_along_axis(legal, index, axis=len(batch)), axis=len(batch)
                )
            rows.append(logits)
            picks.append(pick)
        return jnp.stack(rows, axis=-2), jnp.stack(picks, axis=-1)

    def given(self, components: Array) -> Categorical:
        """The `K` component categoricals `[..., K]`, each masked given the earlier ones of
        `components [..., K]`."""
        if self.mask is None:
            return Categorical(self.logits)
        return Categorical(self._given(lambda k, _: components[..., k])[0])

    def sample(self, key: PRNGKey) -> Array:
        """`[..., K]` int32 components; `key` is consumed."""
        return self.sample_with(jax.random.gumbel(key, self.logits.shape, self.logits.dtype))

    def sample_with(self, noise: Array) -> Array:
        """`[..., K]` int32 components from standard Gumbel `noise [..., K, C]`."""
        return self._given(lambda k, logits: jnp.argmax(logits + noise[..., k, :], axis=-1))[1]

    def mode(self) -> Array:
        """`[..., K]` each component's most likely choice given the earlier ones."""
        return self._given(lambda k, logits: jnp.argmax(logits, axis=-1))[1]

    def log_prob(self, components: Array) -> Array:
        return jnp.sum(self.given(components).log_prob(components), axis=-1)

    def entropy(self, components: Array | None = None) -> Array:
        """`[...]` the sum of the components' entropies given the earlier ones of `components`
        (default: the mode)."""
        if self.mask is not None and components is None:
            components = self.mode()
        cats = Categorical(self.logits) if components is None else self.given(components)
        return jnp.sum(cats.entropy(), axis=-1)

    def kl(self, other: MultiCategorical, components: Array | None = None) -> Array:
        """KL(self || other), `[...]`: the sum over the components given the earlier ones of
        `components` (default: `self`'s mode), each side masked by its own mask."""
        if (self.mask is not None or other.mask is not None) and components is None:
            components = self.mode()
        if components is None:
            mine, theirs = Categorical(self.logits), Categorical(other.logits)
        else:
            mine, theirs = self.given(components), other.given(components)
        return jnp.sum(mine.kl(theirs), axis=-1)

    def joint_log_probs(self) -> Array:
        """`[..., A]` log-probability of every flat action (row-major over the components'
        sizes, which the mask gives; without a mask, every component has `C` choices)."""
        batch = self.logits.shape[:-2]
        num, width = self.logits.shape[-2:]
        sizes = (width,) * num if self.mask is None else self.mask.shape[len(batch) :]
        grid = jnp.stack(jnp.unravel_index(jnp.arange(math.prod(sizes)), sizes), axis=-1)

        def one(components: Array) -> Array:
            return self.log_prob(jnp.broadcast_to(components, (*batch, num)))

        return jax.vmap(one, out_axes=-1)(grid.astype(jnp.int32))


Distribution = Categorical | DiagGaussian | TanhGaussian | ScaledBeta | MultiCategorical


def mask_policy(dist: Distribution, mask: Array | None) -> Distribution:
    """`dist` restricted to the legal actions of `mask`: a categorical's `[..., A]` (illegal
    logits at `MASKED_LOGIT`), or a multi-discrete one's joint mask `[..., n_1, ..., n_K]`, which
    masks each component given the earlier ones; the continuous heads' unchanged."""
    if mask is None:
        return dist
    if isinstance(dist, Categorical):
        return Categorical(jnp.where(mask, dist.logits, MASKED_LOGIT))
    if isinstance(dist, MultiCategorical):
        return dist._replace(mask=mask)
    return dist


def per_sample(dist: Distribution) -> Distribution:
    """`dist` with every field batched like its samples (`[E, ...]`), so that it can be stacked
    over time, flattened and shuffled with the rest of a rollout. A Gaussian head's shared
    log standard deviation `[D]` and the bounded heads' bounds `[D]` are broadcast to `[E, D]`."""
    if isinstance(dist, DiagGaussian):
        return DiagGaussian(dist.mean, jnp.broadcast_to(dist.log_std, dist.mean.shape))
    if isinstance(dist, TanhGaussian):
        return TanhGaussian(
            *(jnp.broadcast_to(x, dist.mean.shape) for x in dist)  # type: ignore[arg-type]
        )
    if isinstance(dist, ScaledBeta):
        return ScaledBeta(
            *(jnp.broadcast_to(x, dist.alpha.shape) for x in dist)  # type: ignore[arg-type]
        )
    return dist
