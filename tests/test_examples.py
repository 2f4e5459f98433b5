"""The examples run."""

from __future__ import annotations

import runpy
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def test_custom_game_example_finds_the_winning_move():
    module = runpy.run_path(str(EXAMPLES / "custom_game.py"))
    assert module["main"]() == 0
