"""Turn a flax module into the foundation's batched `eval_fn`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from turbozero.types import Array, EvalFn, Params, PRNGKey


def make_eval_fn(
    module: nn.Module,
    state_to_input: Callable[[Array], Array] | None = None,
    *,
    value_support: Array | None = None,
) -> EvalFn:
    """`eval_fn(params, observations [B, ...], key) -> (logits [B, A], value [B])`.

    Args:
        module: a flax module called as `module.apply(params, x, train=False)` returning
            `(logits, value)`; `params` holds all its variables (batch-norm statistics included).
        state_to_input: optional per-observation transform applied (vmapped) first.
        value_support: `[K]` bin centres when the module returns value-bin logits `[B, K]`;
            the value is then their expectation.

    Raises:
        ValueError: `state_to_input` is not callable, or `value_support` is not a row of at
            least 2 finite numbers.
    """
    if state_to_input is not None and not callable(state_to_input):
        raise ValueError(f"state_to_input must be a function or None, got {state_to_input!r}")
    bins = None  # (NumPy: making the function starts no backend)
    if value_support is not None:
        support = np.asarray(value_support, np.float32)
        if support.ndim != 1 or support.size < 2 or not np.isfinite(support).all():
            raise ValueError(
                "value_support must be a row [K] of at least 2 finite bin centres, got shape "
                f"{support.shape}" + ("" if np.isfinite(support).all() else " with NaN or inf")
            )
        bins = support

    def eval_fn(params: Params, observations: Array, key: PRNGKey) -> tuple[Array, Array]:
        x = observations if state_to_input is None else jax.vmap(state_to_input)(observations)
        out: Any = module.apply(params, x, train=False)
        logits, value = out
        if bins is not None:
            value = jnp.sum(jax.nn.softmax(value, axis=-1) * bins, axis=-1)
        return logits, value

    return eval_fn


def init_params(module: nn.Module, example_observation: Array, key: PRNGKey) -> Params:
    """Initialise all variables of `module` from one unbatched example observation."""
    return module.init(key, example_observation[None], train=False)


def param_count(params: Params) -> int:
    """Number of trainable parameters (batch-norm statistics excluded)."""
    tree = params.get("params", params) if isinstance(params, dict) else params
    return int(sum(x.size for x in jax.tree_util.tree_leaves(tree)))
