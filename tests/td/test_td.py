"""TD learning over afterstates (`turbozero.td`) and backgammon's turns in JAX."""

from __future__ import annotations

import dataclasses
import functools
import json
import re
import shutil

import jax
import jax.numpy as jnp
import numpy as np
import pgx.backgammon as bg
import pytest

import turbozero
from turbozero.arena import play_match
from turbozero.arena.opponents import make_opponent
from turbozero.config import ConfigError
from turbozero.engines.backgammon import flip, turn_plays
from turbozero.games.backgammon import START, afterstate_result, dice_plays, jax_flip, state_plays
from turbozero.td import TDConfig, make_td, td_agent
from turbozero.td.learner import play_turns
from turbozero.td.lookahead import TDSearchPolicy
from turbozero.td.train import train_td

from . import assert_same_learner, full_and_resumed

TINY = TDConfig(
    num_games=8,
    steps_per_epoch=30,
    num_epochs=2,
    hidden=(16,),
    eval_every=1,
    eval_games=2,
    eval_opponents=("pubeval",),
    eval_record_games=0,  # (drawing a backgammon game takes ~10 s: `RECORDED` draws one)
)
#: the uninterrupted run of the `runs` fixture, which draws one game at its end
RECORDED = dataclasses.replace(TINY, eval_record_games=1)


def _positions(count: int, seed: int = 0) -> list[tuple[np.ndarray, tuple[int, int]]]:
    """`count` positions of random play (the mover's board and a roll), from every stage."""
    rng = np.random.default_rng(seed)
    out: list[tuple[np.ndarray, tuple[int, int]]] = []
    while len(out) < count:
        board = np.array(START, np.int8)
        for _ in range(300):
            dice = (int(rng.integers(1, 7)), int(rng.integers(1, 7)))
            out.append((board, dice))
            plays = turn_plays(board, dice if dice[0] != dice[1] else (dice[0],) * 2)
            after = np.frombuffer(plays[rng.integers(len(plays))].after, np.int8)
            if after[26] == 15 or len(out) >= count:
                break
            board = flip(after)
    return out


@pytest.fixture(scope="module")
def plays_fn():
    return jax.jit(dice_plays)


def test_dice_plays_are_the_rules_plays_of_two_dice(plays_fn):
    """The plays listed in JAX leave exactly the positions the host's rules (`turn_plays`,
    which the engines' bridge uses) list: both dice where possible, else the larger one; half
    a double's turn is two dice of the same number."""
    legal_mask = jax.jit(bg._legal_action_mask)  # (compiled once, not run op by op)
    for board, (d1, d2) in _positions(300):
        expected = {p.after for p in turn_plays(board, (d1, d2))}
        boards, actions, valid = plays_fn(jnp.asarray(board, jnp.int32), d1, d2)
        valid = np.asarray(valid)
        got = {b.astype(np.int8).tobytes() for b in np.asarray(boards)[valid]}
        assert (got or {board.tobytes()}) == expected, (board.tolist(), d1, d2)
        legal = np.asarray(legal_mask(jnp.asarray(board), jnp.array([d1 - 1, d2 - 1])))
        assert legal[np.asarray(actions)[valid]].all()  # each play starts with a pgx action


def test_the_winners_points_are_pgx_scores():
    """A single game, a gammon (the loser bore off none) and a backgammon (one also still in
    the winner's home board) score 1, 2 and 3, as pgx scores them."""
    for where, off, points in ((2, 1, 1), (2, 0, 2), (20, 0, 3)):
        board = np.zeros(28, np.int32)
        board[26], board[27], board[where] = 15, -off, -(15 - off)
        over, index = afterstate_result(jnp.asarray(board))
        assert bool(over) and int(index) == 2 + points == 2 + int(bg._calc_win_score(board))
    assert not bool(afterstate_result(jnp.asarray(START))[0])


def test_the_board_turns_as_pgx_turns_it():
    for board, _ in _positions(50, seed=1):
        b = jnp.asarray(board, jnp.int32)
        np.testing.assert_array_equal(np.asarray(jax_flip(b)), flip(board))
        np.testing.assert_array_equal(np.asarray(jax_flip(b)), np.asarray(bg._flip_board(b)))


def test_a_states_plays_are_pgx_legal_actions():
    env = turbozero.envs.make("backgammon")
    plays, step, init = jax.jit(state_plays), jax.jit(env.step), jax.jit(env.init)
    key = jax.random.PRNGKey(4)
    state, _ = init(jax.random.PRNGKey(3))
    for _ in range(120):
        _, actions, valid = plays(state)
        legal = np.asarray(state.legal_action_mask)
        valid = np.asarray(valid)
        if valid.any():
            assert legal[np.asarray(actions)[valid]].all()
        else:
            assert legal[0]  # no checker can move: pgx's no-op
        key, k1, k2 = jax.random.split(key, 3)
        action = jax.random.choice(k1, legal.shape[0], p=legal / legal.sum())
        state, meta = step(state, action, k2)
        if bool(meta.terminated):
            state, _ = init(k2)


