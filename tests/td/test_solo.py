"""TD learning over afterstates for a one-player game with chance (`turbozero.td.solo`): 2048's
afterstate rules against pgx's step, the n-tuple network's sharing and delta rule, the
expectimax against an enumeration, learning, exact resume, the run, its agent and its errors."""

from __future__ import annotations

import dataclasses
import json
import math

import jax
import jax.numpy as jnp
import numpy as np
import pgx.play2048 as p2048
import pytest

import turbozero
from turbozero.config import ConfigError
from turbozero.games.play2048 import _slide_row, decide, probabilities, resolve, solo_rules
from turbozero.td import TDConfig, make_td
from turbozero.td.ntuple import make_ntuple, ntuple_init, ntuple_update, ntuple_value
from turbozero.td.solo import action_values

from . import assert_same_learner, full_and_resumed

#: a small network (two 4-cell tuples: 131,072 weights) so the suite's runs stay light
SMALL = ((0, 1, 2, 3), (4, 5, 6, 7))
TINY = TDConfig(
    env="2048",
    value_net="ntuple",
    ntuples=SMALL,
    learning_rate=1.0,
    num_games=16,
    steps_per_epoch=40,
    num_epochs=2,
    eval_every=1,
    eval_games=4,
    eval_opponents=(),
    eval_record_games=0,
)


@pytest.fixture(scope="module")
def positions():
    """2,048 boards of random play (pgx's own steps), from every stage of short games."""
    env = turbozero.envs.make("2048")
    init, step = jax.jit(jax.vmap(env.init)), jax.jit(jax.vmap(env.step))
    key = jax.random.PRNGKey(0)
    states, _ = init(jax.random.split(key, 256))
    boards = []
    for t in range(8 * 30):
        key, k_act, k_step, k_new = jax.random.split(key, 4)
        legal = states.legal_action_mask
        action = jax.random.categorical(k_act, jnp.where(legal, 0.0, -jnp.inf))
        states, meta = step(states, action, jax.random.split(k_step, 256))
        fresh, _ = init(jax.random.split(k_new, 256))
        states = jax.tree.map(
            lambda n, o: jnp.where(meta.terminated.reshape((-1,) + (1,) * (n.ndim - 1)), n, o),
            fresh, states,
        )  # fmt: skip
        if t % 30 == 29:
            boards.append(np.asarray(states._board))
    return np.concatenate(boards)


def test_the_afterstate_rules_are_pgx_s_step(positions):
    """On 2,048 positions of random play, each move's afterstate and reward are pgx's slide and
    merge, a move is valid where pgx's legal mask says so, and chance's outcomes and their
    probabilities are pgx's new tile's."""
    rules = solo_rules()
    moves = jax.jit(jax.vmap(rules.moves))
    after, rewards, valid = (np.asarray(x) for x in moves(jnp.asarray(positions)))
    env = turbozero.envs.make("2048")
    # (each JAX call compiled, not run op by op)
    states, _ = jax.jit(jax.vmap(env.init))(jax.random.split(jax.random.PRNGKey(1), len(positions)))
    legal = jax.jit(jax.vmap(lambda b: p2048._legal_action_mask(b.reshape(4, 4))))
    mask = legal(jnp.asarray(positions))
    np.testing.assert_array_equal(valid, np.asarray(mask))
    states = states.replace(_board=jnp.asarray(positions, jnp.int32))
    for a in range(4):
        decided, _ = jax.jit(jax.vmap(decide, in_axes=(0, None)))(states, a)
        np.testing.assert_array_equal(after[:, a], np.asarray(decided._board))
        np.testing.assert_array_equal(rewards[:, a], np.asarray(decided.rewards)[:, 0])
    # chance below the first valid move of the first 300 positions
    a = valid[:300].argmax(1)
    decided = jax.jit(jax.vmap(decide))(jax.tree.map(lambda x: x[:300], states), jnp.asarray(a))[0]
    boards, probs = jax.jit(jax.vmap(rules.outcomes))(jnp.asarray(after[np.arange(300), a]))
    want = jax.jit(jax.vmap(probabilities))(decided)
    np.testing.assert_allclose(np.asarray(probs), np.asarray(want))
    placed = jax.jit(jax.vmap(jax.vmap(resolve, in_axes=(None, 0)), in_axes=(0, None)))(
        decided, jnp.arange(32)
    )
    np.testing.assert_array_equal(np.asarray(boards), np.asarray(placed._board))


