"""The metrics logger: metrics.jsonl always; TensorBoard and W&B when the config asks."""

from __future__ import annotations

import sys
import types

from turbozero.alphazero import AlphaZeroConfig
from turbozero.io.logger import MetricsLogger
from turbozero.io.rundir import RunDir


def test_rows_go_to_metrics_jsonl_tensorboard_and_wandb(tmp_path, monkeypatch, capsys):
    scalars, logged, finished, purged, inits = [], [], [], [], []

    class Writer:
        def __init__(self, logdir, purge_step=None):
            self.logdir = logdir
            purged.append(purge_step)

        def add_scalar(self, name, value, step):
            scalars.append((name, value, step))

        def flush(self):
            scalars.append("flushed")

        def close(self):
            finished.append("tb")

    run = types.SimpleNamespace(
        log=lambda d, step: logged.append((d, step)), finish=lambda: finished.append("wandb")
    )
    monkeypatch.setitem(sys.modules, "tensorboardX", types.SimpleNamespace(SummaryWriter=Writer))
    monkeypatch.setitem(
        sys.modules, "wandb", types.SimpleNamespace(init=lambda **kw: inits.append(kw) or run)
    )
    rd = RunDir(tmp_path / "run").create()
    cfg = AlphaZeroConfig(tensorboard=True, wandb_project="proj")
    with MetricsLogger(rd, total_epochs=2, progress=False, config=cfg) as log:
        log.epoch({"epoch": 1, "env_steps": 64, "wall_seconds": 1.0, "loss": 0.5})
    assert rd.read_metrics() == [{"epoch": 1, "env_steps": 64, "wall_seconds": 1.0, "loss": 0.5}]
    assert ("loss", 0.5, 64) in scalars and scalars[-1] == "flushed"  # on disk with the row
    assert logged and logged[0][0]["loss"] == 0.5 and logged[0][1] == 64
    assert sorted(finished) == ["tb", "wandb"]
    assert "Epoch 1/2: loss=0.5 | 0:00:01 left" in capsys.readouterr().out
    # a resumed run (a second logger on the same directory) continues the same W&B run, and
    # TensorBoard drops events from the first row's step on (a crashed attempt's)
    with MetricsLogger(rd, total_epochs=2, progress=False, config=cfg) as log:
        log.epoch({"epoch": 2, "env_steps": 128, "wall_seconds": 2.0, "loss": 0.4})
    assert inits[0]["id"] == inits[1]["id"] and inits[1]["resume"] == "allow"
    assert purged == [64, 128]
    # a logger closed once, again (the runner closes it also where the run fails before its
    # epochs), or never entered: its W&B run finished once
    log.close()
    assert sorted(finished) == ["tb", "tb", "wandb", "wandb"]
    MetricsLogger(rd, total_epochs=2, progress=False, config=cfg).close()
    assert sorted(finished) == ["tb", "tb", "wandb", "wandb", "wandb"]


def test_a_disabled_logger_writes_nothing(tmp_path):
    rd = RunDir(tmp_path / "run").create()
    with MetricsLogger(rd, total_epochs=1, progress=False, enabled=False) as log:
        log.epoch({"epoch": 1, "env_steps": 1, "wall_seconds": 0.1})
    assert rd.read_metrics() == []


def test_an_epoch_without_training_says_it_waited_for_positions(tmp_path, capsys):
    rd = RunDir(tmp_path / "run").create()
    with MetricsLogger(rd, total_epochs=1, progress=False) as log:
        log.epoch({"epoch": 1, "env_steps": 8, "wall_seconds": 1.0, "waiting_for_positions": True})
    assert "Epoch 1/1: waiting for positions" in capsys.readouterr().out


