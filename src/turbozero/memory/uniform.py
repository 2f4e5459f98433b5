"""A plain ring buffer of transitions, sampled uniformly with replacement.

It holds any pytree. `add` writes a batch of `T` transitions at the ring position, overwriting the
oldest ones once full; `sample` draws `batch_size` of the filled slots uniformly. Names and
argument order (`init(sample_transition)`, `add(state, transitions)`, `sample(state, batch_size,
key)`, `add_and_sample(state, transitions, batch_size, key)`) are those of the functional
`ReplayBuffer(buffer_size)` that turbozero tutorial users know (`capacity` is its `buffer_size`).

Sampling an empty buffer is an error. Outside `jit` it raises `ValueError`. Under `jit` the fill
level is not known while tracing, so the batch is poisoned instead: floating-point leaves are NaN,
so a loss computed from them is NaN rather than silently trained on zeros (integer and bool leaves
are zero). Check `state.size > 0` first when that matters.

Shape letters: `C` capacity, `T` transitions per `add`, `S` batch size, `...` one leaf's shape.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp

from turbozero import struct
from turbozero.types import Array, PRNGKey, PyTree
from turbozero.validate import check_count


@struct.dataclass
class UniformBufferState(struct.Struct):
    """Contents of a uniform ring buffer.

    Attributes:
        data: the stored pytree, every leaf `[C, ...]`.
        position: `[]` int32, the slot the next transition is written to.
        size: `[]` int32, filled slots, at most `C`.
    """

    data: PyTree  # leaves [C, ...]
    position: Array  # []
    size: Array  # []


class UniformBuffer(NamedTuple):
    """Pure functions of a uniform ring buffer (see `make_uniform_buffer`).

    Attributes:
        init: `init(sample_transition) -> UniformBufferState`; one unbatched transition.
        add: `add(state, transitions) -> state`; leaves `[T, ...]` with `T <= capacity`.
        sample: `sample(state, batch_size, key) -> (state, batch)`; leaves `[S, ...]`.
            `batch_size` is a Python int (static under `jit`).
        add_and_sample: `add_and_sample(state, transitions, batch_size, key) -> (state, batch)`.
    """

    init: Callable[[PyTree], UniformBufferState]
    add: Callable[[UniformBufferState, PyTree], UniformBufferState]
    sample: Callable[[UniformBufferState, int, PRNGKey], tuple[UniformBufferState, PyTree]]
    add_and_sample: Callable[
        [UniformBufferState, PyTree, int, PRNGKey], tuple[UniformBufferState, PyTree]
    ]


def validate_uniform_buffer_args(*, capacity: int) -> int:
    """`capacity` checked (an int >= 1).

    Raises:
        ValueError: `capacity` is out of range.
    """
    return check_count("capacity", capacity, low=1)


def init(sample_transition: PyTree, *, capacity: int) -> UniformBufferState:
    """An empty buffer of `capacity` slots shaped like `sample_transition` (one transition)."""
    data = jax.tree.map(
        lambda x: jnp.zeros((capacity, *jnp.shape(x)), jnp.result_type(x)), sample_transition
    )
    return UniformBufferState(data=data, position=jnp.int32(0), size=jnp.int32(0))


def validate_add_args(state: UniformBufferState, transitions: PyTree, *, capacity: int) -> int:
    """Check that `transitions` is a batch `[T, ...]` of the stored structure, shapes and dtypes,
    with `1 <= T <= capacity`, and return `T`.

    Raises:
        ValueError: naming the leaf and what was expected.
    """
    stored_def = jax.tree.structure(state.data)
    given_def = jax.tree.structure(transitions)
    if given_def != stored_def:  # type: ignore[operator]
        raise ValueError(
            f"transitions must have the structure of the sample transition given to init: "
            f"expected {stored_def}, got {given_def}"
        )
    num = None
    for (path, stored), given in zip(
        jax.tree_util.tree_flatten_with_path(state.data)[0],
        jax.tree.leaves(transitions),
        strict=True,
    ):
        where = jax.tree_util.keystr(path) or "transitions"
        shape = tuple(jnp.shape(given))
        if len(shape) != stored.ndim or shape[1:] != stored.shape[1:]:
            raise ValueError(
                f"transition leaf {where} must have shape [T, *{stored.shape[1:]}] (a batch of "
                f"the sample transition's shape), got {shape}"
            )
        if jnp.result_type(given) != stored.dtype:
            raise ValueError(
                f"transition leaf {where} must have dtype {stored.dtype} like the sample "
                f"transition, got {jnp.result_type(given)}"
            )
        if num is None:
            num = shape[0]
        elif shape[0] != num:
            raise ValueError(
                f"all transition leaves must share the leading size T, got {num} and "
                f"{shape[0]} (leaf {where})"
            )
    if num is None or num < 1:
        raise ValueError("add needs at least one transition (T >= 1)")
    if num > capacity:
        raise ValueError(f"cannot add T={num} transitions to a buffer of capacity {capacity}")
    return num


def add(state: UniformBufferState, transitions: PyTree, *, capacity: int) -> UniformBufferState:
    """Write `transitions` (leaves `[T, ...]`) at the ring position, overwriting the oldest."""
    num = jax.tree.leaves(transitions)[0].shape[0]
    index = (state.position + jnp.arange(num)) % capacity
    data = jax.tree.map(lambda buf, x: buf.at[index].set(x), state.data, transitions)
    return state.replace(
        data=data,
        position=(state.position + num) % capacity,
        size=jnp.minimum(state.size + num, capacity),
    )


def validate_sample_args(state: UniformBufferState, batch_size: int) -> int:
    """`batch_size` checked (>= 1), and a concrete buffer checked to be non-empty.

    Raises:
        ValueError: `batch_size` out of range, or the buffer is empty (outside `jit`).
    """
    batch_size = check_count("batch_size", batch_size, low=1)
    if not isinstance(state.size, jax.core.Tracer) and int(state.size) == 0:
        raise ValueError("sample called on an empty buffer: add transitions first")
    return batch_size


def sample(
    state: UniformBufferState, batch_size: int, key: PRNGKey
) -> tuple[UniformBufferState, PyTree]:
    """`batch_size` filled slots drawn uniformly with replacement (leaves `[S, ...]`); an empty
    buffer under `jit` gives a poisoned batch (NaN floats, zero integers)."""
    filled = state.size > 0
    index = jax.random.randint(key, (batch_size,), 0, jnp.maximum(state.size, 1))

    def gather(leaf: Array) -> Array:
        picked = leaf[index]
        poison = jnp.nan if jnp.issubdtype(leaf.dtype, jnp.inexact) else 0
        return jnp.where(filled, picked, jnp.full_like(picked, poison))

    return state, jax.tree.map(gather, state.data)


def _checked_add(
    state: UniformBufferState, transitions: PyTree, *, capacity: int
) -> UniformBufferState:
    validate_add_args(state, transitions, capacity=capacity)
    return add(state, transitions, capacity=capacity)


def _checked_sample(
    state: UniformBufferState, batch_size: int, key: PRNGKey
) -> tuple[UniformBufferState, PyTree]:
    return sample(state, validate_sample_args(state, batch_size), key)


def _add_and_sample(
    state: UniformBufferState, transitions: PyTree, batch_size: int, key: PRNGKey, *, capacity: int
) -> tuple[UniformBufferState, PyTree]:
    return _checked_sample(_checked_add(state, transitions, capacity=capacity), batch_size, key)


def make_uniform_buffer(*, capacity: int) -> UniformBuffer:
    """Builds a ring buffer of `capacity` transitions: validates and binds the functions above
    (their argument checks run first, outside `jit`'s traced values).

    Args:
        capacity: `C`, transitions held, >= 1.

    Returns:
        A `UniformBuffer` of pure, jit-able functions (mark `batch_size` static under `jit`).

    Raises:
        ValueError: `capacity` is out of range.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> buffer = make_uniform_buffer(capacity=4)
        >>> state = buffer.init({"x": jnp.float32(0)})
        >>> state = buffer.add(state, {"x": jnp.arange(3, dtype=jnp.float32)})
        >>> state = buffer.add(state, {"x": jnp.arange(3, 6, dtype=jnp.float32)})
        >>> state.data["x"].tolist(), int(state.size)
        ([4.0, 5.0, 2.0, 3.0], 4)
        >>> state, batch = buffer.sample(state, 3, jax.random.PRNGKey(0))
        >>> batch["x"].shape
        (3,)
    """
    capacity = validate_uniform_buffer_args(capacity=capacity)
    return UniformBuffer(
        init=functools.partial(init, capacity=capacity),
        add=functools.partial(_checked_add, capacity=capacity),
        sample=_checked_sample,
        add_and_sample=functools.partial(_add_and_sample, capacity=capacity),
    )
