"""Self-play collection: a batch of games searched, played, recorded and reset, as one scan.

Letters: B games, A actions, P players.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NamedTuple

import jax
import jax.numpy as jnp

from turbozero import struct
from turbozero.memory import EpisodeBuffer, EpisodeBufferState
from turbozero.search import Search, Tree, value_vector
from turbozero.types import Array, Params, PRNGKey, PyTree
from turbozero.validate import check_count, check_number

# An augmentation maps (observation, policy [A], mask [A]) to a symmetric copy of the same.
AugmentFn = Callable[[Array, Array, Array], tuple[Array, Array, Array]]


@struct.dataclass
class SelfPlayState(struct.Struct):
    """Everything self-play carries between steps."""

    env_states: PyTree  # leaves [B, ...]
    tree: Tree  # [B, N, ...]
    memory: EpisodeBufferState
    episode_return: Array  # [B, P] rewards summed over the running episode


class SelfPlay(NamedTuple):
    """Pure self-play functions (compile `collect` with `jax.jit`, `num_steps` static, and
    `compiler_options=turbozero.search.compiler_options()` as the trainer does).

    Attributes:
        init: `init(key) -> SelfPlayState`, fresh games, trees and memory.
        step: `step(state, params, key) -> (state, metrics)`, one move in every game.
        collect: `collect(state, params, key, *, num_steps) -> (state, metrics)`, `num_steps`
            steps as one `lax.scan`; metrics are summed over the steps.
    """

    init: Callable[[PRNGKey], SelfPlayState]
    step: Callable[[SelfPlayState, Params, PRNGKey], tuple[SelfPlayState, dict[str, Array]]]
    collect: Callable[..., tuple[SelfPlayState, dict[str, Array]]]
    search: Search
    memory: EpisodeBuffer
    batch_size: int


def temperature_schedule(move: Array, *, temperature: float, temperature_moves: int) -> Array:
    """`temperature` for the first `temperature_moves` moves of a game, then 0 (best move)."""
    return jnp.where(move < temperature_moves, temperature, 0.0)


def make_selfplay(
    search: Search,
    memory: EpisodeBuffer,
    *,
    batch_size: int,
    max_episode_steps: int,
    temperature: float = 1.0,
    temperature_moves: int = 30,
    augment_fns: Sequence[AugmentFn] = (),
) -> SelfPlay:
    """Configure self-play over `search.env`.

    Args:
        search: from `make_search`; self-play uses its `reuse` setting between moves.
        memory: an episode buffer built with `num_games == batch_size`.
        batch_size: games played in parallel, >= 1.
        max_episode_steps: games longer than this are truncated (memory's truncation policy).
        temperature: move-choice temperature for the first `temperature_moves` moves (>= 0).
        temperature_moves: after this many moves the best move is played.
        augment_fns: symmetries; each stores one extra experience per position.
    """
    batch_size = check_count("batch_size", batch_size, low=1)
    max_episode_steps = check_count("max_episode_steps", max_episode_steps, low=1)
    temperature = check_number("temperature", temperature, low=0.0)
    temperature_moves = check_count("temperature_moves", temperature_moves, low=0)
    env = search.env
    P = env.num_players
    if (memory.num_games, memory.num_players) != (batch_size, P):
        raise ValueError(
            f"memory was built for num_games={memory.num_games} and "
            f"num_players={memory.num_players}; self-play needs num_games=batch_size="
            f"{batch_size} and num_players={P} ({env.name!r})"
        )
    if memory.discount != search.discount:
        raise ValueError(
            f"memory discounts outcomes by {memory.discount} but the search by "
            f"{search.discount}: value targets would mix the two (give both the same discount)"
        )

    def experience(obs, policy, mask, root_value):
        return {"observation": obs, "policy": policy, "mask": mask, "root_value": root_value}

    def init(key: PRNGKey) -> SelfPlayState:
        states, _ = jax.vmap(env.init)(jax.random.split(key, batch_size))
        obs = env.observe(jax.tree_util.tree_map(lambda x: x[0], states))
        A = env.num_actions
        example = experience(
            obs, jnp.zeros((A,), jnp.float32), jnp.zeros((A,), jnp.bool_), jnp.float32(0)
        )
        return SelfPlayState(
            env_states=states,
            tree=search.init(batch_size),
            memory=memory.init(example),
            episode_return=jnp.zeros((batch_size, P), jnp.float32),
        )

    def step(state: SelfPlayState, params: Params, key: PRNGKey):
        k_search, k_env, k_reset = jax.random.split(key, 3)
        md = jax.vmap(env.metadata)(state.env_states)
        temp = temperature_schedule(
            md.step, temperature=temperature, temperature_moves=temperature_moves
        )
        tree, out = search.search(state.tree, params, state.env_states, k_search, temp)
        obs = jax.vmap(env.observe)(state.env_states)
        mem = memory.add(
            state.memory,
            experience(obs, out.action_weights, md.action_mask, out.root_value),
            md.cur_player_id,
        )
        for fn in augment_fns:
            o2, p2, m2 = jax.vmap(fn)(obs, out.action_weights, md.action_mask)
            mem = memory.add(mem, experience(o2, p2, m2, out.root_value), md.cur_player_id)
        keys = jax.random.split(k_env, batch_size)
        outcome = None
        if env.chance is None:
            next_states, nmd = jax.vmap(env.step)(state.env_states, out.action, keys)
        else:  # `step`'s own draw, split so that the tree can follow the outcome drawn
            after = jax.vmap(env.chance.decide)(state.env_states, out.action)
            outcome = jax.vmap(env.chance.sample_outcome)(after, keys)
            next_states, nmd = jax.vmap(env.chance.resolve)(after, outcome)
        terminated = nmd.terminated
        truncated = ~terminated & (nmd.truncated | (nmd.step >= max_episode_steps))
        # Value of the state reached, per player, from the search: the move's Q is its reward
        # plus the discounted value there (`Q = r + discount * V`). A move the search never
        # visited (sampled at a positive temperature, e.g. from Gumbel's improved policy) has
        # no Q: the root's value stands in for it.
        b = jnp.arange(batch_size)
        mover_reward = nmd.rewards[b, md.cur_player_id]
        visited = out.visit_counts[b, out.action] > 0
        q = jnp.where(visited, out.q_values[b, out.action], out.root_value)
        boot = value_vector((q - mover_reward) / search.discount, md.cur_player_id, P)
        mem = memory.end_step(mem, nmd.rewards, terminated, truncated, boot)
        done = terminated | truncated
        episode_return = state.episode_return + nmd.rewards
        tree = search.advance(tree, out.action, outcome)
        tree = search.reset(tree, done)
        fresh, _ = jax.vmap(env.init)(jax.random.split(k_reset, batch_size))
        env_states = jax.tree_util.tree_map(
            lambda f, n: jnp.where(done.reshape((-1,) + (1,) * (n.ndim - 1)), f, n),
            fresh,
            next_states,
        )
        donef = done.astype(jnp.float32)
        metrics = {
            "positions": jnp.float32(batch_size),
            "episodes": jnp.sum(donef),
            "terminated": jnp.sum(terminated.astype(jnp.float32)),
            "truncated": jnp.sum(truncated.astype(jnp.float32)),
            "episode_length_sum": jnp.sum(donef * nmd.step),
            "episode_return_sum": jnp.sum(donef * episode_return[:, 0]),
            "root_value_sum": jnp.sum(out.root_value),
            "search_depth_sum": jnp.sum(out.max_depth.astype(jnp.float32)),
            "tree_fullness_sum": jnp.sum(out.tree_fullness),
            "full_events": jnp.sum(out.full_events.astype(jnp.float32)),
        }
        new = SelfPlayState(
            env_states=env_states,
            tree=tree,
            memory=mem,
            episode_return=jnp.where(done[:, None], 0.0, episode_return),
        )
        return new, metrics

    def collect(state: SelfPlayState, params: Params, key: PRNGKey, *, num_steps: int):
        def body(s, k):
            return step(s, params, k)

        state, metrics = jax.lax.scan(body, state, jax.random.split(key, num_steps))
        return state, jax.tree_util.tree_map(lambda m: jnp.sum(m, axis=0), metrics)

    return SelfPlay(
        init=init, step=step, collect=collect, search=search, memory=memory, batch_size=batch_size
    )
