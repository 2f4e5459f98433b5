"""Go engines over GTP: the translation between pgx and GTP, the protocol against a tiny engine
of our own (in `make test`), and GNU Go (Debian's `gnugo`, in `make check`, which installs it).
The tiny engine also fails as real ones do (silent, deaf to `quit`, printing garbage, dying):
each failure is one line naming the engine, and no engine outlives the command that started it.
"""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import turbozero
from tests.subprocesses import pythonpath
from turbozero.arena import play_match, random_agent
from turbozero.arena.opponents import make_opponent, parse_opponent
from turbozero.config import ConfigError
from turbozero.engines.gtp import (
    GNUGO,
    GTPEngine,
    GTPError,
    action_to_vertex,
    gnugo_command,
    position_sgf,
    sgf_file,
    vertex_to_action,
)
from turbozero.io.outside import failure_behind

FAKE = f"{sys.executable} {Path(__file__).with_name('fake_gtp.py')}"


@pytest.fixture(scope="module")
def go9():
    return turbozero.envs.make("go_9x9")


def test_every_move_goes_to_gtp_and_back_as_the_same_move():
    for size in (9, 19):
        for action in range(size * size + 1):
            assert vertex_to_action(action_to_vertex(action, size), size) == action
    assert action_to_vertex(0, 9) == "A9" and action_to_vertex(80, 9) == "J1"  # GTP skips I
    assert vertex_to_action("resign", 9) == vertex_to_action("PASS", 9) == 81


def test_a_position_is_sent_as_sgf_stones_and_the_colour_to_play():
    board = np.zeros(81, int)
    board[0], board[10], board[80] = 5, -3, 7  # pgx: black ids > 0, white < 0
    sgf = position_sgf(board, black_to_play=False, size=9)
    assert sgf == "(;GM[1]FF[4]SZ[9]KM[7.5]AB[aa][ii]AW[bb]PL[W])"


def test_an_engine_that_is_not_installed_is_refused_in_one_line(go9):
    with pytest.raises(FileNotFoundError, match="'/nowhere/engine' is not installed"):
        make_opponent(go9, "gtp:/nowhere/engine --mode gtp")
    with pytest.raises(ValueError, match="gnugo:LEVEL"):
        parse_opponent("gnugo:11")
    with pytest.raises(ValueError, match="plays go_7x7 or go_9x9 or go_19x19 only"):
        make_opponent(turbozero.envs.make("othello"), f"gtp:{FAKE}")
    from turbozero.alphazero.config import AlphaZeroConfig

    with pytest.raises(ConfigError, match="or go_19x19 only, not env 'othello'"):
        AlphaZeroConfig(env="othello", eval_opponents=("gnugo:1",))
    AlphaZeroConfig(env="go_9x9", eval_opponents=("gnugo:1", f"gtp:{FAKE}"))


def test_a_gtp_engine_plays_its_moves_in_a_compiled_match(go9):
    """The tiny engine plays the first empty point: its moves in the record are exactly those."""
    engine = make_opponent(go9, f"gtp:{FAKE}")
    r = play_match(go9, engine, random_agent(go9), jax.random.PRNGKey(0), num_games=2, max_steps=30)
    assert r.illegal_moves_a == 0
    step = jax.jit(go9.step)
    for game in range(2):
        state, meta = jax.jit(go9.init)(jax.random.fold_in(jnp.asarray(r.game_keys[game]), 0))
        for action in np.asarray(r.actions[: int(r.lengths[game]), game]):
            if int(meta.cur_player_id) == int(r.player_a[game]):
                empty = np.flatnonzero(np.asarray(state._x.board) == 0)
                first = int(empty[0]) if empty.size else 81
                assert int(action) in (first, 81)  # (a pass where pgx forbids the point)
            state, meta = step(state, jnp.int32(action), jax.random.PRNGKey(0))


def test_an_engine_that_dies_is_started_again(monkeypatch):
    monkeypatch.setenv("FAKE_GTP_DIE_AFTER", "1")
    engine = GTPEngine(FAKE.split(), 9)
    board, legal = np.zeros(81, int), np.ones(82, bool)
    assert engine.genmove(board, True, legal) == 0
    assert engine.genmove(board, True, legal) == 0  # the first process exited: a new one
    engine.close()