def test_the_ntuple_network_shares_its_tables_across_the_symmetries(positions):
    """Whatever it has learned, a board and each of its 8 symmetric images have one value."""
    rules = solo_rules()
    net = make_ntuple(rules.tuples, rules.symmetries, rules.cell_values)
    params = ntuple_init(net)
    boards = jnp.asarray(positions[:512])
    errors = jax.random.normal(jax.random.PRNGKey(0), (512,)) * 100
    params = ntuple_update(net, params, boards, errors, 0.5)
    values = np.asarray(ntuple_value(net, params, boards[:64]))
    assert np.abs(values).max() > 1.0  # (it learned something)
    for perm in rules.symmetries:
        image = np.asarray(ntuple_value(net, params, boards[:64][:, perm]))
        np.testing.assert_allclose(image, values, rtol=1e-5, atol=1e-3)


def test_the_delta_rule_moves_a_value_by_its_step_and_a_batch_by_the_mean():
    """One board's value moves by `step` times its error; two games at the same board move it by
    the mean of their errors, not the sum (the batch learns as steadily as one game)."""
    symmetries = np.arange(16)[None]  # (no sharing: each weight read once)
    net = make_ntuple(((0, 1, 2, 3), (4, 5, 6, 7)), symmetries, 16)
    board = jnp.asarray([[1, 2, 3, 4, 5, 6, 7, 8, 0, 0, 0, 0, 0, 0, 0, 0]])
    params = ntuple_update(net, ntuple_init(net), board, jnp.asarray([10.0]), 0.5)
    assert float(ntuple_value(net, params, board)[0]) == pytest.approx(5.0)
    twice = jnp.concatenate([board, board])
    params = ntuple_update(net, ntuple_init(net), twice, jnp.asarray([10.0, 30.0]), 1.0)
    assert float(ntuple_value(net, params, board)[0]) == pytest.approx(20.0)
    with pytest.raises(ValueError, match=r"groups of 4 distinct cells in 0\.\.15"):
        make_ntuple(((0, 1, 2, 3), (4, 5, 6, 16)), symmetries, 16)


def _slide(board: np.ndarray, action: int) -> tuple[np.ndarray, int]:
    """pgx's move by hand: the board turned so the move slides left, each row slid, back."""
    turned = np.rot90(board.reshape(4, 4), action)
    rows = [_slide_row(r) for r in turned.tolist()]
    slid = np.array([r[0] for r in rows])
    return np.rot90(slid, -action).ravel(), sum(r[1] for r in rows)


def _brute(value, board: np.ndarray, depth: int) -> list[float]:
    """Each move's worth by enumeration: reward plus, at depth 0, the afterstate's value; deeper,
    the probability-weighted best reply over every new tile on every empty cell."""
    out = []
    for a in range(4):
        after, reward = _slide(board, a)
        if (after == board).all():
            out.append(-math.inf)
            continue
        if depth == 0:
            out.append(reward + value(after))
            continue
        empty = np.flatnonzero(after == 0)
        total = 0.0
        for cell in empty:
            for tile, p in ((1, 0.9), (2, 0.1)):
                placed = after.copy()
                placed[cell] = tile
                best = max(_brute(value, placed, depth - 1))
                total += p / len(empty) * (best if best > -math.inf else 0.0)
        out.append(reward + total)
    return out


def test_the_expectimax_is_the_enumeration_of_chance(positions):
    """At depths 0 and 1 (and 2 on one board) each move's worth is the brute-force enumeration
    of every new tile and reply, under a network with random weights."""
    rules = solo_rules()
    net = make_ntuple(SMALL, rules.symmetries, rules.cell_values)
    tables = jax.random.normal(jax.random.PRNGKey(3), (net.size,)) * 50
    params = {"tables": tables}

    def value(boards):
        return ntuple_value(net, params, boards)

    table = np.asarray(tables)

    def one(b):  # (the same sum of weights, read in NumPy: the enumeration calls it often)
        index = (np.minimum(b[net.reads], 15) * net.powers).sum(-1) + net.offsets
        return float(table[index].sum())

    picks = positions[::400][:5]  # (boards from several stages)
    for depth, boards in ((0, picks), (1, picks), (2, picks[-1:])):
        got, _ = jax.jit(lambda b, d=depth: action_values(rules, value, b, d))(jnp.asarray(boards))
        for b, row in zip(boards, np.asarray(got), strict=True):
            want = np.asarray(_brute(one, b, depth))
            np.testing.assert_allclose(row, want, rtol=1e-4, atol=1e-2)


def test_self_play_learns_to_score_beyond_random():
    """A few seconds of learning (256 games, 1,600 moves each, the small network) and the games
    that end in the second half score several times random play's 1,100 (about 4,300; greedy
    play on the merges' points alone, the learner's play without values, about 2,300)."""
    td = make_td(dataclasses.replace(TINY, num_games=256))
    state = td.init(jax.random.PRNGKey(0))
    state, _ = td.train(state, 800)
    state, metrics = td.train(state, 800)
    games = float(np.sum(metrics["games"]))
    assert games > 100 and float(np.sum(metrics["returns"])) / games > 3300


