"""The AlphaZero replay buffer: positions that learn the outcome of the episode they belong to.

Self-play stores a position before anyone knows how its game ends. The buffer keeps one ring of
`capacity` slots per parallel game; each slot remembers which episode it belongs to, the player to
move there and the step index `t` within its episode, and accumulates its return while the episode
runs. When the episode terminates, every slot still holding one of its positions receives its
outcome and becomes sampleable:

    outcome_t = sum_{k >= t} discount**(k - t) * r_k[player_t]

where `r_k` are the rewards `[P]` received on step `k` (the step taken from position `k`). With two
players, terminal rewards and `discount=1` this is the final reward of the player who was to move:
+1 on the winner's positions, -1 on the loser's, 0 for a draw, whatever the order of movers.

Protocol, once per environment step:

    state = buffer.add(state, experience, player)      # one or more times (symmetric copies)
    state = buffer.end_step(state, rewards, terminated, truncated, bootstrap_values)

A truncated episode (cut off by a step limit) is either dropped (`truncation="drop"`: its positions
are never sampled) or closed with a bootstrapped value (`truncation="bootstrap"`: the outcome adds
`discount**(T - t) * bootstrap_values[player_t]`, `T` being the number of steps taken). A game that
is both terminated and truncated counts as terminated.

Slots are reused in ring order; overwriting a slot forgets what it held, so an episode longer than
`capacity`, or one still running when its first positions are overwritten, never hands a position
the outcome of another episode.

Each slot accumulates its own return (`outcome += discount**(t_now - t) * r[player]` on every
step of its episode, a masked `[B, C]` update) instead of differencing one running sum per game
and dividing by `discount**t`, which loses float32 precision in long discounted episodes.
`player` values must lie in `[0, P)`; `add` checks them outside traced code (inside it they
cannot be read).

Shape letters: `B` parallel games (`num_games`), `C` slots per game (`capacity`), `P` players,
`S` sample size, `...` the shape of one experience leaf.
"""

from __future__ import annotations

import functools
import numbers
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from turbozero import struct
from turbozero.struct import pytree_bytes
from turbozero.types import Array, PRNGKey, PyTree
from turbozero.validate import check_count

_TRUNCATION_MODES = ("drop", "bootstrap")


@struct.dataclass
class EpisodeBufferState(struct.Struct):
    """Contents of an episode buffer (a pytree; pass it through `jit` and `scan`).

    Attributes:
        experience: the stored experience pytree, every leaf `[B, C, ...]`.
        player: `[B, C]` int32, the player to move at each stored position.
        episode_id: `[B, C]` int32, the game's episode counter when the slot was written; -1 for a
            slot never written.
        step_index: `[B, C]` int32, `t`: steps taken in its episode before the position.
        outcome: `[B, C]` float32, the discounted return from the position for its player; a
            running sum while the episode runs, final once `assigned`.
        assigned: `[B, C]` bool, the episode has finished and `outcome` is final (sampleable).
        position: `[]` int32, the slot the next `add` writes (the same in every game's ring).
        current_episode: `[B]` int32, episode counter of each game's running episode.
        episode_step: `[B]` int32, steps taken so far in each game's running episode.
        positions_added: `[]` int32, slots written since `init` (every copy counts; wraps
            around past 2**31).
        episodes_finished: `[]` int32, episodes that received outcomes (terminated, or truncated
            under `truncation="bootstrap"`).
        episodes_dropped: `[]` int32, truncated episodes discarded under `truncation="drop"`.
    """

    experience: PyTree  # leaves [B, C, ...]
    player: Array  # [B, C]
    episode_id: Array  # [B, C]
    step_index: Array  # [B, C]
    outcome: Array  # [B, C]
    assigned: Array  # [B, C]
    position: Array  # []
    current_episode: Array  # [B]
    episode_step: Array  # [B]
    positions_added: Array  # []
    episodes_finished: Array  # []
    episodes_dropped: Array  # []

    @property
    def positions_sampleable(self) -> Array:
        """`[]` int32, slots whose outcome is assigned (what `sample` draws from)."""
        return jnp.sum(self.assigned, dtype=jnp.int32)

    @property
    def positions_held(self) -> Array:
        """`[]` int32, slots holding a position (finished, running or dropped)."""
        return jnp.sum(self.episode_id >= 0, dtype=jnp.int32)


