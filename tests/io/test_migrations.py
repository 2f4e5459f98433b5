"""The run format's versions (`turbozero.io.migrations`): one test per version step, and the
reader every command uses (`RunDir.read_config`) going through them."""

from __future__ import annotations

import copy
import json
import re
import shutil
from pathlib import Path

import pytest

from tests.alphazero.test_selfplay_and_trainer import TINY
from turbozero.alphazero.config import AlphaZeroConfig
from turbozero.config import ConfigError
from turbozero.io.errors import DamagedRunError
from turbozero.io.migrations import BEFORE_2, FORMAT_VERSION, REMOVED_IN_2, STEPS, migrate
from turbozero.io.rundir import RunDir

STORED = Path(__file__).parents[1] / "alphazero" / "data" / "config_before_accuracy.json"


def _v1(config: dict, **rest) -> dict:
    """An AlphaZero run's config.json as version 1 wrote it (no `format`)."""
    return {"algorithm": "alphazero", "preset": None, "config": config, **rest}


def _with(data: dict, dotted: str, value) -> dict:
    data = copy.deepcopy(data)
    *path, name = dotted.split(".")
    (data[path[0]] if path else data)[name] = value
    return data


def test_every_version_below_todays_has_one_step():
    assert sorted(STEPS) == list(range(1, FORMAT_VERSION))


@pytest.mark.parametrize("key", list(REMOVED_IN_2))
def test_step_1_to_2_drops_a_removed_setting_left_off_and_refuses_one_used(key):
    """Settings tried on Connect Four, not kept and removed (docs/benchmarks.md's lever table):
    a version-1 run holding one at the value that left it off reads as before; one that used
    it is refused in one line naming it; `--set` no longer knows it."""
    off = REMOVED_IN_2[key]
    used = {bool: (not off), int: 8000, float: 0.05, str: "other"}[type(off)]
    kept = migrate(_v1(_with(TINY.to_dict(), key, off)))
    assert kept["format"] == FORMAT_VERSION == 2
    assert AlphaZeroConfig.from_dict(kept["config"]) == TINY
    with pytest.raises(ConfigError, match=rf"^{re.escape(key)}={used!r}: .* removed") as err:
        migrate(_v1(_with(TINY.to_dict(), key, used)))
    assert "\n" not in str(err.value)
    with pytest.raises(ConfigError, match="unknown config key"):
        TINY.with_overrides([f"{key}={used}"])


def test_step_1_to_2_reads_a_moved_default_at_the_value_the_run_ran_with():
    """A version-1 config.json lacking a setting whose default moved ran with the first
    recipe's value (`BEFORE_2`), nested keys included; a user's own JSON (`from_dict`, no
    migration) takes today's defaults; what the record holds is kept."""
    record = AlphaZeroConfig(env="connect_four").resolved().to_dict()
    del record["search"]["fpu"], record["network"]["value_bins"]
    del record["ema_decay"], record["ema_selfplay"]
    old = AlphaZeroConfig.from_dict(migrate(_v1(record))["config"])
    assert (old.search.fpu, old.network.value_bins, old.ema_decay) == ("zero", 0, 0.0)
    assert old.learning_rate == record["learning_rate"]  # (recorded: kept)
    new = AlphaZeroConfig.from_dict(record)
    assert (new.search.fpu, new.network.value_bins, new.ema_decay) == (None, None, 0.9995)
    assert set(BEFORE_2) >= {"search.fpu", "network.value_bins", "ema_decay"}


def test_step_1_to_2_names_the_line_length_in_a_resnets_recorded_description():
    """Version 1 described a network given from Python without `line_length` at its default;
    version 2 describes every field, so a version-1 run given the same network resumes."""
    from turbozero.alphazero.train import describe_parts
    from turbozero.nets import AZResnet, AZResnetConfig

    today = describe_parts({"module": AZResnet(AZResnetConfig(policy_head_out_size=9))})
    assert "line_length=0" in today["module"]
    then = {"module": today["module"].replace(", line_length=0", "")}
    assert migrate(_v1(TINY.to_dict(), parts=then))["parts"] == today
    lines = describe_parts({"module": AZResnet(AZResnetConfig(9, line_length=3))})
    assert migrate(_v1(TINY.to_dict(), parts=lines))["parts"] == lines  # (named: kept)


def test_step_1_to_2_leaves_ppo_and_td_runs_as_they_were():
    from turbozero.ppo.config import PPOConfig
    from turbozero.td.config import TDConfig

    for algorithm, config in (("ppo", PPOConfig()), ("td", TDConfig())):
        saved = {"algorithm": algorithm, "preset": None, "config": config.to_dict()}
        assert migrate(saved) == {**saved, "format": FORMAT_VERSION}
        assert "format" not in saved  # (the record read is not changed)


def test_a_stored_version_1_run_reads_as_it_ran_through_the_run_directory(tmp_path):
    """A run directory's config.json from before `eval_accuracy`, `root_value_weight` and the
    format's version: read by the reader eval, play and --resume use, at what it ran with."""
    saved = json.loads(STORED.read_text())
    assert "format" not in saved and "root_value_weight" not in saved["config"]
    shutil.copy(STORED, tmp_path / "config.json")
    read = RunDir(tmp_path).read_config("alphazero")
    assert read["format"] == FORMAT_VERSION
    config = AlphaZeroConfig.from_dict(read["config"])
    assert config.eval_accuracy is False and config.root_value_weight == 0.0
    # (today's defaults differ: the run is read at the values it ran with)
    assert AlphaZeroConfig().root_value_weight == 0.75 and config.ema_decay == 0.0
    assert config.search.chance_widening == 1.0
    assert config.env == "connect_four" and config.num_games == 128


@pytest.mark.parametrize("version", [FORMAT_VERSION + 1, 0, "2", True])
def test_a_format_this_version_does_not_know_is_refused_in_one_line(tmp_path, version):
    (tmp_path / "config.json").write_text(
        json.dumps({"format": version, "algorithm": "ppo", "config": {}})
    )
    with pytest.raises(DamagedRunError) as err:
        RunDir(tmp_path).read_config()
    message = str(err.value)
    assert "config.json" in message and "\n" not in message
    if version == FORMAT_VERSION + 1:
        assert "newer turbozero" in message


def test_a_new_run_records_todays_format(tmp_path):
    from turbozero.ppo import train_ppo
    from turbozero.ppo.config import PPOConfig

    cfg = PPOConfig(num_envs=2, rollout_length=4, num_updates=1, num_updates_per_eval=1)
    train_ppo(cfg, tmp_path / "run", progress=False)
    assert RunDir(tmp_path / "run").read_json("config.json")["format"] == FORMAT_VERSION
