"""The experiment runner with an algorithm of a few lines: what any algorithm gets from it (the run
directory, exact resume, stop signals, checkpoints, metric rows, the summary) without writing it."""

from __future__ import annotations

import dataclasses
import os
import signal
from typing import Any

import numpy as np
import pytest

from turbozero.algorithms import AlgorithmEntry, register_algorithm, unregister_algorithm
from turbozero.config import Config
from turbozero.io.checkpoint import Checkpointer
from turbozero.io.experiment import Run, run_experiment
from turbozero.io.migrations import FORMAT_VERSION
from turbozero.io.rundir import RunDir


@dataclasses.dataclass(frozen=True)
class CountConfig(Config):
    num_epochs: int = 4
    step: int = 1
    eval_every: int = 2
    checkpoint_every: int = 1
    keep_checkpoints: int | None = 2


class Count:
    """Adds `step * epoch` to a total each epoch, and reads it out every `eval_every` epochs."""

    name = "count"
    env_name = "nothing"
    max_wall_seconds = 0.0
    resume_may_change = ("num_epochs",)

    def __init__(self, config: CountConfig, during_epoch: Any = None):
        self.config = config
        self.resume_notes = {"step": "the step is what the run counts in"}
        self.evaluations = 0
        self.during_epoch = during_epoch

    def record(self, saved: dict[str, Any] | None, run_dir: RunDir) -> dict[str, Any]:
        return {}

    def describe(self) -> str:
        return f"steps of {self.config.step}"

    def start(self, run: Run) -> None:
        pass

    def init(self) -> dict[str, Any]:
        return {"total": np.zeros((), np.int32)}

    def restore_target(self, meta: dict[str, Any]) -> dict[str, Any]:
        return self.init()

    def restored(self, run: Run, tree: Any, meta: dict[str, Any]) -> Any:
        self.evaluations = meta["evaluations"]
        return tree

    def resumed(self, run: Run, state: Any, epoch: int) -> None:
        pass

    def epoch(self, run: Run, state: Any, epoch: int) -> tuple[Any, dict[str, Any]]:
        if self.during_epoch is not None:
            self.during_epoch(epoch)
        return {"total": state["total"] + self.config.step * epoch}, {"loss": 1.0 / epoch}

    def evaluate(
        self, run: Run, state: Any, epoch: int, *, out_of_time: bool
    ) -> tuple[Any, dict[str, Any]]:
        if epoch % self.config.eval_every and not out_of_time:
            return state, {}
        self.evaluations += 1
        return state, {"eval/return": float(state["total"])}

    def env_steps(self, epoch: int) -> int:
        return 10 * epoch

    def checkpoint(self, state: Any, epoch: int) -> tuple[Any, dict[str, Any]]:
        return state, {"evaluations": self.evaluations}

    def summary(self, state: Any, epoch: int, row: dict[str, Any], *, final: bool) -> dict:
        return {"total": int(state["total"]), "evaluations": self.evaluations}


@pytest.fixture(autouse=True)
def _count_is_an_algorithm():
    """Count registered as an algorithm (one registration), for this file's tests."""
    register_algorithm(
        AlgorithmEntry(
            name="count",
            title="Count",
            config=f"{__name__}:CountConfig",
            run=f"{__name__}:_run",
            load=f"{__name__}:_run",
            load_options=(),
            plays="it counts",
        )
    )
    yield
    unregister_algorithm("count")


def _run(path, config=CountConfig(), *, resume=False, last_epoch=None, during_epoch=None):
    return run_experiment(
        Count(config, during_epoch),
        RunDir(path),
        resume=resume,
        preset="tiny",
        last_epoch=last_epoch or config.num_epochs,
        progress=False,
    )


def _rows(path):
    return [
        {k: v for k, v in r.items() if k != "wall_seconds"} for r in RunDir(path).read_metrics()
    ]


def _checkpoint(path):
    ck = Checkpointer(RunDir(path).checkpoints)
    try:
        return ck.restore({"total": np.zeros((), np.int32)})
    finally:
        ck.close()


def test_a_run_writes_config_rows_checkpoints_and_the_summary(tmp_path):
    summary = _run(tmp_path / "run")
    rd = RunDir(tmp_path / "run")
    saved = rd.read_json("config.json")
    assert saved == {
        "format": FORMAT_VERSION,
        "algorithm": "count",
        "preset": "tiny",
        "config": CountConfig().to_dict(),
    }
    rows = _rows(tmp_path / "run")
    assert [r["epoch"] for r in rows] == [1, 2, 3, 4]
    assert [r["env_steps"] for r in rows] == [10, 20, 30, 40]
    assert [r.get("eval/return") for r in rows] == [None, 3.0, None, 10.0]
    state, meta = _checkpoint(tmp_path / "run")
    assert int(state["total"]) == 10 and meta["epoch"] == 4 and meta["evaluations"] == 2
    ck = Checkpointer(rd.checkpoints)
    assert ck.all_steps() == [3, 4]  # keep_checkpoints=2
    ck.close()
    assert summary == rd.read_json("summary.json")
    assert summary["epochs"] == 4 and summary["env_steps"] == 40
    assert summary["total"] == 10 and summary["algorithm"] == "count"


def test_stopping_early_and_resuming_ends_as_the_uninterrupted_run(tmp_path):
    _run(tmp_path / "whole")
    assert _run(tmp_path / "split", last_epoch=3)["epochs"] == 3
    summary = _run(tmp_path / "split", resume=True)
    assert summary["total"] == 10 and summary["evaluations"] == 2
    assert _rows(tmp_path / "split") == _rows(tmp_path / "whole")


