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
    # the engines each game plays as opponents (`eval --vs`), from its file's `Engine`s
    from turbozero.gamespec import game_spec

    for name in ("backgammon", "go_9x9"):
        (line,) = [x for x in out.splitlines() if x.startswith(f"  {name} ")]
        forms = ", ".join(e.form for e in game_spec(name).engines.values())
        assert line.endswith(f"  engines: {forms}"), line
    (line,) = [x for x in out.splitlines() if x.startswith("  tic_tac_toe ")]
    assert "engines:" not in line


def test_envs_verbose_marks_a_download_without_trying_it_and_gives_whole_reasons(
    monkeypatch, capsys
):
    from turbozero import cli, envs, reference

    made = []
    reason = "jumanji:Wide-v0 has a MultiDiscreteArray action mask of another size (reward spec)"

    def make(env_id, **kwargs):
        made.append(env_id)
        raise ValueError(reason)

    monkeypatch.setattr(envs, "GAMES", {})
    monkeypatch.setattr(reference, "_presets_by_env", dict)
    monkeypatch.setattr(envs, "make", make)
    monkeypatch.setattr(
        reference,
        "other_environments",
        lambda: {"jumanji": ["jumanji:Sokoban-v0", "jumanji:Wide-v0"]},
    )
    assert cli.main(["envs", "-v"]) == 0
    out = capsys.readouterr().out
    assert made == ["jumanji:Wide-v0"]  # Sokoban is not made: it would download its levels
    assert "jumanji:Sokoban-v0" in out and "needs a download when made" in out
    assert f"(not usable here: {reason})" in out