class EpisodeSample(NamedTuple):
    """A batch drawn from an episode buffer.

    Attributes:
        experience: the sampled experience pytree, every leaf `[S, ...]` (zeros where not valid).
        outcome: `[S]` float32, the return of each position for its player (0 where not valid).
        player: `[S]` int32, the player to move at each position.
        valid: `[S]` bool, False only when the buffer had nothing sampleable.
        num_available: `[]` int32, sampleable positions when the batch was drawn.
        complete: `[]` bool, `num_available >= S`, i.e. the batch was drawn without replacement;
            otherwise, if anything was available, it was drawn with replacement.
    """

    experience: PyTree
    outcome: Array
    player: Array
    valid: Array
    num_available: Array
    complete: Array


class EpisodeBuffer(NamedTuple):
    """Pure functions of an episode buffer (see `make_episode_buffer`).

    Attributes:
        init: `init(example) -> EpisodeBufferState`; `example` is one unbatched experience.
        add: `add(state, experience, player) -> state`; experience leaves `[B, ...]`, player
            `[B]`.
        end_step: `end_step(state, rewards, terminated, truncated, bootstrap_values=None) ->
            state`; rewards `[B, P]`, terminated and truncated `[B]`, bootstrap_values `[B, P]`.
        sample: `sample(state, key) -> EpisodeSample` of the size fixed in the factory.
        nbytes: `nbytes(example) -> int`, bytes of device memory `init(example)` takes.
        stats: `stats(state) -> dict[str, Array]` of scalar counters.
        num_games, num_players, discount: `B`, `P` and the discount given to the factory.
    """

    init: Callable[[PyTree], EpisodeBufferState]
    add: Callable[[EpisodeBufferState, PyTree, Array], EpisodeBufferState]
    end_step: Callable[..., EpisodeBufferState]
    sample: Callable[[EpisodeBufferState, PRNGKey], EpisodeSample]
    nbytes: Callable[[PyTree], int]
    stats: Callable[[EpisodeBufferState], dict[str, Array]]
    num_games: int
    num_players: int
    discount: float


# --------------------------------------------------------------------------- validation


def _check_batch(name: str, value: Any, shape: tuple[int, ...]) -> None:
    if tuple(np.shape(value)) != shape:
        raise ValueError(f"{name} must have shape {shape}, got {tuple(np.shape(value))}")


def validate_episode_buffer_args(
    num_games: int,
    capacity: int,
    sample_size: int,
    num_players: int,
    discount: float,
    truncation: str,
) -> tuple[int, int, int, int]:
    """`(B, C, S, P)` from the factory's arguments, or a ValueError naming the one out of range."""
    num_games = check_count("num_games", num_games, low=1)
    capacity = check_count("capacity", capacity, low=1)
    if (
        isinstance(sample_size, bool)
        or not isinstance(sample_size, numbers.Integral)
        or not 1 <= sample_size <= num_games * capacity
    ):
        raise ValueError(
            f"sample_size must be an integer in [1, num_games * capacity = "
            f"{num_games * capacity}], got {sample_size!r}"
        )
    if isinstance(num_players, bool) or num_players not in (1, 2):
        raise ValueError(f"num_players must be 1 or 2, got {num_players!r}")
    if not 0.0 < discount <= 1.0:
        raise ValueError(f"discount must be in (0, 1], got {discount!r}")
    if truncation not in _TRUNCATION_MODES:
        raise ValueError(f"truncation must be one of {_TRUNCATION_MODES}, got {truncation!r}")
    return num_games, capacity, int(sample_size), int(num_players)


