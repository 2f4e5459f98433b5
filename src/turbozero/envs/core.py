"""The environment contract: one adapter type every part of turbozero consumes.

An `Env` holds pure, single-game functions (callers `vmap` them over a batch of games):

    init(key) -> (state, StepMetadata)
    step(state, action, key) -> (state, StepMetadata)
    observe(state) -> observation [*observation_shape]
    metadata(state) -> StepMetadata      # what the last init/step reported, from the state alone

`key` is consumed by `init` and `step` (deterministic games ignore it). See docs/conventions.md for
players, rewards, signs, terminal states, truncation and illegal actions. A game with chance events
may also expose its step split at them on `Env.chance` (see `turbozero.envs.chance`).
"""

from __future__ import annotations

import dataclasses
import functools
import math
import numbers
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp

from turbozero.envs.chance import Chance, validate_chance
from turbozero.types import Array, PRNGKey, PyTree, StepMetadata


@dataclasses.dataclass(frozen=True, eq=False)
class Env:
    """An environment adapter (hashable by identity, so it can be closed over by `jit`).

    Attributes:
        name: identifier, e.g. ``"connect_four"`` or ``"gymnax:CartPole-v1"``.
        num_players: 1 or 2.
        num_actions: size of the discrete action space ``A``.
        observation_shape: shape of `observe(state)`.
        init, step, observe, metadata: the contract's functions (see the module docstring).
        deterministic: True when `step` ignores its key; subtree reuse in search needs it.
        chance: for a game with chance events, its step split at them (`decide`, then
            `resolve` with an outcome drawn from `probabilities`; see `turbozero.envs.chance`);
            None for the others, whose `step` draws any randomness itself.
        render_svg: optional host-side function drawing one (unbatched) state as SVG text.
        raw: the wrapped library object, if any (e.g. the `pgx.Env`).
        action_shape: None for the discrete games above (actions are int32 indices in
            ``[0, num_actions)``); for a continuous action space, the shape ``[D]`` of one float32
            action. Continuous environments set ``num_actions = prod(action_shape)`` (the action
            dimension) and report an all-True ``action_mask`` of that length.
        action_low, action_high: for continuous spaces, the bounds of each action component
            (floats or arrays broadcastable to ``action_shape``); None when unbounded or discrete.
        action_components: for a discrete space that is a product of choices (jumanji's
            ``MultiDiscreteArray``, e.g. Minesweeper's ``[row, col]``), the size of each
            component; the flat index is row-major,
            ``jnp.ravel_multi_index(components, action_components)``, and
            ``num_actions == prod(action_components)``. None for a plain discrete or a continuous
            space.
        episode_stats: optional `episode_stats(state) -> {name: [] float32}`, figures of a
            game's last state that evaluation reports beside the return (2048's largest tile,
            whether it reached 1024 and 2048): `play_match` computes them for every game, and
            the AlphaZero evaluation logs each one's mean over games as `eval/<name>` and its
            largest as `eval/<name>/max`.
    """

    name: str
    num_players: int
    num_actions: int
    observation_shape: tuple[int, ...]
    init: Callable[[PRNGKey], tuple[PyTree, StepMetadata]]
    step: Callable[[PyTree, Array, PRNGKey], tuple[PyTree, StepMetadata]]
    observe: Callable[[PyTree], Array]
    metadata: Callable[[PyTree], StepMetadata]
    deterministic: bool = True
    chance: Chance | None = None
    render_svg: Callable[[PyTree], str] | None = None
    raw: Any = None
    action_shape: tuple[int, ...] | None = None
    action_low: Any = None
    action_high: Any = None
    action_components: tuple[int, ...] | None = None
    episode_stats: Callable[[PyTree], dict[str, Array]] | None = None

    @property
    def continuous(self) -> bool:
        """True when actions are float vectors of `action_shape` rather than discrete indices."""
        return self.action_shape is not None

    def __post_init__(self) -> None:
        if isinstance(self.num_players, bool) or self.num_players not in (1, 2):
            raise ValueError(
                f"num_players must be 1 or 2 (games with 3+ players are not supported yet), "
                f"got {self.num_players!r} for {self.name!r}"
            )
        if (
            isinstance(self.num_actions, bool)
            or not isinstance(self.num_actions, numbers.Integral)
            or self.num_actions < 1
        ):
            raise ValueError(
                f"num_actions must be an int >= 1, got {self.num_actions!r} for {self.name!r}"
            )
        if self.action_components is not None and (
            self.continuous
            or not self.action_components
            or math.prod(self.action_components) != self.num_actions
        ):
            raise ValueError(
                f"action_components={self.action_components!r} must be the component sizes of "
                f"a discrete action space, whose product is num_actions={self.num_actions}, "
                f"for {self.name!r}"
            )
        for fn_name in ("init", "step", "observe", "metadata"):
            if not callable(getattr(self, fn_name)):
                raise TypeError(f"Env.{fn_name} must be callable for {self.name!r}")
        if self.chance is not None:
            validate_chance(self.chance, name=self.name, deterministic=self.deterministic)

    def __repr__(self) -> str:
        return (
            f"Env({self.name!r}, players={self.num_players}, actions={self.num_actions}, "
            f"observation={self.observation_shape})"
        )


@functools.lru_cache(maxsize=64)
def _single_state_leaves(env: Env) -> list[Any]:
    """Shapes of one game's state leaves (traced once per environment)."""
    return jax.tree_util.tree_leaves(jax.eval_shape(env.init, jax.random.PRNGKey(0))[0])


def check_batched(env: Env, states: PyTree, who: str) -> None:
    """Raise a `ValueError` naming `who` unless `states` are a batch (a leading axis on every
    leaf of `env`'s single-game state); shapes only, so it also works on traced states."""
    singles = _single_state_leaves(env)
    leaves = jax.tree_util.tree_leaves(states)
    if len(leaves) != len(singles) or any(
        jnp.ndim(x) != len(s.shape) + 1 or tuple(jnp.shape(x)[1:]) != tuple(s.shape)
        for x, s in zip(leaves, singles, strict=True)
    ):
        raise ValueError(
            f"{who} takes a batch of {env.name!r} states (a leading axis [B, ...] on every "
            f"leaf); for one state pass jax.tree.map(lambda x: x[None], state)"
        )


def check_discrete_action(name: str, action: Any) -> None:
    """Raise a `TypeError` (when `step` is traced) unless `action` holds integer move indices:
    a float would be truncated or fail deep inside the game. Its range cannot be checked here
    (the values are traced); moves outside `[0, num_actions)` are the caller's to avoid."""
    dtype = jnp.result_type(action)
    if not (jnp.issubdtype(dtype, jnp.integer) and not jnp.issubdtype(dtype, jnp.bool_)):
        raise TypeError(
            f"{name}: step takes integer move indices (int32) for a discrete action space, "
            f"got dtype {dtype}"
        )


def hold_finished(state: PyTree, stepped: PyTree) -> PyTree:
    """`stepped`, except that a game already over keeps its state with zero rewards.

    For adapters whose states carry `metadata` (the contract's rule: rewards are zero on steps
    taken after termination and the state does not change).
    """
    old = state.metadata
    finished = old.terminated | old.truncated
    frozen = state.replace(metadata=old.replace(rewards=jnp.zeros_like(old.rewards)))
    return jax.tree.map(lambda f, s: jnp.where(finished, f, s), frozen, stepped)