def test_the_mlp_value_function_learns_too():
    """value_net="mlp" on 2048: its Adam steps change the network and the loss stays finite."""
    td = make_td(dataclasses.replace(TINY, value_net="mlp", ntuples=(), hidden=(32,),
                                     learning_rate=1e-3))  # fmt: skip
    state = td.init(jax.random.PRNGKey(0))
    after, metrics = td.train(state, 50)
    assert np.isfinite(np.asarray(metrics["loss"])).all()
    moved = jax.tree.map(lambda a, b: float(jnp.abs(a - b).max()), state.params, after.params)
    assert max(jax.tree.leaves(moved)) > 0


def test_bad_settings_are_refused_by_name():
    with pytest.raises(ConfigError, match="eval_opponents must be empty for '2048'"):
        dataclasses.replace(TINY, eval_opponents=("random",))
    with pytest.raises(ConfigError, match="value_net must be one of"):
        dataclasses.replace(TINY, value_net="cnn")
    with pytest.raises(ConfigError, match="learning_rate"):
        dataclasses.replace(TINY, learning_rate=2.0)
    with pytest.raises(ConfigError, match="eval_depth"):
        dataclasses.replace(TINY, eval_depth=3)
    with pytest.raises(ConfigError, match="ntuples: tuples must be groups of 4"):
        dataclasses.replace(TINY, ntuples=((0, 1, 2, 3), (0, 1)))
    with pytest.raises(ConfigError, match="'backgammon' is a two-player game"):
        TDConfig(value_net="ntuple", learning_rate=0.5)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The tiny run in one go (recording one game), and stopped after one epoch then resumed."""
    recorded = dataclasses.replace(TINY, eval_record_games=1)
    return full_and_resumed(recorded, TINY, tmp_path_factory.mktemp("td2048"))


def test_a_resumed_run_ends_as_the_uninterrupted_one(runs):
    assert_same_learner(*runs)


def test_a_run_reports_scores_as_players_count_them(runs):
    """Each evaluation row: mean and median score, the share of games reaching 2048, 4096 and
    8192, the time a move took, random play's mean score; the records of its last games."""
    full, _ = runs
    rows = [json.loads(line) for line in (full / "metrics.jsonl").read_text().splitlines()]
    assert [r["epoch"] for r in rows] == [1, 2]
    for r in rows:
        assert r["eval/return"] == r["eval/score"] > 0 and r["eval/return_median"] > 0
        assert 0 <= r["eval/reached_8192/mean"] <= r["eval/reached_2048/mean"] <= 1
        assert r["eval/ms_per_move"] > 0 and r["eval/random/return"] > 0
    assert "<section class='game'>" in (full / "games" / "latest.html").read_text()
    from turbozero.io.plots import plot_run, strength_series

    assert full / "drawn" / "strength.png" in plot_run(rows, full / "drawn")
    panels = strength_series(rows)
    assert list(panels["share of games reaching"]) == ["1024", "2048", "4096", "8192"]
    assert panels["mean return"] == {"agent": "eval/return", "random policy": "eval/random/return"}


def test_the_agent_looks_ahead_by_depth_from_load_and_the_cli(runs, capsys):
    full, _ = runs
    loaded = turbozero.load_agent(full, depth=1)
    assert loaded.agent.name.endswith(":depth1") and loaded.agent.policy_fn.depth == 1
    states, _ = jax.vmap(loaded.env.init)(jax.random.split(jax.random.PRNGKey(0), 3))
    action = np.asarray(loaded.act(states, jax.random.PRNGKey(1)))
    assert np.asarray(states.legal_action_mask)[np.arange(3), action].all()
    with pytest.raises(ValueError, match="depth must be an int >= 0 and <= 2"):
        turbozero.load_agent(full, depth=3)
    from turbozero.cli import main

    assert main(["eval", str(full), "--games", "4", "--depth", "1", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["games"] == 4 and out["agent"].endswith(":depth1") and out["ms_per_move"] > 0
    assert 0 <= out["reached_2048"] <= 1 and out["median_return"] > 0
    # `play --depth` reaches the loader too (refused here before any server starts)
    assert main(["play", str(full), "--depth", "3", "--no-browser", "--port", "0"]) == 2
    assert "depth must be an int >= 0 and <= 2" in capsys.readouterr().err


def test_the_play_page_lets_the_agent_play_2048(runs):
    """On the play page the human plays 2048 and the agent's move (the page's "agent" button)
    is a legal slide, its value in points still to come."""
    from turbozero.play.session import Game

    full, _ = runs
    game = Game(turbozero.load_agent(full), human_first=True, seed=0)
    state = game.snapshot()
    assert state["to_move"] == "human"
    state = game.agent_move()
    assert state["history"][-1]["by"] == "agent"
    assert state["reply"]["value_unit"] == "points" and state["reply"]["searched"] is False
    game.move(state["legal"][0])