def validate_add_args(
    state: EpisodeBufferState, experience: PyTree, player: Array, *, num_players: int
) -> None:
    """Refuse an `add` whose experience does not match the buffer's example (structure, shapes
    `[B, ...]`, dtypes) or whose `player` is not `[B]` integer ids in `[0, P)` (values are read
    only outside traced code)."""
    B = state.player.shape[0]
    stored_def = jax.tree.structure(state.experience)
    given_def = jax.tree.structure(experience)
    if given_def != stored_def:  # type: ignore[operator]
        raise ValueError(
            f"experience must have the structure of the example given to init: "
            f"expected {stored_def}, got {given_def}"
        )
    for (path, stored), given in zip(
        jax.tree_util.tree_flatten_with_path(state.experience)[0],
        jax.tree.leaves(experience),
        strict=True,
    ):
        where = jax.tree_util.keystr(path) or "experience"
        expected = (B, *stored.shape[2:])
        if tuple(jnp.shape(given)) != expected:
            raise ValueError(
                f"experience leaf {where} must have shape {expected} ([num_games, ...] with "
                f"the example's shape), got {tuple(jnp.shape(given))}"
            )
        if jnp.result_type(given) != stored.dtype:
            raise ValueError(
                f"experience leaf {where} must have dtype {stored.dtype} like the example, "
                f"got {jnp.result_type(given)}"
            )
    _check_batch("player", player, (B,))
    if not jnp.issubdtype(jnp.result_type(player), jnp.integer):
        raise ValueError(
            f"player must hold integer player ids, got dtype {jnp.result_type(player)}"
        )
    if not isinstance(player, jax.core.Tracer):  # (inside traced code it cannot be read)
        values = np.asarray(player)
        if values.size and (values.min() < 0 or values.max() >= num_players):
            raise ValueError(
                f"player values must lie in [0, {num_players}) (num_players={num_players}), "
                f"got {sorted(set(values.tolist()))}"
            )


def validate_end_step_args(
    state: EpisodeBufferState,
    rewards: Array,
    terminated: Array,
    truncated: Array,
    bootstrap_values: Array | None,
    *,
    num_players: int,
    bootstrap: bool,
) -> None:
    """Refuse an `end_step` whose arrays are not `[B, P]`, `[B]`, `[B]` (and `[B, P]` bootstrap
    values, required with `truncation="bootstrap"`)."""
    B, P = state.player.shape[0], num_players
    _check_batch("rewards", rewards, (B, P))
    _check_batch("terminated", terminated, (B,))
    _check_batch("truncated", truncated, (B,))
    if bootstrap:
        if bootstrap_values is None:
            raise ValueError('bootstrap_values are required with truncation="bootstrap"')
        _check_batch("bootstrap_values", bootstrap_values, (B, P))


# --------------------------------------------------------------------------- the buffer


def init(example: PyTree, *, num_games: int, capacity: int) -> EpisodeBufferState:
    """Empty rings of `capacity` slots for `num_games` games; leaves `[B, C, ...]` shaped like
    the unbatched `example`."""
    B, C = num_games, capacity
    experience = jax.tree.map(
        lambda x: jnp.zeros((B, C, *jnp.shape(x)), jnp.result_type(x)), example
    )
    return EpisodeBufferState(
        experience=experience,
        player=jnp.zeros((B, C), jnp.int32),
        episode_id=jnp.full((B, C), -1, jnp.int32),
        step_index=jnp.zeros((B, C), jnp.int32),
        outcome=jnp.zeros((B, C), jnp.float32),
        assigned=jnp.zeros((B, C), jnp.bool_),
        position=jnp.int32(0),
        current_episode=jnp.zeros((B,), jnp.int32),
        episode_step=jnp.zeros((B,), jnp.int32),
        positions_added=jnp.int32(0),
        episodes_finished=jnp.int32(0),
        episodes_dropped=jnp.int32(0),
    )


