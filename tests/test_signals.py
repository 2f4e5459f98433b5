"""Ctrl-C during training: the first stops after the step, the second always aborts."""

from __future__ import annotations

import signal
import time

import pytest

from turbozero.io.signals import ABORT_GRACE_SECONDS, StopFlag


def test_a_second_signal_aborts_even_when_its_raise_is_dropped():
    with pytest.raises(KeyboardInterrupt), StopFlag() as flag:
        signal.raise_signal(signal.SIGINT)
        assert flag.stop and not flag.abort
        flag.check_abort()  # one signal: finish the step, no abort
        try:  # as in a garbage-collection callback, where Python drops the exception
            signal.raise_signal(signal.SIGINT)
        except KeyboardInterrupt:
            pass
        with pytest.raises(KeyboardInterrupt):
            flag.check_abort()


def test_a_dropped_second_signal_is_not_reported_and_the_block_ends_interrupted(capsys):
    """Where no step boundary comes after it (the run's last save), a second Ctrl-C dropped in
    a garbage-collection callback still ends the block with `KeyboardInterrupt`, not as a
    finished run, and Python's "Exception ignored" traceback is not printed."""
    import gc

    class RaisesOnCollection:
        def __del__(self):
            signal.raise_signal(signal.SIGINT)  # (the handler raises inside __del__)

    with pytest.raises(KeyboardInterrupt), StopFlag() as flag:
        signal.raise_signal(signal.SIGINT)
        cycle = RaisesOnCollection()
        cycle.me = cycle
        del cycle
        gc.collect()  # the second signal, raised and dropped inside the collection
        assert flag.abort
    err = capsys.readouterr().err
    assert "Traceback" not in err and "Exception ignored" not in err


def test_the_handlers_found_are_restored_including_an_ignored_sigint():
    before = signal.signal(signal.SIGINT, signal.SIG_IGN)  # as under nohup
    try:
        with StopFlag():
            assert signal.getsignal(signal.SIGINT) not in (signal.SIG_IGN, before)
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, before)


def test_training_aborts_on_a_second_ctrl_c_whose_exception_was_dropped(
    systems, tmp_path, monkeypatch
):
    from tests.alphazero.test_selfplay_and_trainer import TINY
    from turbozero.alphazero import train
    from turbozero.io.logger import MetricsLogger

    epoch = MetricsLogger.epoch

    def twice(self, row):
        epoch(self, row)
        signal.raise_signal(signal.SIGINT)
        try:
            signal.raise_signal(signal.SIGINT)
        except KeyboardInterrupt:
            pass  # dropped, as inside JAX's gc callback

    monkeypatch.setattr(MetricsLogger, "epoch", twice)
    with pytest.raises(KeyboardInterrupt):
        train(
            TINY.with_overrides(["num_epochs=3"]), tmp_path / "run", progress=False, systems=systems
        )


def test_a_second_signal_whose_raise_is_swallowed_ends_the_process_within_the_grace():
    ended = []
    # (were the process not ended, the block's end would still raise the abort)
    with pytest.raises(KeyboardInterrupt), StopFlag(on_stuck=lambda: ended.append(True)) as flag:
        signal.raise_signal(signal.SIGINT)
        try:  # as inside the checkpoint library's save, which swallows the raise
            signal.raise_signal(signal.SIGINT)
        except KeyboardInterrupt:
            pass
        time.sleep(ABORT_GRACE_SECONDS + 0.5)  # still inside the block: stuck
        assert ended == [True]
        assert flag.abort
    # a block left in time (the raise went through) ends nothing
    ended.clear()
    with pytest.raises(KeyboardInterrupt), StopFlag(on_stuck=lambda: ended.append(True)):
        signal.raise_signal(signal.SIGINT)
        signal.raise_signal(signal.SIGINT)
    time.sleep(ABORT_GRACE_SECONDS + 0.5)
    assert ended == []


# A save as long as a real one can be, swallowing interrupts as the checkpoint library's does.
_SLOW_SAVE = """
import sys
import time

from turbozero.io import checkpoint

real = checkpoint.Checkpointer.save


def slow_save(self, step, state, meta):
    print("saving", flush=True)
    end = time.monotonic() + 30
    while time.monotonic() < end:
        try:
            time.sleep(0.02)
        except KeyboardInterrupt:
            pass
    real(self, step, state, meta)


checkpoint.Checkpointer.save = slow_save
from turbozero.cli import main

sys.exit(main(["train", "tic_tac_toe", "--out", sys.argv[1], *sys.argv[2:]]))
"""


def test_a_second_ctrl_c_during_the_final_save_aborts_within_about_a_second(tmp_path):
    import os
    import subprocess
    import sys

    from tests.subprocesses import pythonpath

    small = ["num_games=8", "network.kind=mlp", "network.hidden=16", "search.num_simulations=8"]
    small += ["collection_steps_per_epoch=9", "train_batch_size=16", "memory_capacity=16"]
    small += ["warmup_steps=0", "train_steps_per_epoch=2", "num_epochs=200", "eval_every=1000"]
    small += ["checkpoint_every=1"]
    sets = [a for s in small for a in ("--set", s)]
    proc = subprocess.Popen(
        [sys.executable, "-c", _SLOW_SAVE, str(tmp_path / "run"), *sets],
        env={**os.environ, "PYTHONPATH": pythonpath(), "JAX_PLATFORMS": "cpu"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        for line in proc.stdout:  # the first epoch's save
            if line.strip() == "saving":
                break
        proc.send_signal(signal.SIGINT)  # stop: this save is the last
        time.sleep(0.3)
        proc.send_signal(signal.SIGINT)  # abort, while the save runs
        start = time.monotonic()
        _, err = proc.communicate(timeout=30)
        took = time.monotonic() - start
    finally:
        proc.kill()
    assert proc.returncode == 130, err[-2000:]
    assert took < ABORT_GRACE_SECONDS + 1.5
    assert err.strip().splitlines()[-1].startswith("interrupted") and "Traceback" not in err
