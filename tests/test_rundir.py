"""A run directory has one writer at a time."""

from __future__ import annotations

import os

import pytest

from turbozero.io.errors import RunInUseError
from turbozero.io.rundir import RunDir


def test_a_held_run_directory_refuses_a_second_writer_until_released(tmp_path):
    run = RunDir(tmp_path / "run").create()
    second = RunDir(run.path)
    with (
        run.lock(),
        pytest.raises(RunInUseError, match=f"in use by process {os.getpid()}"),
        second.lock(),
    ):
        pass
    with RunDir(run.path).lock():  # released when the first block ended
        pass


def test_a_lock_is_released_when_the_block_raises(tmp_path):
    run = RunDir(tmp_path / "run").create()
    with pytest.raises(ZeroDivisionError), run.lock():
        raise ZeroDivisionError
    with run.lock():
        pass