# ----------------------------------------------------------------- engines that fail

EMPTY, ALL_LEGAL = np.zeros(81, int), np.ones(82, bool)


def running(pid: int) -> bool:
    """Whether process `pid` runs (a zombie left to a parent that does not reap: no)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False


def kill_if_running(pidfile: Path) -> None:
    """End a fake engine a failed test left running."""
    if pidfile.exists() and running(pid := int(pidfile.read_text())):
        os.kill(pid, signal.SIGKILL)


@pytest.fixture
def pidfile(tmp_path):
    path = tmp_path / "engine.pid"
    yield path
    kill_if_running(path)


def fake(*flags: str) -> list[str]:
    return [*FAKE.split(), *flags]


def test_an_engines_position_files_last_one_move(monkeypatch, tmp_path):
    """Each move's SGF file is removed after the move, also where the engine failed, so that no
    engine leaves files behind (closed or not)."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    engine = GTPEngine(FAKE.split(), 9)
    assert engine.genmove(EMPTY, True, ALL_LEGAL) == 0
    assert list(tmp_path.iterdir()) == []
    broken = GTPEngine(fake("--garbage"), 9)
    with pytest.raises(GTPError):
        broken.genmove(EMPTY, True, ALL_LEGAL)
    assert list(tmp_path.iterdir()) == []
    engine.close()
    broken.close()


_EXIT_WHILE_THINKING = """
import os, sys, threading, time
import numpy as np
from turbozero.engines.gtp import GTPEngine
from turbozero.io.signals import exit_now

fake, pidfile, tmp = sys.argv[1:]
engine = GTPEngine([sys.executable, fake, "--silent-at", "genmove", "--pidfile", pidfile], 9)
args = (np.zeros(81, int), True, np.ones(82, bool))
threading.Thread(target=engine.genmove, args=args, daemon=True).start()
while not (os.path.exists(pidfile) and os.listdir(tmp)):
    time.sleep(0.05)
time.sleep(0.3)  # (the engine asked for its move, which it never gives)
exit_now()
"""


