"""Runs given their parts from Python record how to rebuild them: eval, play and --resume work."""

from __future__ import annotations

import functools
import json
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
    rebuild_parts,
    record_parts,
    resolve,
)
from turbozero.alphazero.train import describe_parts
from turbozero.cli import main
from turbozero.io.errors import NotRebuildableError
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
    train(AlphaZeroConfig(**TINY), run, progress=False, parts=parts, rebuild={"env": NIM})
    return run


def test_eval_play_and_resume_rebuild_a_users_game_from_the_cli(nim_run, capsys):
    saved = json.loads((nim_run / "config.json").read_text())
    assert saved["rebuild"]["env"] == {"factory": NIM}
    assert saved["rebuild"]["module"]["class"] == "turbozero.nets.mlp:PolicyValueMLP"
    loaded = turbozero.load_agent(nim_run)  # no env, no module passed
    assert loaded.env.name == "nim" and loaded.env.num_actions == 3
    assert main(["eval", str(nim_run), "--games", "4", "--json"]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["wins"] + out["draws"] + out["losses"] == 4
    assert main(["train", "--out", str(nim_run), "--resume", "--set", "num_epochs=2"]) == 0
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


def test_a_network_setting_added_later_is_described_only_when_changed():
    """A run records a description of the network it was given from Python and a resumed run
    must match it; fields added to `AZResnetConfig` after such runs existed (the heads' widths)
    are left out at their defaults, so those runs still resume."""
    from turbozero.nets import AZResnet, AZResnetConfig

    before = (
        "AZResnet(config=AZResnetConfig(policy_head_out_size=9, num_blocks=2, num_channels=16, "
        "norm='batch', value_bins=0, bounded_value=True, model_type='resnet'))"
    )
    (plain,) = describe_parts({"module": AZResnet(AZResnetConfig(policy_head_out_size=9))}).values()
    assert plain == before
    wide = AZResnet(AZResnetConfig(policy_head_out_size=9, value_channels=4))
    (described,) = describe_parts({"module": wide}).values()
    assert described == before.replace("'resnet'))", "'resnet', value_channels=4))")
