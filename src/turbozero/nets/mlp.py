"""A policy-value MLP for vector (or flattened) observations."""

from __future__ import annotations

from collections.abc import Sequence

import flax.linen as nn
import jax.numpy as jnp

from turbozero.types import Array
from turbozero.validate import check_count


class PolicyValueMLP(nn.Module):
    """Hidden layers, then policy logits `[B, A]` and a value `[B]` (tanh) or bin logits."""

    num_actions: int
    hidden: Sequence[int] = (128, 128)
    layer_norm: bool = False
    value_bins: int = 0
    bounded_value: bool = True

    def __post_init__(self) -> None:
        check_count("num_actions", self.num_actions, low=1)
        for width in self.hidden:
            check_count("hidden (each width)", width, low=1)
        if check_count("value_bins", self.value_bins, low=0) == 1:
            raise ValueError("value_bins must be 0 (a scalar value) or >= 2, got 1")
        super().__post_init__()

    @nn.compact
    def __call__(self, x: Array, train: bool = False) -> tuple[Array, Array]:
        x = x.reshape(x.shape[0], -1).astype(jnp.float32)
        for width in self.hidden:
            x = nn.Dense(width)(x)
            if self.layer_norm:
                x = nn.LayerNorm()(x)
            x = nn.relu(x)
        logits = nn.Dense(self.num_actions)(x)
        if self.value_bins:
            return logits, nn.Dense(self.value_bins)(x)
        v = nn.Dense(1)(x)[:, 0]
        return logits, jnp.tanh(v) if self.bounded_value else v
