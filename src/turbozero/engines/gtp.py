"""Go engines over GTP, the Go Text Protocol: `gtp:COMMAND` (any engine: KataGo, Pachi, ...) and
`gnugo:LEVEL` (GNU Go from Debian's `gnugo` package at level 1 to 10), as opponents.

The engine runs as a subprocess. Each move it is sent the position as an SGF file (`loadsgf`):
the board size, pgx's komi (7.5), the stones and the colour to play, then asked `genmove`; its
vertex is pgx's action (`pass` is pgx's last action, and `resign`, which pgx has not, is
played as a pass). The position carries no history: an engine may retake a ko that pgx's simple
ko forbids; such a move is played as a pass and counted (`GTPEngine.refused`). An engine that
dies is started again; a command that is not there is refused in one line when the opponent is
made. The translation between pgx's state and GTP's vertices lives here: pgx keeps the board
row-major from the top row, black stones positive and white negative (`state._x.board`), the
colour to play `_x.step_count % 2` (0 black).
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import tempfile
import threading

import numpy as np

from turbozero.games.go import go_label

GNUGO = "/usr/games/gnugo"  # where Debian's package puts it (not on root's PATH)
KOMI = 7.5  # pgx's Go
COLUMNS = "ABCDEFGHJKLMNOPQRST"  # GTP's columns skip I
SGF_LETTERS = "abcdefghijklmnopqrs"
MAX_GNUGO_LEVEL = 10


class GTPError(RuntimeError):
    """The engine answered a command with an error (`? ...`) or stopped answering."""


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
    """pgx's action for a GTP vertex (`D4`, `pass`; `resign` plays as a pass)."""
    v = vertex.strip().upper()
    if v in ("PASS", "RESIGN"):
        return size * size
    column = COLUMNS.index(v[0])
    row = size - int(v[1:])  # GTP counts rows up from the bottom
    if not (0 <= column < size and 0 <= row < size):
        raise GTPError(f"vertex {vertex!r} is off a {size}x{size} board")
    return row * size + column


def action_to_vertex(action: int, size: int) -> str:
    """The GTP vertex of pgx's action (its move name: `A9` top left, `pass`)."""
    return go_label(size)(action)


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


class GTPEngine:
    """One engine subprocess, asked one position at a time (thread-safe)."""

    def __init__(self, command: list[str], size: int):
        check_command(command)
        self.command, self.size = list(command), size
        self.refused = 0  # moves pgx did not allow (a ko retaken), played as passes
        self._process: subprocess.Popen[str] | None = None
        self._lock = threading.Lock()
        self._sgf = tempfile.NamedTemporaryFile("w", suffix=".sgf", delete=False)  # noqa: SIM115
        self._sgf.close()

    def _ended(self) -> bool:
        """Whether the subprocess has exited (waiting a moment for one that closed its pipe)."""
        if self._process is None:
            return True
        try:
            self._process.wait(timeout=2.0)
        except subprocess.TimeoutExpired:
            return False
        return True

    def _discard(self) -> None:
        """Forget the subprocess (ended, or ended here), closing its pipes."""
        process, self._process = self._process, None
        if process is None:
            return
        if process.poll() is None:
            process.kill()
        for pipe in (process.stdin, process.stdout):
            if pipe is not None:
                try:
                    pipe.close()
                except OSError:
                    pass
        process.wait()

    def _start(self) -> subprocess.Popen[str]:
        if self._process is None or self._process.poll() is not None:
            self._discard()
            self._process = subprocess.Popen(
                self.command,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                text=True,
                bufsize=1,
            )
            self._send(f"boardsize {self.size}")
            self._send(f"komi {KOMI:g}")
        return self._process

    def _send(self, command: str) -> str:
        """One command; its answer's text (`= text`), or a GTPError."""
        process = self._process
        assert process is not None and process.stdin is not None and process.stdout is not None
        process.stdin.write(command + "\n")
        process.stdin.flush()
        lines: list[str] = []
        while True:
            line = process.stdout.readline()
            if not line:
                raise GTPError(f"{shlex.join(self.command)} stopped answering at {command!r}")
            if line.strip() == "" and lines:
                break
            if line.strip():
                lines.append(line.rstrip("\n"))
        answer = "\n".join(lines)
        if answer.startswith("?"):
            raise GTPError(f"{shlex.join(self.command)}: {command!r}: {answer[1:].strip()}")
        return answer[1:].strip()

    def ask(self, command: str) -> str:
        """Send one GTP command (the engine started if it is not running); its answer."""
        with self._lock:
            self._start()
            return self._send(command)

    def genmove(self, board: np.ndarray, black_to_play: bool, legal: np.ndarray) -> int:
        """pgx's action for the engine's move in the position (`legal`: pgx's mask `[A]`)."""
        with open(self._sgf.name, "w") as f:
            f.write(position_sgf(np.asarray(board), black_to_play, self.size))
        with self._lock:
            for attempt in range(2):  # an engine that died is started again once
                try:
                    self._start()
                    self._send(f"loadsgf {self._sgf.name}")
                    vertex = self._send(f"genmove {'b' if black_to_play else 'w'}")
                    break
                except (GTPError, BrokenPipeError):
                    if attempt or not self._ended():
                        raise
                    self._discard()
        action = vertex_to_action(vertex, self.size)
        if not legal[action]:
            self.refused += 1
            return self.size * self.size
        return action

    def close(self) -> None:
        with self._lock:
            if self._process is not None and self._process.poll() is None:
                try:
                    self._send("quit")
                except (GTPError, OSError):
                    pass
            self._discard()
        if os.path.exists(self._sgf.name):
            os.unlink(self._sgf.name)
