"""Ctrl-C and SIGTERM during training: finish the current step, save, exit cleanly."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Callable
from typing import Any

from turbozero.io import outside

#: seconds a second Ctrl-C may take to end the run before the process is ended outright
ABORT_GRACE_SECONDS = 1.0


def exit_now() -> None:
    """End the process with Ctrl-C's status (130), at once, from any thread, and the outside
    programs it started (`os._exit` skips `atexit`, which would have ended them)."""
    print("\ninterrupted (the checkpoints saved before stay)", file=sys.stderr, flush=True)
    outside.end_all(at_once=True)
    os._exit(130)


class StopFlag:
    """Context manager whose `stop` turns True on the first SIGINT/SIGTERM.

    The training loop checks `stop` between steps, saves and returns; a second Ctrl-C raises
    `KeyboardInterrupt` at once. Python runs a signal handler wherever the main thread is, and a
    `KeyboardInterrupt` raised inside a garbage-collection callback (JAX has one) is dropped (Python
    would print it; inside the block it is not reported), so the loop also calls `check_abort()`
    between steps, and the block's end, which raise it again: a run stopped by two signals never
    ends as finished. A raise can also be swallowed where no step boundary comes soon (inside the
    checkpoint library's save), so the second signal also starts a timer: if the block has not been
    left `ABORT_GRACE_SECONDS` later, `on_stuck` ends the process (by default with status 130; the
    checkpoints saved before stay, a save cut short is cleared on the next open). On exit the
    handlers that were installed before (Python's default, or `SIG_IGN` under `nohup`) come back.
    Outside the main thread no handlers are installed.
    """

    def __init__(self, *, on_stuck: Callable[[], None] = exit_now) -> None:
        self.stop = False
        self.abort = False
        self._old: dict[int, Any] = {}
        self._on_stuck = on_stuck
        self._timer: threading.Timer | None = None
        self._old_hook: Callable[[Any], Any] = sys.unraisablehook

    def __enter__(self) -> StopFlag:
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(ValueError):  # not the main thread
                self._old[sig] = signal.signal(sig, self._handle)
        if self._old:
            self._old_hook = sys.unraisablehook
            sys.unraisablehook = self._unraisable
        return self

    def _unraisable(self, unraisable: Any) -> None:
        """Python's report of an exception it could not raise: the second signal's
        `KeyboardInterrupt` raised inside a garbage-collection callback is not reported (as a
        traceback) but kept in `abort`, which the loop and the block's end raise again."""
        if isinstance(unraisable.exc_value, KeyboardInterrupt) and self.abort:
            return
        self._old_hook(unraisable)

    def _handle(self, signum: int, frame: Any) -> None:
        if self.stop:
            self.abort = True
            if self._timer is None:
                self._timer = threading.Timer(ABORT_GRACE_SECONDS, self._on_stuck)
                self._timer.daemon = True
                self._timer.start()
            raise KeyboardInterrupt
        self.stop = True
        print("\nstopping after the current step (again to abort)...", file=sys.stderr)

    def __exit__(self, kind: type[BaseException] | None, *exc: Any) -> None:
        if self._timer is not None:
            self._timer.cancel()
        for sig, old in self._old.items():
            signal.signal(sig, old)
        if self._old and sys.unraisablehook == self._unraisable:
            sys.unraisablehook = self._old_hook
        if kind is None and self.abort:  # a second signal whose raise was dropped on the way
            raise KeyboardInterrupt

    def check_abort(self) -> None:
        """Raise `KeyboardInterrupt` if a second signal came (even if its raise was dropped)."""
        if self.abort:
            raise KeyboardInterrupt
