"""PUCT rules: AlphaZero's `puct` and MuZero's `muzero_puct`."""

from __future__ import annotations

import numbers
from typing import Any

import jax.numpy as jnp

from turbozero.search.forced import force_playouts, pruned_visit_policy
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


def _check_forced(k: float) -> None:
    check_number("forced_playouts", k, low=0.0)


#: what an unvisited move's Q is taken to be (first-play urgency)
FIRST_PLAY_VALUES = ("zero", "node", "network")
#: the largest first-play reduction (Q spans [-1, 1])
FPU_REDUCTION_MAX = 2.0


def first_play_q(view: NodeView, fpu: str, reduction: float = 0.0) -> Array:
    """`[B, A]` the node's Q with each unvisited move valued by `fpu`, less `reduction`: "zero"
    a draw (the stored 0), "node" the node's backed-up mean value, "network" the network's value
    of the node (both from the point of view of the player to move there, as Leela Zero and
    KataGo value an unvisited move at the node's value less a reduction). A reduction makes the
    search look at fewer new moves and deeper at the ones it has seen."""
    if fpu == "zero" and not reduction:
        return view.child_q
    if fpu == "zero":
        unvisited = jnp.zeros_like(view.node_value)
    else:
        unvisited = view.node_value if fpu == "node" else view.raw_value
    unvisited = unvisited - reduction
    return jnp.where(view.child_visits > 0, view.child_q, unvisited[:, None])


def _policy(forced_playouts: float, q_fn, explore):
    """The rule's policy target: root visits, with the forced ones pruned when they were on."""
    if not forced_playouts:
        return lambda root, ctx: visit_policy(root)

    def policy(root: NodeView, root_probs: Array):
        return pruned_visit_policy(root, root_probs, q_fn(root), explore, forced_playouts)

    return policy


def puct(
    *,
    c_puct: float = 1.0,
    dirichlet_alpha: float = 0.3,
    dirichlet_fraction: float = 0.25,
    normalize_q: bool = False,
    forced_playouts: float = 0.0,
    fpu: str = "zero",
    fpu_reduction: float = 0.0,
) -> Selector:
    """AlphaZero's rule: `Q + c_puct * P * sqrt(N) / (1 + N_a)`.

    Args:
        c_puct: exploration weight, > 0.
        dirichlet_alpha: concentration of the root noise, > 0.
        dirichlet_fraction: weight of the root noise in [0, 1] (0 = no noise).
        normalize_q: map Q to [0, 1] by the min and max over the node's value and its visited
            children (needed for returns outside [-1, 1], e.g. one-player scores). Without it an
            unvisited action's Q is 0.
        forced_playouts: KataGo's `k` (>= 0; 0 = off, KataGo uses 2): every root child gets at
            least `sqrt(k * P * N)` visits, and the policy target prunes them again
            (`turbozero.search.forced`). Self-play only: `without_noise` turns it off.
        fpu: the Q of an unvisited move (`first_play_q`): "zero", "node" or "network"; with
            `normalize_q` only "zero" (an unvisited move takes the minimum there).
        fpu_reduction: subtracted from that value, in [0, 2] (Q spans [-1, 1]); 0 with
            `normalize_q`.

    Returns:
        A `Selector`; its policy target is the root visit distribution (pruned of forced
        visits when `forced_playouts` is on).
    """
    check_number("c_puct", c_puct, low=0.0, strict=True)
    _check_noise(dirichlet_alpha, dirichlet_fraction)
    _check_forced(forced_playouts)
    if fpu not in FIRST_PLAY_VALUES:
        raise ValueError(f"fpu must be one of {', '.join(FIRST_PLAY_VALUES)}, got {fpu!r}")
    if check_number("fpu_reduction", fpu_reduction, low=0.0) > FPU_REDUCTION_MAX:
        raise ValueError(
            f"fpu_reduction must be in [0, {FPU_REDUCTION_MAX:g}], got {fpu_reduction}"
        )
    if normalize_q and (fpu != "zero" or fpu_reduction):
        raise ValueError(
            f"fpu={fpu!r} with fpu_reduction={fpu_reduction} needs normalize_q=False (normalised "
            "Q has its own rule): use fpu='zero' and fpu_reduction=0"
        )
    options: dict[str, Any] = dict(
        c_puct=c_puct,
        dirichlet_alpha=dirichlet_alpha,
        dirichlet_fraction=dirichlet_fraction,
        normalize_q=normalize_q,
        forced_playouts=forced_playouts,
        fpu=fpu,
        fpu_reduction=fpu_reduction,
    )

    def q_of(view: NodeView) -> Array:
        if normalize_q:
            return normalize_by_parent_and_siblings(view)
        return first_play_q(view, fpu, fpu_reduction)

    def explore(view: NodeView, priors: Array) -> Array:
        return c_puct * priors * jnp.sqrt(view.node_visits.astype(jnp.float32))[:, None]

    def select(view: NodeView, root_probs: Array, is_root: bool) -> Array:
        priors = _priors(view, root_probs, is_root)
        scores = q_of(view) + explore(view, priors) / (1.0 + view.child_visits)
        if is_root and forced_playouts:
            scores = force_playouts(scores, view, priors, forced_playouts)
        return scores

    off = dict(dirichlet_fraction=0.0, forced_playouts=0.0)
    return Selector(
        name="puct",
        prepare=_prepare(dirichlet_alpha, dirichlet_fraction),
        select=select,
        policy=_policy(forced_playouts, q_of, explore),
        reusable=True,
        without_noise=lambda: puct(**with_options(options, **off)),
        options=options,
    )


