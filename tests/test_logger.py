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
    assert "Epoch 1: {'loss': '0.5000'}" in capsys.readouterr().out
    # a resumed run (a second logger on the same directory) continues the same W&B run, and
    # TensorBoard drops events from the first row's step on (a crashed attempt's)
    with MetricsLogger(rd, total_epochs=2, progress=False, config=cfg) as log:
        log.epoch({"epoch": 2, "env_steps": 128, "wall_seconds": 2.0, "loss": 0.4})
    assert inits[0]["id"] == inits[1]["id"] and inits[1]["resume"] == "allow"
    assert purged == [64, 128]


def test_a_disabled_logger_writes_nothing(tmp_path):
    rd = RunDir(tmp_path / "run").create()
    with MetricsLogger(rd, total_epochs=1, progress=False, enabled=False) as log:
        log.epoch({"epoch": 1, "env_steps": 1, "wall_seconds": 0.1})
    assert rd.read_metrics() == []


def test_an_epoch_without_training_says_it_waited_for_positions(tmp_path, capsys):
    rd = RunDir(tmp_path / "run").create()
    with MetricsLogger(rd, total_epochs=1, progress=False) as log:
        log.epoch({"epoch": 1, "env_steps": 8, "wall_seconds": 1.0, "waiting_for_positions": True})
    assert "'waiting_for_positions': 'True'" in capsys.readouterr().out


def test_rates_and_scores_are_drawn_on_a_unit_axis_only_when_they_are_fractions():
    """A one-player game's `eval/score` is its mean return (2048: hundreds): on the axis pinned
    to [0, 1] its line was drawn off the panel."""
    from turbozero.io.plots import is_fraction

    assert is_fraction("eval/random/win", [0.0, 0.25, 1.0])
    assert is_fraction("eval/score", [0.5, 0.75]) and is_fraction("tree_fullness", [0.9])
    assert not is_fraction("eval/score", [912.0, 1304.0])
    assert not is_fraction("eval/score", [0.5, -0.25])
    assert not is_fraction("loss", [0.5])
