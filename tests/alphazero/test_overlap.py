"""`overlap`: self-play on a second thread while the gradient steps run, one epoch's memory
behind, with the same result for a seed whatever the threads' timing."""

from __future__ import annotations

import importlib
import threading
import time

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


def test_overlapped_runs_repeat_for_a_seed_and_resume_exactly(systems, tmp_path):
    whole, split = tmp_path / "whole", tmp_path / "split"
    train(OVERLAP, whole, progress=False, systems=systems)
    train(OVERLAP, split, progress=False, num_epochs=2, systems=systems)
    train(OVERLAP, split, progress=False, resume=True, systems=systems)
    rows = _rows(whole)
    assert rows == _rows(split)  # (two runs, one of them stopped and resumed)
    for a, b in zip(jax.tree.leaves(_params(whole)), jax.tree.leaves(_params(split)), strict=True):
        np.testing.assert_array_equal(a, b)
    assert all(np.isfinite(r["loss"]) for r in rows)
    assert not _selfplay_threads(), "the self-play thread ends with the run"


def test_an_overlapped_epoch_is_self_play_from_its_state_beside_steps_on_a_copy(
    systems, tmp_path, monkeypatch
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
    train(
        OVERLAP.with_overrides(["num_epochs=2"]), tmp_path / "run", progress=False, systems=systems
    )
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


def test_a_second_ctrl_c_in_an_overlapped_epoch_waits_for_self_play_and_keeps_the_last_save(
    systems, tmp_path, monkeypatch
):
    learn, collect, overlapped = (
        _AlphaZeroRun._learn,
        _AlphaZeroRun._collect,
        _AlphaZeroRun._overlapped_epoch,
    )
    times = {}

    def interrupted(self, run, state, epoch):
        out = learn(self, run, state, epoch)
        if epoch == 2:
            raise KeyboardInterrupt  # as `check_abort` after a second Ctrl-C
        return out

    def timed_collect(self, state):
        out = collect(self, state)
        times["self-play ended"] = time.monotonic()
        return out

    def timed_epoch(self, run, state, epoch, row):
        try:
            return overlapped(self, run, state, epoch, row)
        except KeyboardInterrupt:
            times["epoch left"] = time.monotonic()
            raise

    monkeypatch.setattr(_AlphaZeroRun, "_learn", interrupted)
    monkeypatch.setattr(_AlphaZeroRun, "_collect", timed_collect)
    monkeypatch.setattr(_AlphaZeroRun, "_overlapped_epoch", timed_epoch)
    run = tmp_path / "run"
    with pytest.raises(KeyboardInterrupt):
        train(OVERLAP, run, progress=False, systems=systems)
    assert times["self-play ended"] <= times["epoch left"], "self-play was waited for"
    assert not _selfplay_threads()
    ck = Checkpointer(RunDir(run).checkpoints)
    assert ck.latest_step() == 1
    ck.close()


def test_the_memory_check_counts_overlaps_copy_of_the_state(systems, tmp_path, monkeypatch):
    train_module = importlib.import_module("turbozero.alphazero.train")  # (the package's
    # `train` attribute is the function)
    counted = []

    def record(nbytes, what):
        counted.append((nbytes, what))
        raise SystemExit  # (nothing to train)

    monkeypatch.setattr(train_module, "check_fits_in_memory", record)
    for overlap in ("false", "true", "none"):  # (none: on, the tests run on one device)
        with pytest.raises(SystemExit):
            train(
                OVERLAP.with_overrides([f"overlap={overlap}"]), tmp_path / overlap, systems=systems
            )
    (one, what_one), (two, what_two), (auto, what_auto) = counted
    assert two == 2 * one and "twice" in what_two and "twice" not in what_one
    assert (auto, what_auto) == (two, what_two)