def test_self_play_keeps_fifteen_checkers_a_side_and_finishes_games():
    td = make_td(dataclasses.replace(TINY, num_games=16))
    state, metrics = td.train(td.init(jax.random.PRNGKey(0)), 120)
    boards = np.asarray(state.boards)
    mine = boards[:, :24].clip(min=0).sum(1) + boards[:, 24] + boards[:, 26]
    theirs = -boards[:, :24].clip(max=0).sum(1) - boards[:, 25] - boards[:, 27]
    assert (mine == 15).all() and (theirs == 15).all()
    assert int(np.asarray(metrics["games"]).sum()) > 0
    assert np.isfinite(np.asarray(metrics["loss"])).all()


def test_each_turn_keeps_the_play_of_highest_equity_among_all_listed(plays_fn):
    """`play_turns` rates only the valid plays, packed from the whole batch; its afterstates are
    those of rating every listed play of each game one by one, a double's second half too."""
    td = make_td(TINY)
    leaves, tree = jax.tree.flatten(td.init(jax.random.PRNGKey(0)).params)
    keys = jax.random.split(jax.random.PRNGKey(1), len(leaves))
    params = jax.tree.unflatten(  # (a random network: the zero result layer rates all alike)
        tree, [x + 0.3 * jax.random.normal(k, x.shape) for x, k in zip(leaves, keys, strict=True)]
    )
    positions = _positions(64, seed=3)
    boards = jnp.asarray(np.stack([b for b, _ in positions]), jnp.int32)
    dice = jnp.asarray([d for _, d in positions], jnp.int32)
    got = np.asarray(jax.jit(functools.partial(play_turns, td.rules, td.net))(params, boards, dice))
    rate = jax.jit(lambda b: td.equity(params, b))
    doubles = 0
    for i, (board, (d1, d2)) in enumerate(positions):
        after = np.asarray(board, np.int32)
        for _ in range(2 if d1 == d2 else 1):
            plays, _, valid = plays_fn(jnp.asarray(after), d1, d2)
            valid = np.asarray(valid)
            if valid.any():
                scores = np.where(valid, np.asarray(rate(plays)), -np.inf)
                after = np.asarray(plays)[int(np.argmax(scores))]
            if after[26] == 15:  # (won: no second half)
                break
        doubles += d1 == d2
        np.testing.assert_array_equal(got[i], after, err_msg=f"position {i}, dice {d1, d2}")
    assert doubles >= 4  # (doubles' second halves were checked)


def test_a_won_afterstate_is_valued_at_its_exact_result():
    td = make_td(TINY)
    params = td.init(jax.random.PRNGKey(0)).params
    won = np.array([0] * 26 + [15, -3], np.int32)
    won[2] = -12
    probs = np.asarray(td.distribution(params, jnp.asarray(won)[None]))[0]
    np.testing.assert_array_equal(probs, [0, 0, 0, 1, 0, 0])
    assert float(td.equity(params, jnp.asarray(won)[None])[0]) == 1.0


def test_the_agent_plays_only_legal_moves():
    td = make_td(TINY)
    env = turbozero.envs.make("backgammon")
    agent = td_agent(td, env, td.init(jax.random.PRNGKey(0)).params)
    r = play_match(env, agent, make_opponent(env, "random"), jax.random.PRNGKey(1), num_games=4)
    assert r.illegal_moves == 0 and r.wins + r.losses == 4


