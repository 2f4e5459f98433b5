"""The MLPs of every algorithm, for vector (or flattened) observations: `dense_layers` (hidden
layers inside a caller's module), `MLP` (those layers as a module: PPO's actor and critic trunks,
`turbozero.ppo.networks`), `PolicyValueMLP` (AlphaZero's policy-value network); TD's value network
(`turbozero.td.learner.ValueNet`) is `dense_layers` and a head of results.

Letters: `B` batch, `F` features, `A` actions, `H` the last hidden layer's width.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import flax.linen as nn
import jax.numpy as jnp
from flax.linen.linear import default_kernel_init

from turbozero.types import Array
from turbozero.validate import check_count

#: the hidden layers' activations by name (`MLP.activation`, PPO's `activation` setting)
ACTIVATIONS: dict[str, Callable[[Array], Array]] = {
    "tanh": jnp.tanh,
    "relu": nn.relu,
    "gelu": nn.gelu,
    "silu": nn.silu,
    "elu": nn.elu,
}


def dense_layers(
    x: Array,
    hidden: Sequence[int],
    *,
    activation: Callable[[Array], Array] = nn.relu,
    layer_norm: bool = False,
    kernel_init: Callable[..., Array] = default_kernel_init,
) -> Array:
    """`x [B, F]` through a dense layer of each width in `hidden`, each followed by a layer norm
    (with `layer_norm`) and `activation`: `[B, H]` (`x` itself when `hidden` is empty); the
    dense layers' kernels start from `kernel_init` (flax's default: LeCun normal). Called
    inside an `nn.compact` method, the layers are the caller's own (`Dense_0`, `LayerNorm_0`,
    `Dense_1`, ... in its variables, numbered on from the layers it made before)."""
    for width in hidden:
        x = nn.Dense(width, kernel_init=kernel_init)(x)
        if layer_norm:
            x = nn.LayerNorm()(x)
        x = activation(x)
    return x


class MLP(nn.Module):
    """Dense layers with an activation (one of `ACTIVATIONS`) and optional layer norm (before the
    activation), orthogonally initialised with gain `sqrt(2)`: `[B, F]` to `[B, H]`."""

    hidden_sizes: Sequence[int]
    activation: str = "tanh"
    layer_norm: bool = False

    @nn.compact
    def __call__(self, x: Array) -> Array:
        return dense_layers(
            x,
            self.hidden_sizes,
            activation=ACTIVATIONS[self.activation],
            layer_norm=self.layer_norm,
            kernel_init=nn.initializers.orthogonal(math.sqrt(2.0)),
        )


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
        x = dense_layers(x, self.hidden, layer_norm=self.layer_norm)
        logits = nn.Dense(self.num_actions)(x)
        if self.value_bins:
            return logits, nn.Dense(self.value_bins)(x)
        v = nn.Dense(1)(x)[:, 0]
        return logits, jnp.tanh(v) if self.bounded_value else v
