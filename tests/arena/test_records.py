"""Records: replaying a recorded game, drawing it, and the gallery page of evaluation games."""

from __future__ import annotations

import re

import jax
import numpy as np
import pytest

import turbozero
from turbozero.arena import (
    perfect_agent,
    play_match,
    random_agent,
    records,
    render_game_svgs,
    replay_game,
)
from turbozero.arena.records import (
    fit_svg,
    game_outcome,
    packed_frames,
    pick_games,
    records_page,
    replay_game_movers,
)
from turbozero.games.backgammon import point_numbers


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


def test_fit_svg_scales_pgx_drawings_by_a_viewbox_instead_of_cutting_them(connect_four):
    state, _ = connect_four.init(jax.random.PRNGKey(0))
    raw = connect_four.render_svg(state)
    assert "viewBox" not in raw  # pgx's drawing: fixed width and height only
    fitted = fit_svg(raw)
    head = fitted[: fitted.index(">")]
    assert 'viewBox="0 0 280.0 280.0"' in head
    assert not re.search(r"\s(width|height)=", head)  # the container sizes it
    assert fitted[fitted.index(">") :] == raw[raw.index(">") :]  # the drawing itself unchanged
    assert fit_svg(fitted) == fitted


def test_fit_svg_refuses_what_it_cannot_scale():
    with pytest.raises(ValueError, match="<svg"):
        fit_svg("<html></html>")
    with pytest.raises(ValueError, match="height"):
        fit_svg('<svg width="10"></svg>')


def test_movers_alternate_in_tic_tac_toe(tic_tac_toe, result):
    movers = replay_game_movers(tic_tac_toe, result, 0)
    assert len(movers) == result.lengths[0]
    assert movers[0::2] == [movers[0]] * len(movers[0::2])
    assert set(movers) == {0, 1}


def test_game_outcome_follows_the_returns(result):
    for g in range(result.num_games):
        ret = result.returns[g, result.player_a[g]]
        assert game_outcome(result, g) == {1.0: "win", 0.0: "draw", -1.0: "loss"}[float(ret)]


def test_pick_games_shows_the_worst_games_from_both_sides(tic_tac_toe):
    r = play_match(
        tic_tac_toe,
        random_agent(tic_tac_toe),
        perfect_agent(tic_tac_toe),
        jax.random.PRNGKey(3),
        num_games=16,
        max_steps=9,
    )
    picked = pick_games(r, 4)
    assert len(picked) == 4 and len(set(picked)) == 4
    assert {bool(r.a_first[g]) for g in picked} == {True, False}
    worst = min(("loss", "draw", "win").index(game_outcome(r, g)) for g in range(16))
    assert ("loss", "draw", "win").index(game_outcome(r, picked[0])) == worst
    assert pick_games(r, 100) == pick_games(r, 16) and len(pick_games(r, 100)) == 16
    assert sorted(pick_games(r, 100)) == list(range(16))


def test_pick_games_shows_one_game_of_each_result_that_occurred(tic_tac_toe):
    """A strong agent's wins with a few draws: the gallery shows a draw and a win, where the
    worst-first order alone showed only draws."""
    r = play_match(
        tic_tac_toe,
        perfect_agent(tic_tac_toe),
        random_agent(tic_tac_toe),
        jax.random.PRNGKey(10),  # (draws on both sides: worst-first showed two draws)
        num_games=32,
        max_steps=9,
    )
    occurred = {game_outcome(r, g) for g in range(32)}
    assert occurred >= {"win", "draw"}, occurred  # (this seed: both, and no loss)
    picked = pick_games(r, len(occurred))
    assert {game_outcome(r, g) for g in picked} == occurred
    assert game_outcome(r, picked[0]) == ("loss" if "loss" in occurred else "draw")


