"""Self-play collection: a batch of games searched, played, recorded and reset, as one scan.

Letters: B games, A actions, P players.
"""

from __future__ import annotations

import dataclasses
import functools
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
        search, memory, batch_size: the configuration.
        fast_search: playout cap randomisation's cheap search, or None.
    """

    init: Callable[[PRNGKey], SelfPlayState]
    step: Callable[[SelfPlayState, Params, PRNGKey], tuple[SelfPlayState, dict[str, Array]]]
    collect: Callable[..., tuple[SelfPlayState, dict[str, Array]]]
    search: Search
    memory: EpisodeBuffer
    batch_size: int
    fast_search: Search | None = None


def temperature_schedule(move: Array, *, temperature: float, temperature_moves: int) -> Array:
    """`temperature` for the first `temperature_moves` moves of a game, then 0 (best move)."""
    return jnp.where(move < temperature_moves, temperature, 0.0)


@dataclasses.dataclass(frozen=True)
class SelfPlaySpec:
    """What self-play's functions are bound to (see `make_selfplay` for each field)."""

    search: Search
    memory: EpisodeBuffer
    batch_size: int
    max_episode_steps: int
    temperature: float
    temperature_moves: int
    augment_fns: tuple[AugmentFn, ...]
    fast_search: Search | None
    full_fraction: float
    opening_moves: int
    store_states: bool


