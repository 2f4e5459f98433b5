"""Go engines over GTP, the Go Text Protocol: `gtp:COMMAND` (any engine: KataGo, Pachi, ...) and
`gnugo:LEVEL` (GNU Go from Debian's `gnugo` package at level 1 to 10), as opponents.

The engine runs as a subprocess. Each move it is sent the position as an SGF file (`loadsgf`;
the file exists for that move only, `sgf_file`): the board size, pgx's komi (7.5), the stones
and the colour to play, then asked `genmove`; its vertex is pgx's action (`pass` is pgx's last
action, and `resign`, which pgx has not, is played as a pass). The position carries no history:
an engine may retake a ko that pgx's simple ko forbids; such a move is played as a pass and
counted (`GTPEngine.refused`). An engine that dies is started again; a command that is not there
is refused in one line when the opponent is made. The translation between pgx's state and
GTP's vertices lives here: pgx keeps the board row-major from the top row, black stones positive
and white negative (`state._x.board`), the colour to play `_x.step_count % 2` (0 black).

Every command has a time limit (`GTPEngine`'s `timeout`, 60 s by default): an engine that does
not answer in time is ended. An engine runs in its own process group and is ended with the
command that started it: `close` (and `turbozero.io.outside.end_all`, run at exit) sends
`quit`, then SIGTERM, then SIGKILL, and never waits on an engine for long. Whatever goes wrong
with an engine is a `GTPError` in one line naming it; raised inside a compiled match, JAX
re-raises it wrapped in a long runtime error, which `turbozero.io.outside.failure_behind` turns
back into the `GTPError` (the CLI and the play page say that line).
"""

from __future__ import annotations

import contextlib
import math
import os
import queue
import re
import shlex
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from typing import IO

import numpy as np

from turbozero.gamespec import go_label
from turbozero.io import outside
from turbozero.io.errors import EngineError

GNUGO = "/usr/games/gnugo"  # where Debian's package puts it (not on root's PATH)
KOMI = 7.5  # pgx's Go
COLUMNS = "ABCDEFGHJKLMNOPQRST"  # GTP's columns skip I
SGF_LETTERS = "abcdefghijklmnopqrs"
MAX_GNUGO_LEVEL = 10
DEFAULT_TIMEOUT = 60.0  # seconds an engine may take to answer one command
QUIT_SECONDS = 2.0  # seconds an engine is given to exit after `quit` (or a busy one to finish)
TERM_SECONDS = 1.0  # seconds an engine is given to exit after SIGTERM, before SIGKILL
_POLL_SECONDS = 0.1  # a wait for an answer wakes this often (Ctrl-C is never held up)
_VERTEX = re.compile(r"([A-HJ-T])([1-9][0-9]?)")


class GTPError(EngineError):
    """An engine's failure, in one line naming the engine: an error answer (`? ...`), an answer
    that is not GTP, a vertex that is no point of the board, no answer within the engine's
    timeout, or the engine's exit."""


class _ExitedError(GTPError):
    """The engine exited (or closed its output) before it answered: it is started again once."""


def gnugo_command(level: int) -> list[str]:
    """GNU Go at `level` (1..10) speaking GTP, scoring by area (Chinese rules) and capturing every
    dead stone before it passes: pgx scores as Tromp and Taylor do, counting the stones left on
    the board, dead or not."""
    binary = shutil.which("gnugo") or GNUGO
    return [binary, "--mode", "gtp", "--level", str(level), "--chinese-rules", "--capture-all-dead"]


def check_command(command: list[str]) -> None:
    """Raise a one-line `FileNotFoundError` if the engine's program is not there."""
    program = command[0] if command else ""
    if not program or (shutil.which(program) is None and not os.access(program, os.X_OK)):
        hint = " (Debian: apt-get install gnugo)" if "gnugo" in program else ""
        raise FileNotFoundError(f"the GTP engine {program!r} is not installed or not on PATH{hint}")


