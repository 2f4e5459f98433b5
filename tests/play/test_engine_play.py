"""An engine takes the agent's seat on the play page (`turbozero play --engine SPEC --game
GAME`): the human plays it as they would a trained run."""

from __future__ import annotations

import random
import sys
from pathlib import Path

import pytest

from turbozero.cli import main
from turbozero.play import Game, engine_side


def test_a_perfect_player_on_the_page_never_loses_to_the_human():
    rng = random.Random(0)
    for human_first in (True, False):
        game = Game(engine_side("tic_tac_toe", "perfect"), human_first=human_first, seed=1)
        assert game.agent_name == "perfect"
        state = game.snapshot()
        while not state["over"]:
            state = game.move(rng.choice(state["legal"]))
        assert {h["by"] for h in state["history"]} == {"human", "agent"}
        assert state["result"]["winner"] in ("agent", "draw")  # never the human's


def test_pubeval_plays_its_turns_of_backgammon_on_the_page():
    rng = random.Random(3)
    game = Game(engine_side("backgammon", "pubeval"), human_first=True, seed=0)
    state = game.snapshot()
    replies = 0
    while not state["over"] and replies < 2:
        before = len(state["history"])
        state = game.move(rng.choice(state["moves"])["action"])
        replies += any(h["by"] == "agent" for h in state["history"][before:])
    assert replies == 2 or state["over"]  # (each reply legal: the page refuses others)
    assert state["to_move"] in ("human", None) and game.agent_name == "pubeval"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["play"], "a run directory, or --engine SPEC --game GAME"),
        (["play", "RUN", "--engine", "pubeval", "--game", "backgammon"], "not both"),
        (["play", "--engine", "pubeval"], "--engine and --game go together"),
        (["play", "--engine", "gnugo:1", "--game", "backgammon"], "or go_9x9 or go_19x19 only"),
        (["play", "--engine", "pubeval", "--game", "backgamon"], "Did you mean 'backgammon'"),
    ],
)
def test_play_with_an_engine_is_refused_in_one_line_where_it_cannot_be(argv, message, capsys):
    assert main([*argv, "--no-browser"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0]


def test_the_page_answers_an_engine_failure_with_its_one_line_and_keeps_serving():
    """A Go engine that answers a move with garbage: the page gets 502 and the engine's one
    line, not a 500 with JAX's tracebacks, and the human's move is taken back."""
    from tests.play.test_server import request, running

    fake = Path(__file__).parents[1] / "engines" / "fake_gtp.py"
    spec = f"gtp:{sys.executable} {fake} --garbage --after 1"  # (compiling costs one move)
    game = Game(engine_side("go_9x9", spec), human_first=True)
    with running(game) as url:
        status, body = request(url, "/api/move", {"action": 40})
        assert status == 502, body
        assert body["error"].startswith(f"GTP engine {spec!r} answered 'genmove w' with 'Seg")
        assert "\n" not in body["error"] and "Traceback" not in body["error"]
        status, state = request(url, "/api/state")
        assert status == 200 and state["history"] == [] and state["to_move"] == "human"
