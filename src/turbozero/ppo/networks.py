"""Actor and critic MLPs and the two action distributions PPO needs.

Letters: `B` batch of observations, `A` discrete actions, `D` continuous action dimension.

The actor ends in a categorical head (logits `[B, A]`) for discrete environments or a diagonal
Gaussian head (mean `[B, D]`, state-independent log standard deviation `[D]`) for continuous ones.
Gaussian actions are unbounded; the learner clips them to the environment's bounds when stepping
and keeps the unclipped sample for the log-probability. The critic is a separate MLP with a scalar
output `[B]`. Observations of any shape are flattened to `[B, F]` first.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp

from turbozero.types import Array, Params, PRNGKey

ACTIVATIONS: dict[str, Callable[[Array], Array]] = {
    "tanh": jnp.tanh,
    "relu": nn.relu,
    "gelu": nn.gelu,
    "silu": nn.silu,
    "elu": nn.elu,
}


class Categorical(NamedTuple):
    """A batch of categorical distributions over `A` actions.

    Attributes:
        logits: `[..., A]` unnormalised log-probabilities.
    """

    logits: Array

    def sample(self, key: PRNGKey) -> Array:
        """`[...]` int32 actions; `key` is consumed."""
        return jax.random.categorical(key, self.logits).astype(jnp.int32)

    def sample_with(self, noise: Array) -> Array:
        """`[...]` int32 actions from standard Gumbel `noise [..., A]` (the Gumbel-max trick;
        `sample(key)` is `sample_with(jax.random.gumbel(key, logits.shape))`)."""
        return jnp.argmax(self.logits + noise, axis=-1).astype(jnp.int32)

    def mode(self) -> Array:
        return jnp.argmax(self.logits, axis=-1).astype(jnp.int32)

    def log_prob(self, action: Array) -> Array:
        logp = jax.nn.log_softmax(self.logits)
        return jnp.take_along_axis(logp, action[..., None].astype(jnp.int32), axis=-1)[..., 0]

    def entropy(self) -> Array:
        logp = jax.nn.log_softmax(self.logits)
        return -jnp.sum(jnp.exp(logp) * logp, axis=-1)

    def kl(self, other: Categorical) -> Array:
        """KL(self || other), `[...]`."""
        logp = jax.nn.log_softmax(self.logits)
        logq = jax.nn.log_softmax(other.logits)
        return jnp.sum(jnp.exp(logp) * (logp - logq), axis=-1)


class DiagGaussian(NamedTuple):
    """A batch of Gaussians with diagonal covariance over `D`-dimensional actions.

    Attributes:
        mean: `[..., D]`.
        log_std: `[..., D]` (or broadcastable to it).
    """

    mean: Array
    log_std: Array

    def sample(self, key: PRNGKey) -> Array:
        """`[..., D]` float32 actions; `key` is consumed."""
        noise = jax.random.normal(key, self.mean.shape, self.mean.dtype)
        return self.mean + jnp.exp(self.log_std) * noise

    def sample_with(self, noise: Array) -> Array:
        """`[..., D]` float32 actions from standard normal `noise [..., D]`."""
        return self.mean + jnp.exp(self.log_std) * noise

    def mode(self) -> Array:
        return self.mean

    def log_prob(self, action: Array) -> Array:
        log_std = jnp.broadcast_to(self.log_std, self.mean.shape)
        z = (action - self.mean) * jnp.exp(-log_std)
        return jnp.sum(-0.5 * z**2 - log_std - 0.5 * math.log(2 * math.pi), axis=-1)

    def entropy(self) -> Array:
        log_std = jnp.broadcast_to(self.log_std, self.mean.shape)
        return jnp.sum(log_std + 0.5 * (1.0 + math.log(2 * math.pi)), axis=-1)

    def kl(self, other: DiagGaussian) -> Array:
        """KL(self || other), `[...]`."""
        ls_p = jnp.broadcast_to(self.log_std, self.mean.shape)
        ls_q = jnp.broadcast_to(other.log_std, other.mean.shape)
        var_ratio = jnp.exp(2 * (ls_p - ls_q))
        diff = (self.mean - other.mean) * jnp.exp(-ls_q)
        return jnp.sum(0.5 * (var_ratio + diff**2 - 1.0) - (ls_p - ls_q), axis=-1)


Distribution = Categorical | DiagGaussian


class MLP(nn.Module):
    """Dense layers with an activation and optional layer norm (before the activation)."""

    hidden_sizes: Sequence[int]
    activation: str = "tanh"
    layer_norm: bool = False

    @nn.compact
    def __call__(self, x: Array) -> Array:
        act = ACTIVATIONS[self.activation]
        gain = math.sqrt(2.0)
        for size in self.hidden_sizes:
            x = nn.Dense(size, kernel_init=nn.initializers.orthogonal(gain))(x)
            if self.layer_norm:
                x = nn.LayerNorm()(x)
            x = act(x)
        return x


class Actor(nn.Module):
    """Policy network: flattened observations `[B, ...]` to a `Categorical` or `DiagGaussian`."""

    action_dim: int
    continuous: bool
    hidden_sizes: Sequence[int] = (64, 64)
    activation: str = "tanh"
    layer_norm: bool = False
    init_log_std: float = 0.0

    @nn.compact
    def __call__(self, obs: Array) -> Distribution:
        x = jnp.reshape(obs, (obs.shape[0], -1)).astype(jnp.float32)
        x = MLP(self.hidden_sizes, self.activation, self.layer_norm)(x)
        out = nn.Dense(self.action_dim, kernel_init=nn.initializers.orthogonal(0.01))(x)
        if not self.continuous:
            return Categorical(out)
        log_std = self.param(
            "log_std", nn.initializers.constant(self.init_log_std), (self.action_dim,)
        )
        return DiagGaussian(out, log_std)


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
        policy: `policy(actor_params, obs [B, ...]) -> Categorical | DiagGaussian`.
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
) -> ActorCritic:
    """Build separate actor and critic MLPs.

    Args:
        action_dim: `A` for discrete actions, `D` for continuous ones (>= 1).
        continuous: Gaussian head when True, categorical when False.
        actor_hidden, critic_hidden: hidden layer sizes (each >= 1; may be empty).
        activation: one of `ACTIVATIONS`.
        layer_norm: add `LayerNorm` after every hidden dense layer.
        init_log_std: initial log standard deviation of the Gaussian head.

    Raises:
        ValueError: naming the argument that is out of range.
    """
    if action_dim < 1:
        raise ValueError(f"action_dim must be >= 1, got {action_dim}")
    if activation not in ACTIVATIONS:
        raise ValueError(f"activation must be one of {sorted(ACTIVATIONS)}, got {activation!r}")
    for arg, sizes in (("actor_hidden", actor_hidden), ("critic_hidden", critic_hidden)):
        if any(int(s) < 1 for s in sizes):
            raise ValueError(f"{arg} sizes must all be >= 1, got {tuple(sizes)}")
    actor = Actor(action_dim, continuous, tuple(actor_hidden), activation, layer_norm, init_log_std)
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
