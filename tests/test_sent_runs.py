"""A run directory someone sent you is data: opening it (`eval`, `play`, `train --resume`,
`plot`, `load_agent`) imports, calls and starts nothing it names without `--trust-run`, and
writes nothing outside itself. Each test crafts the run directory a probe would."""

from __future__ import annotations

import json
import os

import pytest

import turbozero
from turbozero.alphazero import AlphaZeroConfig
from turbozero.alphazero.rebuild import check_trusted, is_builtin
from turbozero.cli import main
from turbozero.io.errors import UntrustedRunError


def _sent_run(tmp_path, rebuild=None, **settings):
    """A run directory as `train` writes one (no checkpoint yet), with `config.json`'s
    `rebuild` and settings as the sender chose them."""
    run = tmp_path / "sent"
    run.mkdir()
    config = AlphaZeroConfig(**settings).to_dict()
    record = {"algorithm": "alphazero", "preset": None, "config": config}
    if rebuild is not None:
        record["rebuild"] = rebuild
    (run / "config.json").write_text(json.dumps(record))
    return run


def _climbing_spec(tmp_path):
    """A spec spelled like a built-in module that climbs out of it to a file the sender put in
    the run directory (`turbozero.nets.mlp/../../RUN/evil.py:make`); importing the file touches a
    marker."""
    marker = tmp_path / "ran"
    evil = tmp_path / "sent_code" / "evil.py"
    evil.parent.mkdir()
    evil.write_text(f"open({str(marker)!r}, 'w').write('ran')\ndef make():\n    return None\n")
    climb = "../" * (len(os.getcwd().split(os.sep)) + 2)
    return f"turbozero.nets.mlp/{climb}{str(evil).lstrip(os.sep)}:make", marker


@pytest.mark.parametrize(
    "spec",
    [
        "turbozero.nets/../../x.py:make",
        "turbozero.nets.mlp/../evil.py:f",
        "turbozero.nets:os.system",  # reached through the module's own import of os
        "turbozero.search:jax.numpy.save",
        "turbozero.nets.mlp:PolicyValueMLP.__init__.__globals__",
        "turbozero.netsx.mlp:PolicyValueMLP",
        " turbozero.nets.mlp:PolicyValueMLP",
    ],
)
def test_a_spec_is_built_in_by_what_it_resolves_to_never_by_its_spelling(spec):
    assert not is_builtin(spec)
    with pytest.raises(UntrustedRunError, match="--trust-run"):
        check_trusted("RUN", {"module": {"object": spec}}, trust=False)
    assert is_builtin("turbozero.nets.mlp:PolicyValueMLP")
    assert is_builtin("turbozero.nets:PolicyValueMLP")  # (re-exported: defined in nets.mlp)
    assert is_builtin("turbozero.search.puct:puct")


@pytest.mark.parametrize(
    "command",
    [
        ["eval", "RUN", "--games", "2"],
        ["play", "RUN", "--no-browser", "--port", "0"],
        ["train", "--out", "RUN", "--resume"],
    ],
)
def test_a_recipe_climbing_out_of_a_built_in_module_is_refused_by_every_command(
    tmp_path, capsys, command
):
    spec, marker = _climbing_spec(tmp_path)
    run = _sent_run(tmp_path, rebuild={"env": {"object": spec}})
    assert main([str(run) if a == "RUN" else a for a in command]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--trust-run" in err and spec in err
    assert not marker.exists()


def test_load_agent_refuses_a_climbing_recipe_and_imports_nothing(tmp_path):
    spec, marker = _climbing_spec(tmp_path)
    run = _sent_run(tmp_path, rebuild={"env": {"object": spec}, "module": {"partial": spec}})
    with pytest.raises(UntrustedRunError, match="--trust-run"):
        turbozero.load_agent(run)
    assert not marker.exists()


def test_a_recorded_opponent_that_starts_a_command_is_refused_on_resume(tmp_path, capsys):
    marker = tmp_path / "started"
    opponent = f"gtp:touch {marker}"
    run = _sent_run(tmp_path, env="go_9x9", eval_opponents=("random", opponent))
    assert main(["train", "--out", str(run), "--resume"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and opponent in err and "--trust-run" in err
    assert not marker.exists()
    assert not (run / "checkpoints").exists()  # refused before anything was written


def test_an_opponent_named_twice_is_refused_by_name():
    from turbozero.config import ConfigError
    from turbozero.td.config import TDConfig

    with pytest.raises(ConfigError, match="eval_opponents names 'random' twice"):
        AlphaZeroConfig(eval_opponents=("random", "random"))
    with pytest.raises(ConfigError, match="eval_opponents names 'pubeval' twice"):
        TDConfig(eval_opponents=("pubeval", "gnubg:0", "pubeval"))


@pytest.mark.parametrize(
    "setting", ["num_games=100000000", "hidden=[100000000]", "eval_games=2000000000"]
)
def test_a_td_run_too_large_for_the_machine_is_refused_before_its_directory(
    tmp_path, capsys, setting
):
    out = tmp_path / "run"
    assert main(["train", "backgammon", "--out", str(out), "--set", setting]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "GiB, more than this machine's" in err[0]
    assert setting.partition("=")[0] in err[0]  # (the setting to lower is named)
    assert not out.exists()


def test_a_match_too_large_for_the_machine_is_refused_before_it_compiles(tic_tac_toe):
    import jax

    from turbozero.arena import play_match, random_agent
    from turbozero.arena.search_agents import rollout_mcts_agent
    from turbozero.io.errors import TooLargeError

    searcher = rollout_mcts_agent(tic_tac_toe, num_simulations=(1 << 24) - 1)
    with pytest.raises(TooLargeError, match=r"GiB, more than .* search less"):
        play_match(
            tic_tac_toe, searcher, random_agent(tic_tac_toe), jax.random.PRNGKey(0), num_games=4096
        )


def test_a_refused_setting_of_the_library_is_one_line(tmp_path, capsys, monkeypatch):
    """A `ValueError` from the library's own checks (not one of the CLI's named errors) is one
    line too, its debugging hint on the same line."""
    from turbozero import cli

    def refuses(args):
        raise ValueError("temperature must be >= 0, got -1")

    monkeypatch.setattr(cli, "cmd_plot", refuses)
    monkeypatch.delenv("TURBOZERO_DEBUG", raising=False)
    assert main(["plot", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "got -1" in err and "TURBOZERO_DEBUG=1" in err
