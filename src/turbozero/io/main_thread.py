"""Host calls that only the main thread may make, served by it while a compiled program runs.

gnubg looks ahead (1 ply and more) only on the process's main thread; a compiled match reaches
its engines through `jax.pure_callback`, which runs on XLA's threads. `serve_main_thread(fn)`,
called on the main thread, runs `fn` (the match) on a helper thread and meanwhile runs the calls
that `on_main_thread` sends it; elsewhere `on_main_thread` calls directly.
"""

from __future__ import annotations

import concurrent.futures
import queue
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")
_POLL_SECONDS = 0.02
INTERRUPT_GRACE_SECONDS = 10.0  # seconds a Ctrl-C waits for the work it stops (`on_interrupt`)
_requests: queue.Queue[tuple[Callable[..., Any], tuple[Any, ...], concurrent.futures.Future[Any]]]
_requests = queue.Queue()
_serving = threading.Event()


def on_main_thread(fn: Callable[..., T], *args: Any) -> T:
    """`fn(*args)` run on the main thread: directly there, else by the main thread while it
    serves (`serve_main_thread`).

    Raises:
        RuntimeError: off the main thread while it does not serve.
    """
    if threading.current_thread() is threading.main_thread():
        return fn(*args)
    if not _serving.is_set():
        raise RuntimeError(
            "this engine runs on the main thread only: play its match from the main thread "
            "(play_match serves it there)"
        )
    done: concurrent.futures.Future[T] = concurrent.futures.Future()
    _requests.put((fn, args, done))
    return done.result()


def serve_main_thread(fn: Callable[[], T], *, on_interrupt: Callable[[], None] | None = None) -> T:
    """`fn()`, run on a helper thread while this (main) thread runs what `on_main_thread` sends;
    off the main thread, `fn()` directly.

    The main thread waits in Python, where a Ctrl-C reaches it. With `on_interrupt`, a Ctrl-C
    calls it (it should make `fn` end soon: end the engine `fn` waits on) and waits for `fn`,
    up to `INTERRUPT_GRACE_SECONDS`, before the `KeyboardInterrupt` goes on: the interpreter
    must not end under a thread still inside a compiled program (a fatal error at exit).
    """
    if threading.current_thread() is not threading.main_thread() or _serving.is_set():
        return fn()
    result: concurrent.futures.Future[T] = concurrent.futures.Future()

    def run() -> None:
        try:
            result.set_result(fn())
        except BaseException as err:  # (re-raised on the main thread)
            result.set_exception(err)

    _serving.set()
    try:
        threading.Thread(target=run, name="turbozero-match", daemon=True).start()
        try:
            _serve_until(result, None)
        except KeyboardInterrupt:
            if on_interrupt is not None:
                on_interrupt()
                _serve_until(result, time.monotonic() + INTERRUPT_GRACE_SECONDS)
            raise
    finally:
        _serving.clear()
    return result.result()


def _serve_until(result: concurrent.futures.Future[Any], deadline: float | None) -> None:
    """Run the calls sent to the main thread until `result` is done (or `deadline` passes)."""
    while not result.done() and (deadline is None or time.monotonic() < deadline):
        try:
            call, args, done = _requests.get(timeout=_POLL_SECONDS)
        except queue.Empty:
            continue
        try:
            done.set_result(call(*args))
        except BaseException as err:
            done.set_exception(err)