def make_selfplay(
    search: Search,
    memory: EpisodeBuffer,
    *,
    batch_size: int,
    max_episode_steps: int,
    temperature: float = 1.0,
    temperature_moves: int = 30,
    augment_fns: Sequence[AugmentFn] = (),
    fast_search: Search | None = None,
    full_fraction: float = 1.0,
    opening_moves: int = 0,
    store_states: bool = False,
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
        fast_search: playout cap randomisation (KataGo): a cheaper search over the same
            tree shape (`max_nodes`) that plays the moves not searched in full. Their
            positions are stored with an all-zero policy target, so they train the value
            alone. None: every move is searched with `search`.
        full_fraction: with `fast_search`, the share of self-play steps searched in full,
            in (0, 1]; one draw per step for the whole batch (the batch shares one search).
        opening_moves: every game starts from the position after a uniformly random number
            (0 to `opening_moves`) of uniformly random legal moves, played without search and
            not stored (a move that would end the game is skipped), so that the replay memory
            also holds positions that strong self-play does not reach. 0: games start from
            `env.init`.
        store_states: also store each position's environment state (`"state"`) and the
            index of the symmetry its copy was made with (`"symmetry"`: 0 as played, `k` the
            `k`-th of `augment_fns`), which `turbozero.alphazero.reanalyse` searches again.
    """
    spec = validate_selfplay(
        search,
        memory,
        batch_size=batch_size,
        max_episode_steps=max_episode_steps,
        temperature=temperature,
        temperature_moves=temperature_moves,
        augment_fns=augment_fns,
        fast_search=fast_search,
        full_fraction=full_fraction,
        opening_moves=opening_moves,
        store_states=store_states,
    )
    return SelfPlay(
        init=functools.partial(init_selfplay, spec),
        step=functools.partial(selfplay_step, spec),
        collect=functools.partial(collect_steps, spec),
        search=search,
        memory=memory,
        batch_size=spec.batch_size,
        fast_search=fast_search,
    )


def validate_selfplay(
    search: Search,
    memory: EpisodeBuffer,
    *,
    batch_size: int,
    max_episode_steps: int,
    temperature: float,
    temperature_moves: int,
    augment_fns: Sequence[AugmentFn],
    fast_search: Search | None,
    full_fraction: float,
    opening_moves: int,
    store_states: bool,
) -> SelfPlaySpec:
    """`make_selfplay`'s arguments checked (each error names its argument) as a spec."""
    batch_size = check_count("batch_size", batch_size, low=1)
    max_episode_steps = check_count("max_episode_steps", max_episode_steps, low=1)
    temperature = check_number("temperature", temperature, low=0.0)
    temperature_moves = check_count("temperature_moves", temperature_moves, low=0)
    opening_moves = check_count("opening_moves", opening_moves, low=0)
    env = search.env
    P = env.num_players
    if (memory.num_games, memory.num_players) != (batch_size, P):
        raise ValueError(
            f"memory was built for num_games={memory.num_games} and "
            f"num_players={memory.num_players}; self-play needs num_games=batch_size="
            f"{batch_size} and num_players={P} ({env.name!r})"
        )
    full_fraction = check_number("full_fraction", full_fraction, low=0.0, strict=True)
    if full_fraction > 1.0:
        raise ValueError(f"full_fraction must be in (0, 1], got {full_fraction!r}")
    if fast_search is not None and fast_search.env is not search.env:
        raise ValueError(
            f"fast_search must search the same env as search ({search.env.name!r}), "
            f"got {fast_search.env.name!r}"
        )
    if fast_search is not None and fast_search.max_nodes != search.max_nodes:
        raise ValueError(
            f"fast_search must search trees of the same max_nodes as search "
            f"({search.max_nodes}), got max_nodes={fast_search.max_nodes}"
        )
    if memory.discount != search.discount:
        raise ValueError(
            f"memory discounts outcomes by {memory.discount} but the search by "
            f"{search.discount}: value targets would mix the two (give both the same discount)"
        )
    return SelfPlaySpec(
        search=search,
        memory=memory,
        batch_size=batch_size,
        max_episode_steps=max_episode_steps,
        temperature=temperature,
        temperature_moves=temperature_moves,
        augment_fns=tuple(augment_fns),
        fast_search=fast_search,
        full_fraction=full_fraction,
        opening_moves=opening_moves,
        store_states=bool(store_states),
    )


def start_games(spec: SelfPlaySpec, key: PRNGKey) -> PyTree:
    """`batch_size` fresh games, each `opening_moves` random moves in at most. Leaves `[B, ...]`."""
    env, batch_size, opening_moves = spec.search.env, spec.batch_size, spec.opening_moves
    if not opening_moves:  # (the same keys as before the option existed)
        return jax.vmap(env.init)(jax.random.split(key, batch_size))[0]
    k_init, k_count, k_moves = jax.random.split(key, 3)
    states, _ = jax.vmap(env.init)(jax.random.split(k_init, batch_size))
    count = jax.random.randint(k_count, (batch_size,), 0, opening_moves + 1)

    def move(i, states):
        k_act, k_step = jax.random.split(jax.random.fold_in(k_moves, i))
        md = jax.vmap(env.metadata)(states)
        logits = jnp.where(md.action_mask, 0.0, -jnp.inf)
        action = jax.random.categorical(k_act, logits, axis=-1)
        stepped, nmd = jax.vmap(env.step)(states, action, jax.random.split(k_step, batch_size))
        keep = (i < count) & ~nmd.terminated & ~nmd.truncated
        return _where_games(keep, stepped, states)

    return jax.lax.fori_loop(0, opening_moves, move, states)


def _where_games(which: Array, new: PyTree, old: PyTree) -> PyTree:
    """Per game (`which` `[B]`), the leaf of `new` where True and of `old` elsewhere."""
    return jax.tree_util.tree_map(
        lambda n, o: jnp.where(which.reshape((-1,) + (1,) * (n.ndim - 1)), n, o), new, old
    )


def _experience(
    spec: SelfPlaySpec, obs, policy, mask, root_value, env_state=None, symmetry=0
) -> dict[str, Array]:
    """One stored position: observation, policy target, legal moves, root value (and, with
    `store_states`, the environment state and the symmetry index its copy was made with)."""
    stored = {"observation": obs, "policy": policy, "mask": mask, "root_value": root_value}
    if spec.store_states:
        stored["state"] = env_state
        stored["symmetry"] = jnp.full(jnp.shape(root_value), symmetry, jnp.int32)
    return stored


def init_selfplay(spec: SelfPlaySpec, key: PRNGKey) -> SelfPlayState:
    """Fresh games, empty trees `[B, N, ...]` and an empty replay memory."""
    env = spec.search.env
    states = start_games(spec, key)
    first = jax.tree_util.tree_map(lambda x: x[0], states)
    A = env.num_actions
    example = _experience(
        spec,
        env.observe(first),
        jnp.zeros((A,), jnp.float32),
        jnp.zeros((A,), jnp.bool_),
        jnp.float32(0),
        first,
    )
    return SelfPlayState(
        env_states=states,
        tree=spec.search.init(spec.batch_size),
        memory=spec.memory.init(example),
        episode_return=jnp.zeros((spec.batch_size, env.num_players), jnp.float32),
    )


def _search_moves(spec: SelfPlaySpec, state: SelfPlayState, params: Params, key, temp):
    """Every game's search: `(tree, output, policy target [B, A])`; with playout cap
    randomisation a fast search's moves get an all-zero target (they train the value alone)."""
    search, fast_search = spec.search, spec.fast_search
    if fast_search is None:
        tree, out = search.search(state.tree, params, state.env_states, key, temp)
        return tree, out, out.action_weights
    key, k_cap = jax.random.split(key)
    full = jax.random.uniform(k_cap) < spec.full_fraction
    args = (state.tree, params, state.env_states, key, temp)
    tree, out = jax.lax.cond(full, search.search, fast_search.search, *args)
    return tree, out, jnp.where(full, out.action_weights, 0.0)


def _store_positions(spec: SelfPlaySpec, memory: EpisodeBufferState, md, obs, target, out, here):
    """The positions searched, and one copy per symmetry, added to the replay memory."""
    buffer, stored = spec.memory, out.root_value  # the root's mean: the value target's share
    mem = buffer.add(
        memory, _experience(spec, obs, target, md.action_mask, stored, here), md.cur_player_id
    )
    for k, fn in enumerate(spec.augment_fns, start=1):
        o2, p2, m2 = jax.vmap(fn)(obs, target, md.action_mask)
        mem = buffer.add(mem, _experience(spec, o2, p2, m2, stored, here, k), md.cur_player_id)
    return mem


def _play_moves(spec: SelfPlaySpec, states: PyTree, action: Array, key: PRNGKey):
    """Every game's move played: `(next states, metadata, chance outcome or None)`; in a game
    with chance the draw is `step`'s own, split so that the tree can follow the outcome."""
    env = spec.search.env
    keys = jax.random.split(key, spec.batch_size)
    if env.chance is None:
        next_states, nmd = jax.vmap(env.step)(states, action, keys)
        return next_states, nmd, None
    after = jax.vmap(env.chance.decide)(states, action)
    outcome = jax.vmap(env.chance.sample_outcome)(after, keys)
    next_states, nmd = jax.vmap(env.chance.resolve)(after, outcome)
    return next_states, nmd, outcome


def _bootstrap_values(spec: SelfPlaySpec, md, nmd, out) -> Array:
    """Value of the state reached, per player `[B, P]`, from the search: the move's Q is its
    reward plus the discounted value there (`Q = r + discount * V`). A move the search never
    visited (sampled at a positive temperature, e.g. from Gumbel's improved policy) has no Q:
    the root's value stands in for it."""
    b = jnp.arange(spec.batch_size)
    mover_reward = nmd.rewards[b, md.cur_player_id]
    visited = out.visit_counts[b, out.action] > 0
    q = jnp.where(visited, out.q_values[b, out.action], out.root_value)
    P = spec.search.env.num_players
    return value_vector((q - mover_reward) / spec.search.discount, md.cur_player_id, P)


def selfplay_step(spec: SelfPlaySpec, state: SelfPlayState, params: Params, key: PRNGKey):
    """One move in every game: search, store, play, close finished games and start new ones.
    Returns `(state, metrics)`, the metrics summed over the batch."""
    env, search = spec.search.env, spec.search
    k_search, k_env, k_reset = jax.random.split(key, 3)
    md = jax.vmap(env.metadata)(state.env_states)
    temp = temperature_schedule(
        md.step, temperature=spec.temperature, temperature_moves=spec.temperature_moves
    )
    tree, out, target = _search_moves(spec, state, params, k_search, temp)
    obs = jax.vmap(env.observe)(state.env_states)
    mem = _store_positions(spec, state.memory, md, obs, target, out, state.env_states)
    next_states, nmd, outcome = _play_moves(spec, state.env_states, out.action, k_env)
    terminated = nmd.terminated
    truncated = ~terminated & (nmd.truncated | (nmd.step >= spec.max_episode_steps))
    boot = _bootstrap_values(spec, md, nmd, out)
    mem = spec.memory.end_step(mem, nmd.rewards, terminated, truncated, boot)
    done = terminated | truncated
    episode_return = state.episode_return + nmd.rewards
    tree = search.advance(tree, out.action, outcome)
    tree = search.reset(tree, done)
    env_states = _where_games(done, start_games(spec, k_reset), next_states)
    donef = done.astype(jnp.float32)
    metrics = {
        "positions": jnp.float32(spec.batch_size),
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


def collect_steps(
    spec: SelfPlaySpec, state: SelfPlayState, params: Params, key: PRNGKey, *, num_steps: int
):
    """`num_steps` self-play steps as one `lax.scan`; metrics summed over the steps."""

    def body(s, k):
        return selfplay_step(spec, s, params, k)

    state, metrics = jax.lax.scan(body, state, jax.random.split(key, num_steps))
    return state, jax.tree_util.tree_map(lambda m: jnp.sum(m, axis=0), metrics)
