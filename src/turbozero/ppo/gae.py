"""Truncated generalised advantage estimation (time-major, with auto-reset rollouts).

Letters: `T` rollout steps, `B` parallel environments.

Step `t` starts from observation `o_t` (value `v_t`), receives reward `r_t` and ends in the true
next observation `o'_t` (value `v'_t`). Without an episode end `o'_t = o_{t+1}`; with one, `o'_t`
is the final observation kept by the auto-reset wrapper and `o_{t+1}` already starts a new episode.

    delta_t = r_t + gamma * (1 - terminated_t) * v'_t - v_t
    A_t      = delta_t + gamma * lambda * (1 - done_t) * A_{t+1}
    done_t   = terminated_t | truncated_t
    target_t = A_t + v_t

A termination (the rules ended the game) does not bootstrap: the future is worth zero. A truncation
(a time limit cut the episode) bootstraps from the value of the true final observation. In both
cases the recursion stops, since `A_{t+1}` belongs to the next episode. The last step of the rollout
bootstraps through `v'_{T-1}` with `A_T = 0`.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from turbozero.types import Array


def truncated_gae(
    rewards: Array,
    values: Array,
    next_values: Array,
    terminated: Array,
    truncated: Array,
    *,
    gamma: float | Array,
    gae_lambda: float | Array,
) -> tuple[Array, Array]:
    """Advantages and value targets of a time-major rollout.

    Args:
        rewards: `[T, B]` float, reward of each step.
        values: `[T, B]` value of the observation each step starts from.
        next_values: `[T, B]` value of the TRUE next observation of each step (the final
            observation when the episode ended there).
        terminated: `[T, B]` bool, the episode ended by its rules at this step.
        truncated: `[T, B]` bool, the episode was cut by a time limit at this step.
        gamma: discount in [0, 1].
        gae_lambda: GAE mixing parameter in [0, 1].

    Returns:
        `(advantages [T, B], targets [T, B])`, with `targets = advantages + values`.
    """
    terminated = terminated.astype(jnp.float32)
    done = jnp.maximum(terminated, truncated.astype(jnp.float32))
    deltas = rewards + gamma * (1.0 - terminated) * next_values - values
    carry_weight = gamma * gae_lambda * (1.0 - done)

    def backward(acc: Array, xs: tuple[Array, Array]) -> tuple[Array, Array]:
        delta, weight = xs
        acc = delta + weight * acc
        return acc, acc

    _, advantages = jax.lax.scan(
        backward, jnp.zeros_like(deltas[0]), (deltas, carry_weight), reverse=True
    )
    return advantages, advantages + values
