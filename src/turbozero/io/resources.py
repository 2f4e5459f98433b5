"""The machine's memory, and refusing runs that would not fit in it before they allocate."""

from __future__ import annotations

import os

from turbozero.io.errors import TooLargeError


def machine_memory_bytes() -> int | None:
    """Memory this process may use: the physical memory, or a lower cgroup limit (containers).
    None where neither can be read."""
    sizes = []
    try:
        sizes.append(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        pass
    for path in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            with open(path) as f:
                text = f.read().strip()
        except OSError:
            continue
        if text.isdigit() and int(text) < 1 << 60:  # "max" or a huge number: no limit
            sizes.append(int(text))
    return min(sizes) if sizes else None


#: what AlphaZero's refusal says to lower (its default, kept for callers of before)
LOWER_ALPHAZERO = (
    "lower num_games, memory_capacity or search.max_nodes (or pass --skip-memory-check to try "
    "anyway)"
)


def check_fits_in_memory(
    estimate: int, what: str, *, lower: str = LOWER_ALPHAZERO, memory: int | None = None
) -> None:
    """Refuse `estimate` bytes of `what` when they exceed the machine's memory; `lower` says
    which settings to lower (and any way to go on anyway).

    On an accelerator the arrays live in its memory, which this does not know: only CPU runs
    are checked (where the arrays are in the machine's memory; emulated devices share it).

    Raises:
        TooLargeError: with the estimate, the machine's figure and how to go on anyway.
    """
    import jax

    if jax.default_backend() != "cpu":
        return
    memory = machine_memory_bytes() if memory is None else memory
    if memory is None:
        return
    total = estimate
    if total > memory:
        raise TooLargeError(
            f"{what} would take about {total / 2**30:,.1f} GiB, more than this machine's "
            f"{memory / 2**30:,.1f} GiB of memory: {lower}"
        )
