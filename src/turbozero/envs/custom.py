"""Build an adapter from users' own JAX game functions (the tutorial's `env_step_fn` style)."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp

from turbozero import struct
from turbozero.envs.chance import (
    Chance,
    no_chance_event,
    sample_from_probabilities,
    step_through,
)
from turbozero.envs.core import Env, check_discrete_action, hold_finished
from turbozero.types import Array, PRNGKey, PyTree, StepMetadata


@struct.dataclass
class GameState(struct.Struct):
    """A user game's state kept together with the metadata its last step reported."""

    inner: PyTree
    metadata: StepMetadata


@struct.dataclass
class GameAfterstate(struct.Struct):
    """A user game's afterstate, with the state it was decided from (a finished game resolves
    to that state unchanged, and the step is counted from it)."""

    inner: PyTree
    previous: GameState


def _normalise(md: StepMetadata, num_players: int) -> StepMetadata:
    rewards = jnp.asarray(md.rewards, jnp.float32)
    if rewards.ndim == 0:
        rewards = jnp.broadcast_to(rewards, (num_players,))
    return StepMetadata(
        rewards=rewards,
        action_mask=jnp.asarray(md.action_mask, jnp.bool_),
        terminated=jnp.asarray(md.terminated, jnp.bool_),
        cur_player_id=jnp.asarray(md.cur_player_id, jnp.int32),
        step=jnp.asarray(md.step, jnp.int32),
        truncated=jnp.asarray(md.truncated, jnp.bool_),
    )


def _takes_key(fn: Callable[..., Any]) -> bool:
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return True
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return len(positional) >= 3 or any(p.kind == p.VAR_POSITIONAL for p in params)


def validate_split_args(name: str, **fns: Callable[..., Any] | None) -> bool:
    """Whether `from_functions` was given a chance split (`decide_fn`, `probabilities_fn`,
    `resolve_fn`: all three or none; `sample_fn` only with them); a game needs it or a
    `step_fn`."""
    split = ("decide_fn", "probabilities_fn", "resolve_fn")
    given = [k for k in split if fns.get(k) is not None]
    if given and len(given) < 3:
        missing = [k for k in split if k not in given]
        raise ValueError(
            f"a game with chance needs decide_fn, probabilities_fn and resolve_fn; {name!r} "
            f"gives {', '.join(given)} without {', '.join(missing)}"
        )
    if fns.get("sample_fn") is not None and not given:
        raise ValueError(f"sample_fn of {name!r} needs decide_fn, probabilities_fn, resolve_fn")
    if fns.get("step_fn") is None and not given:
        raise TypeError(
            f"from_functions needs step_fn, or decide_fn, probabilities_fn and resolve_fn, "
            f"for {name!r}"
        )
    return bool(given)


FinishFn = Callable[[GameState, PyTree, StepMetadata, str], GameState]


def _user_chance(
    *,
    decide_fn: Callable[[PyTree, Array], PyTree],
    probabilities_fn: Callable[[PyTree], Array],
    resolve_fn: Callable[[PyTree, Array], tuple[PyTree, StepMetadata]],
    sample_fn: Callable[[PyTree, PRNGKey], Array] | None,
    num_outcomes: int,
    name: str,
    finish: FinishFn,
) -> Chance:
    """A user game's chance split on `GameState`s: a finished game has no chance event and
    resolves to itself; `finish` counts the step and holds finished games as `step` does."""

    def finished(after: GameAfterstate) -> Array:
        md = after.previous.metadata
        return md.terminated | md.truncated

    def decide(state: GameState, action: Array) -> GameAfterstate:
        check_discrete_action(name, action)
        return GameAfterstate(decide_fn(state.inner, action), state)

    def probabilities(after: GameAfterstate) -> Array:
        p = jnp.asarray(probabilities_fn(after.inner), jnp.float32)
        return jnp.where(finished(after), no_chance_event(num_outcomes), p)

    def sample_outcome(after: GameAfterstate, key: PRNGKey) -> Array:
        if sample_fn is None:
            outcome = sample_from_probabilities(probabilities_fn(after.inner), key)
        else:
            outcome = sample_fn(after.inner, key)
        return jnp.where(finished(after), 0, outcome).astype(jnp.int32)

    def resolve(after: GameAfterstate, outcome: Array) -> tuple[GameState, StepMetadata]:
        s, md = resolve_fn(after.inner, outcome)
        new = finish(after.previous, s, md, "resolve_fn")
        return new, new.metadata

    return Chance(num_outcomes, decide, probabilities, resolve, sample_outcome)