def test_records_page_shows_results_named_moves_and_every_position(tic_tac_toe, result):
    page = records_page(tic_tac_toe, {"random": result}, 2, "tic_tac_toe: epoch_3")
    sections = page.split("<section class='game'>")[1:]
    assert len(sections) == 2
    assert f"({result.wins} wins, {result.draws} draws, {result.losses} losses" in page
    for section, g in zip(sections, pick_games(result, 2), strict=True):
        n = int(result.lengths[g])
        assert f": {game_outcome(result, g)} in {n} moves" in section
        assert section.count("<svg") == n + 1  # the start and every move
        assert section.count("<li>") == n
        # moves named as on the play page (a1..c3), never as raw action ids
        named = re.findall(r"plays ([a-c][1-3])</figcaption>", section)
        assert len(named) == n and "action " not in section
        # whose seat is whose, and the columns' and rows' names the moves are given in
        assert re.search(r"\((first|second)\) vs random \((first|second)\): ", section)
        svg = section[section.index("<svg") : section.index("</svg>")]
        labels = re.findall(r"fill='#6b7383'>([^<]+)</text>", svg)
        assert sorted(labels) == ["1", "2", "3", "a", "b", "c"]
    assert re.search(r"\bol\{[^}]*max-height", page) is None  # (the whole move list shows)
    assert page.count("viewBox") == page.count("<svg")  # every board scales to its frame
    assert "<script>" in page and "http" not in page.replace("http://www.w3.org", "")


@pytest.fixture(scope="module")
def play2048():
    return turbozero.envs.make("2048")


@pytest.fixture(scope="module")
def backgammon():
    return turbozero.envs.make("backgammon")


def test_a_2048_record_says_where_each_new_tile_fell(play2048):
    r = play_match(
        play2048, random_agent(play2048), None, jax.random.PRNGKey(4), num_games=1, max_steps=12
    )
    page = records_page(play2048, {"self": r}, 1, "2048")
    moves = re.findall(r"<li>[^<]*</li>", page)
    assert len(moves) == int(r.lengths[0]) == 12
    states = replay_game(play2048, r, 0)
    for t, move in enumerate(moves):  # "left, then a 2 at c1": the tile the next board shows
        m = re.fullmatch(
            r"<li>random: (left|up|right|down), then a ([24]) at ([a-d])([1-4])</li>", move
        )
        assert m, move
        cell = 4 * (int(m.group(4)) - 1) + "abcd".index(m.group(3))
        exponent = int(np.asarray(states[t + 1]._board)[cell])
        assert 2**exponent == int(m.group(2))


def test_a_long_game_is_sent_compressed_with_every_board(play2048, monkeypatch):
    """A whole random 2048 game (133 moves): its drawings exceed `FRAMES_INLINE_BYTES`, and the
    page that packs them is over 20 times smaller than the page that does not."""
    r = play_match(
        play2048, random_agent(play2048), None, jax.random.PRNGKey(4), num_games=1, max_steps=400
    )
    assert int(r.lengths[0]) == 133
    packed = records_page(play2048, {"self": r}, 1, "2048")
    monkeypatch.setattr(records, "FRAMES_INLINE_BYTES", 10**9)
    inline = records_page(play2048, {"self": r}, 1, "2048")
    assert packed_frames(inline) is None and inline.count("<svg") == 134
    frames = packed_frames(packed)
    assert frames is not None and "<svg" not in packed.split("<script>")[0]
    figures = r"<figure><figcaption>(.*?)</figcaption><div class='frame'>(.*?)</div>"
    expected = re.findall(figures, inline.split("<script>")[0])  # (not the script's template)
    assert [tuple(f) for f in frames] == expected  # the same captions and boards
    assert len(packed) * 20 < len(inline)  # consecutive boards compress well (26x)


def test_a_backgammon_record_numbers_the_points_from_agent_a_side_and_names_its_colour(
    backgammon,
):
    r = play_match(
        backgammon,
        random_agent(backgammon),
        random_agent(backgammon),
        jax.random.PRNGKey(2),
        num_games=2,
        max_steps=8,
    )
    page = records_page(backgammon, {"random": r}, 2, "backgammon")
    sections = page.split("<section class='game'>")[1:]
    assert len(sections) == 2
    for section, g in zip(sections, pick_games(r, 2), strict=True):
        start = replay_game(backgammon, r, g)[0]
        mover_black = int(start._turn) == 0
        a_moves = int(start.current_player) == int(r.player_a[g])
        colour = "black" if mover_black == a_moves else "white"
        side = "first" if bool(r.a_first[g]) else "second"
        assert f"random ({side}, {colour}) vs random" in section
        first_board = section[section.index("<svg") : section.index("</svg>")]
        numbers = re.findall(r"<text x='([\d.]+)' y='([\d.]+)'[^>]*>(\d+)</text>", first_board)
        assert len(numbers) == 24
        expected = point_numbers(black=colour == "black")
        assert [[n, float(x), float(y)] for x, y, n in numbers] == expected
    assert re.search(r"\(die [1-6]\), then rolled [1-6]-[1-6]</li>", page)  # the dice that fell
