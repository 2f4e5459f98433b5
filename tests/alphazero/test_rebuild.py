"""Runs given their parts from Python record how to rebuild them: eval, play and --resume work."""

from __future__ import annotations

import contextlib
import functools
import io
import json
import shutil
from pathlib import Path

import flax.linen as nn
import jax.numpy as jnp
import pytest

import turbozero
from turbozero.alphazero import AlphaZeroConfig, train
from turbozero.alphazero.losses import az_loss
from turbozero.alphazero.rebuild import (
    automatic_recipe,
    build,
    check_trusted,
    rebuild_parts,
    record_parts,
    resolve,
)
from turbozero.alphazero.train import describe_parts
from turbozero.cli import main
from turbozero.io.errors import NotRebuildableError, UntrustedRunError
from turbozero.nets import PolicyValueMLP

ROOT = Path(__file__).resolve().parents[2]
NIM = f"{ROOT / 'examples' / 'custom_game.py'}:make_env"
TINY = dict(
    env="custom:nim",
    num_games=8,
    train_batch_size=16,
    collection_steps_per_epoch=8,
    num_epochs=1,
    eval_games=4,
    memory_capacity=16,
    warmup_steps=0,
    train_steps_per_epoch=2,
    eval_opponents=("random",),
)


def _same(name, part):
    recipe = automatic_recipe(name, part)
    assert recipe is not None, name
    assert describe_parts({name: build(json.loads(json.dumps(recipe)))}) == describe_parts(
        {name: part}
    )


def test_builtin_games_importable_functions_partials_and_flax_modules_rebuild_by_themselves(
    tic_tac_toe,
):
    _same("env", tic_tac_toe)
    _same("loss_fn", az_loss)
    _same("loss_fn", functools.partial(az_loss, value_weight=0.5))
    _same("module", PolicyValueMLP(num_actions=9, hidden=(16, 8)))
    assert automatic_recipe("augment_fns", []) == {"objects": []}


def test_what_cannot_be_rebuilt_has_no_recipe_and_a_named_recipe_must_match():
    def local_loss(*args, **kwargs):
        return az_loss(*args, **kwargs)

    assert automatic_recipe("loss_fn", local_loss) is None  # a function inside a function
    assert automatic_recipe("loss_fn", lambda *a: a) is None
    env = turbozero.envs.make("tic_tac_toe")
    with pytest.raises(ValueError, match=r"rebuild\['env'\].*differs"):
        record_parts({"env": env}, {"env": NIM}, describe_parts)  # a recipe for another game
    with pytest.raises(ValueError, match="rebuild names \\['module'\\]"):
        record_parts({"env": env}, {"module": NIM}, describe_parts)
    with pytest.raises(ValueError, match="cannot be loaded"):
        record_parts({"env": env}, {"env": "no_such_module:make"}, describe_parts)
    with pytest.raises(NotRebuildableError, match=r"'pkg\.module:function'"):
        rebuild_parts({"module": None}, ["module"], "RUN")


@pytest.fixture(scope="module")
def nim_run(tmp_path_factory):
    make_env = resolve(NIM)
    run = tmp_path_factory.mktemp("rebuild") / "nim"
    parts = {"env": make_env(), "module": PolicyValueMLP(num_actions=3, hidden=(16,))}
    said = io.StringIO()
    with contextlib.redirect_stdout(said):
        train(AlphaZeroConfig(**TINY), run, progress=False, parts=parts, rebuild={"env": NIM})
    # the run names the user's file: the next commands it suggests carry the user's word
    assert f"next: turbozero eval {run} --trust-run, or play it: " in said.getvalue()
    return run


