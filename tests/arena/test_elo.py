"""Elo: maximum likelihood fit, anchors, order invariance, the pool helper."""

from __future__ import annotations

import math

import jax
import numpy as np
import pytest

from turbozero.arena import EloPool, fit_elo, perfect_agent, play_match, random_agent
from turbozero.arena.elo import SCALE


def synthetic_games(ratings, games_per_pair, seed, draw_rate=0.0):
    """Results drawn from the Elo model; draws replace a win and a loss in equal parts."""
    rng = np.random.default_rng(seed)
    games = []
    for i in range(len(ratings)):
        for j in range(i + 1, len(ratings)):
            p = 1.0 / (1.0 + 10 ** ((ratings[j] - ratings[i]) / 400))
            d = draw_rate * min(p, 1 - p) * 2  # keeps the expected score equal to p
            u = rng.random(games_per_pair)
            scores = np.where(u < p - d / 2, 1.0, np.where(u < p + d / 2, 0.5, 0.0))
            games += [(i, j, s) if k % 2 else (j, i, 1 - s) for k, s in enumerate(scores)]
    return games


@pytest.mark.parametrize("draw_rate", [0.0, 0.3])
def test_fit_recovers_known_ratings(draw_rate):
    truth = np.array([0.0, 150.0, 400.0, -200.0, 50.0])
    games = synthetic_games(truth, 600, seed=0, draw_rate=draw_rate)
    fitted = fit_elo(games, num_players=5, anchors={0: 0.0})
    assert fitted[0] == 0.0
    np.testing.assert_allclose(fitted, truth, atol=40)


def test_fit_is_invariant_to_game_order():
    games = synthetic_games([0.0, 100.0, -300.0], 50, seed=1, draw_rate=0.2)
    shuffled = [games[k] for k in np.random.default_rng(2).permutation(len(games))]
    np.testing.assert_array_equal(fit_elo(games, num_players=3), fit_elo(shuffled, num_players=3))


def test_three_wins_in_four_games_is_400_log10_3_elo():
    games = [(0, 1, 1.0), (1, 0, 0.0), (0, 1, 1.0), (0, 1, 0.0)]
    ratings = fit_elo(games, num_players=2, prior_sd=1e6)
    assert ratings[0] - ratings[1] == pytest.approx(400 * math.log10(3), abs=1e-3)
    assert ratings.sum() == pytest.approx(0.0, abs=1e-6)  # centred without anchors


def test_draws_count_as_half_a_win():
    ratings = fit_elo([(0, 1, 0.5), (1, 0, 0.5), (0, 1, 1.0), (0, 1, 0.0)], num_players=2)
    np.testing.assert_allclose(ratings, 0.0, atol=1e-9)


def test_undefeated_and_isolated_players_get_finite_ratings():
    games = [(0, 1, 1.0)] * 20
    ratings = fit_elo(games, num_players=3, anchors={1: 1000.0})
    assert np.all(np.isfinite(ratings)) and ratings[0] > 1000.0 + 400
    assert ratings[2] == pytest.approx(1000.0)  # never played: stays at the anchors' centre
    assert ratings[1] == 1000.0


def test_fit_elo_validates_arguments():
    with pytest.raises(ValueError, match="num_players"):
        fit_elo([], num_players=0)
    with pytest.raises(ValueError, match="anchors"):
        fit_elo([], num_players=2, anchors={2: 0.0})
    with pytest.raises(ValueError, match="score"):
        fit_elo([(0, 1, 2.0)], num_players=2)
    with pytest.raises(ValueError, match="itself"):
        fit_elo([(1, 1, 1.0)], num_players=2)
    with pytest.raises(ValueError, match="prior_sd"):
        fit_elo([], num_players=2, prior_sd=0.0)
    with pytest.raises(ValueError, match="prior_sd must be a finite number"):
        fit_elo([(0, 1, 1.0)], num_players=2, prior_sd=math.inf)
    with pytest.raises(ValueError, match="anchors values must be finite ratings"):
        fit_elo([], num_players=2, anchors={1: math.nan})


def test_elo_pool_refuses_bad_anchors_and_scores_where_they_are_given():
    with pytest.raises(ValueError, match="anchors values must be finite ratings"):
        EloPool(anchors={"random": math.nan})
    with pytest.raises(ValueError, match=r"score_i must be in \[0, 1\]"):
        EloPool().add_game("a", "random", 2.0)
    with pytest.raises(ValueError, match=r"score_i must be in \[0, 1\]"):
        EloPool().add_game("a", "random", math.nan)


def test_scale_is_400_over_ln_10():
    assert 1.0 / (1.0 + math.exp(-200.0 / SCALE)) == pytest.approx(1 / (1 + 10 ** (-0.5)))


def test_pool_accumulates_matches_by_name(tic_tac_toe):
    pool = EloPool(anchors={"random": 0.0})
    r = play_match(
        tic_tac_toe,
        perfect_agent(tic_tac_toe),
        random_agent(tic_tac_toe),
        jax.random.PRNGKey(2),
        num_games=256,
    )
    pool = pool.add_match(r).add_game("human", "random", 1.0)
    ratings = pool.ratings()
    assert set(ratings) == {"perfect", "random", "human"}
    assert ratings["random"] == 0.0 and ratings["perfect"] > 300
    assert len(pool.games) == 257
    with pytest.raises(ValueError, match="itself"):
        pool.add_game("a", "a", 0.5)


def test_a_record_adds_the_same_games_as_one_game_at_a_time():
    pool = EloPool(anchors={"random": 0.0}).add_game("b", "random", 0.0)
    one_by_one = pool
    for score in (1.0, 1.0, 0.5, 0.0, 0.0, 0.0):
        one_by_one = one_by_one.add_game("a", "random", score)
    assert pool.add_record("a", "random", 2, 1, 3) == one_by_one
    for bad in ({"wins": -1}, {"draws": 1.5}, {"losses": True}):
        counts = {"wins": 1, "draws": 1, "losses": 1, **bad}
        with pytest.raises(ValueError, match=f"{next(iter(bad))} must be an int >= 0"):
            pool.add_record("a", "random", **counts)
    with pytest.raises(ValueError, match="distinct names"):
        pool.add_record("a", "a", 1, 0, 0)