def add(state: EpisodeBufferState, experience: PyTree, player: Array) -> EpisodeBufferState:
    """Write one position per game (leaves `[B, ...]`, `player` `[B]`) into the next slot of
    each ring, as a position of the game's running episode whose outcome is not known yet."""
    B, C = state.player.shape
    pos = state.position
    new_experience = jax.tree.map(
        lambda buf, x: buf.at[:, pos].set(x), state.experience, experience
    )
    return state.replace(
        experience=new_experience,
        player=state.player.at[:, pos].set(jnp.asarray(player, jnp.int32)),
        episode_id=state.episode_id.at[:, pos].set(state.current_episode),
        step_index=state.step_index.at[:, pos].set(state.episode_step),
        outcome=state.outcome.at[:, pos].set(0.0),
        assigned=state.assigned.at[:, pos].set(False),
        position=(pos + 1) % C,
        positions_added=state.positions_added + B,
    )


def end_step(
    state: EpisodeBufferState,
    rewards: Array,
    terminated: Array,
    truncated: Array,
    bootstrap_values: Array | None = None,
    *,
    discount: float,
    bootstrap: bool,
) -> EpisodeBufferState:
    """Add this step's rewards `[B, P]` to the running episodes' positions and close the episodes
    that ended (`terminated`, `truncated` `[B]`): their positions become sampleable, or are
    dropped when truncated without `bootstrap`."""
    rewards = jnp.asarray(rewards, jnp.float32)
    terminated = jnp.asarray(terminated, jnp.bool_)
    truncated = jnp.asarray(truncated, jnp.bool_) & ~terminated

    # Slots of each game's running episode: their return grows by this step's reward.
    running = (state.episode_id == state.current_episode[:, None]) & ~state.assigned
    steps_since = (state.episode_step[:, None] - state.step_index).astype(jnp.float32)
    scale = jnp.power(jnp.float32(discount), steps_since)  # [B, C]
    reward_of_mover = jnp.take_along_axis(rewards, state.player, axis=1)  # [B, C]
    outcome = jnp.where(running, state.outcome + scale * reward_of_mover, state.outcome)

    finished = terminated
    if bootstrap:
        finished = terminated | truncated
        values = jnp.asarray(bootstrap_values, jnp.float32)
        value_of_mover = jnp.take_along_axis(values, state.player, axis=1)  # [B, C]
        tail = scale * jnp.float32(discount) * value_of_mover  # discount**(T - t)
        outcome = jnp.where(running & truncated[:, None], outcome + tail, outcome)
        dropped = jnp.int32(0)
    else:
        dropped = jnp.sum(truncated, dtype=jnp.int32)

    ended = terminated | truncated
    return state.replace(
        outcome=outcome,
        assigned=state.assigned | (running & finished[:, None]),
        current_episode=state.current_episode + ended.astype(jnp.int32),
        episode_step=jnp.where(ended, 0, state.episode_step + 1),
        episodes_finished=state.episodes_finished + jnp.sum(finished, dtype=jnp.int32),
        episodes_dropped=state.episodes_dropped + dropped,
    )


def sample(state: EpisodeBufferState, key: PRNGKey, *, sample_size: int) -> EpisodeSample:
    """`sample_size` sampleable positions, uniformly: without replacement when enough are
    available, else with replacement (and none valid when nothing is)."""
    B, C = state.player.shape
    S = sample_size
    available = state.assigned.reshape(B * C)
    num_available = jnp.sum(available, dtype=jnp.int32)
    complete = num_available >= S
    logits = jnp.where(available, 0.0, -jnp.inf)
    key_without, key_with = jax.random.split(key)
    # Gumbel-top-k: S distinct slots, uniformly among the available ones.
    gumbel = jax.random.gumbel(key_without, (B * C,))
    _, without_replacement = jax.lax.top_k(gumbel + logits, S)
    # With replacement: the k-th available slot for uniform k (O(B*C + S log(B*C)); a
    # categorical draw of shape [S] would make an [S, B*C] noise array).
    # (a scan of pairwise sums: `jnp.cumsum` lowers to one reduce-window across the memory,
    # which XLA:CPU runs quickly on one device, but split over devices it became a window the
    # memory's size at every slot, 17x slower for connect_four's 262,144 slots on 2)
    ranks = jax.lax.associative_scan(jnp.add, available.astype(jnp.int32))
    k = jax.random.randint(key_with, (S,), 0, jnp.maximum(num_available, 1))
    with_replacement = jnp.searchsorted(ranks, k + 1, side="left").astype(jnp.int32)
    with_replacement = jnp.minimum(with_replacement, B * C - 1)
    index = jnp.where(complete, without_replacement, with_replacement)
    valid = available[index]

    def gather(leaf: Array) -> Array:
        picked = leaf.reshape(B * C, *leaf.shape[2:])[index]
        mask = valid.reshape(S, *([1] * (picked.ndim - 1)))
        return jnp.where(mask, picked, jnp.zeros_like(picked))

    return EpisodeSample(
        experience=jax.tree.map(gather, state.experience),
        outcome=jnp.where(valid, state.outcome.reshape(B * C)[index], 0.0),
        player=state.player.reshape(B * C)[index],
        valid=valid,
        num_available=num_available,
        complete=complete,
    )