def vertex_to_action(vertex: str, size: int) -> int:
    """pgx's action for a GTP vertex (`D4`, `pass`; `resign` plays as a pass).

    Raises:
        GTPError: `vertex` is no GTP vertex, or a point off a `size` board.
    """
    v = vertex.strip().upper()
    if v in ("PASS", "RESIGN"):
        return size * size
    found = _VERTEX.fullmatch(v)
    if found is None:
        raise GTPError(f"{vertex!r} is not a GTP vertex")
    column = COLUMNS.index(found[1])
    row = size - int(found[2])  # GTP counts rows up from the bottom
    if not (0 <= column < size and 0 <= row < size):
        raise GTPError(f"vertex {vertex!r} is off a {size}x{size} board")
    return row * size + column


def action_to_vertex(action: int, size: int) -> str:
    """The GTP vertex of pgx's action (its move name: `A9` top left, `pass`)."""
    return go_label(size)(action)


@contextlib.contextmanager
def sgf_file(sgf: str) -> Iterator[str]:
    """A temporary file holding `sgf` for one `loadsgf`, removed when the block ends however it
    ends (a file kept for an engine's life was left behind by every engine not closed)."""
    fd, path = tempfile.mkstemp(suffix=".sgf", prefix="turbozero-")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(sgf)
        yield path
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)


def position_sgf(board: np.ndarray, black_to_play: bool, size: int, komi: float = KOMI) -> str:
    """An SGF game holding only the position: `board` `[size * size]` (>0 black, <0 white,
    row-major from the top) with the colour to play."""

    def points(mask: np.ndarray) -> str:
        return "".join(
            f"[{SGF_LETTERS[i % size]}{SGF_LETTERS[i // size]}]" for i in np.flatnonzero(mask)
        )

    black, white = points(board > 0), points(board < 0)
    setup = (f"AB{black}" if black else "") + (f"AW{white}" if white else "")
    return f"(;GM[1]FF[4]SZ[{size}]KM[{komi:g}]{setup}PL[{'B' if black_to_play else 'W'}])"


def validate_engine_args(*, size: int, timeout: float) -> None:
    """Check `GTPEngine`'s settings: `size` a board of 2..19 lines, `timeout` > 0 seconds."""
    if isinstance(size, bool) or not isinstance(size, (int, np.integer)):
        raise ValueError(f"size must be an int in [2, {len(COLUMNS)}], got {size!r}")
    if not 2 <= size <= len(COLUMNS):
        raise ValueError(f"size must be an int in [2, {len(COLUMNS)}], got {size!r}")
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)):
        raise ValueError(f"timeout must be a number of seconds > 0, got {timeout!r}")
    if not (timeout > 0 and math.isfinite(timeout)):
        raise ValueError(f"timeout must be a number of seconds > 0, got {timeout!r}")


