"""The run and evaluation settings every algorithm shares are one group each
(`turbozero.config.RunSettings`/`EpochSettings`, `turbozero.arena.settings.EvalSettings`),
validated once, and what a resumed run may change follows from the groups."""

from __future__ import annotations

import dataclasses

import pytest

from turbozero.alphazero.config import AlphaZeroConfig
from turbozero.arena.settings import EvalSettings
from turbozero.config import ConfigError, EpochSettings, RunSettings
from turbozero.ppo.config import PPOConfig
from turbozero.td.config import TDConfig

CONFIGS = (AlphaZeroConfig, PPOConfig, TDConfig)


def _names(cls: type) -> set[str]:
    return {f.name for f in dataclasses.fields(cls)}


def test_every_algorithm_holds_the_shared_run_group_and_the_epoch_ones_its_stop():
    for cls in CONFIGS:
        assert issubclass(cls, RunSettings) and _names(RunSettings) <= _names(cls)
    assert issubclass(AlphaZeroConfig, EpochSettings) and issubclass(TDConfig, EpochSettings)
    assert issubclass(AlphaZeroConfig, EvalSettings) and issubclass(TDConfig, EvalSettings)
    assert not issubclass(PPOConfig, EpochSettings)  # (its length is num_updates)
    for cls in (AlphaZeroConfig, TDConfig):  # listed in `turbozero config`'s sections
        assert _names(EpochSettings) <= set(cls.GROUPS["run"])
        assert _names(EvalSettings) <= set(cls.GROUPS["eval"])


@pytest.mark.parametrize(
    "setting, says",
    [
        ("seed=-3000000000", "seed must be"),
        ("checkpoint_every=0", "checkpoint_every must be"),
        ("keep_checkpoints=0", "keep_checkpoints must be"),
    ],
)
def test_a_run_setting_is_refused_alike_by_every_algorithm(setting, says):
    messages = set()
    for cls in CONFIGS:
        with pytest.raises(ConfigError, match=says) as err:
            cls().with_overrides([setting])
        messages.add(str(err.value))
    assert len(messages) == 1, messages  # (one check, one message)


@pytest.mark.parametrize(
    "setting, says",
    [
        ("eval_games=3", "eval_games must be even"),
        ("eval_every=0", "eval_every must be"),
        ("eval_opponents=random,random", "eval_opponents"),
        ("eval_opponents=nobody", "eval_opponents entry 'nobody'"),
        ("eval_accuracy_positions=0", "eval_accuracy_positions must be"),
    ],
)
def test_an_evaluation_setting_is_refused_alike_by_alphazero_and_td(setting, says):
    messages = set()
    for config in (AlphaZeroConfig(env="backgammon"), TDConfig()):
        with pytest.raises(ConfigError, match=says) as err:
            config.with_overrides([setting])
        messages.add(str(err.value))
    assert len(messages) == 1, messages


def test_what_a_resume_may_change_follows_from_the_groups():
    shared = {"tensorboard", "wandb_project"}
    stops = {"num_epochs", "max_wall_seconds"}
    records = {"eval_record_games"}  # (the evaluation group's)
    assert set(PPOConfig.resume_may_change()) == shared
    assert set(AlphaZeroConfig.resume_may_change()) == (shared | stops | records | {"eval_share"})
    assert set(TDConfig.resume_may_change()) == (
        shared | stops | records | set(TDConfig.RESUME_MAY_CHANGE)
    )
    for cls in CONFIGS:  # (each names a setting of its config)
        assert set(cls.resume_may_change()) <= _names(cls)
    # the runner's hooks use them
    from turbozero.alphazero.train import RESUME_MAY_CHANGE as ALPHAZERO
    from turbozero.ppo.train import PPORun
    from turbozero.td.train import TDRun

    assert AlphaZeroConfig.resume_may_change() == ALPHAZERO
    assert PPORun.resume_may_change == PPOConfig.resume_may_change()
    assert TDRun.resume_may_change == TDConfig.resume_may_change()


def test_the_shared_settings_comments_reach_the_configuration_docs():
    from turbozero.config import setting_notes

    for cls in CONFIGS:
        notes = setting_notes(cls)
        assert "W&B" in notes["wandb_project"] and "checkpoints" in notes["keep_checkpoints"]
    assert "colours alternate" in setting_notes(TDConfig)["eval_games"]  # (its own, kept)
    # a comment written above its setting, on one or two lines, is that setting's whole note
    # (`config --explain` cut them: issue 86 item 7)
    from turbozero.alphazero.config import NetworkConfig

    notes = setting_notes(AlphaZeroConfig)
    assert notes["memory_capacity"].endswith("(64 * collection_steps_per_epoch)")
    assert notes["eval_simulations"].startswith("simulations at play")
    value_bins = setting_notes(NetworkConfig)["value_bins"]
    assert value_bins.startswith("None: from the game") and value_bins.endswith("cross-entropy")
