"""Gumbel MuZero's rule: Gumbel-Top-k and sequential halving at the root.

Root: `max_num_considered_actions` actions are drawn without replacement by Gumbel-Top-k on the
prior logits; sequential halving spreads the simulations over them, and each simulation goes to
the considered action with the target visit count of the highest `g + logits + sigma(Q)`.
Interior nodes: deterministic, the action whose improved-policy probability most exceeds its
share of the visits. The training target is `softmax(logits + sigma(completed Q))`.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from turbozero.search.qtransform import completed_q
from turbozero.search.selector import (
    NodeView,
    Selector,
    masked_argmax,
    masked_softmax,
    row_keys,
    with_options,
)
from turbozero.types import Array
from turbozero.validate import check_count, check_number


def considered_visit_sequence(num_considered: int, num_simulations: int) -> tuple[int, ...]:
    """Target visit count of the action chosen at each root simulation under sequential halving.

    Rounds give every remaining action the same number of extra visits (about
    `num_simulations / (log2(num_considered) * remaining)`), then keep the better half.
    """
    if num_considered <= 1:
        return tuple(range(num_simulations))
    rounds = math.ceil(math.log2(num_considered))
    out: list[int] = []
    visits = [0] * num_considered
    remaining = num_considered
    while len(out) < num_simulations:
        extra = max(1, int(num_simulations / (rounds * remaining)))
        for _ in range(extra):
            out.extend(visits[:remaining])
            for i in range(remaining):
                visits[i] += 1
        remaining = max(2, remaining // 2)
    return tuple(out[:num_simulations])


def considered_visit_table(max_considered: int, num_simulations: int) -> np.ndarray:
    """`[max_considered + 1, num_simulations]` int32: the sequence for each number considered."""
    return np.array(
        [considered_visit_sequence(m, num_simulations) for m in range(max_considered + 1)],
        dtype=np.int32,
    )


class GumbelContext(NamedTuple):
    gumbel: Array  # [B, A] Gumbel noise (scaled)
    table: Array  # [K + 1, S] considered-visit table


def gumbel(
    *,
    max_num_considered_actions: int = 16,
    gumbel_scale: float = 1.0,
    value_scale: float = 0.1,
    maxvisit_init: float = 50.0,
    num_simulations: int | None = None,
) -> Selector:
    """Gumbel MuZero's selection rule (the rule of `mctx.gumbel_muzero_policy`).

    Args:
        max_num_considered_actions: actions sampled at the root for sequential halving, >= 1.
        gumbel_scale: scale of the root Gumbel noise, >= 0 (0 = deterministic).
        value_scale, maxvisit_init: the sigma transform of completed Q.
        num_simulations: filled in by `make_search`.
    """
    max_num_considered_actions = check_count(
        "max_num_considered_actions", max_num_considered_actions, low=1
    )
    check_number("gumbel_scale", gumbel_scale, low=0.0)
    check_number("value_scale", value_scale, low=0.0, strict=True)
    check_number("maxvisit_init", maxvisit_init, low=0.0)
    options: dict[str, Any] = dict(
        max_num_considered_actions=max_num_considered_actions,
        gumbel_scale=gumbel_scale,
        value_scale=value_scale,
        maxvisit_init=maxvisit_init,
        num_simulations=num_simulations,
    )
    sims = num_simulations or 1
    table = considered_visit_table(max_num_considered_actions, sims)

    def sigma(view: NodeView) -> Array:
        return completed_q(view, value_scale=value_scale, maxvisit_init=maxvisit_init)

    def prepare(root: NodeView, key) -> GumbelContext:
        shape = root.prior_logits.shape
        keys = row_keys(key, shape[0])
        g = gumbel_scale * jax.vmap(lambda k: jax.random.gumbel(k, shape[1:]))(keys)
        return GumbelContext(gumbel=g, table=jnp.asarray(table))

    def root_scores(view: NodeView, ctx: GumbelContext, considered_visit: Array) -> Array:
        logits = view.prior_logits - jnp.max(view.prior_logits, axis=-1, keepdims=True)
        score = jnp.maximum(-1e9, ctx.gumbel + logits + sigma(view))
        penalty = jnp.where(view.child_visits == considered_visit[:, None], 0.0, -jnp.inf)
        return score + penalty

    def select(view: NodeView, ctx: GumbelContext, is_root: bool) -> Array:
        if not is_root:
            improved = masked_softmax(view.prior_logits + sigma(view), view.mask)
            total = jnp.sum(view.child_visits, axis=-1, keepdims=True)
            return improved - view.child_visits / (1.0 + total)
        # root: sequential halving
        num_legal = jnp.sum(view.mask, axis=-1)
        num_considered = jnp.minimum(max_num_considered_actions, num_legal)
        sim_index = jnp.minimum(jnp.sum(view.child_visits, axis=-1), sims - 1)
        considered_visit = ctx.table[num_considered, sim_index]
        return root_scores(view, ctx, considered_visit)

    def policy(root: NodeView, ctx: GumbelContext) -> tuple[Array, Array]:
        weights = masked_softmax(root.prior_logits + sigma(root), root.mask)
        considered_visit = jnp.max(jnp.where(root.mask, root.child_visits, 0), axis=-1)
        action = masked_argmax(root_scores(root, ctx, considered_visit), root.mask)
        return weights, action

    return Selector(
        name="gumbel",
        prepare=prepare,
        select=select,
        policy=policy,
        reusable=False,
        without_noise=lambda: gumbel(**with_options(options, gumbel_scale=0.0)),
        options=options,
        interior_logits=True,
    )
