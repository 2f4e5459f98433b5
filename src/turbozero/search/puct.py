"""PUCT rules: AlphaZero's `puct` and MuZero's `muzero_puct`."""

from __future__ import annotations

import numbers
from typing import Any

import jax.numpy as jnp

from turbozero.search.qtransform import normalize_by_parent_and_siblings
from turbozero.search.selector import (
    NodeView,
    Selector,
    dirichlet_mix,
    visit_policy,
    with_options,
)
from turbozero.types import Array
from turbozero.validate import check_number


def _check_noise(alpha: float, fraction: float) -> None:
    check_number("dirichlet_alpha", alpha, low=0.0, strict=True)
    if not (isinstance(fraction, numbers.Real) and 0.0 <= fraction <= 1.0):
        raise ValueError(f"dirichlet_fraction must be in [0, 1], got {fraction!r}")


def _prepare(alpha: float, fraction: float):
    def prepare(root: NodeView, key) -> Array:
        return dirichlet_mix(root.prior_probs, root.mask, key, alpha=alpha, fraction=fraction)

    return prepare


def _priors(view: NodeView, root_probs: Array, is_root: bool) -> Array:
    return root_probs if is_root else view.prior_probs


def puct(
    *,
    c_puct: float = 1.0,
    dirichlet_alpha: float = 0.3,
    dirichlet_fraction: float = 0.25,
    normalize_q: bool = False,
) -> Selector:
    """AlphaZero's rule: `Q + c_puct * P * sqrt(N) / (1 + N_a)`.

    Args:
        c_puct: exploration weight, > 0.
        dirichlet_alpha: concentration of the root noise, > 0.
        dirichlet_fraction: weight of the root noise in [0, 1] (0 = no noise).
        normalize_q: map Q to [0, 1] by the min and max over the node's value and its visited
            children (needed for returns outside [-1, 1], e.g. one-player scores). Without it an
            unvisited action's Q is 0.

    Returns:
        A `Selector`; its policy target is the root visit distribution.
    """
    check_number("c_puct", c_puct, low=0.0, strict=True)
    _check_noise(dirichlet_alpha, dirichlet_fraction)
    options: dict[str, Any] = dict(
        c_puct=c_puct,
        dirichlet_alpha=dirichlet_alpha,
        dirichlet_fraction=dirichlet_fraction,
        normalize_q=normalize_q,
    )

    def select(view: NodeView, root_probs: Array, is_root: bool) -> Array:
        priors = _priors(view, root_probs, is_root)
        q = normalize_by_parent_and_siblings(view) if normalize_q else view.child_q
        sqrt_n = jnp.sqrt(view.node_visits.astype(jnp.float32))[:, None]
        return q + c_puct * priors * sqrt_n / (1.0 + view.child_visits)

    return Selector(
        name="puct",
        prepare=_prepare(dirichlet_alpha, dirichlet_fraction),
        select=select,
        policy=lambda root, ctx: visit_policy(root),
        reusable=True,
        without_noise=lambda: puct(**with_options(options, dirichlet_fraction=0.0)),
        options=options,
    )


def muzero_puct(
    *,
    pb_c_init: float = 1.25,
    pb_c_base: float = 19652.0,
    dirichlet_alpha: float = 0.3,
    dirichlet_fraction: float = 0.25,
) -> Selector:
    """MuZero's rule with min-max normalised Q (the rule of `mctx.muzero_policy`).

    `score = Q_norm + P * sqrt(N) / (1 + N_a) * (pb_c_init + log((N + pb_c_base + 1) / pb_c_base))`
    where `Q_norm` maps the visited children's Q and the node's value to [0, 1] and unvisited
    actions get 0, so unbounded single-player returns work.
    """
    check_number("pb_c_init", pb_c_init, low=0.0, strict=True)
    check_number("pb_c_base", pb_c_base, low=0.0, strict=True)
    _check_noise(dirichlet_alpha, dirichlet_fraction)
    options: dict[str, Any] = dict(
        pb_c_init=pb_c_init,
        pb_c_base=pb_c_base,
        dirichlet_alpha=dirichlet_alpha,
        dirichlet_fraction=dirichlet_fraction,
    )

    def select(view: NodeView, root_probs: Array, is_root: bool) -> Array:
        priors = _priors(view, root_probs, is_root)
        n = view.node_visits.astype(jnp.float32)[:, None]
        pb_c = pb_c_init + jnp.log((n + pb_c_base + 1.0) / pb_c_base)
        explore = jnp.sqrt(n) * pb_c * priors / (view.child_visits + 1.0)
        return normalize_by_parent_and_siblings(view) + explore

    return Selector(
        name="muzero_puct",
        prepare=_prepare(dirichlet_alpha, dirichlet_fraction),
        select=select,
        policy=lambda root, ctx: visit_policy(root),
        reusable=True,
        without_noise=lambda: muzero_puct(**with_options(options, dirichlet_fraction=0.0)),
        options=options,
    )
