"""Shared types: the step metadata every environment emits and the network-call signature.

Letters used for array shapes throughout the package:
    B: batch of games, P: players, A: actions, N: node capacity of a search tree.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp

from turbozero import struct

Array = jax.Array
PRNGKey = jax.Array
PyTree = Any
Params = Any  # the network's variables (flax `{"params": ..., "batch_stats": ...}`)


@struct.dataclass
class StepMetadata(struct.Struct):
    """What an environment reports after `init` or `step`, for one game.

    Attributes:
        rewards: `[P]` reward each player received on the step that led here (zero after
            termination).
        action_mask: `[A]` bool, True for legal actions of `cur_player_id`. Unspecified (pgx: all
            True) at terminal states, where no action is taken.
        terminated: `[]` bool, the game ended by its rules.
        cur_player_id: `[]` int32, the player to move.
        step: `[]` int32, number of steps taken since `init`.
        truncated: `[]` bool, the game was cut off by a step limit (default False).
    """

    rewards: Array
    action_mask: Array
    terminated: Array
    cur_player_id: Array
    step: Array = struct.field(default_factory=lambda: jnp.int32(0))
    truncated: Array = struct.field(default_factory=lambda: jnp.bool_(False))


# The batched, pure network call used by every search and trainer:
# `eval_fn(params, observations [B, ...], key) -> (policy_logits [B, A], value [B])`.
# The value is for the player to move in each observation. Batch-norm statistics, if any, are part
# of `params` and used in inference mode. `key` is consumed (networks may ignore it).
EvalFn = Callable[[Params, Array, PRNGKey], tuple[Array, Array]]

EnvInitFn = Callable[[PRNGKey], tuple[PyTree, StepMetadata]]
EnvStepFn = Callable[[PyTree, Array, PRNGKey], tuple[PyTree, StepMetadata]]
ObserveFn = Callable[[PyTree], Array]
