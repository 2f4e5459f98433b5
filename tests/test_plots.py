"""The strength figure: move accuracy, scores per opponent and Elo over time, in one PNG."""

from __future__ import annotations

from turbozero.io.plots import accuracy_limits, plot_run, strength_series


def _rows():
    return [
        {
            "epoch": e,
            "env_steps": 100 * e,
            "wall_seconds": 30.0 * e,
            "positions_per_s": 1000.0,
            "loss": 1.0 / e,
            "eval/accuracy/result": 0.8 + 0.05 * e,
            "eval/accuracy/best": 0.5 + 0.05 * e,
            "eval/random/win": 0.75,
            "eval/random/draw": 0.25,
            "eval/random/loss": 0.0,
            "eval/perfect/win": 0.0,
            "eval/perfect/draw": 0.5,
            "eval/perfect/loss": 0.5,
            "elo": 100.0 * e,
        }
        for e in (1, 2, 3)
    ]


def test_strength_panels_hold_accuracy_scores_per_opponent_and_elo():
    panels = strength_series(_rows())
    assert list(panels) == ["move accuracy vs solver", "score (win + draw/2)", "Elo (random = 0)"]
    assert panels["score (win + draw/2)"] == {
        "vs perfect": "score:perfect",
        "vs random": "score:random",
    }


def test_the_score_panel_draws_random_plays_score_beside_the_agents(tmp_path):
    rows = [{**row, "eval/perfect/random_score": 0.04} for row in _rows()]
    score = strength_series(rows)["score (win + draw/2)"]
    assert score["random play vs perfect"] == "eval/perfect/random_score"
    assert "random play vs random" not in score  # (only where a row has it)
    assert any(p.name == "strength.png" for p in plot_run(rows, tmp_path))


def test_a_one_player_run_plots_the_searched_return_beside_the_network_alone():
    rows = [
        {"epoch": e, "env_steps": e, "wall_seconds": e, "eval/return": 9.0 * e}
        | {"eval/network/return": 4.0 * e}
        for e in (1, 2)
    ]
    panels = strength_series(rows)
    assert panels == {
        "mean return": {"searched": "eval/return", "network alone": "eval/network/return"}
    }


def test_the_accuracy_axis_zooms_to_the_runs_range_up_to_perfect_play():
    assert accuracy_limits([0.953, 0.97, 0.98]) == (0.9, 1.005)
    assert accuracy_limits([0.962, 0.98]) == (0.95, 1.005)
    assert accuracy_limits([0.3, 0.9]) == (0.25, 1.005)
    assert accuracy_limits([0.004]) == (0.0, 1.005)
    assert accuracy_limits([]) == (0.0, 1.005)


def test_the_run_plots_are_one_strength_figure_beside_losses_and_throughput(tmp_path):
    written = {p.name for p in plot_run(_rows(), tmp_path)}
    assert written == {"strength.png", "losses.png", "throughput.png"}
    assert (tmp_path / "strength.png").stat().st_size > 10_000


def test_a_run_without_evaluations_draws_no_strength_figure(tmp_path):
    rows = [{"epoch": 1, "env_steps": 10, "wall_seconds": 1.0, "positions_per_s": 5.0}]
    assert {p.name for p in plot_run(rows, tmp_path)} == {"throughput.png"}


def test_an_on_policy_run_draws_its_returns_in_one_figure_not_a_panel_per_statistic(tmp_path):
    from turbozero.io.plots import plot_returns

    rows = [
        {
            "epoch": e,
            "env_steps": 1000 * e,
            "wall_seconds": float(e),
            "env_steps_per_s": 5e4,
            "actor_loss": 0.1,
            "episode_return": 20.0 * e if e > 1 else float("nan"),  # no episode ended yet
            "eval/return": 30.0 * e,
            "eval/return_std": 5.0,
            "eval/return_min": 30.0 * e - 4,
            "eval/return_max": 30.0 * e + 9,
            "eval/length_mean": 30.0 * e,
            "eval/return_per_seed": [30.0 * e - 1, 30.0 * e + 1],
        }
        for e in (1, 2, 3)
    ]
    written = {p.name for p in plot_run(rows, tmp_path)}
    assert written == {"returns.png", "losses.png", "throughput.png"}
    assert (tmp_path / "returns.png").stat().st_size > 10_000
    assert not plot_returns([{"epoch": 1, "env_steps": 1, "loss": 1.0}], tmp_path / "none.png")
