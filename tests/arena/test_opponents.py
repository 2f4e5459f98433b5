"""Opponent names are parsed in one place: the config, the evaluator and the CLI agree."""

from __future__ import annotations

import pytest

from turbozero.alphazero import AlphaZeroConfig
from turbozero.arena.opponents import (
    MAX_MCTS_SIMULATIONS,
    Opponent,
    make_opponent,
    parse_opponent,
)


def test_names_parse_to_their_opponents():
    assert parse_opponent("random") == Opponent("random")
    assert parse_opponent("perfect") == Opponent("perfect")
    assert parse_opponent("mcts:200") == Opponent("mcts", 200)
    assert parse_opponent(f"mcts:{MAX_MCTS_SIMULATIONS}").simulations == MAX_MCTS_SIMULATIONS


@pytest.mark.parametrize("name", ["mcts:0", "mcts:", "mcts:-3", "mcts:1e3", "mcts:²", "best", "x"])
def test_other_names_are_refused_with_the_forms_allowed(name):
    with pytest.raises(ValueError, match=r"is not one of: random \| perfect"):
        parse_opponent(name)
    with pytest.raises(ValueError, match="mcts:N"):
        parse_opponent(f"mcts:{MAX_MCTS_SIMULATIONS + 1}")


def test_the_config_and_the_cli_refuse_the_same_names(tic_tac_toe):
    from turbozero.arena.evaluation import _opponent
    from turbozero.config import ConfigError

    for name in ("mcts:0", "mcts:x"):
        with pytest.raises(ValueError, match="eval_opponents entry"):
            AlphaZeroConfig(eval_opponents=(name,)).validate()
    AlphaZeroConfig(eval_opponents=("random", "perfect", "mcts:8", "best")).validate()
    assert make_opponent(tic_tac_toe, "mcts:8").name.startswith("mcts")
    for name in ("mcts:0", "mcts:x"):
        with pytest.raises(ConfigError, match=rf"--vs '{name}' is not one of.*or a run directory"):
            _opponent(name, tic_tac_toe, None)
    assert _opponent("random", tic_tac_toe, None).name == "random"
