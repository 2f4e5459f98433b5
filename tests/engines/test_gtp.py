"""Go engines over GTP: the translation between pgx and GTP, the protocol against a tiny engine
of our own (in `make test`), and GNU Go (Debian's `gnugo`, in `make check`, which installs it)."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import turbozero
from turbozero.arena import play_match, random_agent
from turbozero.arena.opponents import make_opponent, parse_opponent
from turbozero.config import ConfigError
from turbozero.engines.gtp import (
    GNUGO,
    GTPEngine,
    action_to_vertex,
    gnugo_command,
    position_sgf,
    vertex_to_action,
)

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
        Path(engine._sgf.name).write_text(position_sgf(np.asarray(state._x.board), black, 9))
        engine.ask(f"loadsgf {engine._sgf.name}")
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
