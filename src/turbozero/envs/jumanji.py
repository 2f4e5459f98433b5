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
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
from jax.typing import ArrayLike

from turbozero import struct
from turbozero.envs.core import Env, check_discrete_action, hold_finished
from turbozero.types import Array, PRNGKey, PyTree, StepMetadata


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


def make_jumanji(name: str) -> Env:
    """A jumanji environment by its registered id (``"Snake-v1"``, ``"Minesweeper-v0"``, ...).

    Args:
        name: the id given to `jumanji.make`.

    Returns:
        A one-player `Env` named ``"jumanji:<name>"`` whose states are `JumanjiState` and whose
        observations are flat float32 vectors.

    Raises:
        ImportError: when jumanji is not installed.
        ValueError: for an unknown id, an unsupported action spec, more joint actions than an
            int32 index holds, rewards per agent, or an action mask of a size the adapter
            cannot read.
    """
    try:
        import jumanji
        from jumanji import specs
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
    spec = env.action_spec
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
    env_action_shape = tuple(int(d) for d in spec.shape)

    def _flatten(obs: PyTree) -> tuple[Array, Array]:
        leaves, mask = _split_observation(obs)
        flat = jnp.concatenate([jnp.ravel(jnp.asarray(x, jnp.float32)) for x in leaves])
        if mask is None or action_shape is not None:
            return flat, jnp.ones((num_actions,), jnp.bool_)
        mask = jnp.asarray(mask, jnp.bool_)
        if mask.size == num_actions:  # one flag per (joint) action, e.g. Minesweeper's [rows, cols]
            return flat, jnp.reshape(mask, (num_actions,))
        if multi is not None and mask.size == sum(multi):
            # one row per component (RobotWarehouse's [agents, moves]): the joint move is legal
            # when every component's choice is; an outer product, raveled row-major
            flags = jnp.ravel(mask)
            parts = jnp.split(flags, np.cumsum(multi)[:-1])
            full = parts[0]
            for part in parts[1:]:
                full = (full[:, None] & part[None, :]).reshape(-1)
            return flat, full
        raise ValueError(
            f"jumanji environment {name!r}: its observation's action_mask has shape "
            f"{tuple(mask.shape)}, which is neither one flag per action ({num_actions}"
            + (f", or the shape {multi}" if multi is not None else "")
            + ")"
            + (f" nor one per component choice ({sum(multi)})" if multi is not None else "")
            + "; the adapter cannot tell which moves are legal"
        )

    def _metadata(ts, mask: Array, step: ArrayLike) -> StepMetadata:
        last = ts.last()
        terminated = last & (ts.discount == 0)
        return StepMetadata(
            rewards=jnp.reshape(jnp.asarray(ts.reward, jnp.float32), (1,)),
            action_mask=mask,
            terminated=jnp.asarray(terminated, jnp.bool_),
            cur_player_id=jnp.int32(0),
            step=jnp.asarray(step, jnp.int32),
            truncated=jnp.asarray(last & ~terminated, jnp.bool_),
        )

    def init(key: PRNGKey) -> tuple[JumanjiState, StepMetadata]:
        inner, ts = env.reset(key)
        obs, mask = _flatten(ts.observation)
        md = _metadata(ts, mask, 0)
        md = md.replace(
            rewards=jnp.zeros((1,), jnp.float32),
            terminated=jnp.bool_(False),
            truncated=jnp.bool_(False),
        )
        return JumanjiState(inner, obs, md), md

    def _env_action(action: Array) -> Array:
        if action_shape is not None:
            a = jnp.broadcast_to(jnp.asarray(action, jnp.float32), action_shape)
            return jnp.reshape(a, env_action_shape).astype(spec.dtype)
        check_discrete_action(f"jumanji:{name}", action)
        if multi is not None:
            parts = jnp.unravel_index(jnp.asarray(action, jnp.int32), multi)
            return jnp.reshape(jnp.stack(parts), env_action_shape).astype(spec.dtype)
        return jnp.asarray(action, spec.dtype)

    def step(state: JumanjiState, action: Array, key: PRNGKey) -> tuple[JumanjiState, StepMetadata]:
        del key  # jumanji draws its randomness from the state
        inner, ts = env.step(state.inner, _env_action(action))
        obs, mask = _flatten(ts.observation)
        old = state.metadata
        md = _metadata(ts, mask, old.step + 1)
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
    return Env(
        name=f"jumanji:{name}",
        num_players=1,
        num_actions=num_actions,
        observation_shape=obs_shape,
        init=init,
        step=step,
        observe=observe,
        metadata=metadata,
        deterministic=False,
        raw=env,
        action_shape=action_shape,
        action_low=low,
        action_high=high,
    )
