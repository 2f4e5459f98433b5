"""PPOConfig validation names the offending key; presets are registered and valid."""

from __future__ import annotations

import pytest

from turbozero.config import ConfigError, get_preset
from turbozero.ppo import PPOConfig, make_ppo


def test_minibatches_must_divide_the_batch_and_the_error_says_so():
    with pytest.raises(
        ConfigError, match=r"num_minibatches must divide num_envs \* rollout_length"
    ):
        PPOConfig(num_envs=3, rollout_length=5, num_minibatches=4)


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("gamma", 1.5),
        ("clip_eps", 0.0),
        ("num_envs", 0),
        ("loss", "ppo2"),
        ("lr_schedule", "cosine"),
        ("actor_lr", -1.0),
        ("activation", "sigmoid"),
        ("dpo_alpha", 0.0),
        ("dpo_beta", -0.6),
        ("dpo_alpha", float("nan")),
        ("action_head", "gumbel"),
        ("seed", -(2**31) - 1),
        ("seed", 2**32),
        ("seed", 10**400),
    ],
)
def test_out_of_range_values_name_their_key(key, value):
    with pytest.raises(ConfigError, match=key):
        PPOConfig(**{key: value})


def test_updates_per_eval_must_divide_updates():
    with pytest.raises(ConfigError, match="num_updates_per_eval"):
        PPOConfig(num_updates=10, num_updates_per_eval=3)


def test_overrides_parse_and_unknown_keys_are_refused():
    cfg = PPOConfig().with_overrides(["num_envs=8", "actor_hidden=32,32"])
    assert cfg.num_envs == 8 and cfg.actor_hidden == (32, 32)
    with pytest.raises(ConfigError, match="num_env"):
        PPOConfig().with_overrides(["num_env=8"])
    with pytest.raises(ConfigError, match="unknown"):
        make_ppo(PPOConfig(), not_a_key=1)
    with pytest.raises(ConfigError, match="Did you mean 'num_envs'"):
        make_ppo(numenvs=4)  # without a config too


@pytest.mark.parametrize("name", ["ppo_cartpole", "ppo_acrobot", "ppo_pendulum"])
def test_presets_are_registered_for_ppo(name):
    preset = get_preset(name)
    assert preset.algorithm == "ppo"
    assert isinstance(preset.make(), PPOConfig)


def test_a_linear_decay_longer_than_int32_counts_is_refused_naming_its_factors():
    """The decay counts optimizer steps in int32: 10**7 updates x 64 epochs x 4 minibatches
    passed and failed with an OverflowError once the run directory was written."""
    big = dict(num_updates=10**7, num_updates_per_eval=1, epochs=64, num_minibatches=4)
    with pytest.raises(ConfigError, match="num_updates \\* epochs \\* num_minibatches"):
        PPOConfig(**big)
    PPOConfig(**big, lr_schedule="constant")


def test_the_loader_never_picks_a_diverged_seed_as_the_best():
    import numpy as np

    from turbozero.ppo.load import best_seed

    assert best_seed(np.array([np.nan, -50.0, -80.0])) == 1
    assert best_seed(np.array([3.0, 9.0])) == 1 and best_seed(np.array([np.nan])) == 0


def test_dpo_scales_must_be_positive_and_the_error_gives_the_range():
    with pytest.raises(ConfigError, match=r"dpo_alpha must be a finite number in \(0.0, inf\)"):
        PPOConfig(loss="dpo", dpo_alpha=0.0)
    with pytest.raises(ConfigError, match=r"dpo_beta must be a finite number in \(0.0, inf\)"):
        PPOConfig(loss="dpo", dpo_beta=-1.0)
    cfg = PPOConfig(loss="dpo")
    assert (cfg.dpo_alpha, cfg.dpo_beta) == (2.0, 0.6)  # the paper's


def test_the_new_settings_round_trip_and_an_old_run_config_gets_the_defaults():
    cfg = PPOConfig(loss="dpo", dpo_alpha=1.5, action_head="beta")
    assert PPOConfig.from_dict(cfg.to_dict()) == cfg
    old = {
        k: v
        for k, v in PPOConfig().to_dict().items()
        if k not in ("dpo_alpha", "dpo_beta", "action_head")
    }
    assert PPOConfig.from_dict(old) == PPOConfig()


def test_one_hot_observations_are_refused_outside_jumanji_and_reach_the_environment():
    with pytest.raises(ConfigError, match="one_hot_observations"):
        PPOConfig(env="gymnax:CartPole-v1", one_hot_observations=True)
    ppo = make_ppo(PPOConfig(env="jumanji:Minesweeper-v0", one_hot_observations=True))
    assert ppo.env.observation_shape == (1002,)
