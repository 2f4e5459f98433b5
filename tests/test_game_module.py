"""A game of your own named by its file or module (`turbozero train --game`), or by an installed
package's `turbozero.games` entry point: the run records the module (config.json's
`"game_module"`), and every command that opens the run (`eval`, `play`, `train --resume`,
`load_agent`) imports it again with `--trust-run` and refuses it, in one line, without.

Each test trains from a scratch directory (not the repository's root), and forgets the game
afterwards as a new process would not know it (`forget`)."""

from __future__ import annotations

import importlib.metadata
import json
import shutil
import sys
import threading
import urllib.request
from pathlib import Path

import pytest

import turbozero
from turbozero import gamespec
from turbozero.cli import main
from turbozero.config import PRESETS, ConfigError
from turbozero.io.errors import UntrustedRunError
from turbozero.io.rundir import RunDir, load_run_game

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "custom_game.py"
#: the smallest run of the example's preset: one epoch of 4 games at 4 simulations, 2 steps
TINY = [
    "--set",
    "num_epochs=1",
    "--set",
    "num_games=4",
    "--set",
    "search.num_simulations=4",
    "--set",
    "train_steps_per_epoch=2",
    "--set",
    "train_batch_size=16",
    "--set",
    "eval_record_games=0",
]


def forget() -> None:
    """Unregister the example's game and preset and drop its modules, as in a new process."""
    gamespec.unregister_game("nim")
    PRESETS.pop("nim", None)
    for name in [
        n for n in sys.modules if n.startswith(("my_games", "nim_game", "turbozero_game_"))
    ]:
        del sys.modules[name]


