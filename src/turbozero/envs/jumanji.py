"""Adapter for jumanji environments (single-agent puzzles and routing problems).

The observation is flattened: every array leaf of jumanji's observation except `action_mask` is cast
to float32, raveled and concatenated in pytree order, giving `observation_shape = (F,)`. A leaf
called `action_mask` becomes the contract's `action_mask`.

Action spaces: `DiscreteArray` gives `num_actions = num_values`; `MultiDiscreteArray` (e.g.
Minesweeper's `[row, col]`) is flattened into one index `a` in `[0, prod(num_values))`, unravelled
row-major before stepping (at most 2**31 - 1 joint actions, an int32 index). Its `action_mask`
is read by size: one flag per joint action (Minesweeper's `[rows, cols]`, Sudoku's `[9, 9, 9]`)
is raveled the same way; one row per component (RobotWarehouse's `[agents, 5]`, Cleaner's,
LevelBasedForaging's) gives the joint mask as their outer product (a joint move is legal when
every component's choice is). A mask of any other size is refused when the adapter is built,
since the legal moves could not be known. `BoundedArray` float specs give a continuous `Env`
with flat `(D,)` actions (reshaped to the spec's shape before stepping).

jumanji marks the last step with `step_type == LAST`; a zero discount means termination, a non-zero
one truncation (a time limit). As with the other adapters, a finished episode stays frozen with zero
reward until the caller resets it.

jumanji keeps its randomness in the state (a `key` field), so `step` ignores the key it is given.
The games in `DETERMINISTIC` draw nothing from that key after `reset` and are marked
`Env.deterministic` (subtree reuse); the others (2048's new tiles, Tetris's pieces, Snake's fruit,
...) are not. Either way a search that steps the true state sees what the player would not: the
draws its key will make, and hidden parts of the state such as Minesweeper's mines.

A `reward_fn` replaces the environment's reward: `reward_fn(state, action, next_state)`, or
jumanji's own `RewardFn` convention `reward_fn(state, action)` (the state before the move, as
the user's Minesweeper notebook wrote it), on jumanji's states and its (unflattened) action.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import math
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike

from turbozero import struct
from turbozero.envs.core import Env, check_discrete_action, hold_finished
from turbozero.types import Array, PRNGKey, PyTree, StepMetadata

#: jumanji ids whose `step` draws nothing from the state's key (randomness at reset only):
#: marked `Env.deterministic`, each checked by a test that changes the key held in the state.
#: Not marked: Game2048, Tetris, Snake, PacMan, MMST and RobotWarehouse (their steps split the
#: state's key), and Sokoban (deterministic, but its levels are downloaded: not tested here).
DETERMINISTIC = frozenset(
    {
        "BinPack-v2",
        "CVRP-v1",
        "Cleaner-v0",
        "FlatPack-v0",
        "GraphColoring-v1",
        "Knapsack-v1",
        "Maze-v0",
        "Minesweeper-v0",
        "RubiksCube-partly-scrambled-v0",
        "RubiksCube-v0",
        "SlidingTilePuzzle-v0",
        "Sudoku-v0",
        "Sudoku-very-easy-v0",
        "TSP-v1",
    }
)

#: `reward_fn(state, action, next_state) -> []` or `reward_fn(state, action) -> []`, on jumanji's
#: states and action
RewardFn = Callable[..., Array]


def uncovered_share(state: Any, action: Array, next_state: Any) -> Array:
    """Minesweeper: the share of the board's cells uncovered after the move, a mine not counted.

    The user's notebook rewards every move with the share of the board uncovered; its version
    reads the board before the move and also leaves out the cells showing 1 (jumanji's
    `IS_MINE` constant is 1, a neighbour count on the board, not a mine marker). A solved 10x10
    board with 10 mines has earned ``sum(k / 100 for k in 1..90) = 40.95``.
    """
    del state, action
    board = next_state.board
    mines = jnp.zeros(board.size, jnp.bool_).at[next_state.flat_mine_locations].set(True)
    uncovered = (jnp.ravel(board) >= 0) & ~mines  # (UNEXPLORED_ID is -1)
    return jnp.sum(uncovered, dtype=jnp.float32) / board.size


#: rewards a config can name (configs are JSON); anything else as ``"package.module:function"``
REWARDS: dict[str, RewardFn] = {"uncovered_share": uncovered_share}


def resolve_reward_fn(reward_fn: RewardFn | str) -> tuple[RewardFn, int]:
    """The reward function `reward_fn` names and how many arguments it takes (2 or 3).

    Args:
        reward_fn: a callable, a name in `REWARDS`, or ``"package.module:function"``.

    Raises:
        ValueError: for an unknown name, a module or attribute that cannot be imported, an
            object that is not callable, or a function taking neither 2 nor 3 arguments.
    """
    fn: Any = reward_fn
    if isinstance(reward_fn, str):
        if reward_fn in REWARDS:
            fn = REWARDS[reward_fn]
        elif ":" in reward_fn:
            module_name, _, qualname = reward_fn.partition(":")
            try:
                fn = importlib.import_module(module_name)
                for part in qualname.split("."):
                    fn = getattr(fn, part)
            except (ImportError, AttributeError) as e:
                raise ValueError(
                    f"reward_fn {reward_fn!r} cannot be imported ({type(e).__name__}: {e}); "
                    f"give 'package.module:function' of an importable module"
                ) from None
        else:
            raise ValueError(
                f"unknown reward_fn {reward_fn!r}: registered ones are {sorted(REWARDS)}; "
                f"a function of your own as 'package.module:function'"
            )
    if not callable(fn):
        raise ValueError(f"reward_fn must be callable, got {type(fn).__name__} ({reward_fn!r})")
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):  # (no signature to read: a builtin; take the general form)
        return fn, 3
    required = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if any(p.kind == p.VAR_POSITIONAL for p in params) or len(required) >= 3:
        return fn, 3
    if len(required) == 2:
        return fn, 2
    raise ValueError(
        f"reward_fn {reward_fn!r} takes {len(required)} positional argument(s); it must take "
        f"(state, action, next_state) or jumanji's (state, action)"
    )


def _three_argument_reward(reward_fn: RewardFn | str) -> Callable[[PyTree, Array, PyTree], Array]:
    """`reward_fn` resolved and called as ``(state, action, next_state) -> float32 []``."""
    fn, arity = resolve_reward_fn(reward_fn)

    def reward(state: PyTree, action: Array, next_state: PyTree) -> Array:
        args = (state, action, next_state)[:arity]
        return jnp.asarray(fn(*args), jnp.float32)

    return reward


@struct.dataclass
class JumanjiState(struct.Struct):
    """A jumanji state with what the last `init`/`step` produced.

    Attributes:
        inner: the jumanji environment state.
        observation: `[F]` float32 flattened observation.
        metadata: what the last `init`/`step` reported.
    """

    inner: PyTree
    observation: Array
    metadata: StepMetadata


def _split_observation(obs: PyTree) -> tuple[list[Array], Array | None]:
    mask = getattr(obs, "action_mask", None)
    if mask is None and isinstance(obs, dict):
        mask = obs.get("action_mask")
    leaves = []
    for path, leaf in jax.tree_util.tree_leaves_with_path(obs):
        last = path[-1] if path else None
        name = getattr(last, "name", None) or getattr(last, "key", None)
        if name == "action_mask":
            continue
        leaves.append(leaf)
    return leaves, mask


#: the most values an integer observation field may take to be one-hot encoded (`one_hot=True`)
ONE_HOT_MAX_VALUES = 32


def _one_hot_ranges(observation_spec: Any, observation: PyTree) -> list[tuple[int, int] | None]:
    """Per non-mask observation leaf (in `_split_observation`'s order), `(minimum, size)` when
    its spec is an integer `BoundedArray` with one bound for all its entries and at most
    `ONE_HOT_MAX_VALUES` values; None for the others (kept as numbers)."""
    ranges: list[tuple[int, int] | None] = []
    for path, leaf in jax.tree_util.tree_leaves_with_path(observation):
        names = [getattr(p, "name", None) or getattr(p, "key", None) for p in path]
        if names and names[-1] == "action_mask":
            continue
        spec = observation_spec
        for n in names:
            spec = getattr(spec, str(n), None)
        low, high = getattr(spec, "minimum", None), getattr(spec, "maximum", None)
        if (
            low is None
            or high is None
            or not jnp.issubdtype(leaf.dtype, jnp.integer)
            or np.size(low) != 1
            or np.size(high) != 1
            or not 2 <= int(high) - int(low) + 1 <= ONE_HOT_MAX_VALUES
        ):
            ranges.append(None)
        else:
            ranges.append((int(low), int(high) - int(low) + 1))
    return ranges


def _load_jumanji(name: str) -> Any:
    """`jumanji.make(name)`, refusing an unknown id (with close matches), a missing jumanji and
    rewards per agent."""
    try:
        import jumanji
    except ImportError as e:  # pragma: no cover - depends on the installation
        raise ImportError(
            "jumanji environments need the 'jumanji' package: pip install 'turbozero[envs]'"
        ) from e
    known = list(jumanji.registered_environments())
    if name not in known:
        import difflib

        close = difflib.get_close_matches(name, known, n=3, cutoff=0.4)
        hint = f" Did you mean {' or '.join(map(repr, close))}?" if close else ""
        raise ValueError(f"unknown jumanji environment {name!r}.{hint}")
    env = jumanji.make(name)
    reward_shape = tuple(int(d) for d in getattr(env.reward_spec, "shape", ()))
    if reward_shape != ():
        raise ValueError(
            f"jumanji environment {name!r} gives one reward per agent (reward shape "
            f"{reward_shape}); the adapter is for one player with a scalar reward. A team "
            f"reward (their sum, say) can be written with turbozero.envs.from_functions"
        )
    return env


def _action_layout(
    name: str, spec: Any
) -> tuple[
    int, tuple[int, ...] | None, np.ndarray | None, np.ndarray | None, tuple[int, ...] | None
]:
    """`(num_actions, action_shape, low, high, components)` of a jumanji action spec: discrete
    (`action_shape` None), joint discrete choices flattened into one index (`components`, at
    most int32's), or a float box flattened to `(D,)` with its bounds."""
    from jumanji import specs

    action_shape: tuple[int, ...] | None = None
    low = high = None
    multi: tuple[int, ...] | None = None
    if isinstance(spec, specs.DiscreteArray):
        num_actions = int(spec.num_values)
    elif isinstance(spec, specs.MultiDiscreteArray):
        multi = tuple(int(n) for n in np.asarray(spec.num_values).reshape(-1))
        num_actions = math.prod(multi)
        if num_actions > np.iinfo(np.int32).max:
            raise ValueError(
                f"jumanji environment {name!r} has {num_actions:,} joint actions "
                f"(MultiDiscreteArray {list(multi)}); the adapter flattens them into one int32 "
                f"index, so at most {np.iinfo(np.int32).max:,} are supported"
            )
    elif isinstance(spec, specs.BoundedArray) and np.issubdtype(spec.dtype, np.floating):
        # flat `(D,)` for the policy; a `[D1, D2, ...]` box is reshaped back when stepping
        box = tuple(int(d) for d in np.shape(np.zeros(spec.shape))) or (1,)
        action_shape = (math.prod(box),)
        num_actions = action_shape[0]
        low = np.broadcast_to(np.asarray(spec.minimum, np.float32), box).ravel().copy()
        high = np.broadcast_to(np.asarray(spec.maximum, np.float32), box).ravel().copy()
    else:
        raise ValueError(
            f"jumanji environment {name!r} has action spec {type(spec).__name__}; supported: "
            f"DiscreteArray, MultiDiscreteArray, float BoundedArray"
        )
    return num_actions, action_shape, low, high, multi


def _legal_mask(name: str, mask: Any, num_actions: int, multi: tuple[int, ...] | None) -> Array:
    """`[A]` bool legal (joint) actions from a jumanji observation's action mask."""

    mask = jnp.asarray(mask, jnp.bool_)
    if mask.size == num_actions:  # one flag per (joint) action, e.g. Minesweeper's [rows, cols]
        return jnp.reshape(mask, (num_actions,))
    if multi is not None and mask.size == sum(multi):
        # one row per component (RobotWarehouse's [agents, moves]): the joint move is legal
        # when every component's choice is; an outer product, raveled row-major
        flags = jnp.ravel(mask)
        parts = jnp.split(flags, np.cumsum(multi)[:-1])
        full = parts[0]
        for part in parts[1:]:
            full = (full[:, None] & part[None, :]).reshape(-1)
        return full
    raise ValueError(
        f"jumanji environment {name!r}: its observation's action_mask has shape "
        f"{tuple(mask.shape)}, which is neither one flag per action ({num_actions}"
        + (f", or the shape {multi}" if multi is not None else "")
        + ")"
        + (f" nor one per component choice ({sum(multi)})" if multi is not None else "")
        + "; the adapter cannot tell which moves are legal"
    )


def _jumanji_metadata(ts: Any, mask: Array, step: ArrayLike, reward: ArrayLike) -> StepMetadata:
    """The contract's metadata of a jumanji timestep: a last step with discount 0 ended the
    game, one with a discount left was cut by the time limit."""
    last = ts.last()
    terminated = last & (ts.discount == 0)
    return StepMetadata(
        rewards=jnp.reshape(jnp.asarray(reward, jnp.float32), (1,)),
        action_mask=mask,
        terminated=jnp.asarray(terminated, jnp.bool_),
        cur_player_id=jnp.int32(0),
        step=jnp.asarray(step, jnp.int32),
        truncated=jnp.asarray(last & ~terminated, jnp.bool_),
    )


class _Layout(NamedTuple):
    """How the adapter reads a jumanji environment's observations and writes its actions."""

    name: str  # the jumanji id
    num_actions: int  # flat (joint) discrete actions, or the flat box's size
    action_shape: tuple[int, ...] | None  # `(D,)` for a float box, None when discrete
    multi: tuple[int, ...] | None  # the components of a joint discrete action
    env_action_shape: tuple[int, ...]  # the shape jumanji's step takes
    env_action_dtype: Any
    ranges: tuple[tuple[int, int] | None, ...]  # per observation leaf: one-hot `(low, size)`


def _flatten_observation(layout: _Layout, obs: PyTree) -> tuple[Array, Array]:
    """A jumanji observation as one flat float32 vector, its one-hot fields expanded, and the
    `[A]` legal actions (all legal for a float box or without an action mask)."""
    leaves, mask = _split_observation(obs)
    parts = []
    for i, x in enumerate(leaves):
        if i < len(layout.ranges) and layout.ranges[i] is not None:
            low, size = layout.ranges[i]  # type: ignore[misc]
            parts.append(jnp.ravel(jax.nn.one_hot(jnp.asarray(x, jnp.int32) - low, size)))
        else:
            parts.append(jnp.ravel(jnp.asarray(x, jnp.float32)))
    flat = jnp.concatenate(parts)
    if mask is None or layout.action_shape is not None:
        return flat, jnp.ones((layout.num_actions,), jnp.bool_)
    return flat, _legal_mask(layout.name, mask, layout.num_actions, layout.multi)


def _to_env_action(layout: _Layout, action: Array) -> Array:
    """Our action (a flat index or a flat box vector) as jumanji's step takes it."""
    shape, dtype = layout.env_action_shape, layout.env_action_dtype
    if layout.action_shape is not None:
        a = jnp.broadcast_to(jnp.asarray(action, jnp.float32), layout.action_shape)
        return jnp.reshape(a, shape).astype(dtype)
    check_discrete_action(f"jumanji:{layout.name}", action)
    if layout.multi is not None:
        parts = jnp.unravel_index(jnp.asarray(action, jnp.int32), layout.multi)
        return jnp.reshape(jnp.stack(parts), shape).astype(dtype)
    return jnp.asarray(action, dtype)


def make_jumanji(
    name: str, *, reward_fn: RewardFn | str | None = None, one_hot: bool = False
) -> Env:
    """A jumanji environment by its registered id (``"Snake-v1"``, ``"Minesweeper-v0"``, ...).

    Args:
        name: the id given to `jumanji.make`.
        reward_fn: replaces the environment's reward: a function
            ``reward_fn(state, action, next_state) -> reward`` or ``reward_fn(state, action)``
            (jumanji's `RewardFn`, given the state before the move), of jumanji's states and its
            action (Minesweeper's ``[row, col]``), returning a scalar; or its name in `REWARDS`
            (``"uncovered_share"``) or ``"package.module:function"``. None: jumanji's reward.
        one_hot: encode each integer observation field whose spec bounds it to at most
            `ONE_HOT_MAX_VALUES` values as one-hot flags, one per value (Minesweeper's board,
            -1 to 8, becomes 10 flags per cell), as jumanji's own networks for such boards do;
            other fields stay numbers. A linear layer then reads "this cell shows a 0" directly.

    Returns:
        A one-player `Env` named ``"jumanji:<name>"`` whose states are `JumanjiState` and whose
        observations are flat float32 vectors.

    Raises:
        ImportError: when jumanji is not installed.
        ValueError: for an unknown id, an unsupported action spec, more joint actions than an
            int32 index holds, rewards per agent, an action mask of a size the adapter
            cannot read, or a `reward_fn` that cannot be found or called (see
            `resolve_reward_fn`) or does not return one number for this game.
    """
    env = _load_jumanji(name)
    reward_of = None if reward_fn is None else _three_argument_reward(reward_fn)
    spec = env.action_spec
    num_actions, action_shape, low, high, multi = _action_layout(name, spec)

    ranges: tuple[tuple[int, int] | None, ...] = ()
    if one_hot:
        example = jax.eval_shape(lambda k: env.reset(k)[1].observation, jax.random.PRNGKey(0))
        ranges = tuple(_one_hot_ranges(env.observation_spec, example))
    layout = _Layout(
        name,
        num_actions,
        action_shape,
        multi,
        tuple(int(d) for d in spec.shape),
        spec.dtype,
        ranges,
    )

    def init(key: PRNGKey) -> tuple[JumanjiState, StepMetadata]:
        inner, ts = env.reset(key)
        obs, mask = _flatten_observation(layout, ts.observation)
        md = _jumanji_metadata(ts, mask, 0, 0.0)
        md = md.replace(terminated=jnp.bool_(False), truncated=jnp.bool_(False))
        return JumanjiState(inner, obs, md), md

    _env_action = functools.partial(_to_env_action, layout)

    def step(state: JumanjiState, action: Array, key: PRNGKey) -> tuple[JumanjiState, StepMetadata]:
        del key  # jumanji draws its randomness from the state
        env_action = _env_action(action)
        inner, ts = env.step(state.inner, env_action)
        reward = ts.reward if reward_of is None else reward_of(state.inner, env_action, inner)
        obs, mask = _flatten_observation(layout, ts.observation)
        old = state.metadata
        md = _jumanji_metadata(ts, mask, old.step + 1, reward)
        stepped = JumanjiState(inner, obs, md)
        new = hold_finished(state, stepped)
        return new, new.metadata

    def observe(state: JumanjiState) -> Array:
        return state.observation

    def metadata(state: JumanjiState) -> StepMetadata:
        return state.metadata

    obs_shape = tuple(
        int(d)
        for d in jax.eval_shape(lambda k: init(k)[0].observation, jax.random.PRNGKey(0)).shape
    )
    if reward_of is not None:
        _check_reward(name, reward_fn, init, _env_action, reward_of, action_shape)
    return Env(
        name=f"jumanji:{name}",
        num_players=1,
        num_actions=num_actions,
        observation_shape=obs_shape,
        init=init,
        step=step,
        observe=observe,
        metadata=metadata,
        deterministic=name in DETERMINISTIC,
        raw=env,
        action_shape=action_shape,
        action_low=low,
        action_high=high,
        action_components=multi,
    )


def _check_reward(
    name: str,
    reward_fn: Any,
    init: Callable[[PRNGKey], tuple[JumanjiState, StepMetadata]],
    env_action: Callable[[Array], Array],
    reward: Callable[[PyTree, Array, PyTree], Array],
    action_shape: tuple[int, ...] | None,
) -> None:
    """A `ValueError` unless `reward_fn` traces on this game's states and returns one number
    (shapes only: nothing is computed)."""

    def first_reward(key: PRNGKey) -> Array:
        state, _ = init(key)
        if action_shape is None:
            action = env_action(jnp.int32(0))
        else:
            action = env_action(jnp.zeros(action_shape, jnp.float32))
        return reward(state.inner, action, state.inner)

    try:
        out = jax.eval_shape(first_reward, jax.random.PRNGKey(0))
    except Exception as e:
        raise ValueError(
            f"reward_fn {reward_fn!r} fails on jumanji:{name}'s states ({type(e).__name__}: {e})"
        ) from e
    if out.shape != ():
        raise ValueError(
            f"reward_fn {reward_fn!r} returns shape {out.shape} for jumanji:{name}; it must "
            f"return one number (shape ())"
        )
