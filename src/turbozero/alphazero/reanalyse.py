"""Reanalyse: fresh search targets for positions already in replay memory.

A stored position's policy target, and the root value that `root_value_weight` mixes into its
value target, are what the search found with the network of the epoch the position was played
in. Positions stay in memory for dozens of epochs, so most targets a gradient step reads were
computed by an older, weaker network. Reanalyse (MuZero Reanalyse, Schrittwieser et al. 2021)
searches a random sample of stored positions again with the current network and overwrites
those two targets; the game's outcome is left as it was.

Reanalysing needs the environment state each stored position was searched from, so self-play
stores it beside the observation (`make_selfplay(store_states=True)`), with the index of the
symmetry a stored copy was made with (0 the position as played, `k` the `k`-th augmentation):
a copy's fresh policy is the fresh search's policy mapped through that same symmetry. Each copy
is a slot of its own, picked and searched on its own.

A reanalysis is a full search, so a position that playout cap randomisation stored with no
policy target (a fast move's all-zero policy) gets one when it is reanalysed.

Letters: B games, C memory slots per game, R positions reanalysed, A actions.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NamedTuple

import jax
import jax.numpy as jnp

from turbozero.alphazero.augment import check_augment_fns
from turbozero.alphazero.selfplay import AugmentFn
from turbozero.memory import EpisodeBufferState
from turbozero.search import Search
from turbozero.types import Array, Params, PRNGKey
from turbozero.validate import check_count


class Reanalyse(NamedTuple):
    """A configured reanalysis (see `make_reanalyse`).

    Attributes:
        run: `run(memory_state, params, key) -> (memory_state, metrics)`: search
            `num_positions` stored positions again and overwrite their `policy` and
            `root_value`. Metrics: `reanalysed` (positions rewritten), `reanalyse_targets`
            (those that had a policy target: playout cap randomisation's fast moves have none)
            and `reanalyse_policy_shift_sum` (the total variation distance between the old and
            the new policy target, summed over `reanalyse_targets`): how stale targets were.
        num_positions: R, the positions searched per call.
    """

    run: Callable[[EpisodeBufferState, Params, PRNGKey], tuple[EpisodeBufferState, dict]]
    num_positions: int


def validate_reanalyse_args(*, num_positions: int) -> int:
    """Check `make_reanalyse`'s settings; returns `num_positions`."""
    return check_count("num_positions", num_positions, low=1)


def pick_held(memory: EpisodeBufferState, key: PRNGKey, *, num: int) -> tuple[Array, Array]:
    """`num` distinct slots drawn uniformly among those holding a position that will be sampled
    (its episode finished with an outcome, or still running; not a dropped episode's), as flat
    indices `[R]` into `B * C`, and `[R]` whether each holds one (False only when memory holds
    fewer than `num`)."""
    running = memory.episode_id == memory.current_episode[:, None]
    held = (memory.assigned | ((memory.episode_id >= 0) & running)).reshape(-1)
    noise = jax.random.gumbel(key, held.shape)
    _, index = jax.lax.top_k(jnp.where(held, noise, -jnp.inf), num)
    return index, held[index]


def symmetric_policy(augment_fns: Sequence[AugmentFn]) -> Callable[..., Array]:
    """`f(symmetry [], observation, policy [A], mask [A]) -> policy [A]`: the policy mapped
    through augmentation `symmetry - 1` (unchanged for symmetry 0), given the position as
    played (its observation and legal mask), as self-play gives them; only the mapped policy
    is kept."""

    def through(fn: AugmentFn) -> Callable[[Array, Array, Array], Array]:
        return lambda obs, policy, mask: fn(obs, policy, mask)[1]

    branches = [lambda obs, policy, mask: policy, *(through(fn) for fn in augment_fns)]

    def mapped(symmetry: Array, obs: Array, policy: Array, mask: Array) -> Array:
        return jax.lax.switch(symmetry, branches, obs, policy, mask)

    return mapped


def make_reanalyse(
    search: Search,
    *,
    num_positions: int,
    augment_fns: Sequence[AugmentFn] = (),
) -> Reanalyse:
    """Configure reanalysis over memory filled by `make_selfplay(..., store_states=True)`.

    Args:
        search: the search self-play uses (its root noise included, so that fresh targets are
            made as the originals were).
        num_positions: stored positions searched again per call (one batch of R trees), >= 1.
        augment_fns: the augmentations self-play stores copies with, in the same order.

    `run` consumes its `key` (the picks and the searches' root noise).
    """
    num_positions = validate_reanalyse_args(num_positions=num_positions)
    check_augment_fns(search.env, list(augment_fns))
    mapped = jax.vmap(symmetric_policy(augment_fns))
    env = search.env

    def run(memory: EpisodeBufferState, params: Params, key: PRNGKey):
        exp = memory.experience
        if "state" not in exp or "symmetry" not in exp:
            raise ValueError(
                "reanalyse needs the environment states in memory: build self-play with "
                "make_selfplay(..., store_states=True)"
            )
        B, C = memory.episode_id.shape
        if num_positions > B * C:
            raise ValueError(
                f"num_positions must be at most the {B * C} slots memory holds "
                f"(num_games * capacity), got {num_positions}"
            )
        k_pick, k_search = jax.random.split(key)
        index, valid = pick_held(memory, k_pick, num=num_positions)
        # picks past what memory holds search a held position (index[0], if any) instead of
        # an empty slot's all-zero state; their results are not written
        source = jnp.where(valid, index, index[0])

        def rows(leaf: Array, at: Array = index) -> Array:
            return leaf.reshape(B * C, *leaf.shape[2:])[at]

        states = jax.tree_util.tree_map(lambda leaf: rows(leaf, source), exp["state"])
        _, out = search.search(search.init(num_positions), params, states, k_search, 0.0)
        value = out.root_value
        old = rows(exp["policy"])
        played = jax.vmap(env.observe)(states)
        legal = jax.vmap(env.metadata)(states).action_mask
        policy = mapped(rows(exp["symmetry"]), played, out.action_weights, legal)

        def write(leaf: Array, new: Array) -> Array:
            keep = valid.reshape((-1,) + (1,) * (new.ndim - 1))
            flat = leaf.reshape(B * C, *leaf.shape[2:])
            return flat.at[index].set(jnp.where(keep, new, flat[index])).reshape(leaf.shape)

        experience = {
            **exp,
            "policy": write(exp["policy"], policy.astype(exp["policy"].dtype)),
            "root_value": write(exp["root_value"], value.astype(exp["root_value"].dtype)),
        }
        had_target = valid & (jnp.sum(old, axis=-1) > 0)
        shift = 0.5 * jnp.sum(jnp.abs(policy - old), axis=-1)
        metrics = {
            "reanalysed": jnp.sum(valid.astype(jnp.float32)),
            "reanalyse_policy_shift_sum": jnp.sum(jnp.where(had_target, shift, 0.0)),
            "reanalyse_targets": jnp.sum(had_target.astype(jnp.float32)),
        }
        return memory.replace(experience=experience), metrics

    return Reanalyse(run=run, num_positions=num_positions)
