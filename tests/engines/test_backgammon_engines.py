"""The backgammon engines' bridge: the plays we list are gnubg's, a play goes to pgx and back
unchanged, and the engines play pgx's game as they would play it alone (pubeval, gnubg at 0 ply:
the `engines` extra, which `make test` installs)."""

from __future__ import annotations

import random

import gnubg  # the engines extra, which `make test` installs
import jax
import jax.numpy as jnp
import numpy as np
import pgx.backgammon as bg
import pytest

import turbozero
from turbozero.arena import play_match, random_agent
from turbozero.arena.opponents import make_opponent, parse_opponent
from turbozero.config import ConfigError
from turbozero.engines import gnubg as gnubg_engine
from turbozero.engines.backgammon import (
    NO_OP,
    apply_engine_move,
    flip,
    from_gnubg,
    micro_step,
    to_gnubg,
    turn_plays,
)
from turbozero.engines.players import TurnPlanner, gnubg_chooser, pubeval_chooser

START = np.array(
    [2, 0, 0, 0, 0, -5, 0, -3, 0, 0, 0, 5, -5, 0, 0, 0, 3, 0, 5, 0, 0, 0, 0, -2, 0, 0, 0, 0],
    np.int8,
)


def positions(num_games: int, seed: int):
    """`(board, dice)` at each turn of games where both sides play a random legal play: the
    contact of the opening, hits, the bar, races and bearing off."""
    rng = random.Random(seed)
    for _ in range(num_games):
        board = START.copy()
        for _ in range(400):
            roll = (rng.randint(1, 6), rng.randint(1, 6))
            yield board, roll
            dice = [roll[0]] * 4 if roll[0] == roll[1] else list(roll)
            plays = turn_plays(board, dice)
            board = np.frombuffer(plays[rng.randrange(len(plays))].after, np.int8).copy()
            if board[26] == 15:
                break
            board = flip(board)


def dice_of(roll):
    return [roll[0]] * 4 if roll[0] == roll[1] else list(roll)


def test_the_plays_we_list_are_the_plays_gnubg_lists():
    """Over the turns of random games (bar, hits, doubles, bearing off), the legal plays under
    the rules (the most dice, else the larger) are gnubg's: as many, and the same positions
    where gnubg's move tuples are whole (its binding cuts a tuple at its first checker off)."""
    cube, context = gnubg.cube_info(), gnubg.eval_context(0, 0, 1, 0, 0.0)
    checked = whole = 0
    seen = {"bar": 0, "off": 0, "double": 0, "none": 0}
    for board, roll in positions(8, seed=0):
        ours = turn_plays(board, dice_of(roll))
        listed = gnubg.find_best_moves(to_gnubg(board), cube, context, roll)
        if ours[0].actions == (NO_OP,):
            assert listed == [] or listed == [{"move": (), "score": listed[0]["score"]}]
            seen["none"] += 1
            continue
        assert len(listed) == len(ours), (board.tolist(), roll)
        moves = [m["move"] for m in listed]
        theirs = {apply_engine_move(board, m).tobytes() for m in moves if len(m) % 2 == 0}
        assert theirs <= {p.after for p in ours}
        if all(len(m) % 2 == 0 for m in moves):
            assert theirs == {p.after for p in ours}
            whole += 1
        checked += 1
        seen["bar"] += board[24] > 0
        seen["off"] += any(np.frombuffer(p.after, np.int8)[26] > board[26] for p in ours)
        seen["double"] += roll[0] == roll[1]
    assert checked >= 500 and whole >= 450
    assert min(seen.values()) >= 5, seen  # every kind of turn was met