def muzero_puct(
    *,
    pb_c_init: float = 1.25,
    pb_c_base: float = 19652.0,
    dirichlet_alpha: float = 0.3,
    dirichlet_fraction: float = 0.25,
    forced_playouts: float = 0.0,
) -> Selector:
    """MuZero's rule with min-max normalised Q (the rule of `mctx.muzero_policy`).

    `score = Q_norm + P * sqrt(N) / (1 + N_a) * (pb_c_init + log((N + pb_c_base + 1) / pb_c_base))`
    where `Q_norm` maps the visited children's Q and the node's value to [0, 1] and unvisited
    actions get 0, so unbounded single-player returns work. `forced_playouts` as in `puct`.
    """
    check_number("pb_c_init", pb_c_init, low=0.0, strict=True)
    check_number("pb_c_base", pb_c_base, low=0.0, strict=True)
    _check_noise(dirichlet_alpha, dirichlet_fraction)
    _check_forced(forced_playouts)
    options: dict[str, Any] = dict(
        pb_c_init=pb_c_init,
        pb_c_base=pb_c_base,
        dirichlet_alpha=dirichlet_alpha,
        dirichlet_fraction=dirichlet_fraction,
        forced_playouts=forced_playouts,
    )

    def explore(view: NodeView, priors: Array) -> Array:
        n = view.node_visits.astype(jnp.float32)[:, None]
        pb_c = pb_c_init + jnp.log((n + pb_c_base + 1.0) / pb_c_base)
        return jnp.sqrt(n) * pb_c * priors

    def select(view: NodeView, root_probs: Array, is_root: bool) -> Array:
        priors = _priors(view, root_probs, is_root)
        scores = normalize_by_parent_and_siblings(view) + explore(view, priors) / (
            view.child_visits + 1.0
        )
        if is_root and forced_playouts:
            scores = force_playouts(scores, view, priors, forced_playouts)
        return scores

    off = dict(dirichlet_fraction=0.0, forced_playouts=0.0)
    return Selector(
        name="muzero_puct",
        prepare=_prepare(dirichlet_alpha, dirichlet_fraction),
        select=select,
        policy=_policy(forced_playouts, normalize_by_parent_and_siblings, explore),
        reusable=True,
        without_noise=lambda: muzero_puct(**with_options(options, **off)),
        options=options,
    )
