"""Actor and critic MLPs; the actor ends in one of PPO's action heads.

Letters: `B` batch of observations, `A` discrete actions, `D` continuous action dimension, `K`
components of a multi-discrete action, `C` the largest component's size.

Heads (`HEADS`; the distributions are in `turbozero.ppo.distributions`):

    categorical     logits [B, A]                        -> Categorical
    gaussian        mean [B, D], log std [D] (a param)   -> DiagGaussian (unbounded; the learner
                                                            clips samples to the bounds)
    tanh_gaussian   mean [B, D], log std [D] (a param)   -> TanhGaussian (squashed into the bounds)
    beta            alpha, beta = 1 + softplus([B, D])   -> ScaledBeta (scaled to the bounds)
    multi_discrete  logits [B, sum(n_k)]                 -> MultiCategorical (one categorical per
                                                            component, padded to [B, K, C], drawn
                                                            in order under the legal actions)

The critic is a separate MLP with a scalar output `[B]`. Observations of any shape are flattened
to `[B, F]` first.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp

from turbozero.nets.mlp import ACTIVATIONS, MLP
from turbozero.ppo.config import HEADS
from turbozero.ppo.distributions import (
    MASKED_LOGIT,
    Categorical,
    DiagGaussian,
    Distribution,
    MultiCategorical,
    ScaledBeta,
    TanhGaussian,
    pad_component_logits,
)
from turbozero.types import Array, Params, PRNGKey

__all__ = [
    "ACTIVATIONS",
    "HEADS",
    "MASKED_LOGIT",
    "MLP",
    "Actor",
    "ActorCritic",
    "ActorCriticParams",
    "Categorical",
    "Critic",
    "DiagGaussian",
    "Distribution",
    "MultiCategorical",
    "ScaledBeta",
    "TanhGaussian",
    "make_actor_critic",
]

CONTINUOUS_HEADS = ("gaussian", "tanh_gaussian", "beta")
BOUNDED_HEADS = ("tanh_gaussian", "beta")


class Actor(nn.Module):
    """Policy network: flattened observations `[B, ...]` to the head's distribution.

    `head` None is the categorical head when `continuous` is False and the Gaussian one when
    True. The bounded heads read `action_low`/`action_high` (`D` finite floats each); the
    multi-discrete head reads `action_components` (`K` sizes, product `action_dim`).
    """

    action_dim: int
    continuous: bool
    hidden_sizes: Sequence[int] = (64, 64)
    activation: str = "tanh"
    layer_norm: bool = False
    init_log_std: float = 0.0
    head: str | None = None
    action_low: tuple[float, ...] | None = None
    action_high: tuple[float, ...] | None = None
    action_components: tuple[int, ...] | None = None

    @nn.compact
    def __call__(self, obs: Array) -> Distribution:
        head = self.head or ("gaussian" if self.continuous else "categorical")
        x = jnp.reshape(obs, (obs.shape[0], -1)).astype(jnp.float32)
        x = MLP(self.hidden_sizes, self.activation, self.layer_norm)(x)
        small = nn.initializers.orthogonal(0.01)
        if head == "categorical":
            return Categorical(nn.Dense(self.action_dim, kernel_init=small)(x))
        if head == "multi_discrete":
            sizes = self.action_components
            assert sizes is not None
            flat = nn.Dense(sum(sizes), kernel_init=small)(x)
            return MultiCategorical(pad_component_logits(flat, sizes))
        if head == "beta":
            out = nn.Dense(2 * self.action_dim, kernel_init=small)(x)
            alpha = 1.0 + jax.nn.softplus(out[:, : self.action_dim])
            beta = 1.0 + jax.nn.softplus(out[:, self.action_dim :])
            return ScaledBeta(alpha, beta, *self._bounds())
        out = nn.Dense(self.action_dim, kernel_init=small)(x)
        log_std = self.param(
            "log_std", nn.initializers.constant(self.init_log_std), (self.action_dim,)
        )
        if head == "tanh_gaussian":
            return TanhGaussian(out, log_std, *self._bounds())
        return DiagGaussian(out, log_std)

    def _bounds(self) -> tuple[Array, Array]:
        assert self.action_low is not None and self.action_high is not None
        return (
            jnp.asarray(self.action_low, jnp.float32),
            jnp.asarray(self.action_high, jnp.float32),
        )


class Critic(nn.Module):
    """Value network: flattened observations `[B, ...]` to values `[B]`."""

    hidden_sizes: Sequence[int] = (64, 64)
    activation: str = "tanh"
    layer_norm: bool = False

    @nn.compact
    def __call__(self, obs: Array) -> Array:
        x = jnp.reshape(obs, (obs.shape[0], -1)).astype(jnp.float32)
        x = MLP(self.hidden_sizes, self.activation, self.layer_norm)(x)
        return nn.Dense(1, kernel_init=nn.initializers.orthogonal(1.0))(x)[:, 0]


class ActorCriticParams(NamedTuple):
    """The two networks' variables."""

    actor: Params
    critic: Params


