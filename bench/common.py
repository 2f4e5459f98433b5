"""Helpers shared by the benchmark scripts: timing and one JSON line per result row."""

from __future__ import annotations

import json
import platform
import sys
import time
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp


def _selector_rule(name: str) -> Callable[..., Any]:
    """`turbozero.search.<name>`, imported when called: `bench/ppo.py`'s peer runs in a side
    environment that has rejax but not turbozero's dependencies, and imports this module."""

    def make(**kwargs: Any) -> Any:
        import turbozero.search

        return getattr(turbozero.search, name)(**kwargs)

    return make


#: The benchmarks' selectors by name (each built with its defaults).
SELECTOR_RULES = {name: _selector_rule(name) for name in ("puct", "muzero_puct", "gumbel")}


def emit(row: dict[str, Any]) -> None:
    """Print one result row as a JSON line (scripts collect them with `grep '^{'`)."""
    print(json.dumps(row, sort_keys=False), flush=True)


def machine() -> dict[str, Any]:
    import numpy

    return {
        "python": sys.version.split()[0],
        "jax": jax.__version__,
        "numpy": numpy.__version__,
        "platform": platform.platform(),
        "devices": [str(d) for d in jax.devices()],
    }


def floor_programs(run: Callable) -> dict[str, Callable]:
    """The floor `run` compiled for timing: `{"floor": ...}` with the search's compiler options
    (`turbozero.search.compiler_options()`, as every other compared program), and also
    `{"floor_plain": ...}` without them where they are not empty (on an NVIDIA GPU they made the
    floor slower, which would flatter the search). Report the faster of the two."""
    from turbozero.search import compiler_options

    options = compiler_options()
    programs = {"floor": jax.jit(run, compiler_options=options)}
    if options:
        programs["floor_plain"] = jax.jit(run)
    return programs


def fastest_floor(seconds: dict[str, float]) -> tuple[str, float]:
    """The fastest of the `floor_programs` timed in `seconds` (keys starting with "floor"):
    `(name, seconds)`."""
    name = min((k for k in seconds if k.startswith("floor")), key=seconds.__getitem__)
    return name, seconds[name]


def best_time(fn: Callable[[], Any], *, repeats: int = 3) -> float:
    """Seconds of the fastest of `repeats` calls (results blocked on), after one warm-up call."""
    jax.block_until_ready(fn())
    best = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        jax.block_until_ready(fn())
        best = min(best, time.perf_counter() - t)
    return best


def interleaved_best_times(calls: dict[Any, Callable[[], Any]], repeats: int) -> dict[Any, float]:
    """Best seconds per call of each of `calls` (no-argument functions) over `repeats` rounds.
    Each round runs `best_time(repeats=1)` (a warm-up call, then a timed one) on every function
    in turn, so that load from other processes on a shared machine hits them all alike."""
    best = dict.fromkeys(calls, float("inf"))
    for _ in range(repeats):
        for name, call in calls.items():
            best[name] = min(best[name], best_time(call, repeats=1))
    return best


def floor_simulations(env, eval_fn, params, states, mask, logits, total, env_keys, key):
    """The floor's inner loop: `len(env_keys)` x (vmapped `env.step` + `eval_fn`), no tree.

    Each iteration steps `states` with the best move under `mask` of the previous call's
    `logits [B, A]`, so the calls form a chain, and uses what any search needs from the step
    besides the observation: the children's legal moves (masking their logits), rewards and
    termination. Without that XLA drops the step's legal-move computation as dead code (about
    half of an othello step). The states pass through the loop behind an optimisation barrier so
    that no part of the step is hoisted out of it. Returns the last logits and the summed values.
    """

    def body(i, carry):
        logits, total, parents = carry
        parents, logits = jax.lax.optimization_barrier((parents, logits))
        action = jnp.argmax(jnp.where(mask, logits, -jnp.inf), axis=-1)
        children, md = jax.vmap(env.step)(parents, action, env_keys[i])
        logits, value = eval_fn(params, jax.vmap(env.observe)(children), key)
        logits = jnp.where(md.action_mask, logits.astype(jnp.float32), -1e9)
        value = jnp.where(md.terminated, 0.0, value) + md.rewards[:, 0]
        return logits, total + value, parents

    logits, total, _ = jax.lax.fori_loop(0, len(env_keys), body, (logits, total, states))
    return logits, total
