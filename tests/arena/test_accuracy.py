"""Move accuracy against solvers, and the perfect players behind it."""

from __future__ import annotations

import os
import sys

import jax
import numpy as np
import pytest

from turbozero.arena import perfect_agent, play_match, random_agent
from turbozero.arena.accuracy import (
    PositionSet,
    accuracy_of_actions,
    move_accuracy,
    positions_for,
    random_accuracy,
    save_cached,
)
from turbozero.games.connect_four import labelled_positions as connect_four_positions
from turbozero.games.connect_four import require_bitbully, score_moves
from turbozero.games.tic_tac_toe import all_positions as tic_tac_toe_positions
from turbozero.gamespec import ILLEGAL_SCORE
from turbozero.io.errors import MissingExtraError


@pytest.fixture(scope="module")
def c4_positions(tmp_path_factory):
    return connect_four_positions(60, seed=3, cache=tmp_path_factory.mktemp("positions"))


def _tic_tac_toe_row(positions: PositionSet, moves: list[int]) -> int:
    padded = np.full(9, -1)
    padded[: len(moves)] = moves
    (rows,) = np.nonzero((positions.moves == padded).all(axis=1))
    assert len(rows) == 1
    return int(rows[0])


def test_tic_tac_toe_has_4520_reachable_non_terminal_positions():
    positions = tic_tac_toe_positions()
    assert len(positions) == 4520
    assert positions.legal.sum(axis=1).min() >= 1  # every position has a move
    # the empty board: every first move draws with perfect play
    empty = _tic_tac_toe_row(positions, [])
    assert np.array_equal(positions.scores[empty], np.zeros(9))


def test_tic_tac_toe_labels_a_one_move_win_and_a_forced_block():
    positions = tic_tac_toe_positions()
    # X: 0, 1 (cells 0..8 row-major); O: 3, 4; X to move wins at 2
    win = _tic_tac_toe_row(positions, [0, 3, 1, 4])
    assert positions.scores[win, 2] == 1.0
    assert np.flatnonzero(positions.keeps_result[win]).tolist() == [2]  # only 2 wins at once
    # X: 0, 1; O: 4; O to move must block at 2 (any other move loses)
    block = _tic_tac_toe_row(positions, [0, 4, 1])
    assert positions.scores[block, 2] == 0.0
    others = [c for c in range(9) if c not in (0, 1, 2, 4)]
    assert (positions.scores[block, others] == -1.0).all()
    assert (positions.scores[block, [0, 1, 4]] == ILLEGAL_SCORE).all()  # occupied


def test_connect_four_solver_labels_a_one_move_win_a_forced_block_and_a_full_column():
    # first player has three in column 0 and wins by playing it again
    scores = score_moves([0, 1, 0, 1, 0, 1])
    assert scores[0] > 0 and scores[0] == scores.max()
    # the second player must block column 0; every other move loses at once
    scores = score_moves([0, 1, 0, 1, 0])
    assert scores[0] == scores.max()
    assert (np.delete(scores, 0) < 0).all()
    assert np.sign(scores[0]) > np.sign(np.delete(scores, 0)).max()
    # a full column is no move
    scores = score_moves([3, 3, 3, 3, 3, 3])
    assert scores[3] == ILLEGAL_SCORE and (np.delete(scores, 3) > ILLEGAL_SCORE).all()


def test_connect_four_positions_follow_the_sampling_rules_and_come_back_from_the_cache(
    c4_positions, tmp_path
):
    p = c4_positions
    assert len(p) == 60 and p.moves.shape == (60, 24) and p.scores.shape == (60, 7)
    assert p.plies.min() >= 8 and p.plies.max() <= 24
    assert len({tuple(m) for m in p.moves}) == 60  # deduplicated
    # the labels are the solver's for the moves recorded
    for i in range(3):
        assert np.array_equal(p.scores[i], score_moves(p.moves[i][p.moves[i] >= 0].tolist()))
    a = connect_four_positions(5, seed=1, cache=tmp_path)
    assert len(list(tmp_path.glob("*.npz"))) == 1
    b = connect_four_positions(5, seed=1, cache=tmp_path)
    assert np.array_equal(a.moves, b.moves) and np.array_equal(a.scores, b.scores)