def test_rates_and_scores_are_drawn_on_a_unit_axis_only_when_they_are_fractions():
    """A one-player game's `eval/score` is its mean return (2048: hundreds): on the axis pinned
    to [0, 1] its line was drawn off the panel."""
    from turbozero.io.plots import is_fraction

    assert is_fraction("eval/random/win", [0.0, 0.25, 1.0])
    assert is_fraction("eval/score", [0.5, 0.75]) and is_fraction("tree_fullness", [0.9])
    assert not is_fraction("eval/score", [912.0, 1304.0])
    assert not is_fraction("eval/score", [0.5, -0.25])
    assert not is_fraction("loss", [0.5])


def test_the_epoch_line_shows_each_opponent_accuracy_and_numbers_as_numbers():
    from turbozero.io.logger import epoch_line

    row = {
        "epoch": 14,
        "loss": 2.18474,
        "positions_per_s": 730.12,
        "eval/random/win": 1.0,
        "eval/random/draw": 0.0,
        "eval/random/loss": 0.0,
        "eval/perfect/win": 0.0,
        "eval/perfect/draw": 0.75,
        "eval/perfect/loss": 0.25,
        "eval/score": 0.6875,
        "eval/accuracy/result": 0.923,
        "eval/accuracy/best": 0.718,
        "elo": 35.0,
        "elo/games": 12,
    }
    line = epoch_line(row, 1000, 75.0)
    # the rating with the games it rests on (a 1-1 start reads as elo=0)
    assert line.startswith("Epoch 14/1000: loss=2.185 positions_per_s=730.1 elo=35 (12 games) ")
    assert "| vs random W/D/L 100%/0%/0% | vs perfect W/D/L 0%/75%/25% " in line
    assert "| accuracy 92.30% (best move 71.8%) | 0:01:15 left" in line
    assert "'" not in line and "score" not in line  # no quoted numbers, no blended score


def test_the_epoch_line_counts_the_mistakes_one_decimal_would_hide():
    from turbozero.io.logger import epoch_line

    row = {"epoch": 3, "eval/accuracy/result": 1 - 2 / 4520, "eval/accuracy/best": 0.9}
    line = epoch_line({**row, "eval/accuracy/positions": 4520}, 80, None)
    assert line.endswith("| accuracy 99.96% (2 mistakes of 4,520; best move 90.0%)")
    one = {**row, "eval/accuracy/result": 1 - 1 / 4520, "eval/accuracy/positions": 4520}
    assert "(1 mistake of 4,520;" in epoch_line(one, 80, None)
    assert "99.96% (best move 90.0%)" in epoch_line(row, 80, None)  # rows written before


def test_an_opponents_line_carries_what_random_play_scores_against_it():
    from turbozero.io.logger import epoch_line

    row = {"epoch": 4, "eval/pubeval/win": 0.12, "eval/pubeval/loss": 0.88}
    line = epoch_line({**row, "eval/pubeval/random_score": 0.03125}, 4, None)
    assert line.endswith("| vs pubeval W/D/L 12%/0%/88% (random play scores 3%)")
    assert "random play" not in epoch_line(row, 4, None)


def test_a_one_player_epoch_line_shows_the_network_alone_and_2048s_tiles():
    from turbozero.io.logger import epoch_line

    row = {
        "epoch": 25,
        "loss": 4.3,
        "eval/return": 3415.75,
        "eval/network/return": 1531.44,
        "eval/max_tile/mean": 270.0,
        "eval/max_tile/max": 1024.0,
        "eval/reached_2048/mean": 0.125,
    }
    line = epoch_line(row, 100, None)
    assert line == (
        "Epoch 25/100: loss=4.3 return=3416 network/return=1531 max_tile/mean=270 "
        "reached_2048/mean=0.125"
    )


