"""What an action-selection rule sees and provides.

A `Selector` is a small container of pure functions; the search calls them on a batch of nodes
(one node per game) described by a `NodeView`. Letters: B games, A actions.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from turbozero.search import noise
from turbozero.types import Array, PRNGKey


class NodeView(NamedTuple):
    """Statistics of one node per game, from the point of view of the player to move there."""

    prior_logits: Array  # [B, A] network logits, illegal actions at NEG_LOGIT (see Selector)
    prior_probs: Array  # [B, A] softmax of the logits over legal actions (stored at expansion)
    mask: Array  # [B, A] bool legal actions
    child_visits: Array  # [B, A] int32
    child_q: Array  # [B, A] reward + discount * child value (0 where unvisited)
    node_visits: Array  # [B] int32
    node_value: Array  # [B] mean backed-up value of the node
    raw_value: Array  # [B] the network's value of the node


class Selector(NamedTuple):
    """An action-selection rule.

    Attributes:
        name: ``"puct"``, ``"muzero_puct"`` or ``"gumbel"``.
        prepare: `prepare(root: NodeView, keys) -> ctx`, once per search (root noise, Gumbels);
            `keys` one per game (`row_keys`).
        select: `select(view, ctx, is_root) -> scores [L, A]` (`is_root` a Python bool: the
            search scores the root once, outside its loop over depth, with `ctx`; interior nodes
            get `ctx=None`, and `view` may hold any `L` of the games); the search takes the
            argmax over legal actions (ties go to the lowest index). Interior scores must be
            finite for legal actions.
        policy: `policy(root: NodeView, ctx) -> (weights [B, A], greedy_action [B])`; the
            weights are the training target and sum to one over legal actions.
        reusable: whether subtree reuse between moves is sound for this rule.
        without_noise: the same rule with root exploration noise switched off.
        options: the keyword arguments it was built with.
        interior_logits: whether `select` reads `view.prior_logits` below the root (otherwise
            the search skips reading them and gives it the log of the stored probabilities).
    """

    name: str
    prepare: Callable[[NodeView, PRNGKey], Any]
    select: Callable[[NodeView, Any, bool], Array]
    policy: Callable[[NodeView, Any], tuple[Array, Array]]
    reusable: bool
    without_noise: Callable[[], Selector]
    options: dict[str, Any]
    interior_logits: bool = False


def row_keys(key: PRNGKey, rows: int) -> Array:
    """One key per row: `key` itself when it already holds `rows` keys (`[rows]` typed keys or
    `[rows, 2]` raw ones), else `jax.random.split(key, rows)`.

    The search draws every game's randomness from that game's own key, so a batch split over
    devices (each searching its games) draws what the whole batch would on one device.

    Raises:
        ValueError: a batch of keys whose leading axis is not `rows`.
    """
    key = jnp.asarray(key) if not isinstance(key, jax.Array) else key
    return jax.random.split(key, rows) if is_one_key(key, rows) else key


def is_one_key(key: Array, rows: int) -> bool:
    """Whether `key` is one PRNG key (else it is `rows` of them; any other shape is refused,
    from its shape alone, computing nothing).

    Raises:
        ValueError: a batch of keys whose leading axis is not `rows`.
    """
    typed = jax.dtypes.issubdtype(key.dtype, jax.dtypes.prng_key)
    if key.ndim == (0 if typed else 1):
        return True
    if key.ndim != (1 if typed else 2) or key.shape[0] != rows:
        raise ValueError(
            f"key must be one PRNG key or one per game ({rows}), got shape {tuple(key.shape)}"
        )
    return False


def with_options(options: dict[str, Any], **changes: Any) -> dict[str, Any]:
    """A copy of a selector's options with some changed (to rebuild it)."""
    return {**options, **changes}


def masked_softmax(logits: Array, mask: Array) -> Array:
    """Softmax of `logits` `[..., A]` over the True entries of `mask` `[..., A]`; illegal actions
    get exactly zero. The one softmax of the search, the agents and PPO's loaded agents: a row
    whose legal logits give no weight (all -inf, or NaN from a broken network) is uniform over
    its legal moves, and a row with no legal move is all zeros (never NaN)."""
    logits = jnp.where(mask, logits, -jnp.inf)
    logits = logits - jnp.max(jnp.where(mask, logits, -1e30), axis=-1, keepdims=True)
    probs = jnp.where(mask, jnp.exp(logits), 0.0)
    total = jnp.sum(probs, axis=-1, keepdims=True)
    uniform = mask / jnp.maximum(jnp.sum(mask, axis=-1, keepdims=True), 1)
    return jnp.where(total > 0, probs / jnp.maximum(total, 1e-30), uniform)


def first_argmax(x: Array) -> Array:
    """`jnp.argmax(x, axis=-1)` (first index on ties; 0 where a row holds NaN), as two plain
    reductions: XLA:CPU runs `argmax`'s paired (value, index) reduction without vectorising it,
    about twice as slow at 65 actions, and the search takes one per tree level."""
    n = x.shape[-1]
    top = jnp.max(x, axis=-1, keepdims=True)
    index = jnp.min(jnp.where(x == top, jnp.arange(n, dtype=jnp.int32), n), axis=-1)
    return jnp.where(index < n, index, 0).astype(jnp.int32)


def masked_argmax(scores: Array, mask: Array) -> Array:
    """Argmax over legal actions (first index on ties). NaN scores (a network gone wrong) count
    as the lowest; where no legal score is above -inf, the first legal action; action 0 only if
    nothing is legal. Never an illegal action while a legal one exists."""
    x = jnp.where(mask & ~jnp.isnan(scores), scores, -jnp.inf)
    found = jnp.max(x, axis=-1) > -jnp.inf
    return jnp.where(found, first_argmax(x), first_argmax(mask.astype(jnp.float32)))


def dirichlet_mix(
    probs: Array, mask: Array, key: PRNGKey, *, alpha: float, fraction: float
) -> Array:
    """`(1 - fraction) * probs + fraction * Dirichlet(alpha)` over legal actions, `[B, A]`; each
    row draws from its own key (`key`: one key, or one per row, see `row_keys`)."""
    if fraction == 0.0:
        return probs
    keys = row_keys(key, mask.shape[0])
    logs = jax.vmap(lambda k: noise.log_gamma(k, alpha, mask.shape[1:]))(keys)
    dirichlet = masked_softmax(logs, mask)
    return (1.0 - fraction) * probs + fraction * dirichlet


def visit_policy(root: NodeView) -> tuple[Array, Array]:
    """Visit-count distribution over legal children and its argmax.

    With no visited child (a terminal root, or a tree too small to expand) the weights fall back
    to the prior, so an illegal action is never chosen.
    """
    visits = jnp.where(root.mask, root.child_visits, 0).astype(jnp.float32)
    total = jnp.sum(visits, axis=-1, keepdims=True)
    weights = jnp.where(total > 0, visits / jnp.maximum(total, 1.0), root.prior_probs)
    return weights, most_visited(root)


def most_visited(root: NodeView) -> Array:
    """`[B]` the legal child with the most visits; among equals the one with the highest prior,
    then the first. (With the first index alone, a rollout search whose tried moves all lost
    once, each with one visit, played the lowest-numbered of them.)"""
    visits = jnp.where(root.mask, root.child_visits, -1)
    top = visits == jnp.max(visits, axis=-1, keepdims=True)
    return masked_argmax(root.prior_probs, root.mask & top)
