"""Backgammon's move-quality measure: the positions are real turn starts scored by gnubg once
and read back from the cache, gnubg's own play loses nothing against its own scores, and a
random player's plays lose equity (the `engines` extra, which `make test` installs)."""

from __future__ import annotations

import jax
import numpy as np
import pytest

import turbozero
from turbozero.alphazero import AlphaZeroConfig
from turbozero.arena import random_agent
from turbozero.config import ConfigError
from turbozero.engines.backgammon import turn_plays
from turbozero.engines.players import backgammon_engine_agent
from turbozero.engines.quality import move_quality, quality_positions


@pytest.fixture(scope="module")
def backgammon():
    return turbozero.envs.make("backgammon")


@pytest.fixture(scope="module")
def scored(backgammon, tmp_path_factory):
    return quality_positions(backgammon, 12, cache=tmp_path_factory.mktemp("positions"))


def test_positions_are_turn_starts_with_a_choice_and_every_play_scored(scored):
    assert scored.num_positions == 12
    assert (np.asarray(scored.states._played_dice_num) == 0).all()
    assert not np.asarray(scored.states.terminated).any()
    assert len({b.tobytes() for b in scored.boards}) == 12  # distinct
    for i in range(12):
        dice = [int(d) + 1 for d in np.asarray(scored.states._playable_dice)[i] if d >= 0]
        plays = turn_plays(scored.boards[i], dice)
        assert len(plays) >= 2
        assert scored.offsets[i + 1] - scored.offsets[i] == len(plays)
        for play in plays:
            assert scored.equity_of(i, np.frombuffer(play.after, np.int8)) is not None
    assert np.isfinite(scored.equity).all() and (np.abs(scored.equity) <= 3).all()


def test_the_set_comes_back_from_the_cache_and_a_damaged_file_is_made_again(backgammon, tmp_path):
    first = quality_positions(backgammon, 3, seed=5, cache=tmp_path)
    (path,) = tmp_path.glob("backgammon-quality-n3-seed5-ply0-*.npz")
    again = quality_positions(backgammon, 3, seed=5, cache=tmp_path)
    np.testing.assert_array_equal(first.afters, again.afters)
    np.testing.assert_array_equal(first.equity, again.equity)
    path.write_bytes(b"cut")
    remade = quality_positions(backgammon, 3, seed=5, cache=tmp_path)
    np.testing.assert_array_equal(first.equity, remade.equity)


def test_gnubg_loses_nothing_against_its_own_scores_and_random_play_does(backgammon, scored):
    gnubg = move_quality(
        backgammon, backgammon_engine_agent(backgammon, "gnubg:0"), scored, jax.random.key(0)
    )
    assert gnubg.error_rate == pytest.approx(0.0, abs=1e-9) and gnubg.best_share == 1.0
    assert sum(p["positions"] for p in gnubg.phases.values()) == 12
    rand = move_quality(backgammon, random_agent(backgammon), scored, jax.random.key(0))
    assert rand.error_rate > 20 and rand.best_share < 1.0  # millipoints a move


def test_bad_arguments_are_refused_naming_them(backgammon):
    with pytest.raises(ValueError, match="num_positions"):
        quality_positions(backgammon, 0)
    with pytest.raises(ValueError, match="ply"):
        quality_positions(backgammon, 5, ply=3)
    with pytest.raises(ValueError, match="backgammon only"):
        quality_positions(turbozero.envs.make("tic_tac_toe"), 5)
    AlphaZeroConfig(env="backgammon", eval_accuracy=True, eval_accuracy_positions=200).validate()
    with pytest.raises(ConfigError, match="eval_accuracy_positions"):
        AlphaZeroConfig(
            env="backgammon", eval_accuracy=True, eval_accuracy_positions=20_000
        ).validate()
    with pytest.raises(ConfigError, match="gnubg"):
        AlphaZeroConfig(env="othello", eval_accuracy=True).validate()
