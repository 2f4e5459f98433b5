"""The search's speed paths: faster ways to run a step that give the same trees and outputs.

Each path has the plain version beside it and a switch in `SpeedPaths`, so a test runs both and
a reader sees the plain algorithm first (in `search.py`). What each one bought, and on which
machine, is in `docs/benchmarks.md`.

Letters: B games, L lanes (a gathered subset of the games), A actions.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from turbozero.types import Array, PyTree

COMPACT_MIN_LANES = 8  # fewer lanes than this: nothing is compacted (walks, root evaluations)


class SpeedPaths(NamedTuple):
    """Which speed paths a search compiles; none of them changes a result.

    Attributes:
        levels_per_iteration: tree levels per `while_loop` iteration in the walk's last phase and
            in the backup, >= 1. A level applied to a game whose walk is over changes nothing,
            so `n` levels per iteration give the same result with `1/n` of the loop iterations
            (each a round trip to the host on a GPU).
        compact_walks: once at most a quarter of the games still walk down the tree, finish
            their walks on a quarter of the lanes (`walk_compacted`), else every level costs the
            whole batch (`walk_in_lock_step`).
        compact_root_evaluations: evaluate only the roots of empty trees, as a small batch when
            they are few (`evaluate_where`), else the whole batch whenever any is empty.
        step_buffers: on XLA:CPU, materialise the expansion's environment step once
            (`computed_once`) instead of letting XLA recompute its elementwise tail in every
            consumer.
    """

    levels_per_iteration: int = 1
    compact_walks: bool = True
    compact_root_evaluations: bool = True
    step_buffers: bool = True


def default_levels_per_iteration() -> int:
    """1 when JAX's default backend is the CPU, 4 otherwise (the best measured on each, see
    `docs/benchmarks.md`, `bench/unroll.py`)."""
    return 1 if jax.default_backend() == "cpu" else 4


def default_speed_paths() -> SpeedPaths:
    """Every speed path on, with the backend's default `levels_per_iteration`."""
    return SpeedPaths(levels_per_iteration=default_levels_per_iteration())


def repeated(body: Callable, times: int) -> Callable:
    """`body` applied `times` times in a row."""

    def run(c):
        for _ in range(times):
            c = body(c)
        return c

    return run


def gather_lanes(flags: Array, lanes: int) -> tuple[Array, Array]:
    """Where the first `lanes` True entries of `flags [B]` are: `games [lanes]` int32 (0 past
    them) and `used [lanes]` (which lanes hold one). Entries past the first `lanes` are left
    out. Writing results back through `where(used, games, B)` with `mode="drop"` skips the
    unused lanes."""
    B = flags.shape[0]
    slot = jnp.where(flags, jnp.cumsum(flags) - 1, lanes)  # `lanes`: out of range, dropped
    games = jnp.zeros((lanes,), jnp.int32).at[slot].set(jnp.arange(B, dtype=jnp.int32), mode="drop")
    return games, jnp.arange(lanes) < jnp.sum(flags)


#: `step(carry, games [L] or None, full [L]) -> carry`: one tree level of the walk for the games
#: `games` (None: the whole batch); `carry` is a NamedTuple with a `done [L]` field.
WalkStep = Callable[[Any, Array | None, Array], Any]


def walk_in_lock_step(step: WalkStep, carry: Any, full: Array, levels: int) -> Any:
    """Apply `step` to the whole batch until every game's walk is `done`, `levels` levels per
    loop iteration."""
    return jax.lax.while_loop(
        lambda c: jnp.any(~c.done), repeated(lambda c: step(c, None, full), levels), carry
    )


def walk_compacted(step: WalkStep, carry: Any, full: Array, levels: int) -> Any:
    """`walk_in_lock_step`'s result, with the deep tail on a quarter of the lanes.

    A level costs the whole batch however few games still walk, and deep paths are rare, so once
    at most `B // 4` games still walk they are gathered into `B // 4` lanes, finish there, and
    their carries are written back. The first phase runs one level per iteration so that it
    stops where compaction starts; the last runs `levels`.
    """
    B = full.shape[0]
    lanes = B // 4
    if lanes < COMPACT_MIN_LANES:
        return walk_in_lock_step(step, carry, full, levels)
    carry = jax.lax.while_loop(
        lambda c: jnp.sum(~c.done) > lanes, lambda c: step(c, None, full), carry
    )
    games, used = gather_lanes(~carry.done, lanes)
    sub = jax.tree_util.tree_map(lambda x: x[games], carry)
    sub = sub._replace(done=sub.done | ~used)  # unused lanes: already done, never move
    sub_full = full[games]
    sub = jax.lax.while_loop(
        lambda c: jnp.any(~c.done), repeated(lambda c: step(c, games, sub_full), levels), sub
    )
    back = jnp.where(used, games, B)  # `B`: dropped
    return jax.tree_util.tree_map(lambda x, y: x.at[back].set(y, mode="drop"), carry, sub)


