"""Forced playouts and policy-target pruning (KataGo, Wu 2019, section 3.1), for the PUCT rules.

With root noise a move the network dislikes may still be good, but at a small budget PUCT gives
it too few visits to find out. Forced playouts give every root child `c` at least
`sqrt(k * P(c) * N)` visits (`P` the noised prior, `N` the root's visits). Those visits say
nothing about how good the move is, so the training target removes them again: every child but
the most visited one loses up to its forced visits, as long as its PUCT score stays at or below
the most visited child's, and a child left with one visit is dropped. Letters: B games, A actions.
"""

from __future__ import annotations

from collections.abc import Callable

import jax.numpy as jnp

from turbozero.search.selector import NodeView, most_visited
from turbozero.types import Array

#: added to a forced child's score at the root: above any PUCT score of a bounded value
FORCED_BONUS = 1.0e4

#: `explore(view, priors [B, A]) -> [B, A]`: the PUCT exploration term's numerator, the part
#: that is divided by `1 + child visits`
Explore = Callable[[NodeView, Array], Array]


def forced_visits(view: NodeView, priors: Array, k: float) -> Array:
    """`[B, A]` the visits each root child is owed: `sqrt(k * P * N)`."""
    n = view.node_visits.astype(jnp.float32)[:, None]
    return jnp.sqrt(k * priors * n)


def force_playouts(scores: Array, view: NodeView, priors: Array, k: float) -> Array:
    """`[B, A]` root scores where a legal child with fewer visits than it is owed comes first
    (among several, the best by its own score)."""
    owed = (view.child_visits < forced_visits(view, priors, k)) & (priors > 0) & view.mask
    return jnp.where(owed, scores + FORCED_BONUS, scores)


def pruned_visit_policy(
    root: NodeView, priors: Array, q: Array, explore: Explore, k: float
) -> tuple[Array, Array]:
    """The visit distribution with the forced visits pruned, and its argmax.

    Args:
        root: the root's statistics.
        priors: `[B, A]` the priors the search used at the root (noise included).
        q: `[B, A]` the values the rule's root score adds the exploration term to.
        explore: the rule's exploration numerator (`Explore`).
        k: the forced-playout constant the search used.

    Returns:
        `(weights [B, A], greedy [B])`: weights over legal actions summing to one (the prior
        where no child was visited), and the most visited child.
    """
    visits = jnp.where(root.mask, root.child_visits, 0).astype(jnp.float32)
    best = most_visited(root)
    is_best = jnp.arange(visits.shape[-1])[None, :] == best[:, None]
    numerator = explore(root, priors)
    score = q + numerator / (1.0 + visits)
    best_score = jnp.take_along_axis(score, best[:, None], axis=-1)
    # fewest visits n' with q + numerator / (1 + n') <= best_score (none where q >= best_score)
    gap = best_score - q
    needed = jnp.where(gap > 0, jnp.ceil(numerator / jnp.maximum(gap, 1e-12) - 1.0), visits)
    floor = jnp.maximum(visits - jnp.floor(forced_visits(root, priors, k)), 0.0)
    pruned = jnp.clip(jnp.maximum(floor, needed), 0.0, visits)
    pruned = jnp.where(is_best, visits, jnp.where(pruned <= 1.0, 0.0, pruned))
    total = jnp.sum(pruned, axis=-1, keepdims=True)
    weights = jnp.where(total > 0, pruned / jnp.maximum(total, 1.0), root.prior_probs)
    return weights, best
