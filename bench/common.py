"""Helpers shared by the benchmark scripts: timing and one JSON line per result row."""

from __future__ import annotations

import json
import platform
import sys
import time
from collections.abc import Callable
from typing import Any

import jax


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


def best_time(fn: Callable[[], Any], *, repeats: int = 3) -> float:
    """Seconds of the fastest of `repeats` calls (results blocked on), after one warm-up call."""
    jax.block_until_ready(fn())
    best = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        jax.block_until_ready(fn())
        best = min(best, time.perf_counter() - t)
    return best