def test_eval_play_and_resume_rebuild_a_users_game_from_the_cli_when_trusted(nim_run, capsys):
    saved = json.loads((nim_run / "config.json").read_text())
    assert saved["rebuild"]["env"] == {"factory": NIM}
    assert saved["rebuild"]["module"]["class"] == "turbozero.nets.mlp:PolicyValueMLP"
    # the user's own run names the user's file: opened as data, it is refused in one line ...
    with pytest.raises(UntrustedRunError, match="--trust-run"):
        turbozero.load_agent(nim_run)
    for command in (["eval", str(nim_run)], ["train", "--out", str(nim_run), "--resume"]):
        assert main(command) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and NIM in err and "--trust-run" in err
    # ... and works with the documented step, saying first what it imports
    loaded = turbozero.load_agent(nim_run, trust=True)  # no env, no module passed
    assert loaded.env.name == "nim" and loaded.env.num_actions == 3
    assert f"importing {NIM} (its env)" in capsys.readouterr().err
    assert main(["eval", str(nim_run), "--games", "4", "--json", "--trust-run"]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["wins"] + out["draws"] + out["losses"] == 4
    resume = ["train", "--out", str(nim_run), "--resume", "--set", "num_epochs=2"]
    assert main([*resume, "--trust-run"]) == 0
    rows = [json.loads(line) for line in (nim_run / "metrics.jsonl").read_text().splitlines()]
    assert [r["epoch"] for r in rows] == [1, 2]


def test_a_part_without_a_recipe_is_refused_by_name(tmp_path, capsys):
    run = tmp_path / "local"
    env = turbozero.envs.make("tic_tac_toe")
    module = _local_module_in_a_function()  # its class cannot be imported
    cfg = AlphaZeroConfig(**{**TINY, "env": "tic_tac_toe", "eval_accuracy": False})
    train(cfg, run, progress=False, parts={"env": env, "module": module})
    saved = json.loads((run / "config.json").read_text())
    assert saved["rebuild"] == {"env": {"env": "tic_tac_toe"}, "module": None}
    with pytest.raises(NotRebuildableError, match="its module given from Python"):
        turbozero.load_agent(run)
    assert main(["eval", str(run), "--games", "2"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "module" in err and "rebuild=" in err
    assert main(["train", "--out", str(run), "--resume", "--set", "num_epochs=2"]) == 2


def _local_module_in_a_function():
    class Hidden(nn.Module):
        @nn.compact
        def __call__(self, x, train=False):
            h = nn.Dense(4)(x.reshape(x.shape[0], -1))
            return nn.Dense(9)(h), jnp.tanh(nn.Dense(1)(h))[:, 0]

    return Hidden()


def test_a_network_described_by_version_1_matches_todays_description_once_migrated():
    """A run records a description of the network it was given from Python and a resumed run
    must match it; every field is described (`line_length` too), and version 1's descriptions,
    which left out `line_length` at its default, are brought to today's by the run format's
    migration (`turbozero.io.migrations`), so those runs still resume."""
    from turbozero.io.migrations import migrate
    from turbozero.nets import AZResnet, AZResnetConfig

    version_1 = (
        "AZResnet(config=AZResnetConfig(policy_head_out_size=9, num_blocks=2, num_channels=16, "
        "norm='batch', value_bins=0, bounded_value=True, model_type='resnet'))"
    )
    (plain,) = describe_parts({"module": AZResnet(AZResnetConfig(policy_head_out_size=9))}).values()
    assert plain == version_1.replace("'resnet'))", "'resnet', line_length=0))")
    record = {"algorithm": "alphazero", "config": {}, "parts": {"module": version_1}}
    assert migrate(record)["parts"] == {"module": plain}
    lines = AZResnet(AZResnetConfig(policy_head_out_size=9, line_length=3))
    (described,) = describe_parts({"module": lines}).values()
    assert described == version_1.replace("'resnet'))", "'resnet', line_length=3))")


# Code outside turbozero for the recipes below: a loss, a factory of it, a flax network.
def outside_loss(*args, **kwargs):
    return az_loss(*args, **kwargs)


def make_outside_loss():
    return outside_loss


class OutsideNet(nn.Module):
    width: int = 4

    @nn.compact
    def __call__(self, x, train=False):
        h = nn.Dense(self.width)(x.reshape(x.shape[0], -1))
        return nn.Dense(9)(h), jnp.tanh(nn.Dense(1)(h))[:, 0]


HERE = "tests.alphazero.test_rebuild"


@pytest.mark.parametrize(
    ("recipe", "named"),
    [
        ({"factory": NIM}, NIM),
        ({"factory": f"{HERE}:make_outside_loss"}, f"{HERE}:make_outside_loss"),
        ({"object": f"{HERE}:outside_loss"}, f"{HERE}:outside_loss"),
        ({"partial": f"{HERE}:outside_loss", "args": [], "kwargs": {}}, f"{HERE}:outside_loss"),
        ({"class": f"{HERE}:OutsideNet", "fields": {"width": 3}}, f"{HERE}:OutsideNet"),
        (  # a built-in network whose field names a class outside turbozero
            {
                "class": "turbozero.nets.mlp:PolicyValueMLP",
                "fields": {"num_actions": 9, "hidden": {"__class__": f"{HERE}:OutsideNet"}},
            },
            f"{HERE}:OutsideNet",
        ),
    ],
)
def test_each_recipe_naming_outside_code_is_refused_untrusted_and_builds_trusted(
    recipe, named, capsys
):
    with pytest.raises(UntrustedRunError) as refused:
        check_trusted("RUN", {"module": recipe}, trust=False)
    assert named in str(refused.value) and "--trust-run" in str(refused.value)
    assert "trust=True" in str(refused.value) and "\n" not in str(refused.value)
    check_trusted("RUN", {"module": recipe}, trust=True)
    assert capsys.readouterr().err == f"trusting RUN: importing {named} (its module)\n"
    if "__class__" not in json.dumps(recipe):  # (that one's fields do not make a network)
        assert build(recipe) is not None


def test_builtin_parts_open_untrusted_and_a_reward_of_ones_own_does_not(capsys):
    builtin = {
        "env": {"env": "tic_tac_toe"},
        "module": automatic_recipe("module", PolicyValueMLP(num_actions=9, hidden=(8,))),
        "loss_fn": automatic_recipe("loss_fn", functools.partial(az_loss, value_weight=0.5)),
        "selector": {"object": "turbozero.search.puct:puct"},
    }
    check_trusted("RUN", builtin, "uncovered_share", trust=False)  # nothing to refuse or say
    assert capsys.readouterr().err == ""
    with pytest.raises(UntrustedRunError, match=r"its reward: 'os:system'"):
        check_trusted("RUN", builtin, "os:system", trust=False)
    # outside the built-in modules, turbozero's own functions are not parts either
    with pytest.raises(UntrustedRunError, match=r"turbozero\.cli:main"):
        check_trusted("RUN", {"loss_fn": {"object": "turbozero.cli:main"}}, trust=False)


def test_a_run_directory_naming_a_command_runs_nothing_trusted_or_not(nim_run, tmp_path, capsys):
    """The probe's recipe: a "class" that is `subprocess.run`, its fields a command."""
    run = tmp_path / "sent"
    shutil.copytree(nim_run, run)
    touched = tmp_path / "touched"
    saved = json.loads((run / "config.json").read_text())
    saved["rebuild"] = {
        "module": {"class": "subprocess:run", "fields": {"args": ["touch", str(touched)]}}
    }
    (run / "config.json").write_text(json.dumps(saved))
    assert main(["eval", str(run), "--games", "2"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "'subprocess:run'" in err and "--trust-run" in err
    assert main(["eval", str(run), "--games", "2", "--trust-run"]) == 2  # not a dataclass
    assert "is not a dataclass" in capsys.readouterr().err
    assert not touched.exists()


def test_a_run_whose_evaluation_search_would_not_fit_is_refused_by_eval(nim_run, tmp_path, capsys):
    """The probe's run: config.json's eval_simulations raised past what the machine holds."""
    run = tmp_path / "sent"
    shutil.copytree(nim_run, run)
    saved = json.loads((run / "config.json").read_text())
    saved["config"]["eval_simulations"] = 4_000_000
    (run / "config.json").write_text(json.dumps(saved))
    assert main(["eval", str(run), "--games", "20000", "--trust-run"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert "GiB, more than this machine's" in err[-1] and "eval_simulations" in err[-1]
