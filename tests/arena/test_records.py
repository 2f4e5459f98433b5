"""Records: replaying a recorded game and drawing it."""

from __future__ import annotations

import jax
import numpy as np
import pytest

from turbozero.arena import perfect_agent, play_match, random_agent, render_game_svgs, replay_game


@pytest.fixture(scope="module")
def result(tic_tac_toe):
    return play_match(
        tic_tac_toe,
        perfect_agent(tic_tac_toe),
        random_agent(tic_tac_toe),
        jax.random.PRNGKey(10),
        num_games=4,
        max_steps=9,
    )


def test_replayed_game_reaches_the_recorded_outcome(tic_tac_toe, result):
    for game in range(result.num_games):
        states = replay_game(tic_tac_toe, result, game)
        assert len(states) == result.lengths[game] + 1
        assert bool(states[-1].terminated)
        rewards = sum(np.asarray(s.rewards) for s in states)
        np.testing.assert_allclose(rewards, result.returns[game])


def test_render_game_svgs_draws_every_position(tic_tac_toe, result):
    states = replay_game(tic_tac_toe, result, 0)
    svgs = render_game_svgs(tic_tac_toe, states)
    assert len(svgs) == len(states)
    assert all(s.startswith("<svg") and s.rstrip().endswith("</svg>") for s in svgs)


def test_replay_needs_recorded_actions(tic_tac_toe):
    r = play_match(
        tic_tac_toe,
        perfect_agent(tic_tac_toe),
        random_agent(tic_tac_toe),
        jax.random.PRNGKey(0),
        num_games=256,
    )
    with pytest.raises(ValueError, match="max_steps"):
        replay_game(tic_tac_toe, r, 0)
