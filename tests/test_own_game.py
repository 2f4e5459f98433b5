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
    from turbozero.alphazero import Systems, make_alphazero

    systems = Systems()
    config = PRESETS["nim"].make()
    first = make_alphazero(config, systems=systems)
    equal = make_alphazero(config.with_overrides([]), systems=systems)
    assert equal.collect is first.collect
    other = make_alphazero(config.with_overrides(["num_games=4"]), systems=systems)
    assert other.collect is not first.collect
    again = make_alphazero(config, optimizer=first.optimizer, systems=systems)  # parts: anew
    assert again.collect is not first.collect
    tiny = make_alphazero(TINY, systems=systems)
    assert make_alphazero(TINY, systems=systems).collect is tiny.collect is not first.collect
    unregister_game("nim")
    nim.register()  # (the game's registration is a new object)
    assert make_alphazero(config, systems=systems).collect is not first.collect


RUN_CHANGES = [
    "seed=5",
    "warmup_steps=3",
    "collection_steps_per_epoch=5",
    "train_steps_per_epoch=3",
    "overlap=false",
    "num_epochs=7",
    "max_wall_seconds=60",
    "eval_every=3",
    "eval_games=6",
    "eval_simulations=5",
    "eval_opponents=random,best",
    "eval_accuracy=true",
    "eval_accuracy_positions=10",
    "eval_record_games=0",
    "eval_opening_moves=1",
    "eval_network_opening_moves=2",
    "elo_pool_size=2",
    "elo_games_per_opponent=2",
    "gating_threshold=0.6",
    "devices=1",
    "checkpoint_every=2",
    "keep_checkpoints=2",
    "save_memory=false",
    "tensorboard=true",
    "wandb_project=elsewhere",
]
#: changed in a second config: refused beside `gating_threshold`
RUN_CHANGES_APART = ["eval_share=0.1"]


def test_settings_no_program_reads_share_a_built_system_and_change_no_program():
    """`RUN_SETTINGS` (the run's schedule, evaluations and outputs) may share a system's
    functions only because no compiled program reads them: a fresh build with every one of them
    changed lowers the same init, self-play and gradient steps."""
    import jax

    from tests.alphazero.test_selfplay_and_trainer import TINY
    from turbozero.alphazero import Systems, make_alphazero
    from turbozero.alphazero.learner import RUN_SETTINGS, _build_alphazero

    base = TINY.resolved()
    a = _build_alphazero(base, None, None, None, None, None, None, None)
    key = jax.random.PRNGKey(0)
    state = jax.eval_shape(a.init, key)
    differ = set()
    systems = Systems()
    for changes in (RUN_CHANGES, RUN_CHANGES_APART):
        changed = TINY.with_overrides(changes).resolved()
        differ |= {k for k, v in changed.to_dict().items() if base.to_dict()[k] != v}
        shared = make_alphazero(changed, systems=systems)
        assert shared.collect is make_alphazero(TINY, systems=systems).collect
        assert shared.config == changed
        b = _build_alphazero(changed, None, None, None, None, None, None, None)
        assert jax.jit(a.init).lower(key).as_text() == jax.jit(b.init).lower(key).as_text()
        for name in ("collect", "train_steps"):
            fa, fb = (jax.jit(getattr(s, name), static_argnums=1) for s in (a, b))
            assert fa.lower(state, 2).as_text() == fb.lower(state, 2).as_text(), name
    assert differ == RUN_SETTINGS  # (each one changed here)
    # the cache is the caller's: without one, nothing built before is found again
    assert make_alphazero(TINY).collect is not make_alphazero(TINY).collect