def _read_sizes(
    init_fn: Callable[[PRNGKey], tuple[PyTree, StepMetadata]],
    observe_fn: Callable[[PyTree], Array],
    name: str,
    *,
    num_actions: int | None,
    num_players: int | None,
) -> tuple[Any, int, int, tuple[int, ...]]:
    """`(init_fn's output shapes, num_actions, num_players, observation shape)`, the counts read
    off `init_fn` where not given, or a clear error where the functions cannot be traced or
    disagree with what was given."""
    try:
        shape = jax.eval_shape(init_fn, jax.random.PRNGKey(0))
    except Exception as e:
        raise TypeError(f"init_fn of {name!r} could not be traced: {e}") from e
    if not (isinstance(shape, tuple) and len(shape) == 2 and isinstance(shape[1], StepMetadata)):
        raise TypeError(f"init_fn of {name!r} must return (state, StepMetadata)")
    md_shape = shape[1]
    if len(md_shape.action_mask.shape) != 1:
        raise ValueError(
            f"action_mask of {name!r} must have shape [A], got {md_shape.action_mask.shape}"
        )
    if num_actions is None:
        num_actions = int(md_shape.action_mask.shape[0])
    elif num_actions != md_shape.action_mask.shape[0]:
        raise ValueError(
            f"num_actions={num_actions!r} but init_fn of {name!r} returns an action_mask of "
            f"shape {tuple(md_shape.action_mask.shape)}: give the mask's size, or leave "
            f"num_actions out to read it off the mask"
        )
    if num_players is None:
        rshape = md_shape.rewards.shape
        num_players = int(rshape[0]) if len(rshape) == 1 else 1
    try:
        obs_shape = jax.eval_shape(observe_fn, shape[0]).shape
    except Exception as e:
        raise TypeError(f"observe_fn of {name!r} could not be traced: {e}") from e
    return shape, num_actions, num_players, tuple(obs_shape)


def _check_rewards(rewards: Any, where: str, name: str, players: int) -> None:
    """Rewards must be a vector, one per player (a scalar is only read as a one-player
    game's: with two players it would be credited to both)."""
    got = tuple(jnp.shape(rewards))
    if got not in ((players,), () if players == 1 else (players,)):
        raise ValueError(
            f"{where} of {name!r} returns rewards of shape {got}; with "
            f"{players} player(s) they must be a vector [{players}], one per player"
            + (" (a scalar is only read as the one player's)" if players > 1 else "")
        )


def _check_same(before: Any, after: Any, what: str, who: str, name: str) -> None:
    """`who` (`step_fn` or `resolve_fn`) must return a `what` laid out as `init_fn`'s (the
    state is one array program: its leaves keep their shapes and dtypes from step to step)."""

    def layout(tree: Any) -> Any:
        return jax.tree_util.tree_map(lambda x: (jnp.shape(x), jnp.result_type(x)), tree)

    was, now = jax.tree_util.tree_structure(before), jax.tree_util.tree_structure(after)
    if str(was) != str(now):
        raise ValueError(
            f"{who} of {name!r} returns a {what} of another structure than init_fn's: "
            f"{now} instead of {was}"
        )
    if layout(before) != layout(after):
        raise ValueError(
            f"{who} of {name!r} returns a {what} whose (shape, dtype) differ from "
            f"init_fn's: {layout(after)} instead of {layout(before)}"
        )


def _finish(
    previous: GameState, s: PyTree, md: StepMetadata, who: str, *, name: str, players: int
) -> GameState:
    """The state `who` (`step_fn` or `resolve_fn`) stepped to from `previous`, as the contract
    has it."""
    _check_rewards(md.rewards, who, name, players)
    # `step` counts moves since `init_fn` whatever `step_fn` reports (its default, 0, would
    # leave the game uncut by `max_episode_steps` and at the opening's temperature)
    md = _normalise(md, players).replace(step=previous.metadata.step + 1)
    _check_same(previous.inner, s, "state", who, name)
    _check_same(previous.metadata, md, "StepMetadata", who, name)
    # the contract: a finished game keeps its state and pays nothing more
    return hold_finished(previous, GameState(s, md))


def _metadata(state: GameState) -> StepMetadata:
    return state.metadata


def _init_user_game(
    init_fn: Callable[[PRNGKey], tuple[PyTree, StepMetadata]], players: int, key: PRNGKey
) -> tuple[GameState, StepMetadata]:
    """The user's `init_fn` wrapped as the contract's init."""
    s, md = init_fn(key)
    md = _normalise(md, players)
    return GameState(s, md), md


def _step_user_game(
    step_fn: Callable[..., tuple[PyTree, StepMetadata]] | None,
    with_key: bool,
    chance: Chance | None,
    finish: Callable[..., GameState],
    name: str,
    state: GameState,
    action: Array,
    key: PRNGKey,
) -> tuple[GameState, StepMetadata]:
    """The user's `step_fn` (with or without a key) as the contract's step, or, without one,
    the game's chance split stepped through its draw."""
    if step_fn is None:
        assert chance is not None
        return step_through(chance, state, action, key)
    check_discrete_action(name, action)
    if with_key:
        s, md = step_fn(state.inner, action, key)
    else:
        s, md = step_fn(state.inner, action)
    new = finish(state, s, md, "step_fn")
    return new, new.metadata


def _observe_user_game(observe_fn: Callable[[PyTree], Array], state: GameState) -> Array:
    return observe_fn(state.inner)