def test_bad_settings_are_refused_by_name():
    with pytest.raises(ConfigError, match="env 'tic_tac_toe' has no afterstate rules"):
        TDConfig(env="tic_tac_toe")
    with pytest.raises(ConfigError, match="eval_games must be even"):
        TDConfig(eval_games=3)
    with pytest.raises(ConfigError, match="hidden must hold layer sizes"):
        TDConfig(hidden=())
    with pytest.raises(ConfigError, match="num_games"):
        TDConfig(num_games=0)
    with pytest.raises(ConfigError, match="'gnugo:1' plays go"):
        TDConfig(eval_opponents=("gnugo:1",))


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The tiny run in one go, and stopped after one epoch then resumed."""
    return full_and_resumed(RECORDED, TINY, tmp_path_factory.mktemp("td"))


def test_a_resumed_run_ends_as_the_uninterrupted_one(runs):
    assert_same_learner(*runs)


def test_a_run_logs_its_evaluations_and_loads_as_an_agent(runs):
    full, _ = runs
    rows = [json.loads(line) for line in (full / "metrics.jsonl").read_text().splitlines()]
    assert [r["epoch"] for r in rows] == [1, 2]
    # the baseline each evaluation carries: what random play scores against the opponent
    baseline = {r["eval/pubeval/random_score"] for r in rows}
    assert len(baseline) == 1 and 0.0 <= baseline.pop() < 0.5
    for r in rows:
        share = r["eval/pubeval/win"] + r["eval/pubeval/loss"] + r["eval/pubeval/draw"]
        assert (
            share == pytest.approx(1.0) and r["eval/pubeval/points_low"] <= r["eval/pubeval/points"]
        )
    from turbozero.io.plots import plot_run

    drawn = plot_run(rows, full / "drawn")  # (the suite's runs draw none themselves)
    assert full / "drawn" / "strength.png" in drawn  # the scores against pubeval
    loaded = turbozero.load_agent(full)
    assert loaded.config == RECORDED and loaded.agent.name.startswith("td:backgammon:best@")
    states, _ = jax.vmap(loaded.env.init)(jax.random.split(jax.random.PRNGKey(0), 3))
    action = np.asarray(loaded.act(states, jax.random.PRNGKey(1)))
    assert np.asarray(states.legal_action_mask)[np.arange(3), action].all()
    with pytest.raises(ValueError, match="num_simulations is not for TD runs"):
        turbozero.load_agent(full, 8)


def test_a_run_writes_the_records_of_its_last_evaluations_games(runs):
    """As AlphaZero's runs do, at the run's end (drawing a game's positions takes seconds):
    RUN/games/latest.html holds `eval_record_games` games against each opponent, their seats
    and colours named, the points numbered from the agent's side; none with 0."""
    assert not (runs[1] / "games" / "latest.html").exists()  # (eval_record_games=0)
    full, _ = runs
    page = (full / "games" / "latest.html").read_text()
    sections = page.split("<section class='game'>")[1:]
    assert len(sections) == RECORDED.eval_record_games * len(RECORDED.eval_opponents)
    assert "<h2>vs pubeval (" in page
    from turbozero.arena.records import packed_frames

    for section in sections:
        frames = packed_frames(section)  # (a long game's boards are sent compressed)
        assert "<svg" in section if frames is None else all("<svg" in f[1] for f in frames)
        title = section[section.index("<h3>") + 4 : section.index("</h3>")]
        seat = r"\((first|second), (black|white)\)"
        assert re.search(rf"^td\S* {seat} vs pubeval {seat}: ", title), title


def test_the_cli_trains_and_evaluates_a_td_run(runs, tmp_path, capsys):
    from turbozero.cli import main

    full, _ = runs
    assert main(["eval", str(full), "--vs", "random", "--games", "4", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["games"] == 4 and out["ms_per_move"] > 0
    # the 1-ply search over the opponent's rolls (tests/td/test_lookahead.py), loaded
    searching = turbozero.load_agent(full, depth=1).agent
    assert isinstance(searching.policy_fn, TDSearchPolicy) and searching.name.endswith(":depth1")
    assert main(["eval", str(full), "--vs", "random", "--depth", "2"]) == 2
    assert "depth must be in [0, 1] for 'backgammon'" in capsys.readouterr().err
    assert main(["eval", str(full), "--vs", "random", "--simulations", "4"]) == 2
    assert (
        "is a TD run (its network rates each play; only a one-player game"
        in capsys.readouterr().err
    )


def test_a_td_run_is_played_on_the_play_page(runs):
    """The agent takes the first turn of a game the human lets it open, with legal moves."""
    from turbozero.play.session import Game

    full, _ = runs
    game = Game(turbozero.load_agent(full), human_first=False, seed=0)
    state = game.snapshot()
    assert state["to_move"] == "human" and len(state["history"]) >= 1
    assert all(h["by"] == "agent" for h in state["history"])
    # its value is the points it expects (the page says so), from its policy, not a search
    assert state["reply"]["value_unit"] == "points" and state["reply"]["searched"] is False
    game.move(state["legal"][0])


def test_a_resume_keeps_the_opponent_that_ranks_the_best_network(runs, tmp_path):
    run = shutil.copytree(runs[0], tmp_path / "run")  # (a copy: the shared run stays as it was)
    other = dataclasses.replace(RECORDED, num_epochs=3, eval_opponents=("random",))
    with pytest.raises(ValueError, match="eval_opponents"):
        train_td(other, run, resume=True, progress=False)