def test_the_perfect_tic_tac_toe_player_keeps_the_result_everywhere(tic_tac_toe, key):
    positions = tic_tac_toe_positions()
    acc = move_accuracy(tic_tac_toe, perfect_agent(tic_tac_toe), positions, key)
    assert acc.result == 1.0 and acc.best == 1.0 and acc.num_positions == 4520
    assert sum(p["positions"] for p in acc.phases.values()) == 4520


def test_the_perfect_connect_four_player_has_full_accuracy(connect_four, c4_positions, key):
    acc = move_accuracy(connect_four, perfect_agent(connect_four), c4_positions, key)
    assert acc.result == 1.0 and acc.best == 1.0


def test_the_perfect_connect_four_player_never_loses_as_first_player_under_jit(connect_four, key):
    r = play_match(
        connect_four, perfect_agent(connect_four), random_agent(connect_four), key, num_games=4
    )
    assert r.as_first[2] == 0 and r.as_first[0] == 2  # first player wins perfect play
    assert r.losses == 0 and r.illegal_moves == 0


def test_the_random_player_scores_the_expected_share(tic_tac_toe, key):
    positions = tic_tac_toe_positions()
    expected = random_accuracy(positions).result
    measured = [
        move_accuracy(
            tic_tac_toe, random_agent(tic_tac_toe), positions, jax.random.fold_in(key, i)
        ).result
        for i in range(4)
    ]
    # 4 x 4,520 independent draws: the standard error of the mean is under 0.004
    assert abs(np.mean(measured) - expected) < 0.015
    assert 0.5 < expected < 0.65  # about 58% of random moves keep the result


def test_an_illegal_or_wrong_move_is_a_mistake():
    positions = tic_tac_toe_positions()
    best = np.argmax(positions.scores, axis=1)
    assert accuracy_of_actions(positions, best).result == 1.0
    occupied = np.argmin(positions.scores, axis=1)  # some rows: occupied cells
    assert accuracy_of_actions(positions, occupied).result < 0.5
    assert accuracy_of_actions(positions, np.full(4520, 99)).result == 0.0


def test_accuracy_is_split_by_the_positions_own_result():
    # three positions with two moves each: a win (one move keeps it), a draw (one move keeps
    # it), a loss (every move keeps it); the second move is played everywhere
    positions = PositionSet(
        game="tic_tac_toe",
        moves=np.full((3, 1), -1, np.int32),
        scores=np.array([[2.0, -1.0], [0.0, -3.0], [-1.0, -2.0]], np.float32),
        phases={"all": (0, 0)},
    )
    assert positions.results.tolist() == [1, 0, -1]
    acc = accuracy_of_actions(positions, np.array([1, 1, 1]))
    assert acc.result == pytest.approx(1 / 3)
    assert acc.by_result == {
        "win": {"result": 0.0, "best": 0.0, "positions": 1},
        "draw": {"result": 0.0, "best": 0.0, "positions": 1},
        "loss": {"result": 1.0, "best": 0.0, "positions": 1},
    }
    # a class without positions is left out, and the classes cover every position
    acc = accuracy_of_actions(tic_tac_toe_positions(), np.zeros(4520, np.int64))
    assert sum(r["positions"] for r in acc.by_result.values()) == 4520
    only_wins = PositionSet("tic_tac_toe", positions.moves[:1], positions.scores[:1], {})
    assert set(accuracy_of_actions(only_wins, np.array([0])).by_result) == {"win"}


def test_positions_for_a_game_without_a_solver_is_refused():
    with pytest.raises(ValueError, match="no solver for 'othello'"):
        positions_for("othello")


def test_a_missing_solver_names_the_extra_in_one_line(monkeypatch):
    monkeypatch.setitem(sys.modules, "bitbully", None)  # import fails
    with pytest.raises(MissingExtraError) as err:
        require_bitbully()
    message = str(err.value)
    assert "\n" not in message and "pip install 'turbozero[solvers]'" in message


