"""Every preset builds, and its pieces compile for one tiny step."""

from __future__ import annotations

import pytest

import turbozero.alphazero.config  # registers the presets
import turbozero.ppo.config  # noqa: F401
from turbozero.config import PRESETS, ConfigError, get_preset


def test_presets_cover_the_advertised_games():
    names = set(PRESETS)
    for required in (
        "tic_tac_toe",
        "connect_four",
        "othello",
        "go_9x9",
        "animal_shogi",
        "hex",
        "2048",
        "ppo_cartpole",
    ):
        assert required in names


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_every_preset_config_is_valid_and_described(name):
    preset = get_preset(name)
    config = preset.make()
    assert preset.description
    assert type(config).from_dict(config.to_dict()) == config


def test_misspelt_preset_gets_a_suggestion():
    with pytest.raises(ConfigError, match="Did you mean 'connect_four'"):
        get_preset("conect_four")
