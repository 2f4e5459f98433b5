"""`turbozero eval`'s text: a one-line verdict first, then the figures with what each counts."""

from __future__ import annotations

import pytest

from turbozero.arena.evaluation import NOTES, eval_lines, verdict

MATCH = {
    "run": "runs/bg",
    "agent": "td:backgammon:best@40",
    "env": "backgammon",
    "vs": "gnubg:0",
    "games": 1000,
    "opening_moves": 2,
    "wins": 560,
    "draws": 0,
    "losses": 440,
    "score": 0.56,
    "score_ci95": [0.529, 0.591],
    "illegal_moves": 0,
    "agent_illegal_moves": 0,
    "mean_length": 210.4,
}


@pytest.mark.parametrize(
    "interval, says",
    [([0.529, 0.591], "ahead of"), ([0.47, 0.53], "level with"), ([0.40, 0.46], "behind")],
)
def test_a_match_verdict_says_where_the_interval_lies(interval, says):
    line = verdict({**MATCH, "score_ci95": interval})
    assert line.startswith(f"{says} gnubg:0: score 0.560 [")
    assert line.endswith("over 1000 games (W/D/L 560/0/440)")


def test_the_verdict_comes_first_and_unclear_figures_say_what_they_count():
    lines = list(eval_lines(MATCH))
    assert lines[0] == verdict(MATCH)
    by_name = {line.split(":", 1)[0].strip(): line for line in lines[1:]}
    for name in ("opening_moves", "mean_length", "illegal_moves", "agent_illegal_moves"):
        assert by_name[name].endswith(f"({NOTES[name]})"), by_name[name]
    assert by_name["wins"].endswith(": 560")  # (a plain count stays plain)


def test_one_player_and_judged_results_have_their_verdicts():
    solo = {"run": "r", "env": "2048", "games": 100, "mean_return": 5123.25, "mean_length": 400}
    assert verdict(solo) == "mean return 5,123 over 100 games"
    solo.update(mean_return=12.5, median_return=33874.0)
    assert verdict(solo) == "mean return 12.5 (median 33,874) over 100 games"
    solved = {"positions": 4520, "accuracy_result": 0.9996, "accuracy_best": 0.72}
    assert verdict(solved).startswith("keeps the game's value in 99.96% of 4,520 positions")
    judged = {"positions": 500, "error_rate": 119.17}
    assert verdict(judged) == (
        "error rate 119.2 millipoints a move over 500 positions (lower is better)"
    )
    assert "millipoints" in next(line for line in eval_lines(judged) if "error_rate" in line)
    assert verdict({"run": "r"}) is None
