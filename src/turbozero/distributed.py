"""Many hosts: `jax.distributed.initialize` from environment variables, before anything else.

Set `TURBOZERO_COORDINATOR=host:port`, `TURBOZERO_NUM_PROCESSES` and `TURBOZERO_PROCESS_ID` (and,
on CPU, `TURBOZERO_CPU_COLLECTIVES=gloo`) in every process; `import turbozero` then joins them
before any JAX computation (JAX requires that order). See docs/distributed.md.
"""

from __future__ import annotations

import os

_INITIALIZED = False


def maybe_initialize_distributed() -> bool:
    """Join the processes named by the `TURBOZERO_*` variables; returns whether it did (once)."""
    global _INITIALIZED
    if _INITIALIZED:
        return True
    coordinator = os.environ.get("TURBOZERO_COORDINATOR")
    if not coordinator:
        return False
    import jax

    collectives = os.environ.get("TURBOZERO_CPU_COLLECTIVES")
    if collectives:
        jax.config.update("jax_cpu_collectives_implementation", collectives)
    jax.distributed.initialize(
        coordinator_address=coordinator,
        num_processes=int(os.environ["TURBOZERO_NUM_PROCESSES"]),
        process_id=int(os.environ["TURBOZERO_PROCESS_ID"]),
    )
    _INITIALIZED = True
    return True
