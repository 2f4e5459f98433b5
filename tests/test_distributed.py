"""Joining processes from `TURBOZERO_*` variables: malformed settings are named, not a
`KeyError` at import (the two-process run itself is in `tests/test_checks_slow.py`)."""

from __future__ import annotations

import pytest

from turbozero import distributed


@pytest.mark.parametrize(
    "variables, named",
    [
        ({"TURBOZERO_PROCESS_ID": "0"}, "TURBOZERO_NUM_PROCESSES must be an integer >= 1"),
        ({"TURBOZERO_NUM_PROCESSES": "two", "TURBOZERO_PROCESS_ID": "0"}, "got 'two'"),
        ({"TURBOZERO_NUM_PROCESSES": "2"}, "TURBOZERO_PROCESS_ID must be an integer >= 0"),
        (
            {"TURBOZERO_NUM_PROCESSES": "2", "TURBOZERO_PROCESS_ID": "2"},
            "TURBOZERO_PROCESS_ID=2 must be below TURBOZERO_NUM_PROCESSES=2",
        ),
    ],
)
def test_malformed_process_variables_are_named(monkeypatch, variables, named):
    for name in ("TURBOZERO_NUM_PROCESSES", "TURBOZERO_PROCESS_ID"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TURBOZERO_COORDINATOR", "127.0.0.1:1")
    for name, value in variables.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(ValueError, match=named):
        distributed.maybe_initialize_distributed()


def test_a_device_count_that_leaves_out_a_process_is_refused(monkeypatch):
    import jax

    from tests.alphazero.test_selfplay_and_trainer import TINY
    from turbozero.alphazero.sharding import Sharder

    monkeypatch.setattr(jax, "process_count", lambda: 2)  # every visible device is process 0's
    with pytest.raises(ValueError, match="devices=1 leaves out some of the 2 joined processes"):
        Sharder(TINY.with_overrides(["devices=1"]))