def _enter(directory: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Work in `directory`, which is not on sys.path (restored after), knowing no nim."""
    monkeypatch.chdir(directory)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(directory))])
    forget()


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A scratch directory holding the example as a file (`games/nim_game.py`) and as a
    package's module (`my_games/nim.py`), and `runs/nim`, trained there with `--game
    games/nim_game.py`."""
    directory = tmp_path_factory.mktemp("own_game")
    (directory / "games").mkdir()
    shutil.copy(EXAMPLE, directory / "games" / "nim_game.py")
    (directory / "my_games").mkdir()
    (directory / "my_games" / "__init__.py").write_text("")
    shutil.copy(EXAMPLE, directory / "my_games" / "nim.py")
    with pytest.MonkeyPatch.context() as monkeypatch:
        _enter(directory, monkeypatch)
        game = ["--game", "games/nim_game.py"]
        assert main(["train", "nim", *game, "--out", "runs/nim", *TINY]) == 0
        forget()
    return directory


@pytest.fixture
def scratch(trained, monkeypatch):
    """Work in `trained`'s directory, as a new process would: no nim known."""
    _enter(trained, monkeypatch)
    yield trained
    forget()


def _one_line_refusal(capsys, *names: str) -> None:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: "), err
    for name in names:
        assert name in err, err


def _post(url: str, body: dict) -> dict:
    data = json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as response:
        return json.load(response)


def _play_once(monkeypatch) -> list[dict]:
    """`turbozero play`'s server made as usual, whose `serve_forever` starts a game over HTTP,
    plays a move and returns: the page's snapshots."""
    from turbozero.play import server as play_server

    snapshots: list[dict] = []
    real = play_server.make_server

    def make_server(game, **kwargs):
        server = real(game, **kwargs)
        serve = server.serve_forever

        def serve_one_game() -> None:
            thread = threading.Thread(target=serve, daemon=True)
            thread.start()
            try:
                url = play_server.url_of(server)
                snapshots.append(_post(url + "api/new", {"human_first": True}))
                snapshots.append(_post(url + "api/move", {"action": 2}))
            finally:
                server.shutdown()
                thread.join()

        server.serve_forever = serve_one_game  # type: ignore[method-assign]
        return server

    monkeypatch.setattr(play_server, "make_server", make_server)
    return snapshots


def test_a_game_file_trains_and_eval_resume_and_load_agent_find_it_with_trust(scratch, capsys):
    run = "runs/nim"
    recorded = str((scratch / "games" / "nim_game.py").resolve())
    assert RunDir(run).read_config()["game_module"] == recorded
    for command in (
        ["eval", run, "--games", "2"],
        ["play", run, "--no-browser", "--port", "0"],
        ["train", "--out", run, "--resume", "--set", "num_epochs=2"],
    ):
        assert main(command) == 2
        _one_line_refusal(capsys, "--trust-run", recorded, "game module")
    with pytest.raises(UntrustedRunError, match="trust=True"):
        turbozero.load_agent(run)
    assert gamespec.game_spec("nim") is None  # nothing of the run's was imported

    assert main(["eval", run, "--games", "2", "--simulations", "2", "--trust-run"]) == 0
    out, err = capsys.readouterr()
    assert "env: nim" in out and f"importing {recorded}" in err

    forget()
    assert main(["train", "--out", run, "--resume", "--set", "num_epochs=2", "--trust-run"]) == 0
    assert RunDir(run).read_config()["game_module"] == recorded
    assert [r["epoch"] for r in RunDir(run).read_metrics()] == [1, 2]
    assert "--trust-run" in capsys.readouterr().out.splitlines()[-1]  # (the "next:" line)

    forget()
    assert turbozero.load_agent(run, trust=True).env.name == "nim"


def test_a_game_file_is_played_on_the_page_with_trust(scratch, monkeypatch):
    """(No capsys here: the page's server logs to the stderr it finds, which must outlive the
    test.)"""
    snapshots = _play_once(monkeypatch)
    command = ["play", "runs/nim", "--trust-run", "--no-browser", "--port", "0", "--human-first"]
    assert main(command) == 0
    start, after = snapshots
    assert start["env"] == "nim"
    assert [m["label"] for m in start["moves"]] == ["take 1", "take 2", "take 3"]
    assert after["history"][0] == {**after["history"][0], "action": 2, "by": "human"}


def test_a_dotted_module_in_the_current_directory_trains_and_is_found_again(scratch, capsys):
    run = scratch / "runs" / "nim_dotted"
    assert main(["train", "nim", "--game", "my_games.nim", "--out", str(run), *TINY]) == 0
    assert RunDir(run).read_config()["game_module"] == "my_games.nim"
    forget()
    with pytest.raises(UntrustedRunError, match=r"'my_games\.nim'"):
        turbozero.load_agent(run)
    assert turbozero.load_agent(run, trust=True).env.name == "nim"
    assert gamespec.game_module_of("nim") == "my_games.nim"


def test_a_game_module_is_named_by_a_file_or_dotted_names(scratch, capsys):
    (scratch / "no_register.py").write_text("X = 1\n")
    with pytest.raises(ValueError, match="no register"):
        gamespec.load_game_module("no_register.py")
    with pytest.raises(ValueError, match="not found"):
        gamespec.load_game_module("no_such_pkg.nim")
    with pytest.raises(FileNotFoundError, match=r"missing\.py"):
        gamespec.load_game_module("games/missing.py")
    with pytest.raises(ValueError, match="dotted"):
        gamespec.load_game_module("my games")
    assert gamespec.load_game_module("games/nim_game.py") == ("nim",)
    assert gamespec.load_game_module("games/nim_game.py") == ("nim",)  # (loaded once)
    assert main(["train", "--out", "runs/x", "--resume", "--game", "games/nim_game.py"]) == 2
    _one_line_refusal(capsys, "--game", "--resume")


def test_a_sent_run_naming_a_game_module_imports_nothing_without_trust(scratch, capsys):
    """A run directory from anyone that names a file to import runs none of it, whatever the
    command; turbozero's own game modules need no trust."""
    from turbozero.alphazero import AlphaZeroConfig

    marker = scratch / "ran"
    evil = scratch / "evil.py"
    evil.write_text(f"open({str(marker)!r}, 'w').write('ran')\ndef register():\n    pass\n")
    run = scratch / "sent"
    run.mkdir()
    record = {
        "algorithm": "alphazero",
        "preset": None,
        "config": AlphaZeroConfig(env="tic_tac_toe").to_dict(),
        "game_module": str(evil),
    }
    (run / "config.json").write_text(json.dumps(record))
    for command in (
        ["eval", str(run), "--games", "2"],
        ["play", str(run), "--no-browser", "--port", "0"],
        ["train", "--out", str(run), "--resume"],
    ):
        assert main(command) == 2
        _one_line_refusal(capsys, "--trust-run", str(evil))
    assert not marker.exists()

    for builtin in ("turbozero.games.tic_tac_toe", "turbozero.games"):
        record["game_module"] = builtin
        (run / "config.json").write_text(json.dumps(record))
        load_run_game(RunDir(run), trust=False)  # (no refusal, nothing imported)
    for spelled_like_one in ("turbozero.games/../../evil.py", "turbozero.gamesx.hex", "x.py"):
        assert not gamespec.is_builtin_game_module(spelled_like_one)
        record["game_module"] = spelled_like_one
        (run / "config.json").write_text(json.dumps(record))
        with pytest.raises(UntrustedRunError, match="--trust-run"):
            load_run_game(RunDir(run), trust=False)


def _installed(monkeypatch, name: str, module: str) -> None:
    """Pretend an installed package names `module` in the `turbozero.games` entry points."""
    point = importlib.metadata.EntryPoint(name=name, value=module, group=gamespec.ENTRY_POINTS)
    real = importlib.metadata.entry_points

    def entry_points(**selection):
        if selection.get("group") != gamespec.ENTRY_POINTS:
            return real(**selection)
        return importlib.metadata.EntryPoints([point]).select(**selection)

    monkeypatch.setattr(importlib.metadata, "entry_points", entry_points)


def test_an_installed_game_is_found_by_its_entry_point_and_needs_no_trust(
    scratch, monkeypatch, capsys
):
    monkeypatch.syspath_prepend(str(scratch / "games"))
    _installed(monkeypatch, "nim", "nim_game")
    assert gamespec.installed_games() == {"nim": "nim_game"}
    assert gamespec.game_spec("nim").description.startswith("Nim")  # type: ignore[union-attr]
    forget()
    assert main(["envs"]) == 0  # (listed with its preset: imported to be listed)
    assert any(
        line.split()[:1] == ["nim"] and "preset: nim" in line
        for line in capsys.readouterr().out.splitlines()
    )
    forget()
    run = scratch / "runs" / "nim_installed"
    assert main(["train", "nim", "--out", str(run), *TINY]) == 0  # the preset, found by name
    assert "game_module" not in RunDir(run).read_config()  # (found again by its name)
    forget()
    assert turbozero.load_agent(run).env.name == "nim"  # installed code: no --trust-run

    forget()
    _installed(monkeypatch, "nim_other", "nim_game")  # (registers "nim", not "nim_other")
    with pytest.raises(ValueError, match="did not register a game named 'nim_other'"):
        gamespec.game_spec("nim_other")


def test_an_unknown_game_says_how_to_bring_one(scratch, capsys):
    from turbozero import envs
    from turbozero.alphazero import AlphaZeroConfig

    with pytest.raises(ConfigError, match=r"--game path/to/game\.py") as err:
        AlphaZeroConfig(env="nim")
    assert "docs/own-game.md" in str(err.value) and "'turbozero.games' entry point" in str(
        err.value
    )
    with pytest.raises(ValueError, match="--game"):
        envs.make("nim")
    assert main(["train", "nim"]) == 2
    _one_line_refusal(capsys, "unknown preset 'nim'", "--game", "docs/own-game.md")

    run = scratch / "old"  # (a run of a game registered by hand, which it does not record)
    run.mkdir()
    config = AlphaZeroConfig(env="tic_tac_toe").to_dict()
    record = {"algorithm": "alphazero", "preset": None, "config": {**config, "env": "nim"}}
    (run / "config.json").write_text(json.dumps(record))
    assert main(["eval", str(run), "--games", "2"]) == 2
    _one_line_refusal(capsys, "got 'nim'", "--game", "docs/own-game.md")


def test_the_docs_page_shows_the_example_file_as_it_is():
    """docs/own-game.md's file is examples/custom_game.py less its docstrings and self-check:
    every line it shows is the example's, in the example's order."""
    page = (Path(__file__).resolve().parents[1] / "docs" / "own-game.md").read_text()
    shown = page.split("```python\n", 1)[1].split("```", 1)[0].splitlines()
    lines = iter(EXAMPLE.read_text().splitlines())
    missing = [line for line in shown if line and not any(line == mine for mine in lines)]
    assert not missing, missing
    assert "--game examples/custom_game.py" in page and "--trust-run" in page