def evaluate_where(
    run: Callable[[PyTree], tuple[Array, Array]],
    states: PyTree,
    wanted: Array,
    *,
    num_actions: int,
    compact: bool,
) -> tuple[Array, Array]:
    """`run(states)`'s `(logits [B, A], value [B])` where `wanted [B]`, zeros elsewhere.

    No call when nothing is wanted. With `compact`, up to `B // 8` wanted states are gathered
    and evaluated as a small batch (a network call costs about its batch size; with subtree
    reuse only the games that just started have empty trees, a few per move); more than that,
    the whole batch.
    """
    B = wanted.shape[0]

    def none():
        return jnp.zeros((B, num_actions), jnp.float32), jnp.zeros((B,), jnp.float32)

    lanes = B // 8
    if not compact or lanes < COMPACT_MIN_LANES:
        return jax.lax.cond(jnp.any(wanted), lambda: run(states), none)
    count = jnp.sum(wanted)

    def few():
        games, used = gather_lanes(wanted, lanes)
        logits, value = run(jax.tree_util.tree_map(lambda x: x[games], states))
        back = jnp.where(used, games, B)  # `B`: dropped
        zeros = none()
        return (
            zeros[0].at[back].set(logits, mode="drop"),
            zeros[1].at[back].set(value, mode="drop"),
        )

    branch = jnp.where(count == 0, 0, jnp.where(count <= lanes, 1, 2))
    return jax.lax.switch(branch, [none, few, lambda: run(states)])


def computed_once(x: PyTree, always_true: Array) -> PyTree:
    """`x` itself, computed into buffers of its own on XLA:CPU.

    XLA:CPU fuses an elementwise producer into each of its consumers, recomputing it in each;
    after the expansion's environment step that repeats the step's elementwise tail in every
    fusion that reads the new state. A `cond` whose predicate XLA cannot evaluate at compile
    time stops it (its operands are buffers; an `optimization_barrier` is removed before
    fusion). `always_true` must be True at run time (the false branch returns zeros). Other
    backends get `x` unchanged (on a GPU a conditional can cost a round trip for its predicate).
    """
    if jax.default_backend() != "cpu":
        return x
    return jax.lax.cond(
        always_true, lambda v: v, lambda v: jax.tree_util.tree_map(jnp.zeros_like, v), x
    )


#: XLA:GPU command types recorded into command buffers (CUDA graphs) by `compiler_options()`:
#: XLA's default list (as of JAX 0.11.2, jaxlib's CUDA 13 build) plus `CONDITIONAL` and `WHILE`.
#: Spelled out because `jax.jit(compiler_options=...)` does not take XLA_FLAGS' `+WHILE` form.
GPU_COMMAND_BUFFER = "FUSION,CUBLAS,CUBLASLT,CUSTOM_CALL,CUDNN,CONDITIONAL,WHILE"


def _is_cuda() -> bool:
    """Whether JAX's first device is an NVIDIA GPU (its platform version names CUDA)."""
    version = getattr(jax.devices()[0].client, "platform_version", "")
    return "cuda" in str(version).lower()


def compiler_options(backend: str | None = None) -> dict[str, str]:
    """Options for `jax.jit(..., compiler_options=...)` of a program that runs a search.

    On an NVIDIA GPU, XLA records the search's `while_loop`s and `cond`s into the program's CUDA
    graphs as well (`xla_gpu_enable_command_buffer`), so a loop iteration does not return to
    the host for its condition (1.6x to 2.1x faster searches on an H100, `docs/benchmarks.md`).
    The trainer's self-play, the arena and the play server compile with these; pass them to your
    own `jit` of a search. Not for every program: PPO's update (fixed-length scans) ran slower
    with them, so it compiles without. Elsewhere (CPU, ROCm, TPU): `{}`.

    Args:
        backend: `"cpu"`, `"gpu"`, `"cuda"`, `"rocm"` or `"tpu"`; default: JAX's default backend.
            `"gpu"` counts as CUDA when JAX's first device is an NVIDIA GPU.
    """
    if backend is None:
        backend = jax.default_backend()
    if backend == "gpu":
        backend = "cuda" if _is_cuda() else "rocm"
    if backend != "cuda":
        return {}
    return {"xla_gpu_enable_command_buffer": GPU_COMMAND_BUFFER}