def test_cli_names_the_missing_extra_and_leaves_no_run(monkeypatch, tmp_path, capsys):
    from turbozero.cli import main
    from turbozero.games import connect_four as c4

    monkeypatch.setitem(sys.modules, "bitbully", None)
    c4._solver.cache_clear()
    monkeypatch.setenv("TURBOZERO_CACHE", str(tmp_path / "cache"))  # nothing cached
    out = tmp_path / "run"
    code = main(
        [
            "train",
            "connect_four",
            "--out",
            str(out),
            "--set",
            "num_games=2",
            "--set",
            "num_epochs=1",
        ]
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1
    assert "pip install 'turbozero[solvers]'" in err[0]
    assert not out.exists()


def test_config_accepts_the_perfect_player_and_accuracy_only_where_a_solver_exists():
    from turbozero.config import ConfigError, get_preset

    c4 = get_preset("connect_four").make()
    assert c4.eval_accuracy
    c4.with_overrides(["eval_opponents=random,perfect"])
    othello = get_preset("othello").make()
    with pytest.raises(ConfigError, match="eval_opponents 'perfect' exists only for env"):
        othello.with_overrides(["eval_opponents=perfect"])
    with pytest.raises(ConfigError, match="eval_accuracy=true needs a solver"):
        othello.with_overrides(["eval_accuracy=true"])


@pytest.mark.parametrize("opponent", ["random", "mcts:4"])
def test_batches_asked_side_by_side_give_the_moves_asked_one_at_a_time(
    tic_tac_toe, key, monkeypatch, opponent
):
    from turbozero.arena import accuracy
    from turbozero.arena.opponents import make_opponent

    agent, positions = make_opponent(tic_tac_toe, opponent), tic_tac_toe_positions()
    moves = {}
    for threads in (1, 3):
        monkeypatch.setattr(accuracy, "side_by_side", lambda threads=threads: threads)
        moves[threads] = accuracy.agent_actions(tic_tac_toe, agent, positions, key, batch_size=1000)
    assert moves[1].shape == (4520,)
    np.testing.assert_array_equal(moves[1], moves[3])


def test_side_by_side_runs_a_batch_per_cpu_core():
    from turbozero.arena.accuracy import side_by_side

    assert jax.default_backend() == "cpu"
    assert 1 <= side_by_side() <= (os.cpu_count() or 1)


def test_cli_accuracy_asks_the_run_for_the_set_size_its_evaluations_used(tmp_path, capsys):
    """`turbozero eval RUN --accuracy` measures on the run's own `eval_accuracy_positions`
    (the figure beside its training curve), and `--positions` still chooses another size."""
    import json

    from turbozero.cli import main

    run = tmp_path / "run"
    tiny = [
        "num_games=2",
        "num_epochs=1",
        "collection_steps_per_epoch=2",
        "train_steps_per_epoch=1",
        "train_batch_size=8",
        "memory_capacity=8",
        "search.num_simulations=2",
        "search.max_nodes=4",
        "eval_simulations=2",
        "network.num_blocks=1",
        "network.num_channels=4",
        "eval_accuracy=false",
        "eval_accuracy_positions=7",
        "eval_games=2",
    ]
    sets = [a for pair in (("--set", t) for t in tiny) for a in pair]
    assert main(["train", "connect_four", "--out", str(run), *sets]) == 0
    capsys.readouterr()
    for extra, expected in (([], 7), (["--positions", "5"], 5)):
        assert main(["eval", str(run), "--accuracy", "--json", *extra]) == 0
        out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
        assert out["positions"] == expected
        # the count of result-losing moves beside the share, which rounding would hide
        assert out["mistakes"] == round((1 - out["accuracy_result"]) * expected)


def test_a_cache_file_is_written_whole_or_not_at_all(tmp_path, monkeypatch):
    """`save_cached` renames a complete file into place; a write that fails (a full disk,
    Ctrl-C) leaves neither the file nor its temporary one behind."""
    path = tmp_path / "positions" / "set.npz"
    save_cached(path, moves=np.arange(3))
    np.testing.assert_array_equal(np.load(path)["moves"], np.arange(3))

    def full_disk(file, **arrays):
        with open(file, "wb") as f:
            f.write(b"PK partial")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(np, "savez", full_disk)
    with pytest.raises(OSError, match="No space left"):
        save_cached(tmp_path / "positions" / "other.npz", moves=np.arange(3))
    assert sorted(p.name for p in path.parent.iterdir()) == ["set.npz"]
