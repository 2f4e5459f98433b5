"""AlphaZero's loss: policy cross-entropy to the search target, value loss, L2.

Letters: S sampled positions, A actions, K value bins.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp

from turbozero.types import Array, Params


def two_hot(values: Array, support: Array) -> Array:
    """`[S, K]` two-hot encoding of `values [S]` on the sorted bin centres `support [K]`."""
    v = jnp.clip(values, support[0], support[-1])
    hi = jnp.clip(jnp.searchsorted(support, v, side="left"), 1, support.shape[0] - 1)
    lo = hi - 1
    w_hi = (v - support[lo]) / (support[hi] - support[lo])
    out = jax.nn.one_hot(lo, support.shape[0]) * (1.0 - w_hi)[:, None]
    return out + jax.nn.one_hot(hi, support.shape[0]) * w_hi[:, None]


def masked_log_softmax(logits: Array, mask: Array) -> Array:
    """Log-probabilities over legal actions; illegal entries are 0 and carry no gradient."""
    masked = jnp.where(mask, logits, -1e9)
    return jnp.where(mask, jax.nn.log_softmax(masked, axis=-1), 0.0)


def az_loss(
    params: Params,
    batch: dict[str, Array],
    *,
    apply_fn: Callable[..., Any],
    policy_weight: float = 1.0,
    value_weight: float = 1.0,
    l2: float = 1e-4,
    value_support: Array | None = None,
    value_scale: float = 1.0,
) -> tuple[Array, tuple[dict[str, Array], Any]]:
    """The loss on one batch of positions.

    Args:
        params: network variables (`{"params": ..., "batch_stats": ...}` for batch norm).
        batch: `observation [S, ...]`, `policy [S, A]` search target (all zero: no policy
            target for that row, which then trains the value alone), `mask [S, A]` legal actions,
            `outcome [S]` value target for the player to move, `valid [S]` which rows count.
        apply_fn: `apply_fn(variables, x, train=True, mutable=[...])` (flax `module.apply`).
        policy_weight, value_weight, l2: weights of the three terms.
        value_support: bin centres `[K]` for a categorical value loss; None for MSE.
        value_scale: targets are divided by it (unbounded one-player scores).

    Returns:
        `(loss, (metrics, new_batch_stats_or_None))`.

    With batch norm, the network normalises over every row of the batch, valid or not (a flax
    module is called here without a row mask): the invalid rows then move the valid rows'
    normalisation and the returned statistics. Pass batches that are all valid, as the
    trainer does (the episode memory's samples are all valid or all invalid, and the trainer
    skips the step on an invalid one).
    """
    has_bn = isinstance(params, dict) and "batch_stats" in params
    if has_bn:
        (logits, value), updates = apply_fn(
            params, batch["observation"], train=True, mutable=["batch_stats"]
        )
        new_stats = updates["batch_stats"]
    else:
        logits, value = apply_fn(params, batch["observation"], train=True)
        new_stats = None
    valid = batch["valid"].astype(jnp.float32)
    count = jnp.maximum(jnp.sum(valid), 1.0)
    logp = masked_log_softmax(logits, batch["mask"])
    # rows without a policy target (all zero: playout cap randomisation's cheap searches)
    # train the value alone and do not dilute the policy term
    targeted = valid * (jnp.sum(batch["policy"], axis=-1) > 0)
    policy_rows = jnp.maximum(jnp.sum(targeted), 1.0)
    policy_loss = jnp.sum(-jnp.sum(batch["policy"] * logp, axis=-1) * targeted) / policy_rows
    target = batch["outcome"] / value_scale
    if value_support is None:
        value_loss = jnp.sum(jnp.square(value - target) * valid) / count
        prediction = value
    else:
        dist = two_hot(target, value_support)
        value_loss = jnp.sum(-jnp.sum(dist * jax.nn.log_softmax(value), axis=-1) * valid) / count
        prediction = jnp.sum(jax.nn.softmax(value) * value_support, axis=-1)
    trainable = params["params"] if isinstance(params, dict) and "params" in params else params
    l2_loss = sum(
        (jnp.sum(jnp.square(w)) for w in jax.tree_util.tree_leaves(trainable)), jnp.float32(0)
    )
    loss = policy_weight * policy_loss + value_weight * value_loss + l2 * l2_loss
    target_entropy = -jnp.sum(batch["policy"] * jnp.log(jnp.maximum(batch["policy"], 1e-12)), -1)
    metrics = {
        "loss": loss,
        "policy_loss": policy_loss,
        "value_loss": value_loss,
        "l2_loss": l2_loss,
        "policy_kl": policy_loss - jnp.sum(target_entropy * targeted) / policy_rows,
        "value_mae": jnp.sum(jnp.abs(prediction - target) * valid) / count,
    }
    return loss, (metrics, new_stats)