def stats(state: EpisodeBufferState) -> dict[str, Array]:
    """Scalar counters of what the buffer has seen and holds."""
    return {
        "positions_added": state.positions_added,
        "positions_held": state.positions_held,
        "positions_sampleable": state.positions_sampleable,
        "episodes_finished": state.episodes_finished,
        "episodes_dropped": state.episodes_dropped,
    }


# --------------------------------------------------------------------------- the factory


def make_episode_buffer(
    *,
    num_games: int,
    capacity: int,
    sample_size: int,
    num_players: int,
    discount: float = 1.0,
    truncation: str = "drop",
) -> EpisodeBuffer:
    """Builds an episode replay buffer for `num_games` parallel games.

    Args:
        num_games: `B`, games played in parallel (each has its own ring), >= 1.
        capacity: `C`, slots per game, >= 1. The buffer holds `num_games * capacity` positions.
        sample_size: `S`, positions per `sample`, between 1 and `num_games * capacity`.
        num_players: `P`, 1 or 2.
        discount: per-step discount of rewards, in (0, 1].
        truncation: what a truncated episode becomes: "drop" (never sampled) or "bootstrap"
            (closed with `bootstrap_values` of the state it was cut off in).

    Returns:
        An `EpisodeBuffer` of pure, jit-able functions.

    Raises:
        ValueError: an argument is out of range.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> buffer = make_episode_buffer(num_games=2, capacity=4, sample_size=2, num_players=2)
        >>> state = buffer.init({"obs": jnp.zeros(3)})
        >>> state = buffer.add(state, {"obs": jnp.ones((2, 3))}, jnp.array([0, 0]))
        >>> state = buffer.end_step(
        ...     state, jnp.array([[1.0, -1.0], [0.0, 0.0]]), jnp.array([True, False]),
        ...     jnp.array([False, False]))
        >>> batch = buffer.sample(state, jax.random.PRNGKey(0))
        >>> batch.outcome.tolist(), batch.valid.tolist(), bool(batch.complete)
        ([1.0, 1.0], [True, True], False)
    """
    B, C, S, P = validate_episode_buffer_args(
        num_games, capacity, sample_size, num_players, discount, truncation
    )
    bootstrap = truncation == "bootstrap"

    def checked_add(state: EpisodeBufferState, experience: PyTree, player: Array):
        validate_add_args(state, experience, player, num_players=P)
        return add(state, experience, player)

    def checked_end_step(state, rewards, terminated, truncated, bootstrap_values=None):
        validate_end_step_args(
            state,
            rewards,
            terminated,
            truncated,
            bootstrap_values,
            num_players=P,
            bootstrap=bootstrap,
        )
        return end_step(
            state,
            rewards,
            terminated,
            truncated,
            bootstrap_values,
            discount=discount,
            bootstrap=bootstrap,
        )

    def nbytes(example: PyTree) -> int:
        shapes = jax.eval_shape(functools.partial(init, num_games=B, capacity=C), example)
        return pytree_bytes(shapes)

    return EpisodeBuffer(
        init=functools.partial(init, num_games=B, capacity=C),
        add=checked_add,
        end_step=checked_end_step,
        sample=functools.partial(sample, sample_size=S),
        nbytes=nbytes,
        stats=stats,
        num_games=B,
        num_players=P,
        discount=float(discount),
    )