class GTPEngine:
    """One engine subprocess, asked one position at a time (thread-safe).

    Args:
        command: the program and its arguments.
        size: the board's lines (pgx's Go: 7, 9 or 19).
        timeout: seconds the engine may take to answer one command; one that takes longer is
            ended and the command raises a `GTPError`.
        name: the engine's name in messages (its opponent name, `gnugo:1`); the command if None.
    """

    def __init__(
        self,
        command: list[str],
        size: int,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        name: str | None = None,
    ):
        validate_engine_args(size=size, timeout=timeout)
        check_command(command)
        self.command, self.size, self.timeout = list(command), int(size), float(timeout)
        self.name = name or shlex.join(self.command)
        self.refused = 0  # moves pgx did not allow (a ko retaken), played as passes
        #: what the last move asked of the engine raised (None: nothing), for
        #: `outside.failure_behind`
        self.failure: BaseException | None = None
        self.closed = False
        self._process: subprocess.Popen[str] | None = None
        self._answers: queue.Queue[str | None] = queue.Queue()  # its lines; None at their end
        self._lock = threading.Lock()
        self._position: str | None = None  # the SGF file of the move in flight (`kill` removes it)
        outside.known(self)

    # -- public --------------------------------------------------------------------------

    def ask(self, command: str) -> str:
        """Send one GTP command (the engine started if it is not running); its answer.

        Raises:
            GTPError: the engine failed (its `?` answer, no answer in time, its exit, ...).
        """
        with self._lock:
            self._start()
            return self._send(command)

    def genmove(self, board: np.ndarray, black_to_play: bool, legal: np.ndarray) -> int:
        """pgx's action for the engine's move in the position (`legal`: pgx's mask `[A]`).

        An engine that exited is started again once.

        Raises:
            GTPError: the engine failed (no answer in time, an answer that is not a move of the
                board, an exit again after the restart, ...), the engine named.
        """
        command = f"genmove {'b' if black_to_play else 'w'}"
        sgf = position_sgf(np.asarray(board), black_to_play, self.size)
        with self._lock, sgf_file(sgf) as path:
            self.failure = None
            self._position = path
            try:
                vertex = self._ask_restarting(f"loadsgf {path}", command)
                try:
                    action = vertex_to_action(vertex, self.size)
                except GTPError as err:
                    what = f"answered {command!r} with no move of the board: {err}"
                    raise self._failed(what) from None
            except BaseException as err:  # (an interrupt too: see `outside.failure_behind`)
                self.failure = err
                raise
            finally:
                self._position = None
        if not legal[action]:
            self.refused += 1
            return self.size * self.size
        return action

    def close(self) -> None:
        """End the engine for good: `quit`, then SIGTERM, then SIGKILL, a few seconds at most.

        An engine busy with a command on another thread is ended under it (that command raises
        a `GTPError`)."""
        if self._lock.acquire(timeout=QUIT_SECONDS):
            try:
                self.closed = True
                self._quit()
            finally:
                self._lock.release()
        else:
            self.kill()

    def kill(self) -> None:
        """End the engine at once (SIGTERM, then SIGKILL), without its lock: from a signal
        handler, or while another thread waits on it. It is not started again."""
        self.closed = True
        process = self._process
        if process is not None:
            _end_process(process)
        position = self._position  # (the process may end before the move's block removes it)
        if position is not None:
            with contextlib.suppress(OSError):
                os.unlink(position)

    # -- the process ---------------------------------------------------------------------

    def _start(self) -> None:
        """Start the engine if it is not running, and set its board size and komi."""
        if self.closed:
            raise GTPError(f"GTP engine {self.name!r} was closed")
        if self._process is not None and self._process.poll() is None:
            return
        self._end()  # (one that exited)
        try:
            process = subprocess.Popen(
                self.command,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                text=True,
                errors="replace",
                bufsize=1,
                start_new_session=True,  # (its own process group: ended with its children)
            )
        except OSError as err:
            raise self._failed(f"could not be started: {err.strerror or err}") from None
        answers: queue.Queue[str | None] = queue.Queue()
        assert process.stdout is not None
        threading.Thread(
            target=_read_lines, args=(process.stdout, answers), name="gtp-reader", daemon=True
        ).start()
        self._process, self._answers = process, answers
        outside.running(self)
        self._send(f"boardsize {self.size}")
        self._send(f"komi {KOMI:g}")

    def _ask_restarting(self, *commands: str) -> str:
        """The answer to the last of `commands`, sent in turn; an engine that exits is started
        again once and asked them all again."""
        for attempt in range(2):
            try:
                self._start()
                for command in commands:
                    answer = self._send(command)
                return answer
            except _ExitedError as err:
                if attempt:
                    raise self._failed(f"{_what(err, self.name)}, again after a restart") from None
        raise AssertionError("unreachable")

    def _send(self, command: str) -> str:
        """One command; its answer's text (`= text`), or a GTPError. The engine is ended when
        the command is not answered in full (it would answer the next command out of turn)."""
        process = self._process
        assert process is not None and process.stdin is not None
        try:
            try:
                process.stdin.write(command + "\n")
                process.stdin.flush()
            except (OSError, ValueError):  # the pipe is broken, or was closed: it exited
                raise self._exited(command) from None
            lines = self._answer_lines(command)
        except BaseException:
            self._end()
            raise
        answer = "\n".join(lines)
        if answer.startswith("?"):
            raise self._failed(f"answered {command!r} with an error: {answer[1:].strip()!r}")
        return answer[1:].strip()

    def _answer_lines(self, command: str) -> list[str]:
        """The lines of the answer to `command` up to its blank line; a GTPError for no answer
        within the timeout (the engine ended here), the engine's exit, or lines that are not
        GTP."""
        deadline = time.monotonic() + self.timeout
        lines: list[str] = []
        while True:
            try:  # (short waits: a Ctrl-C on this thread is raised at once)
                line = self._answers.get(timeout=min(_POLL_SECONDS, self.timeout))
            except queue.Empty:
                if time.monotonic() < deadline:
                    continue
                self._end()
                raise self._failed(
                    f"did not answer {command!r} within {self.timeout:g} s (ended)"
                ) from None
            if line is None:
                raise self._exited(command)
            text = line.strip()
            if not text:
                if lines:
                    return lines
                continue
            if not lines and text[0] not in "=?":
                raise self._failed(
                    f"answered {command!r} with {text[:80]!r}, not GTP ('= ...' or '? ...')"
                )
            lines.append(text)

    def _failed(self, what: str, kind: type[GTPError] = GTPError) -> GTPError:
        return kind(f"GTP engine {self.name!r} {what}")

    def _exited(self, command: str) -> GTPError:
        """The error for an engine that stopped answering at `command` (it exited)."""
        process = self._process
        status = None
        if process is not None:
            try:
                status = process.wait(timeout=TERM_SECONDS)
            except subprocess.TimeoutExpired:
                pass
        how = "closed its output" if status is None else f"exited with status {status}"
        return self._failed(f"{how} at {command!r}", _ExitedError)

    def _quit(self) -> None:
        """Ask the running engine to quit; end it if it has not within `QUIT_SECONDS`."""
        process = self._process
        if process is not None and process.poll() is None and process.stdin is not None:
            try:
                process.stdin.write("quit\n")
                process.stdin.flush()
                process.wait(timeout=QUIT_SECONDS)
            except (OSError, ValueError, subprocess.TimeoutExpired):
                pass
        self._end()

    def _end(self) -> None:
        """Forget the subprocess, ending it if it still runs (SIGTERM, then SIGKILL)."""
        process, self._process = self._process, None
        outside.stopped(self)
        if process is None:
            return
        _end_process(process)
        if process.stdin is not None:
            try:
                process.stdin.close()
            except (OSError, ValueError):
                pass


def _what(err: GTPError, name: str) -> str:
    """`err`'s message without the engine's name in front."""
    return str(err).removeprefix(f"GTP engine {name!r} ")


def _read_lines(stream: IO[str], answers: queue.Queue[str | None]) -> None:
    """Put each line the engine prints on `answers`, then None when its output ends (its own
    thread: a wait for an answer can then have a time limit)."""
    try:
        for line in stream:
            answers.put(line)
    except (OSError, ValueError):
        pass
    finally:
        answers.put(None)
        try:
            stream.close()
        except (OSError, ValueError):
            pass


def _end_process(process: subprocess.Popen[str]) -> None:
    """End `process` and its process group: SIGTERM, then SIGKILL after `TERM_SECONDS`."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        if process.poll() is not None:
            return
        try:
            os.killpg(process.pid, sig)  # (not reaped yet: the group is still its own)
        except (ProcessLookupError, PermissionError):
            process.send_signal(sig)
        try:
            process.wait(timeout=TERM_SECONDS)
            return
        except subprocess.TimeoutExpired:
            pass
