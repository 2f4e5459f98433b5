"""Many hosts: `jax.distributed.initialize` from environment variables, before anything else.

Set `TURBOZERO_COORDINATOR=host:port`, `TURBOZERO_NUM_PROCESSES` and `TURBOZERO_PROCESS_ID` (and,
on CPU, `TURBOZERO_CPU_COLLECTIVES=gloo`) in every process; `turbozero.configure()` (which the CLI
and the trainers call) then joins them before any JAX computation (JAX requires that order). See
docs/distributed.md.
"""

from __future__ import annotations

import os

from turbozero.validate import is_digits

_INITIALIZED = False


def _count(name: str, low: int) -> int:
    """The integer >= `low` in environment variable `name`, else a `ValueError` naming it."""
    value = os.environ.get(name)
    if value is None or not is_digits(value.strip()) or int(value) < low:
        raise ValueError(
            f"TURBOZERO_COORDINATOR is set, so {name} must be an integer >= {low} "
            f"(see docs/distributed.md), got {value!r}"
        )
    return int(value)


def maybe_initialize_distributed() -> bool:
    """Join the processes named by the `TURBOZERO_*` variables; returns whether it did (once)."""
    global _INITIALIZED
    if _INITIALIZED:
        return True
    coordinator = os.environ.get("TURBOZERO_COORDINATOR")
    if not coordinator:
        return False
    num_processes = _count("TURBOZERO_NUM_PROCESSES", 1)
    process_id = _count("TURBOZERO_PROCESS_ID", 0)
    if process_id >= num_processes:
        raise ValueError(
            f"TURBOZERO_PROCESS_ID={process_id} must be below TURBOZERO_NUM_PROCESSES="
            f"{num_processes} (processes are numbered from 0)"
        )
    import jax

    collectives = os.environ.get("TURBOZERO_CPU_COLLECTIVES")
    if collectives:
        jax.config.update("jax_cpu_collectives_implementation", collectives)
    jax.distributed.initialize(
        coordinator_address=coordinator, num_processes=num_processes, process_id=process_id
    )
    _INITIALIZED = True
    return True
