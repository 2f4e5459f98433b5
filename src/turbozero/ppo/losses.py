"""PPO's losses on a minibatch (arrays are `[M]`, one entry per transition).

ratio = exp(log_prob - old_log_prob)
clipped surrogate:  L = -mean(min(ratio * A, clip(ratio, 1 - eps, 1 + eps) * A))
KL penalty:         L = -mean(ratio * A) + beta * mean(KL(old || new))
DPO:                L = -mean(ratio * A - drift(ratio, A))   (Discovered Policy Optimisation)
clipped value:      L = 0.5 * mean(max((v - G)^2, (v_old + clip(v - v_old, -eps, eps) - G)^2))
entropy bonus:      -coef * mean(entropy), added to the actor's loss by the learner
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from turbozero.types import Array


def ppo_clip_loss(
    log_prob: Array, old_log_prob: Array, advantages: Array, *, clip_eps: float | Array
) -> tuple[Array, dict[str, Array]]:
    """Clipped surrogate policy loss.

    Args:
        log_prob: `[M]` log-probability of the taken actions under the current policy.
        old_log_prob: `[M]` the same under the policy that acted.
        advantages: `[M]` advantage estimates.
        clip_eps: clipping radius of the probability ratio (> 0).

    Returns:
        `(loss [], info)` with `clip_fraction` (share of ratios outside the radius) and
        `approx_kl` (the `(ratio - 1) - log ratio` estimator of KL(old || new)).
    """
    log_ratio = log_prob - old_log_prob
    ratio = jnp.exp(log_ratio)
    unclipped = ratio * advantages
    clipped = jnp.clip(ratio, 1.0 - clip_eps, 1.0 + clip_eps) * advantages
    loss = -jnp.mean(jnp.minimum(unclipped, clipped))
    info = {
        "clip_fraction": jnp.mean((jnp.abs(ratio - 1.0) > clip_eps).astype(jnp.float32)),
        "approx_kl": jnp.mean((ratio - 1.0) - log_ratio),
    }
    return loss, info


def ppo_kl_penalty_loss(
    log_prob: Array, old_log_prob: Array, advantages: Array, kl: Array, *, kl_coef: float | Array
) -> tuple[Array, dict[str, Array]]:
    """Surrogate with a KL penalty instead of clipping.

    Args:
        log_prob, old_log_prob, advantages: as in `ppo_clip_loss`.
        kl: `[M]` KL(old policy || current policy) at each observation.
        kl_coef: penalty weight `beta` (>= 0).

    Returns:
        `(loss [], info)` with `kl` (mean KL) and `approx_kl`.
    """
    log_ratio = log_prob - old_log_prob
    ratio = jnp.exp(log_ratio)
    mean_kl = jnp.mean(kl)
    loss = -jnp.mean(ratio * advantages) + kl_coef * mean_kl
    return loss, {"kl": mean_kl, "approx_kl": jnp.mean((ratio - 1.0) - log_ratio)}


def dpo_drift(
    ratio: Array, advantages: Array, *, alpha: float | Array, beta: float | Array
) -> Array:
    """The drift of Discovered Policy Optimisation (Lu et al. 2022, "Discovered Policy
    Optimisation", NeurIPS), a penalty >= 0 on moving the policy, `[M]`:

        A >= 0:  relu((r - 1) A - alpha tanh((r - 1) A / alpha))
        A <  0:  relu(log(r) A - beta tanh(log(r) A / beta))

    It is zero where the move lowers the surrogate (`(r - 1) A <= 0`), flat at `r = 1` (so the
    first gradient step is the plain policy gradient), and grows like `|x| - scale` once
    `x = (r - 1) A` (or `log(r) A`) is well past `scale`: the surrogate's gain levels off
    instead of being cut as by clipping.

    Args:
        ratio: `[M]` probability ratios `r` (> 0).
        advantages: `[M]` advantages `A`.
        alpha, beta: the drift's scales for positive and negative advantages (> 0).
    """
    positive = (ratio - 1.0) * advantages
    negative = jnp.log(ratio) * advantages
    drift_pos = jax.nn.relu(positive - alpha * jnp.tanh(positive / alpha))
    drift_neg = jax.nn.relu(negative - beta * jnp.tanh(negative / beta))
    return jnp.where(advantages >= 0.0, drift_pos, drift_neg)


def dpo_loss(
    log_prob: Array,
    old_log_prob: Array,
    advantages: Array,
    *,
    alpha: float | Array,
    beta: float | Array,
) -> tuple[Array, dict[str, Array]]:
    """Discovered Policy Optimisation's policy loss, `-mean(ratio * A - drift)` (see
    `dpo_drift`).

    Args:
        log_prob, old_log_prob, advantages: as in `ppo_clip_loss`.
        alpha, beta: the drift's scales for positive and negative advantages (> 0; the paper's
            2 and 0.6).

    Returns:
        `(loss [], info)` with `drift` (its mean), `drift_fraction` (share of transitions with
        a positive drift) and `approx_kl`.
    """
    log_ratio = log_prob - old_log_prob
    ratio = jnp.exp(log_ratio)
    drift = dpo_drift(ratio, advantages, alpha=alpha, beta=beta)
    loss = -jnp.mean(ratio * advantages - drift)
    info = {
        "drift": jnp.mean(drift),
        "drift_fraction": jnp.mean((drift > 0.0).astype(jnp.float32)),
        "approx_kl": jnp.mean((ratio - 1.0) - log_ratio),
    }
    return loss, info


def clipped_value_loss(
    values: Array, old_values: Array, targets: Array, *, clip_eps: float | Array | None
) -> Array:
    """Half mean squared error to `targets [M]`, pessimistic over the clipped prediction.

    Args:
        values: `[M]` current predictions.
        old_values: `[M]` predictions of the critic that acted.
        targets: `[M]` value targets.
        clip_eps: radius around `old_values`; None or 0 gives the plain half squared error.
    """
    loss = jnp.square(values - targets)
    if clip_eps is None or (isinstance(clip_eps, int | float) and not clip_eps):
        return 0.5 * jnp.mean(loss)
    clipped = old_values + jnp.clip(values - old_values, -clip_eps, clip_eps)
    # (a traced `clip_eps`, one per member of a grid, may be 0 too)
    loss = jnp.where(clip_eps > 0, jnp.maximum(loss, jnp.square(clipped - targets)), loss)
    return 0.5 * jnp.mean(loss)


def entropy_bonus(entropy: Array, *, coef: float | Array) -> Array:
    """The loss term `-coef * mean(entropy [M])` that rewards exploration."""
    return -coef * jnp.mean(entropy)