def test_time_left_follows_the_pace_leaves_out_compiling_and_keeps_the_wall_clock_budget(tmp_path):
    rd = RunDir(tmp_path / "run").create()
    log = MetricsLogger(rd, total_epochs=100, progress=False)
    assert log.seconds_left({"epoch": 10, "wall_seconds": 50.0}) == 450.0  # a resumed run
    assert log.seconds_left({"epoch": 12, "wall_seconds": 54.0}) == 88 * 2.0  # pace since then
    first = MetricsLogger(rd, total_epochs=100, progress=False)  # 40 s of it compiling
    assert first.seconds_left({"epoch": 1, "wall_seconds": 42.0, "compile_seconds": 40.0}) == 198
    again = MetricsLogger(rd, total_epochs=100, progress=False)  # 30 s compiling, 10 s warm-up
    row = {"epoch": 1, "wall_seconds": 42.0, "compile_seconds": 30.0, "startup_seconds": 40.0}
    assert again.seconds_left(row) == 198
    budget = MetricsLogger(
        rd, total_epochs=100, progress=False, config=AlphaZeroConfig(max_wall_seconds=60.0)
    )
    assert budget.seconds_left({"epoch": 10, "wall_seconds": 50.0}) == 10.0


def test_time_left_counts_the_evaluations_still_due_at_their_measured_cost(tmp_path, capsys):
    """Tic-tac-toe's time left jumped from 0:18 to 3:02 at the first evaluation: the pace left
    the evaluations out. Now the lines before the first one say how many are still due, and
    from it on each still due is counted at the evaluations' mean cost."""
    rd = RunDir(tmp_path / "run").create()
    config = AlphaZeroConfig(num_epochs=80, eval_every=10)
    with MetricsLogger(rd, total_epochs=80, progress=False, config=config) as log:
        assert log.evaluations_after(0) == 8 and log.evaluations_after(75) == 1
        log.epoch({"epoch": 1, "env_steps": 1, "wall_seconds": 1.0})
        assert "| 0:01:19 left + 8 evaluations" in capsys.readouterr().out
        for epoch in range(2, 10):
            log.epoch({"epoch": epoch, "env_steps": epoch, "wall_seconds": float(epoch)})
        capsys.readouterr()
        # the first evaluation took 20 s: 70 epochs at 1 s and 7 evaluations at 20 s remain
        log.epoch({"epoch": 10, "env_steps": 10, "wall_seconds": 30.0, "eval_seconds": 20.0})
        assert capsys.readouterr().out.rstrip().endswith("| 0:03:30 left")
    odd = MetricsLogger(rd, total_epochs=25, progress=False, config=config)
    assert odd.evaluations_after(0) == 3 and odd.evaluations_after(20) == 1  # (and the last)
    assert odd.evaluations_after(25) == 0


def test_a_stopped_run_says_how_to_resume(tmp_path, capsys):
    rd = RunDir(tmp_path / "run").create()
    with MetricsLogger(rd, total_epochs=80, progress=False) as log:
        log.stopped(14)
    out = capsys.readouterr().out
    assert "stopped at epoch 14/80" in out and f"--out {rd.path} --resume" in out


def test_the_epoch_line_words_gnubgs_error_rate_as_backgammons_judge_says():
    from turbozero.gamespec import game_spec
    from turbozero.io.experiment import judge_of
    from turbozero.io.logger import epoch_line
    from turbozero.io.plots import strength_series

    row = {"epoch": 200, "eval/gnubg/error_rate": 252.197, "eval/gnubg/best": 0.185}
    judge = judge_of("pgx:backgammon")
    assert judge is game_spec("backgammon").judge and judge is not None
    line = epoch_line(row, 1000, None, judge)
    assert line.endswith("| gnubg error rate 252.2 (best play 18.5%)")
    # the log and the plots word no engine themselves: without the game's judge, no gnubg words
    assert "gnubg" not in epoch_line(row, 1000, None)
    rows = [{**row, "env_steps": 1}]
    assert strength_series(rows, judge)["gnubg's best play"] == {
        "share of positions": "eval/gnubg/best"
    }
    assert not any("gnubg" in title for title in strength_series(rows))