def test_ending_training_at_once_ends_an_engine_that_thinks_and_its_position_file(
    pidfile, tmp_path
):
    """`exit_now` (a second Ctrl-C that training could not honour in time) skips `atexit`: the
    engines, in sessions of their own, are ended by it, and the move's SGF file is removed."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    script = [sys.executable, "-c", _EXIT_WHILE_THINKING, FAKE.split()[1], str(pidfile), str(tmp)]
    env = {**os.environ, "TMPDIR": str(tmp), "PYTHONPATH": pythonpath()}
    done = subprocess.run(script, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 130, done.stderr[-2000:]
    deadline = time.monotonic() + 5
    while running(int(pidfile.read_text())) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not running(int(pidfile.read_text())), "the engine outlived the process"
    assert list(tmp.iterdir()) == []


@pytest.mark.parametrize("timeout", [0, -1.0, float("nan"), float("inf"), "5", True])
def test_the_timeout_must_be_a_number_of_seconds_above_zero(timeout):
    with pytest.raises(ValueError, match="timeout must be a number of seconds > 0"):
        GTPEngine(fake(), 9, timeout=timeout)


@pytest.mark.parametrize("command", ["boardsize", "genmove"])
def test_a_silent_engine_is_ended_at_its_timeout_and_named_in_one_line(pidfile, command):
    engine = GTPEngine(fake("--silent-at", command, "--pidfile", str(pidfile)), 9, timeout=1)
    start = time.monotonic()
    with pytest.raises(GTPError) as raised:
        engine.genmove(EMPTY, True, ALL_LEGAL)
    assert time.monotonic() - start < 4
    asked = "boardsize 9" if command == "boardsize" else "genmove b"
    name = shlex.join(engine.command)
    assert str(raised.value) == f"GTP engine {name!r} did not answer {asked!r} within 1 s (ended)"
    assert not running(int(pidfile.read_text()))
    engine.close()


def test_an_engine_that_never_answers_quit_is_ended_by_close_within_seconds(pidfile):
    """`--deaf` ignores `quit`, SIGTERM and SIGINT: close ends it with SIGKILL, never hanging."""
    engine = GTPEngine(fake("--deaf", "--pidfile", str(pidfile)), 9)
    assert engine.genmove(EMPTY, True, ALL_LEGAL) == 0
    closing = threading.Thread(target=engine.close, daemon=True)
    start = time.monotonic()
    closing.start()
    closing.join(timeout=15)
    assert not closing.is_alive(), "close() hangs on an engine that does not quit"
    assert time.monotonic() - start < 6
    assert not running(int(pidfile.read_text()))


@pytest.mark.parametrize(
    ("flags", "says"),
    [
        (["--garbage"], "answered 'genmove b' with 'Segmentation fault (core dumped)', not GTP"),
        (["--vertex", "Z99"], "answered 'genmove b' with no move of the board: 'Z99' is not a"),
        (["--vertex", "A10"], "with no move of the board: vertex 'A10' is off a 9x9 board"),
        (["--die"], "exited with status 1 at 'genmove b', again after a restart"),
    ],
)
def test_an_engine_that_prints_garbage_or_dies_is_one_line_naming_it(flags, says):
    engine = GTPEngine(fake(*flags), 9)
    with pytest.raises(GTPError) as raised:
        engine.genmove(EMPTY, True, ALL_LEGAL)
    message = str(raised.value)
    assert message.startswith(f"GTP engine {shlex.join(engine.command)!r} ") and says in message
    assert "\n" not in message
    engine.close()


def test_an_engine_failure_inside_a_compiled_match_is_found_behind_jaxs_error(go9, capfd):
    """JAX re-raises a host call's error as its own, with the tracebacks in its text (and logs
    another): `failure_behind` finds the engine's one line behind it; nothing is logged."""
    spec = f"gtp:{FAKE} --garbage"
    engine = make_opponent(go9, spec)
    with pytest.raises(Exception) as raised:
        play_match(go9, engine, random_agent(go9), jax.random.PRNGKey(0), num_games=2)
    failure = failure_behind(raised.value)
    assert isinstance(failure, GTPError) and failure is engine.policy_fn.engine.failure
    assert str(failure).startswith(f"GTP engine {spec!r} answered 'genmove ")
    assert failure_behind(RuntimeError("another error")) is None
    assert "Traceback" not in capfd.readouterr().err


def test_a_ctrl_c_while_an_engine_thinks_inside_a_compiled_policy_is_found_behind_jaxs_error(
    go9, pidfile
):
    """The wait for an answer stays interruptible inside a host call on the main thread: the
    interrupt ends the engine, and `failure_behind` finds it behind JAX's error (the CLI then
    says `interrupted`)."""
    spec = f"gtp:{shlex.join(fake('--silent-at', 'genmove', '--pidfile', str(pidfile)))}"
    policy = jax.jit(make_opponent(go9, spec).policy)
    state, _ = jax.jit(go9.init)(jax.random.PRNGKey(0))
    states = jax.tree_util.tree_map(lambda x: x[None], state)

    def interrupt() -> None:
        while not pidfile.exists():
            time.sleep(0.05)
        time.sleep(0.5)  # (its setup answered: it is asked for a move, never answered)
        signal.raise_signal(signal.SIGINT)

    threading.Thread(target=interrupt, daemon=True).start()
    # (a pytest-xdist worker ignores SIGINT: Ctrl-C's own handler, as in a command's process)
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(BaseException) as raised:
            jax.block_until_ready(policy(states, jax.random.PRNGKey(0)))
    finally:
        signal.signal(signal.SIGINT, before)
    assert isinstance(failure_behind(raised.value), KeyboardInterrupt)
    assert not running(int(pidfile.read_text()))


# `turbozero eval RUN --vs gtp:...` as a user runs it, with a random Go agent for the run's.
_EVAL = """
import sys
import types

import turbozero
from turbozero.arena import random_agent


def load_agent(path, *args, **kwargs):
    env = turbozero.envs.make("go_9x9")
    return types.SimpleNamespace(env=env, agent=random_agent(env))


turbozero.load_agent = load_agent
from turbozero.cli import main

sys.exit(main(["eval", "RUN", "--games", "2", "--max-steps", "10", "--vs", sys.argv[1]]))
"""