def test_a_play_goes_to_pgx_and_back_as_the_same_position():
    """Each play's pgx actions are legal in pgx one after the other (its own legal mask) and
    pgx's own move function reaches the play's position; gnubg's board reads back as ours."""
    legal = jax.jit(bg._legal_action_mask)
    move = jax.jit(bg._move)
    checked = 0
    for board, roll in positions(2, seed=1):
        assert (from_gnubg(*to_gnubg(board)) == board).all()
        dice = dice_of(roll)
        for play in turn_plays(board, dice)[:6]:
            b, left = jnp.asarray(board, jnp.int32), list(dice)
            for action in play.actions:
                playable = jnp.asarray([d - 1 for d in left] + [-1] * (4 - len(left)), jnp.int32)
                assert bool(legal(b, playable)[action]), (board.tolist(), roll, play.actions)
                if action != NO_OP:
                    assert (micro_step(np.asarray(b, np.int8), action) == move(b, action)).all()
                    b = move(b, action)
                    left.remove(action % 6 + 1)
            assert np.asarray(b, np.int8).tobytes() == play.after
            checked += 1
    assert checked >= 300


def test_gnubg_at_0_ply_chooses_gnubgs_own_move():
    """Our gnubg player scores each play by gnubg's equity of the position it leaves; it picks
    gnubg's own best move, or one of equal equity."""
    cube, context = gnubg.cube_info(), gnubg.eval_context(0, 0, 1, 0, 0.0)
    choose = gnubg_chooser(0)
    same = compared = 0
    for board, roll in positions(6, seed=2):
        plays = turn_plays(board, dice_of(roll))
        if len(plays) < 2:
            continue
        best = gnubg.find_best_move(to_gnubg(board), cube, context, roll)
        if len(best) % 2:
            continue  # (cut at a checker off)
        index, value = choose(board, plays)
        theirs = apply_engine_move(board, best).tobytes()
        compared += 1
        if theirs == plays[index].after:
            same += 1
        else:  # a tie: gnubg's play is worth what ours is
            afters = [np.frombuffer(theirs, np.int8)]
            assert abs(gnubg_engine.equities(afters, ply=0)[0] - value) < 1e-3
    assert compared >= 300 and same >= 0.99 * compared


def test_the_engine_plays_a_match_as_it_plays_alone():
    """A recorded match of gnubg:0 against a random player: every engine move is the one the
    engine, asked afresh about that position, chooses."""
    env = turbozero.envs.make("backgammon")
    engine = make_opponent(env, "gnubg:0")
    r = play_match(
        env, engine, random_agent(env), jax.random.PRNGKey(3), num_games=2, max_steps=600
    )
    fresh = TurnPlanner(gnubg_chooser(0))
    step = jax.jit(env.step)
    checked = 0
    for game in range(2):
        state, meta = jax.jit(env.init)(jax.random.fold_in(jnp.asarray(r.game_keys[game]), 0))
        engine_player = int(r.player_a[game])
        for t, action in enumerate(np.asarray(r.actions[: int(r.lengths[game]), game])):
            if int(meta.cur_player_id) == engine_player:
                dice = tuple(int(d) + 1 for d in np.asarray(state._playable_dice) if d >= 0)
                expected, _ = fresh.action(np.asarray(state._board), dice)
                assert int(action) == expected, (game, t)
                checked += 1
            state, meta = step(
                state, jnp.int32(action), jax.random.fold_in(r.game_keys[game], t + 1)
            )
    assert checked >= 50 and r.wins == 2


@pytest.mark.parametrize("spec", ["pubeval", "gnubg:0"])
def test_every_engine_beats_random_in_nearly_every_game(spec):
    env = turbozero.envs.make("backgammon")
    r = play_match(
        env, make_opponent(env, spec), random_agent(env), jax.random.PRNGKey(0), num_games=20
    )
    assert r.wins >= 19, (r.wins, r.losses)
    assert r.mean_return_a > 1.5  # gammons counted as the game reports them (2 points each)


@pytest.mark.parametrize("spec", ["pubeval", "gnubg:0"])
def test_an_engine_against_itself_scores_an_even_share_with_colours_alternating(spec):
    env = turbozero.envs.make("backgammon")
    a = make_opponent(env, spec)
    r = play_match(env, a, a, jax.random.PRNGKey(1), num_games=40)
    assert r.score_low <= 0.5 <= r.score_high, (r.wins, r.losses)
    assert int(np.sum(np.asarray(r.a_first))) == 20  # both colours equally often


