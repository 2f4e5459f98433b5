"""Normalisations of the action values seen at a node.

Both follow the definitions of the MuZero and Gumbel MuZero papers (as mctx does), so our search
and mctx can be compared action for action. Only visited children enter the normalisation; one
difference from mctx is noted at `completed_q`.
"""

from __future__ import annotations

import jax.numpy as jnp

from turbozero.search.selector import NodeView
from turbozero.types import Array

EPSILON = 1e-8


def normalize_by_parent_and_siblings(view: NodeView) -> Array:
    """`[B, A]` Q mapped to [0, 1] by the min and max over the node's value and visited children.

    Unvisited actions get 0 (the minimum). Unbounded returns (one-player games) work because
    only the values seen at this node set the scale.
    """
    visited = view.child_visits > 0
    node_value = view.node_value[:, None]
    safe_q = jnp.where(visited, view.child_q, node_value)
    low = jnp.minimum(view.node_value, jnp.min(safe_q, axis=-1))[:, None]
    high = jnp.maximum(view.node_value, jnp.max(safe_q, axis=-1))[:, None]
    completed = jnp.where(visited, view.child_q, low)
    return (completed - low) / jnp.maximum(high - low, EPSILON)


def mixed_value(view: NodeView) -> Array:
    """`[B]` the Gumbel MuZero mixed value: raw value blended with the prior-weighted visited Q."""
    visits = view.child_visits.astype(jnp.float32)
    visited = visits > 0
    total_visits = jnp.sum(visits, axis=-1)
    probs = jnp.maximum(view.prior_probs, jnp.finfo(jnp.float32).tiny)
    visited_prob = jnp.sum(jnp.where(visited, probs, 0.0), axis=-1, keepdims=True)
    weighted_q = jnp.sum(
        jnp.where(visited, probs * view.child_q / jnp.where(visited, visited_prob, 1.0), 0.0),
        axis=-1,
    )
    return (view.raw_value + total_visits * weighted_q) / (total_visits + 1.0)


def completed_q(
    view: NodeView, *, value_scale: float, maxvisit_init: float, rescale: bool = True
) -> Array:
    """`[B, A]` completed Q (unvisited actions take the mixed value), scaled as sigma(q).

    `sigma(q) = (maxvisit_init + max_visits) * value_scale * q`, with q min-max rescaled over
    the legal actions when `rescale`. mctx rescales over all actions, illegal ones holding the
    mixed value too; the two differ only at a node whose legal actions were all visited, with
    illegal actions, where the mixed value lies outside the legal Q range (an illegal action's
    value means nothing, so it does not set the scale here).
    """
    visited = view.child_visits > 0
    q = jnp.where(visited, view.child_q, mixed_value(view)[:, None])
    if rescale:
        low = jnp.min(jnp.where(view.mask, q, jnp.inf), axis=-1, keepdims=True)
        high = jnp.max(jnp.where(view.mask, q, -jnp.inf), axis=-1, keepdims=True)
        low = jnp.where(jnp.isfinite(low), low, 0.0)
        high = jnp.where(jnp.isfinite(high), high, 0.0)
        q = (q - low) / jnp.maximum(high - low, EPSILON)
    max_visits = jnp.max(view.child_visits, axis=-1, keepdims=True).astype(jnp.float32)
    return (maxvisit_init + max_visits) * value_scale * q
