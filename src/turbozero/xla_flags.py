"""The two XLA flags turbozero sets on the CPU: whole-loop kernels for small `while_loop`s, and
XLA's plain scheduler in place of its concurrency-optimized one.

XLA:CPU runs a compiled program one operation ("thunk") at a time, so a `while_loop` whose body is
a few dozen small operations pays a dispatch for each of them on every iteration. XLA's own
`SmallWhileLoopHoistingPass` compiles such a loop into a single function instead (loops with
scatters, sorts, custom calls or library fusions are never eligible), but only when the loop
touches fewer bytes than `xla_cpu_small_while_loop_byte_threshold`, 1 KiB by default: a search's
walk down a batch of trees touches more than that. `configure()` raises the bound (to 1e9 bytes,
in effect no bound) so that those loops are compiled whole. It makes the search's walk faster on
the CPU where that walk is dispatch-bound (figures, and where it does not help, in
docs/benchmarks.md, "bench/xla_flag.py").

XLA:CPU's concurrency-optimized scheduler (`xla_cpu_enable_concurrency_optimized_scheduler`, on by
default in the jaxlib we test) orders some programs so that their run never finishes: the process
waits forever with every XLA thread idle. PPO's `init` with the multi-discrete head on jumanji
Minesweeper, two seeds under `vmap` and observation normalisation, is one such program (a test in
tests/test_xla_flags.py runs it). `configure()` turns that scheduler off
(`SCHEDULER_FLAG`); the search and self-play benchmarks run as fast without it (docs/benchmarks.md,
"XLA's concurrency-optimized scheduler").

Both flags apply to every JAX program of the process, the user's included, and, since they are
written to `os.environ`, to child processes; they only reach XLA:CPU. There is no per-program form
for the first (`jax.jit(compiler_options=...)` does not take XLA's `xla_backend_extra_options`),
and XLA reads `XLA_FLAGS` once, when JAX starts its backends, so `turbozero.configure()` (called by
the CLI and the trainers, and first thing by library users) appends them to `XLA_FLAGS` unless JAX
has already started or `XLA_FLAGS` names a flags file; each is left out when `XLA_FLAGS` already
chooses it:
`--xla_backend_extra_options=xla_cpu_small_while_loop_byte_threshold=1024` keeps XLA's default
bound, `...=0` turns the pass off, `--xla_cpu_enable_concurrency_optimized_scheduler=true` keeps
XLA's scheduler. `import turbozero` changes nothing.
"""

from __future__ import annotations

import os
import re
import sys
import warnings
from collections.abc import MutableMapping

__all__ = [
    "SCHEDULER_FLAG",
    "SCHEDULER_OPTION",
    "SMALL_LOOP_BYTES",
    "SMALL_LOOP_OPTION",
    "configure",
    "with_small_loop_kernels",
    "with_turbozero_flags",
]

SMALL_LOOP_OPTION = "xla_cpu_small_while_loop_byte_threshold"
SMALL_LOOP_BYTES = 1_000_000_000

_CHOSEN = re.compile(rf"(?<![\w]){SMALL_LOOP_OPTION}=")


def with_small_loop_kernels(flags: str) -> str:
    """`flags` (an `XLA_FLAGS` value) with `SMALL_LOOP_OPTION` set to `SMALL_LOOP_BYTES` by a
    flag of its own (XLA merges repeated `--xla_backend_extra_options` into one list); unchanged
    if it already sets the option or names a flags file (a value not starting with `-`)."""
    if _CHOSEN.search(flags) or (flags.strip() and not flags.strip().startswith("-")):
        return flags
    return f"{flags} --xla_backend_extra_options={SMALL_LOOP_OPTION}={SMALL_LOOP_BYTES}".strip()


SCHEDULER_OPTION = "xla_cpu_enable_concurrency_optimized_scheduler"
SCHEDULER_FLAG = f"--{SCHEDULER_OPTION}=false"
_SCHEDULER_CHOSEN = re.compile(rf"--{SCHEDULER_OPTION}(=|\s|$)")


def with_turbozero_flags(flags: str) -> str:
    """`flags` (an `XLA_FLAGS` value) with both of turbozero's flags: the small-loop bound
    (`with_small_loop_kernels`) and `SCHEDULER_FLAG`, each unless `flags` already chooses it;
    unchanged if `flags` names a flags file (a value not starting with `-`)."""
    if flags.strip() and not flags.strip().startswith("-"):
        return flags
    flags = with_small_loop_kernels(flags)
    if not _SCHEDULER_CHOSEN.search(flags):
        flags = f"{flags} {SCHEDULER_FLAG}".strip()
    return flags


def _jax_started() -> bool:
    """Whether JAX has started its backends (False while `jax._src.xla_bridge` is not loaded)."""
    bridge = sys.modules.get("jax._src.xla_bridge")
    if bridge is None:
        return False
    started = getattr(bridge, "backends_are_initialized", None)
    if started is None:  # JAX's layout moved: assume started and change nothing, but say so
        warnings.warn(
            "turbozero could not tell whether JAX has started; XLA_FLAGS left as it is",
            RuntimeWarning,
            stacklevel=3,
        )
        return True
    return bool(started())


def configure(environ: MutableMapping[str, str] | None = None) -> bool:
    """Add turbozero's flags (`with_turbozero_flags`) to `XLA_FLAGS` if JAX has not started its
    backends yet.

    Args:
        environ: the environment to change (default `os.environ`).

    Returns:
        Whether `XLA_FLAGS` was changed.
    """
    environ = os.environ if environ is None else environ
    flags = environ.get("XLA_FLAGS", "")
    new = with_turbozero_flags(flags)
    if new == flags or _jax_started():
        return False
    environ["XLA_FLAGS"] = new
    return True
