"""The registry of outside programs (`turbozero.io.outside`): what ends them, and when."""

from __future__ import annotations

import pytest

from turbozero.io import outside


class Program:
    """An outside program's registry side: `close` ends its process."""

    failure = None

    def __init__(self) -> None:
        self.closed = False

    def close(self) -> None:
        self.closed = True
        outside.stopped(self)

    def kill(self) -> None:
        self.close()


def test_the_programs_a_block_started_end_with_it_however_it_ends():
    """A run's or an evaluation's engines end with it (a notebook's tenth run does not find
    nine idle engines), not the ones that were running before it."""
    before, during = Program(), Program()
    outside.running(before)
    try:
        with pytest.raises(RuntimeError, match="the run failed"), outside.ending_those_started():
            outside.running(during)
            raise RuntimeError("the run failed")
        assert during.closed and not before.closed
        with outside.ending_those_started():
            pass
        assert not before.closed
    finally:
        outside.stopped(before)