@pytest.mark.slow  # (80 games: a strength check, not the bridge's; bench/engines.py: 71-29)
def test_gnubg_beats_pubeval():
    """The stronger engine wins: gnubg's network at 0 ply against Tesauro's linear evaluator."""
    env = turbozero.envs.make("backgammon")
    r = play_match(
        env,
        make_opponent(env, "gnubg:0"),
        make_opponent(env, "pubeval"),
        jax.random.PRNGKey(5),
        num_games=80,
    )
    assert r.score_low > 0.5, (r.wins, r.losses)


def test_engine_names_are_checked_where_they_are_given():
    gnubg = parse_opponent("gnubg:2")
    assert (gnubg.kind, gnubg.name, gnubg.engine) == ("gnubg", "gnubg:2", True)
    assert parse_opponent("pubeval").games() == ("backgammon",)
    for bad in ("gnubg:3", "gnubg:", "gnubg:-1", "pubeval:1"):
        with pytest.raises(ValueError, match="gnubg:PLY"):
            parse_opponent(bad)
    with pytest.raises(ValueError, match="plays backgammon only"):
        make_opponent(turbozero.envs.make("tic_tac_toe"), "pubeval")
    from turbozero.alphazero.config import AlphaZeroConfig

    with pytest.raises(ConfigError, match="'gnubg:1' plays backgammon only, not env 'othello'"):
        AlphaZeroConfig(env="othello", eval_opponents=("gnubg:1",))
    AlphaZeroConfig(env="backgammon", eval_opponents=("pubeval", "gnubg:0"))


def test_pubeval_prefers_the_opening_moves_players_make():
    """pubeval's classic opening choices: 3-1 makes the 5-point, 6-1 the bar point."""
    for roll, expected in (((3, 1), "8/5 6/5"), ((6, 1), "13/7 8/7")):
        plays = turn_plays(START, list(roll))
        index, _ = pubeval_chooser(START, plays)
        cube, context = gnubg.cube_info(), gnubg.eval_context(0, 0, 1, 0, 0.0)
        named = {
            apply_engine_move(START, m["move"]).tobytes(): gnubg.move_tuple_to_string(
                m["move"], to_gnubg(START)
            )
            for m in gnubg.find_best_moves(to_gnubg(START), cube, context, roll)
        }
        assert named[plays[index].after] == expected


def test_your_own_engine_plays_through_the_same_bridge():
    """`chooser_agent`: a chooser that takes the play leaving the most checkers off, else the
    first, sees every position before a turn with its legal plays, and plays whole games."""
    from turbozero.engines.players import chooser_agent

    env = turbozero.envs.make("backgammon")
    seen = []

    def greedy(board, plays):
        seen.append(len(plays))
        offs = [np.frombuffer(p.after, np.int8)[26] for p in plays]
        return int(np.argmax(offs)), 0.0

    agent = chooser_agent(env, greedy, name="greedy-off")
    r = play_match(env, agent, random_agent(env), jax.random.PRNGKey(2), num_games=4)
    assert r.num_games == 4 and r.illegal_moves_a == 0 and seen and min(seen) >= 2
    with pytest.raises(ValueError, match="built-in engine's name"):
        chooser_agent(env, greedy, name="pubeval")


def test_calls_for_the_main_thread_are_served_there_while_the_match_runs():
    import threading

    from turbozero.io.main_thread import on_main_thread, serve_main_thread

    def where():
        return threading.current_thread() is threading.main_thread()

    errors = []
    thread = threading.Thread(target=lambda: errors.append(_refused(on_main_thread, where)))
    thread.start()
    thread.join()
    assert errors == ["refused"]  # nobody serves: a clear error, not a crash in gnubg

    def match():  # (on a helper thread, asking the main thread twice)
        return where(), on_main_thread(where), on_main_thread(lambda: 6 * 7)

    assert serve_main_thread(match) == (False, True, 42)


def _refused(fn, *args):
    try:
        fn(*args)
    except RuntimeError as err:
        assert "main thread" in str(err)
        return "refused"
    return "ran"
