"""`turbozero envs`: every environment a preset or `envs.make` accepts is listed."""

from __future__ import annotations

from turbozero.cli import main


def test_envs_lists_pgx_games_and_the_gymnax_and_jumanji_ids_presets_use(capsys):
    assert main(["envs"]) == 0
    out = capsys.readouterr().out
    assert "  tic_tac_toe " in out
    assert "  gymnax:CartPole-v1  preset: ppo_cartpole" in out
    assert "  gymnax:Pendulum-v1  preset: ppo_pendulum" in out
    assert "jumanji environments" in out and "  jumanji:Game2048-v1" in out