def from_functions(
    *,
    init_fn: Callable[[PRNGKey], tuple[PyTree, StepMetadata]],
    step_fn: Callable[..., tuple[PyTree, StepMetadata]] | None = None,
    observe_fn: Callable[[PyTree], Array],
    name: str = "custom",
    num_players: int | None = None,
    num_actions: int | None = None,
    deterministic: bool | None = None,
    render_svg: Callable[[PyTree], str] | None = None,
    decide_fn: Callable[[PyTree, Array], PyTree] | None = None,
    probabilities_fn: Callable[[PyTree], Array] | None = None,
    resolve_fn: Callable[[PyTree, Array], tuple[PyTree, StepMetadata]] | None = None,
    sample_fn: Callable[[PyTree, PRNGKey], Array] | None = None,
) -> Env:
    """Adapt user-written game functions to the contract.

    Args:
        init_fn: `init_fn(key) -> (state, StepMetadata)`.
        step_fn: `step_fn(state, action, key) -> (state, StepMetadata)`, or the tutorial's
            two-argument `step_fn(state, action)` (then the game is deterministic). May be left
            out for a game with chance: its step is then built from the split below.
        observe_fn: `observe_fn(state) -> Array`, the network input for the player to move.
        name: identifier shown in logs.
        num_players: 1 or 2; read off the reward vector of `init_fn` when None.
        num_actions: read off the action mask of `init_fn` when None.
        deterministic: whether `step_fn` ignores randomness; defaults to True for two-argument
            step functions and False otherwise (and for games with chance).
        render_svg: optional host-side drawing of one state.
        decide_fn, probabilities_fn, resolve_fn: a game with chance events, split at them (all
            three or none; see `turbozero.envs.chance`): `decide_fn(state, action) ->
            afterstate`, `probabilities_fn(afterstate) -> [C]` (one-hot on outcome 0 when
            nothing is drawn; `C` is read off it), `resolve_fn(afterstate, outcome) -> (state,
            StepMetadata)` with the whole step's rewards.
        sample_fn: `sample_fn(afterstate, key) -> int32` outcome; by default a draw from
            `probabilities_fn`. Give it with a `step_fn` whose draw it reproduces.

    `StepMetadata.step` is counted here (moves since `init_fn`), whatever `step_fn` or
    `resolve_fn` report.

    Returns:
        An `Env` whose states are `GameState(inner=<your state>, metadata=...)` (afterstates
        `GameAfterstate(inner=<your afterstate>, previous=<the state decided from>)`).
    """
    has_split = validate_split_args(
        name,
        step_fn=step_fn,
        decide_fn=decide_fn,
        probabilities_fn=probabilities_fn,
        resolve_fn=resolve_fn,
        sample_fn=sample_fn,
    )
    with_key = True if step_fn is None else _takes_key(step_fn)
    if deterministic is None:
        deterministic = not with_key and not has_split
    shape, num_actions, num_players, obs_shape = _read_sizes(
        init_fn, observe_fn, name, num_actions=num_actions, num_players=num_players
    )
    players = num_players
    _check_rewards(shape[1].rewards, "init_fn", name, players)

    init = functools.partial(_init_user_game, init_fn, players)
    finish = functools.partial(_finish, name=name, players=players)

    chance = None
    if decide_fn is not None and probabilities_fn is not None and resolve_fn is not None:
        num_outcomes = _num_outcomes(decide_fn, probabilities_fn, shape[0], name)
        chance = _user_chance(
            decide_fn=decide_fn,
            probabilities_fn=probabilities_fn,
            resolve_fn=resolve_fn,
            sample_fn=sample_fn,
            num_outcomes=num_outcomes,
            name=name,
            finish=finish,
        )

    step = functools.partial(_step_user_game, step_fn, with_key, chance, finish, name)

    # rewards of a step, checked now rather than when a program first traces it
    jax.eval_shape(
        lambda st: step(st, jnp.int32(0), jax.random.PRNGKey(0)),
        jax.eval_shape(init, jax.random.PRNGKey(0))[0],
    )

    observe = functools.partial(_observe_user_game, observe_fn)
    svg = None if render_svg is None else (lambda state: render_svg(state.inner))
    return Env(
        name=name,
        num_players=num_players,
        num_actions=num_actions,
        observation_shape=tuple(int(d) for d in obs_shape),
        init=init,
        step=step,
        observe=observe,
        metadata=_metadata,
        deterministic=bool(deterministic),
        chance=chance,
        render_svg=svg,
    )


def _num_outcomes(
    decide_fn: Callable[[PyTree, Array], PyTree],
    probabilities_fn: Callable[[PyTree], Array],
    state: PyTree,
    name: str,
) -> int:
    """`C`, read off `probabilities_fn(decide_fn(state, 0))` (a vector `[C]`)."""
    try:
        after = jax.eval_shape(decide_fn, state, jax.ShapeDtypeStruct((), jnp.int32))
        probs = jax.eval_shape(probabilities_fn, after)
    except Exception as e:
        raise TypeError(
            f"decide_fn or probabilities_fn of {name!r} could not be traced: {e}"
        ) from e
    if len(probs.shape) != 1 or probs.shape[0] < 1:
        raise ValueError(
            f"probabilities_fn of {name!r} must return a vector [C] of outcome probabilities, "
            f"got shape {tuple(probs.shape)}"
        )
    return int(probs.shape[0])
