"""Ctrl-C during training: the first stops after the step, the second always aborts."""

from __future__ import annotations

import signal

import pytest

from turbozero.io.signals import StopFlag


def test_a_second_signal_aborts_even_when_its_raise_is_dropped():
    with StopFlag() as flag:
        signal.raise_signal(signal.SIGINT)
        assert flag.stop and not flag.abort
        flag.check_abort()  # one signal: finish the step, no abort
        try:  # as in a garbage-collection callback, where Python drops the exception
            signal.raise_signal(signal.SIGINT)
        except KeyboardInterrupt:
            pass
        with pytest.raises(KeyboardInterrupt):
            flag.check_abort()


def test_the_handlers_found_are_restored_including_an_ignored_sigint():
    before = signal.signal(signal.SIGINT, signal.SIG_IGN)  # as under nohup
    try:
        with StopFlag():
            assert signal.getsignal(signal.SIGINT) not in (signal.SIG_IGN, before)
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, before)


def test_training_aborts_on_a_second_ctrl_c_whose_exception_was_dropped(tmp_path, monkeypatch):
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
        train(TINY.with_overrides(["num_epochs=3"]), tmp_path / "run", progress=False)