def test_rows_written_after_the_last_checkpoint_are_redone_not_repeated(tmp_path):
    config = CountConfig(checkpoint_every=3, keep_checkpoints=None)
    _run(tmp_path / "whole", config)
    _run(tmp_path / "crashed", config)
    ck = Checkpointer(RunDir(tmp_path / "crashed").checkpoints)
    ck.manager.delete(4)  # as if the run crashed before epoch 4's checkpoint
    ck.close()
    assert _run(tmp_path / "crashed", config, resume=True)["total"] == 10
    assert _rows(tmp_path / "crashed") == _rows(tmp_path / "whole")


def test_ctrl_c_finishes_the_epoch_saves_and_a_resume_goes_on(tmp_path):
    def interrupt(epoch):
        if epoch == 2:
            signal.raise_signal(signal.SIGINT)

    before = signal.getsignal(signal.SIGINT)
    summary = _run(tmp_path / "run", during_epoch=interrupt)
    assert summary["epochs"] == 2 and signal.getsignal(signal.SIGINT) is before
    assert _checkpoint(tmp_path / "run")[1]["epoch"] == 2
    assert _run(tmp_path / "run", resume=True)["total"] == 10


def test_a_resume_refuses_a_setting_it_may_not_change_and_says_why(tmp_path):
    _run(tmp_path / "run", last_epoch=1)
    with pytest.raises(ValueError, match=r"\{'step': \(1, 2\)\} \(the step is what the run"):
        _run(tmp_path / "run", CountConfig(step=2), resume=True)
    longer = CountConfig(num_epochs=6)  # where it stops may change
    assert _run(tmp_path / "run", longer, resume=True)["epochs"] == 6
    assert RunDir(tmp_path / "run").read_json("config.json")["config"]["num_epochs"] == 6


def test_a_resume_with_nothing_left_to_train_reports_where_the_checkpoint_left_the_run(tmp_path):
    _run(tmp_path / "run")
    summary = _run(tmp_path / "run", resume=True)
    assert summary["epochs"] == 4 and summary["total"] == 10
    assert [r["epoch"] for r in _rows(tmp_path / "run")] == [1, 2, 3, 4]


@pytest.mark.parametrize(
    "name", [".lock", "metrics.jsonl", "summary.json.tmp", "checkpoints", "best", "plots"]
)
def test_a_resume_refuses_a_link_leaving_the_run_before_writing_anything(tmp_path, name):
    """A sent run directory whose `.lock`, temporary, checkpoints or best folder links outside:
    the resume is refused in one line and the file or folder outside is untouched."""
    from turbozero.io.errors import RunPathError

    run = tmp_path / "run"
    _run(run, CountConfig(num_epochs=2))
    outside = tmp_path / "outside"
    outside.mkdir()
    victim = outside / "keep.txt"
    victim.write_text("mine")
    entry = run / name
    if entry.is_dir():
        import shutil

        shutil.copytree(entry, outside / name)
        shutil.rmtree(entry)
        entry.symlink_to(outside / name, target_is_directory=True)
    elif name in ("checkpoints", "best", "plots"):
        entry.symlink_to(outside, target_is_directory=True)
    else:
        entry.unlink(missing_ok=True)
        entry.symlink_to(victim)
    before = sorted(str(p.relative_to(outside)) for p in outside.rglob("*"))
    with pytest.raises(RunPathError, match="outside the run directory") as refused:
        _run(run, CountConfig(num_epochs=4), resume=True)
    assert str(entry) in str(refused.value) and "\n" not in str(refused.value)
    assert victim.read_text() == "mine"
    assert sorted(str(p.relative_to(outside)) for p in outside.rglob("*")) == before


def test_a_link_inside_the_run_and_a_run_directory_that_is_a_link_are_kept(tmp_path):
    real = tmp_path / "disk" / "run"
    _run(real, CountConfig(num_epochs=2))
    (real / "notes").mkdir()
    (real / "plots" / "mine").symlink_to(real / "notes", target_is_directory=True)
    alias = tmp_path / "alias"
    alias.symlink_to(real, target_is_directory=True)  # (the user's own choice of --out)
    _run(alias, CountConfig(num_epochs=4), resume=True)
    assert [r["epoch"] for r in RunDir(real).read_metrics()] == [1, 2, 3, 4]


def test_a_hard_linked_lock_is_refused_and_its_other_name_untouched(tmp_path):
    from turbozero.io.errors import RunPathError

    run = tmp_path / "run"
    _run(run, CountConfig(num_epochs=2))
    victim = tmp_path / "keep.txt"
    victim.write_text("mine")
    (run / ".lock").unlink(missing_ok=True)
    os.link(victim, run / ".lock")
    with pytest.raises(RunPathError, match="hard link"):
        _run(run, CountConfig(num_epochs=4), resume=True)
    assert victim.read_text() == "mine"


def test_plot_refuses_a_plot_that_links_outside_the_run(tmp_path, capsys):
    from turbozero.cli import main

    run = tmp_path / "run"
    _run(run, CountConfig(num_epochs=2))
    victim = tmp_path / "keep.png"
    victim.write_bytes(b"mine")
    for name in ("strength.png", "returns.png"):
        (run / "plots" / name).unlink(missing_ok=True)
        (run / "plots" / name).symlink_to(victim)
    assert main(["plot", str(run)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "outside the run directory" in err
    assert victim.read_bytes() == b"mine"


def test_a_finished_run_says_what_to_run_next(tmp_path, capsys, monkeypatch):
    _run(tmp_path / "one")
    out = capsys.readouterr().out
    assert f"next: turbozero eval {tmp_path / 'one'}\n" in out and "turbozero play" not in out
    monkeypatch.setattr(Count, "num_players", 2, raising=False)  # a two-player game's run
    _run(tmp_path / "two")
    assert f"or play it: turbozero play {tmp_path / 'two'}" in capsys.readouterr().out