class ActorCritic(NamedTuple):
    """Pure functions of the actor and critic.

    Attributes:
        init: `init(key, obs [B, ...]) -> ActorCriticParams`; `key` is consumed.
        policy: `policy(actor_params, obs [B, ...]) -> Distribution` (the head's).
        value: `value(critic_params, obs [B, ...]) -> [B]`.
    """

    init: Callable[[PRNGKey, Array], ActorCriticParams]
    policy: Callable[[Params, Array], Distribution]
    value: Callable[[Params, Array], Array]


def make_actor_critic(
    *,
    action_dim: int,
    continuous: bool,
    actor_hidden: Sequence[int] = (64, 64),
    critic_hidden: Sequence[int] = (64, 64),
    activation: str = "tanh",
    layer_norm: bool = False,
    init_log_std: float = 0.0,
    head: str | None = None,
    action_low: Sequence[float] | None = None,
    action_high: Sequence[float] | None = None,
    action_components: Sequence[int] | None = None,
) -> ActorCritic:
    """Build separate actor and critic MLPs.

    Args:
        action_dim: `A` for discrete actions, `D` for continuous ones (>= 1).
        continuous: whether actions are continuous; picks the head when `head` is None
            (Gaussian when True, categorical when False).
        actor_hidden, critic_hidden: hidden layer sizes (each >= 1; may be empty).
        activation: one of `ACTIVATIONS`.
        layer_norm: add `LayerNorm` after every hidden dense layer.
        init_log_std: initial log standard deviation of the Gaussian heads.
        head: one of `HEADS`, or None (see `continuous`).
        action_low, action_high: `D` finite bounds, `low < high` (the bounded heads).
        action_components: the components' sizes, product `action_dim` (multi-discrete head).

    Raises:
        ValueError: naming the argument that is out of range or missing for the head.
    """
    validate_actor_critic_args(
        action_dim=action_dim,
        continuous=continuous,
        actor_hidden=actor_hidden,
        critic_hidden=critic_hidden,
        activation=activation,
        head=head,
        action_low=action_low,
        action_high=action_high,
        action_components=action_components,
    )
    low = None if action_low is None else tuple(float(v) for v in action_low)
    high = None if action_high is None else tuple(float(v) for v in action_high)
    actor = Actor(
        action_dim,
        continuous,
        tuple(actor_hidden),
        activation,
        layer_norm,
        init_log_std,
        head=head,
        action_low=low,
        action_high=high,
        action_components=None if action_components is None else tuple(action_components),
    )
    critic = Critic(tuple(critic_hidden), activation, layer_norm)

    def init(key: PRNGKey, obs: Array) -> ActorCriticParams:
        ka, kc = jax.random.split(key)
        return ActorCriticParams(actor.init(ka, obs), critic.init(kc, obs))

    # flax types `Module.apply` as returning `Any | (output, mutated variables)`.
    return ActorCritic(
        init=init,
        policy=actor.apply,  # type: ignore[arg-type]
        value=critic.apply,  # type: ignore[arg-type]
    )


def validate_actor_critic_args(
    *,
    action_dim: int,
    continuous: bool,
    actor_hidden: Sequence[int],
    critic_hidden: Sequence[int],
    activation: str,
    head: str | None,
    action_low: Sequence[float] | None,
    action_high: Sequence[float] | None,
    action_components: Sequence[int] | None,
) -> None:
    """`make_actor_critic`'s checks (see there); raises `ValueError` naming the argument."""
    if action_dim < 1:
        raise ValueError(f"action_dim must be >= 1, got {action_dim}")
    if activation not in ACTIVATIONS:
        raise ValueError(f"activation must be one of {sorted(ACTIVATIONS)}, got {activation!r}")
    for arg, sizes in (("actor_hidden", actor_hidden), ("critic_hidden", critic_hidden)):
        if any(int(s) < 1 for s in sizes):
            raise ValueError(f"{arg} sizes must all be >= 1, got {tuple(sizes)}")
    if head is None:
        return
    if head not in HEADS:
        raise ValueError(f"head must be one of {list(HEADS)} or None, got {head!r}")
    if (head in CONTINUOUS_HEADS) != continuous:
        kind = "continuous" if continuous else "discrete"
        raise ValueError(f"head {head!r} does not fit {kind} actions")
    if head in BOUNDED_HEADS:
        if action_low is None or action_high is None:
            raise ValueError(f"head {head!r} needs action_low and action_high")
        low = [float(v) for v in action_low]
        high = [float(v) for v in action_high]
        if (
            len(low) != action_dim
            or len(high) != action_dim
            or not all(
                math.isfinite(lo) and math.isfinite(hi) and lo < hi
                for lo, hi in zip(low, high, strict=True)
            )
        ):
            raise ValueError(
                f"head {head!r} needs {action_dim} finite bounds with action_low < action_high, "
                f"got action_low={low}, action_high={high}"
            )
    if head == "multi_discrete":
        counts = [] if action_components is None else [int(n) for n in action_components]
        if not counts or any(n < 1 for n in counts) or math.prod(counts) != action_dim:
            raise ValueError(
                f"head 'multi_discrete' needs action_components, sizes >= 1 whose product is "
                f"action_dim={action_dim}, got {action_components!r}"
            )
