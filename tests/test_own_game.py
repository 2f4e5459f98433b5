"""A game of your own, from one file (examples/custom_game.py), is known everywhere once its
`GameSpec` is registered: nothing else in turbozero is edited."""

from __future__ import annotations

import importlib.util
import json
import threading
import urllib.request
from pathlib import Path

import pytest

import turbozero
from turbozero.cli import main
from turbozero.config import PRESETS
from turbozero.games import unregister_game

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "custom_game.py"


@pytest.fixture(scope="module")
def nim():
    """The example's module, its game and preset registered for this module's tests."""
    spec = importlib.util.spec_from_file_location("custom_game", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.register()
    module.register()  # (a second call changes nothing)
    yield module
    unregister_game("nim")
    PRESETS.pop("nim", None)


def _post(url: str, body: dict) -> dict:
    data = json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as response:
        return json.load(response)


def test_a_game_registered_from_one_file_is_listed_with_its_preset(nim, capsys):
    assert main(["envs"]) == 0
    out = capsys.readouterr().out.splitlines()
    listed = [line for line in out if line.split()[:1] == ["nim"]]
    assert len(listed) == 1 and "Nim, one heap of 10" in listed[0] and "preset: nim" in listed[0]


def test_a_game_registered_from_one_file_trains_plays_on_the_page_and_writes_records(nim, tmp_path):
    from turbozero.play import Game, make_server
    from turbozero.play.server import url_of

    run = tmp_path / "nim"
    assert main(["train", "nim", "--out", str(run)]) == 0
    records = (run / "games" / "latest.html").read_text()
    assert "take 1" in records or "take 2" in records or "take 3" in records  # its move names

    game = Game(turbozero.load_agent(run), human_first=True, seed=0)
    server = make_server(game, port=0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = url_of(server)
        state = _post(url + "api/new", {"human_first": True})
        assert state["env"] == "nim" and state["svg"].count("<circle") == nim.HEAP
        assert [m["label"] for m in state["moves"]] == ["take 1", "take 2", "take 3"]
        state = _post(url + "api/move", {"action": 1})  # take 2, the agent replies
        human, agent = state["history"]
        assert (human["action"], human["by"], agent["by"]) == (1, "human", "agent")
        assert state["reply"]["label"] == f"take {agent['action'] + 1}"
        assert state["svg"].count("<circle") == nim.HEAP - 2 - (agent["action"] + 1)
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def test_a_game_name_is_registered_once(nim):
    from turbozero.games import GameSpec, register_game

    with pytest.raises(ValueError, match="'nim' is registered already"):
        register_game(GameSpec(name="nim", description="another"))
    with pytest.raises(ValueError, match="plain id"):
        register_game(GameSpec(name="my:game", description="a prefix is a library's"))


def test_a_game_registered_again_is_built_again_where_an_equal_config_reuses_its_system(nim):
    from tests.alphazero.test_selfplay_and_trainer import TINY
    from turbozero.alphazero import make_alphazero

    config = PRESETS["nim"].make()
    first = make_alphazero(config)
    assert make_alphazero(config.with_overrides([])) is first  # equal config: the same system
    assert make_alphazero(config.with_overrides(["num_games=4"])) is not first
    assert make_alphazero(config, optimizer=first.optimizer) is not first  # parts: built anew
    assert make_alphazero(TINY) is make_alphazero(TINY) is not first
    unregister_game("nim")
    nim.register()  # (the game's registration is a new object)
    assert make_alphazero(config) is not first
