"""Rules of the uniform ring buffer."""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from turbozero.memory import UniformBufferState, make_uniform_buffer

SAMPLE = {"x": jnp.float32(0), "pair": jnp.zeros(2, jnp.int32)}


def transitions(values):
    values = jnp.asarray(values, jnp.int32)
    return {"x": values.astype(jnp.float32), "pair": jnp.stack([values, -values], -1)}


def test_add_wraps_around_overwriting_the_oldest_transitions():
    buffer = make_uniform_buffer(capacity=4)
    state = buffer.init(SAMPLE)
    assert isinstance(state, UniformBufferState)
    state = buffer.add(state, transitions([1, 2, 3]))
    assert (int(state.position), int(state.size)) == (3, 3)
    state = buffer.add(state, transitions([4, 5, 6]))
    assert (int(state.position), int(state.size)) == (2, 4)
    assert state.data["x"].tolist() == [5.0, 6.0, 3.0, 4.0]
    assert state.data["pair"][:, 1].tolist() == [-5, -6, -3, -4]


def test_sample_draws_only_filled_slots():
    buffer = make_uniform_buffer(capacity=8)
    state = buffer.add(buffer.init(SAMPLE), transitions([1, 2, 3]))
    state_after, batch = buffer.sample(state, 64, jax.random.PRNGKey(0))
    assert state_after is state
    assert batch["x"].shape == (64,) and batch["pair"].shape == (64, 2)
    assert set(batch["x"].tolist()) == {1.0, 2.0, 3.0}
    np.testing.assert_array_equal(batch["pair"][:, 0], batch["x"].astype(np.int32))


def test_sample_of_empty_buffer_raises_outside_jit():
    buffer = make_uniform_buffer(capacity=4)
    with pytest.raises(ValueError, match="empty buffer"):
        buffer.sample(buffer.init(SAMPLE), 2, jax.random.PRNGKey(0))


def test_sample_of_empty_buffer_under_jit_returns_nan_floats():
    buffer = make_uniform_buffer(capacity=4)
    sample = jax.jit(buffer.sample, static_argnums=1)
    _, batch = sample(buffer.init(SAMPLE), 2, jax.random.PRNGKey(0))
    assert np.isnan(batch["x"]).all()
    assert batch["pair"].tolist() == [[0, 0], [0, 0]]
    state = buffer.add(buffer.init(SAMPLE), transitions([7]))
    _, batch = sample(state, 2, jax.random.PRNGKey(0))
    assert batch["x"].tolist() == [7.0, 7.0]


@pytest.mark.parametrize(
    ("bad", "match"),
    [
        ({"x": jnp.zeros((2, 1)), "pair": jnp.zeros((2, 2), jnp.int32)}, "shape"),
        ({"x": jnp.zeros(2), "pair": jnp.zeros((2, 3), jnp.int32)}, "shape"),
        ({"x": jnp.zeros(2), "pair": jnp.zeros((3, 2), jnp.int32)}, "leading size"),
        ({"x": jnp.zeros(2)}, "structure"),
        ({"x": jnp.zeros(2), "pair": jnp.zeros((2, 2))}, "dtype"),
        ({"x": jnp.zeros(5), "pair": jnp.zeros((5, 2), jnp.int32)}, "capacity"),
        ({"x": jnp.zeros(0), "pair": jnp.zeros((0, 2), jnp.int32)}, "at least one"),
    ],
)
def test_add_rejects_transitions_not_matching_the_sample_transition(bad, match):
    buffer = make_uniform_buffer(capacity=4)
    with pytest.raises(ValueError, match=match):
        buffer.add(buffer.init(SAMPLE), bad)


@pytest.mark.parametrize("capacity", [0, -1, 2.5])
def test_factory_rejects_capacity_below_one(capacity):
    with pytest.raises(ValueError, match="capacity"):
        make_uniform_buffer(capacity=capacity)


@pytest.mark.parametrize("capacity", [np.int64(4), np.int32(4)])
def test_factory_and_sample_take_numpy_integers(capacity):
    buffer = make_uniform_buffer(capacity=capacity)
    state = buffer.add(buffer.init(SAMPLE), transitions([1, 2]))
    _, batch = buffer.sample(state, np.int64(3), jax.random.PRNGKey(0))
    assert jax.tree.leaves(batch)[0].shape[0] == 3


@pytest.mark.parametrize("batch_size", [0, -3, True])
def test_sample_rejects_batch_size_below_one(batch_size):
    buffer = make_uniform_buffer(capacity=4)
    state = buffer.add(buffer.init(SAMPLE), transitions([1]))
    with pytest.raises(ValueError, match="batch_size"):
        buffer.sample(state, batch_size, jax.random.PRNGKey(0))


def test_add_and_sample_samples_from_the_updated_buffer():
    buffer = make_uniform_buffer(capacity=3)
    add_and_sample = jax.jit(buffer.add_and_sample, static_argnums=2)
    state = buffer.init(SAMPLE)
    state, batch = add_and_sample(state, transitions([9]), 5, jax.random.PRNGKey(0))
    assert batch["x"].tolist() == [9.0] * 5
    assert int(state.size) == 1
    state, batch = add_and_sample(state, transitions([10]), 5, jax.random.PRNGKey(1))
    assert set(batch["x"].tolist()) <= {9.0, 10.0}
    assert int(state.size) == 2


@functools.cache
def jitted_add():
    buffer = make_uniform_buffer(capacity=5)
    return buffer, jax.jit(buffer.add)


@given(sizes=st.lists(st.integers(1, 5), min_size=1, max_size=8))
def test_buffer_holds_the_latest_capacity_transitions(sizes):
    buffer, add = jitted_add()  # compiles once per T in 1..5, reused across examples
    state = buffer.init(SAMPLE)
    history: list[int] = []
    for size in sizes:
        values = list(range(len(history), len(history) + size))
        state = add(state, transitions(values))
        history += values
    held = history[-5:]
    assert int(state.size) == len(held)
    assert int(state.position) == len(history) % 5
    stored = state.data["x"].tolist()
    for value in held:  # transition number v was written to slot v % capacity
        assert stored[value % 5] == float(value)


def test_the_pure_functions_are_the_factorys_without_its_checks():
    """`init`, `add` and `sample` at module level give what the factory's bound ones give; the
    checks live in the `validate_*` functions beside them."""
    from turbozero.memory import uniform

    buffer = make_uniform_buffer(capacity=4)
    key = jax.random.PRNGKey(3)
    bound = buffer.init(SAMPLE)
    plain = uniform.init(SAMPLE, capacity=4)
    for values in ([1, 2, 3], [4, 5]):
        bound = buffer.add(bound, transitions(values))
        plain = uniform.add(plain, transitions(values), capacity=4)
    _, from_bound = buffer.sample(bound, 5, key)
    _, from_plain = uniform.sample(plain, 5, key)
    leaves = jax.tree.leaves((bound, from_bound)), jax.tree.leaves((plain, from_plain))
    for a, b in zip(*leaves, strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    assert uniform.validate_add_args(plain, transitions([7, 8]), capacity=4) == 2
    with pytest.raises(ValueError, match="capacity 4"):
        uniform.validate_add_args(plain, transitions([1, 2, 3, 4, 5]), capacity=4)
    with pytest.raises(ValueError, match="capacity"):
        uniform.validate_uniform_buffer_args(capacity=0)
    with pytest.raises(ValueError, match="empty buffer"):
        uniform.validate_sample_args(uniform.init(SAMPLE, capacity=4), 2)
