"""Programs outside turbozero that a command starts (engines run as processes), known in one
place so that the commands can end them and name their failures without knowing any of them.

An engine registers itself (`known`, then `running` while it has a process and `stopped`
after) and keeps in `failure` what its last call raised. The registry exists for what must work
on any exit: `end_all` ends every running process, politely at the end of a command (`atexit`)
or at once from a Ctrl-C handler that then exits without `atexit`. The engine objects own their
processes; this module holds weak references and the set of running ones only.

A failure raised inside a compiled program's host call (`jax.pure_callback`) reaches the caller
as a long runtime error holding only its text; `failure_behind` finds the engine's own one-line
error (or the Ctrl-C's `KeyboardInterrupt`) behind it, and JAX's log of the same traceback is
dropped, so a command says the failure in one line.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import threading
import weakref
from collections.abc import Iterator
from typing import Any, Protocol

from turbozero.io.errors import EngineError


class OutsideProgram(Protocol):
    """What the registry needs of an engine."""

    failure: BaseException | None  # what its last call raised (None: nothing)

    def close(self) -> None:
        """End its process politely (the engine's own way, then signals), within seconds."""

    def kill(self) -> None:
        """End its process at once, from any thread (a signal handler's too)."""


_RUNNING: set[Any] = set()
_KNOWN: weakref.WeakSet[Any] = weakref.WeakSet()
_LOCK = threading.RLock()  # (re-entered by a signal handler on the thread holding it)


def known(program: OutsideProgram) -> None:
    """Register `program` for `failure_behind` (held weakly)."""
    with _LOCK:
        _KNOWN.add(program)


def running(program: OutsideProgram) -> None:
    """`program` has a process now: `end_all` ends it."""
    with _LOCK:
        _RUNNING.add(program)


def stopped(program: OutsideProgram) -> None:
    """`program`'s process has ended."""
    with _LOCK:
        _RUNNING.discard(program)


def end_all(*, at_once: bool = False) -> None:
    """End every running program's process: politely (`close`), or `at_once` (`kill`, for a
    signal handler: the interrupted thread may hold a program's lock)."""
    with _LOCK:
        programs = list(_RUNNING)
    for program in programs:
        if at_once:
            program.kill()
        else:
            program.close()


atexit.register(end_all)


@contextlib.contextmanager
def ending_those_started() -> Iterator[None]:
    """End (`close`) the programs whose processes start inside the block when it ends, however
    it ends: a run's or an evaluation's engines end with it rather than with the interpreter (a
    notebook that trains ten runs would otherwise keep ten idle engines). Programs running
    before the block are left to their owners."""
    with _LOCK:
        before = set(_RUNNING)
    try:
        yield
    finally:
        with _LOCK:
            started = [p for p in _RUNNING if p not in before]
        for program in started:
            program.close()


def failure_behind(err: BaseException) -> BaseException | None:
    """The outside program's failure behind `err`: `err` itself if it is an `EngineError`, or
    the `EngineError` (or the Ctrl-C's `KeyboardInterrupt`) a program recorded as raised inside
    a compiled program's host call, whose type and message the runtime error `err` quotes.
    None if there is none."""
    if isinstance(err, EngineError):
        return err
    text = str(err)
    with _LOCK:
        programs = list(_KNOWN)
    for program in programs:
        failure = program.failure
        if failure is not None and type(failure).__name__ in text and str(failure) in text:
            return failure
    return None


def _told_by_its_caller(record: logging.LogRecord) -> bool:
    """Whether a log record is JAX's traceback of a program's failure inside a host call: the
    failure reaches the caller, who says it in one line."""
    err = record.exc_info[1] if record.exc_info else None
    if err is None:
        return False
    with _LOCK:
        programs = list(_KNOWN)
    return isinstance(err, EngineError) or any(err is p.failure for p in programs)


logging.getLogger("jax._src.callback").addFilter(lambda record: not _told_by_its_caller(record))
