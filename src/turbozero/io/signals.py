"""Ctrl-C and SIGTERM during training: finish the current step, save, exit cleanly."""

from __future__ import annotations

import contextlib
import signal
import sys
from typing import Any


class StopFlag:
    """Context manager whose `stop` turns True on the first SIGINT/SIGTERM.

    The training loop checks `stop` between steps, saves and returns; a second Ctrl-C raises
    `KeyboardInterrupt` at once. Python runs a signal handler wherever the main thread is, and a
    `KeyboardInterrupt` raised inside a garbage-collection callback (JAX has one) is printed and
    dropped, so the loop also calls `check_abort()` between steps, which raises it again. On
    exit the handlers that were installed before (Python's default, or `SIG_IGN` under
    `nohup`) come back. Outside the main thread no handlers are installed.
    """

    def __init__(self) -> None:
        self.stop = False
        self.abort = False
        self._old: dict[int, Any] = {}

    def __enter__(self) -> StopFlag:
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(ValueError):  # not the main thread
                self._old[sig] = signal.signal(sig, self._handle)
        return self

    def _handle(self, signum: int, frame: Any) -> None:
        if self.stop:
            self.abort = True
            raise KeyboardInterrupt
        self.stop = True
        print("\nstopping after the current step (again to abort)...", file=sys.stderr)

    def __exit__(self, *exc: Any) -> None:
        for sig, old in self._old.items():
            signal.signal(sig, old)

    def check_abort(self) -> None:
        """Raise `KeyboardInterrupt` if a second signal came (even if its raise was dropped)."""
        if self.abort:
            raise KeyboardInterrupt
