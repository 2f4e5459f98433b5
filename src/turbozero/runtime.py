"""`turbozero.configure()`: what a process sets up before its first JAX computation.

Two things only work before JAX starts its backends, so they are one explicit call that the CLI
and the trainers make first, and that library users put at the top of their script:

- XLA:CPU's whole-loop kernels for the search's small `while_loop`s, and XLA's plain scheduler
  in place of the concurrency-optimized one, which leaves some programs waiting forever
  (`xla_flags.configure`, two flags appended to the `XLA_FLAGS` environment variable);
- joining the processes of a multi-host run (`jax.distributed.initialize`) when the
  `TURBOZERO_COORDINATOR` variables are set (docs/distributed.md).

`import turbozero` does neither: importing the library leaves the process as it was.
"""

from __future__ import annotations

import os
import sys

from turbozero import distributed, xla_flags
from turbozero.distributed import maybe_initialize_distributed

_CONFIGURED = False
_WARNED = False


def configure() -> bool:
    """Set XLA:CPU's small-loop option and join a multi-host run; returns whether the option is
    in effect for this process. Call it before any JAX computation; calling it again is free.

    Raises:
        RuntimeError: `TURBOZERO_COORDINATOR` is set but JAX has already started (the processes
            can no longer be joined).
    """
    global _CONFIGURED
    if not _CONFIGURED:
        coordinated = os.environ.get("TURBOZERO_COORDINATOR")
        if coordinated and xla_flags._jax_started() and not distributed._INITIALIZED:
            raise RuntimeError(
                "TURBOZERO_COORDINATOR is set, but JAX started before turbozero.configure() "
                "could join the processes: call turbozero.configure() before any JAX code"
            )
        xla_flags.configure()
        maybe_initialize_distributed()
        _CONFIGURED = True
    return small_loops_on()


def small_loops_on() -> bool:
    """Whether XLA_FLAGS carries the small-loop option (set by us or by the user)."""
    return xla_flags.SMALL_LOOP_OPTION in os.environ.get("XLA_FLAGS", "")


def configure_or_say_why() -> None:
    """`configure()` for the trainers, which may be called after the user's own JAX code: then
    the option cannot take effect, and the process is told so once, in one line, on stderr."""
    global _WARNED
    started = xla_flags._jax_started()
    configure()
    if started and not _WARNED and not small_loops_on():
        import jax

        if jax.default_backend() == "cpu":
            _WARNED = True
            print(
                "turbozero: JAX started before turbozero.configure(), so XLA:CPU's small-loop "
                "option is off in this process (searches may run up to 1.3x slower); call "
                "turbozero.configure() before any JAX code",
                file=sys.stderr,
            )
