"""`overlap`: self-play on a second thread while the gradient steps run, one epoch's memory
behind, with the same result for a seed whatever the threads' timing."""

from __future__ import annotations

import threading

import jax
import numpy as np
import orbax.checkpoint as ocp
import pytest

from tests.alphazero.test_resume import _rows
from tests.alphazero.test_selfplay_and_trainer import TINY
from turbozero.alphazero import train
from turbozero.alphazero.train import _AlphaZeroRun
from turbozero.io.checkpoint import Checkpointer
from turbozero.io.rundir import RunDir

OVERLAP = TINY.with_overrides(["overlap=true", "num_epochs=3", "eval_every=3"])


def _params(run):
    ck = Checkpointer(RunDir(run).checkpoints)
    try:
        args = ocp.args.Composite(state=ocp.args.StandardRestore())
        return ck.manager.restore(ck.latest_step(), args=args)["state"]["train"]["params"]
    finally:
        ck.close()


def _selfplay_threads():
    return [t for t in threading.enumerate() if t.name.startswith("turbozero-selfplay")]


def test_overlapped_runs_repeat_for_a_seed_and_resume_exactly(tmp_path):
    whole, again, split = tmp_path / "whole", tmp_path / "again", tmp_path / "split"
    train(OVERLAP, whole, progress=False)
    train(OVERLAP, again, progress=False)
    train(OVERLAP, split, progress=False, num_epochs=2)
    train(OVERLAP, split, progress=False, resume=True)
    rows = _rows(whole)
    assert rows == _rows(again) == _rows(split)
    for other in (again, split):
        for a, b in zip(
            jax.tree.leaves(_params(whole)), jax.tree.leaves(_params(other)), strict=True
        ):
            np.testing.assert_array_equal(a, b)
    assert all(np.isfinite(r["loss"]) for r in rows)
    assert not _selfplay_threads(), "the self-play thread ends with the run"


def test_an_overlapped_epoch_is_self_play_from_its_state_beside_steps_on_a_copy(
    tmp_path, monkeypatch
):
    """The overlapped epoch is exactly: self-play from the epoch's state, and the gradient
    steps on a copy of that state, whose memory lacks the epoch's new positions."""
    seen = {}
    overlapped = _AlphaZeroRun._overlapped_epoch

    def spy(self, run, state, epoch, row):
        if epoch == 2:
            seen["trainer"], seen["before"] = self, jax.device_get(state)  # (then donated)
        out = overlapped(self, run, state, epoch, row)
        if epoch == 2:
            seen["after"] = jax.device_get(out[0])
        return out

    monkeypatch.setattr(_AlphaZeroRun, "_overlapped_epoch", spy)
    train(OVERLAP.with_overrides(["num_epochs=2"]), tmp_path / "run", progress=False)
    assert "before" in seen, "the second epoch overlapped (its memory held a batch)"
    trainer, before, after = seen["trainer"], seen["before"], seen["after"]
    played, _ = trainer.collect(jax.device_put(before), OVERLAP.collection_steps_per_epoch)
    learner = trainer.fork(jax.device_put(before))
    for _ in range(OVERLAP.train_steps_per_epoch):
        learner, _ = trainer.train_steps(learner, 1)
    same = jax.tree.map(
        np.array_equal, jax.device_get(after.params), jax.device_get(learner.params)
    )
    assert all(jax.tree.leaves(same))
    same = jax.tree.map(np.array_equal, after.selfplay, jax.device_get(played.selfplay))
    assert all(jax.tree.leaves(same))
    np.testing.assert_array_equal(after.key, played.key)
    assert int(after.train_steps) == int(before.train_steps) + OVERLAP.train_steps_per_epoch
    assert int(after.epoch) == int(before.epoch) + 1
    held = int(before.selfplay.memory.positions_sampleable)
    assert int(after.selfplay.memory.positions_sampleable) > held >= OVERLAP.train_batch_size


def test_overlap_trains_apart_from_the_sequential_run(tmp_path):
    """From the second epoch on, the gradient steps miss the epoch's newest positions."""
    runs = {}
    for overlap in ("false", "true"):
        runs[overlap] = tmp_path / overlap
        train(
            OVERLAP.with_overrides([f"overlap={overlap}", "num_epochs=2"]),
            runs[overlap],
            progress=False,
        )
    seq, over = _rows(runs["false"]), _rows(runs["true"])
    assert seq[0]["loss"] == over[0]["loss"]  # the first epoch had no batch before its moves
    assert seq[1]["loss"] != over[1]["loss"]


@pytest.mark.parametrize("overlap", [False, True])
def test_a_second_ctrl_c_in_an_overlapped_epoch_waits_for_self_play_and_keeps_the_last_save(
    tmp_path, monkeypatch, overlap
):
    learn = _AlphaZeroRun._learn

    def interrupted(self, run, state, epoch):
        out = learn(self, run, state, epoch)
        if epoch == 2:
            raise KeyboardInterrupt  # as `check_abort` after a second Ctrl-C
        return out

    monkeypatch.setattr(_AlphaZeroRun, "_learn", interrupted)
    run = tmp_path / "run"
    with pytest.raises(KeyboardInterrupt):
        train(OVERLAP.with_overrides([f"overlap={str(overlap).lower()}"]), run, progress=False)
    assert not _selfplay_threads()
    ck = Checkpointer(RunDir(run).checkpoints)
    assert ck.latest_step() == 1
    ck.close()
