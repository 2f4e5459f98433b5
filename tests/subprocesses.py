"""What tests that start Python subprocesses give them."""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def pythonpath() -> str:
    """The repository root (for `tests.`) and `src/` (turbozero, installed or not) ahead of the
    caller's own `PYTHONPATH`, if any: extended, never replaced."""
    first = (str(ROOT), str(ROOT / "src"))
    return os.pathsep.join(p for p in (*first, os.environ.get("PYTHONPATH")) if p)