def start(*argv: str) -> subprocess.Popen[str]:
    """`python ARGV...` run on the repository's code, its output kept."""
    return subprocess.Popen(
        [sys.executable, *argv],
        env={**os.environ, "PYTHONPATH": pythonpath(), "JAX_PLATFORMS": "cpu"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # (a pytest-xdist worker ignores SIGINT, and a child would inherit that: Ctrl-C's
        # default, as in a terminal)
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )


def start_eval(*flags: str) -> subprocess.Popen[str]:
    """`turbozero eval` against the tiny engine with `flags`."""
    return start("-c", _EVAL, f"gtp:{shlex.join(fake(*flags))}")


def finish(
    proc: subprocess.Popen[str], *, interrupt_when: Path | None = None, timeout: float = 120
) -> tuple[str, str, float]:
    """`(stdout, stderr, seconds)` of `proc` once it ends; with `interrupt_when`, Ctrl-C (SIGINT)
    a second after that file appears, the seconds counted from it. A process still running
    after `timeout` seconds is killed (and the test fails)."""
    with proc:
        try:
            if interrupt_when is not None:
                end = time.monotonic() + timeout
                while not interrupt_when.exists():
                    assert time.monotonic() < end, f"{interrupt_when} was not written"
                    time.sleep(0.05)
                time.sleep(1.0)  # (the engine's setup answered: it is asked for a move)
                proc.send_signal(signal.SIGINT)
            start = time.monotonic()
            out, err = proc.communicate(timeout=timeout)
            return out, err, time.monotonic() - start
        finally:
            proc.kill()


def test_eval_says_an_engine_failure_in_one_line_naming_it():
    proc = start_eval("--die")
    _, err, _ = finish(proc)
    assert proc.returncode == 1, err[-3000:]
    assert err.strip().splitlines() == [
        f"error: GTP engine 'gtp:{shlex.join(fake('--die'))}' exited with status 1 at "
        "'genmove b', again after a restart"
    ]


def test_a_finished_eval_ends_an_engine_that_never_answers_quit(pidfile):
    proc = start_eval("--deaf", "--pidfile", str(pidfile))
    out, err, _ = finish(proc)
    assert proc.returncode == 0 and "games: 2" in out, err[-3000:]
    assert not running(int(pidfile.read_text()))


def test_ctrl_c_in_eval_ends_an_engine_that_thinks_forever(pidfile):
    """The engine (deaf to `quit` and SIGTERM) never answers `genmove`; Ctrl-C ends eval at
    once, and the engine with it (eval exits without running `atexit`)."""
    proc = start_eval("--silent-at", "genmove", "--deaf", "--pidfile", str(pidfile))
    _, err, took = finish(proc, interrupt_when=pidfile, timeout=30)
    assert proc.returncode == 130, err[-3000:]
    assert took < 10 and err.strip() == "interrupted"
    assert not running(int(pidfile.read_text()))


def test_ctrl_c_in_play_while_an_engine_thinks_forever_ends_both(pidfile):
    """`play --engine` plays the engine's move once before it serves (compiling it): the
    engine never answers, and Ctrl-C ends the command in one line, the engine with it."""
    spec = f"gtp:{shlex.join(fake('--silent-at', 'genmove', '--pidfile', str(pidfile)))}"
    play = ["play", "--engine", spec, "--game", "go_9x9", "--no-browser", "--port", "0"]
    proc = start("-m", "turbozero.cli", *play)
    _, err, took = finish(proc, interrupt_when=pidfile, timeout=30)
    assert proc.returncode == 130, err[-3000:]
    assert took < 10 and err.strip() == "interrupted"
    assert not running(int(pidfile.read_text()))


def test_ctrl_c_in_play_while_serving_an_engine_move_ends_both(pidfile):
    """The engine answers its first move (played before serving), then never another: Ctrl-C
    while the page waits on its reply ends the server at once (the move answers with the
    engine's end), and the engine with it."""
    import json
    import re
    import urllib.error
    import urllib.request

    flags = ["--silent-at", "genmove", "--after", "1", "--pidfile", str(pidfile)]
    spec = f"gtp:{shlex.join(fake(*flags))}"
    play = ["play", "--engine", spec, "--game", "go_9x9", "--no-browser", "--port", "0"]
    proc = start("-m", "turbozero.cli", *play, "--human-first")
    assert proc.stdout is not None
    lines = [proc.stdout.readline(), proc.stdout.readline()]
    found = re.search(r"ready in .*: (http://\S+)", lines[-1])
    assert found, lines
    answers: list[int] = []

    def move() -> None:
        body = json.dumps({"action": 40}).encode()
        url = found.group(1) + "api/move"
        request = urllib.request.Request(url, body, {"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                answers.append(response.status)
        except urllib.error.HTTPError as err:
            with err:
                answers.append(err.code)
        except OSError:  # (no answer at all: the assertion below says so, not the thread)
            answers.append(-1)

    mover = threading.Thread(target=move, daemon=True)
    mover.start()  # (within the second `finish` waits, the move reaches the engine)
    _, err, took = finish(proc, interrupt_when=pidfile, timeout=30)
    mover.join(timeout=10)
    assert proc.returncode == 0 and "Traceback" not in err, err[-3000:]
    assert took < 10 and answers == [502]
    assert not running(int(pidfile.read_text()))


# ------------------------------------------------------------------- GNU Go (`make check`)


def gnugo_installed() -> None:
    if shutil.which("gnugo") is None and not Path(GNUGO).exists():
        pytest.fail("GNU Go is absent: `make check` installs it (apt-get install -y gnugo)")


def random_positions(env, count: int, seed: int):
    """pgx Go states along random games (captures happen), with their legal masks."""
    init, step = jax.jit(env.init), jax.jit(env.step)
    key = jax.random.PRNGKey(seed)
    out = []
    while len(out) < count:
        key, k = jax.random.split(key)
        state, meta = init(k)
        for _ in range(120):
            if bool(meta.terminated):
                break
            out.append((state, np.asarray(meta.action_mask)))
            key, k = jax.random.split(key)
            legal = np.flatnonzero(np.asarray(meta.action_mask)[:-1])  # (no passes: longer games)
            action = int(jax.random.choice(k, legal)) if legal.size else 81
            state, meta = step(state, jnp.int32(action), k)
    return out[:count]


@pytest.mark.slow
def test_gnugo_lists_the_legal_moves_pgx_does(go9):
    """In positions of random games (captures included; positions with a ko ban left out, which
    an SGF position does not carry), GNU Go's `all_legal` is pgx's legal mask, and a move played
    in both leaves the same stones (captures agree)."""
    gnugo_installed()
    engine = GTPEngine(gnugo_command(1), 9)
    checked = 0
    for state, mask in random_positions(go9, 300, seed=0):
        if int(state._x.ko) != -1:
            continue
        black = int(state._x.step_count) % 2 == 0
        with sgf_file(position_sgf(np.asarray(state._x.board), black, 9)) as path:
            engine.ask(f"loadsgf {path}")
        listed = engine.ask(f"all_legal {'b' if black else 'w'}").split()
        ours = {action_to_vertex(int(a), 9) for a in np.flatnonzero(mask[:-1])}
        assert set(listed) == ours, (state._x.step_count, set(listed) ^ ours)
        checked += 1
    engine.close()
    assert checked >= 250


@pytest.mark.slow
def test_gnugo_beats_random_and_scores_an_even_share_against_itself(go9):
    """With random opening moves (Go has no dice: without them a pairing replays one game), GNU
    Go beats random nearly always and scores half against itself, colours alternating."""
    gnugo_installed()
    r = play_match(
        go9,
        make_opponent(go9, "gnugo:1"),
        random_agent(go9),
        jax.random.PRNGKey(0),
        num_games=10,
        opening_moves=4,
    )
    assert r.wins >= 9, (r.wins, r.losses)
    engine = make_opponent(go9, "gnugo:1")
    mirror = play_match(go9, engine, engine, jax.random.PRNGKey(1), num_games=10, opening_moves=6)
    assert mirror.score_low <= 0.5 <= mirror.score_high, (mirror.wins, mirror.losses)
