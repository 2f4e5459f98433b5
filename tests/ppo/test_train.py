"""`train_ppo` end to end on a tiny CartPole run: the run directory, exact resume, Ctrl-C, no silent
overwrite, and agents loaded back from the checkpoints."""

from __future__ import annotations

import dataclasses
import json
import shutil
import signal

import jax
import numpy as np
import pytest

from tests.conftest import drawing_plots
from turbozero.arena import play_match
from turbozero.io.checkpoint import Checkpointer
from turbozero.io.errors import RunInUseError
from turbozero.io.rundir import RunDir
from turbozero.ppo import PPOConfig, evaluate_run, load_agent, make_ppo, train_ppo
from turbozero.ppo import learner as ppo_learner
from turbozero.ppo import train as ppo_train
from turbozero.ppo.train import abstract_checkpoint

TINY = PPOConfig(
    num_seeds=2,
    num_envs=4,
    rollout_length=8,
    num_updates=6,
    num_updates_per_eval=2,
    epochs=1,
    num_minibatches=2,
    actor_hidden=(16,),
    critic_hidden=(16,),
    normalize_observations=True,
    obs_norm_warmup_steps=2,
    eval_episodes=2,
    eval_max_steps=20,
    absolute_eval_factor=2,
    keep_checkpoints=2,
)
EPOCHS = TINY.num_evals  # 3


def _checkpoint(run):
    ck = Checkpointer(RunDir(run).checkpoints, keep=None)
    try:
        state, meta = ck.restore(abstract_checkpoint(make_ppo(TINY)))
        return state, meta, ck.all_steps()
    finally:
        ck.close()


def _assert_trees_equal(a, b):
    la, lb = jax.tree.leaves(a), jax.tree.leaves(b)
    assert len(la) == len(lb)
    for x, y in zip(la, lb, strict=True):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


def _same_rows(a, b):
    drop = ("wall_seconds", "env_steps_per_s", "compile_seconds", "eval_seconds")
    return [{k: v for k, v in r.items() if k not in drop} for r in a] == [
        {k: v for k, v in r.items() if k not in drop} for r in b
    ]


@pytest.fixture(scope="module")
def full_run(tmp_path_factory):
    run = tmp_path_factory.mktemp("ppo") / "full"
    with drawing_plots():
        summary = train_ppo(TINY, run, preset="tiny", progress=False)
    return run, summary


def test_run_directory_holds_config_metrics_summary_plots_and_checkpoints(full_run):
    run, summary = full_run
    rd = RunDir(run)
    saved = rd.read_json("config.json")
    assert saved["algorithm"] == "ppo" and PPOConfig.from_dict(saved["config"]) == TINY
    rows = rd.read_metrics()
    assert [r["epoch"] for r in rows] == [1, 2, 3]
    # the update is compiled before the first epoch's clock starts; the time is reported apart
    assert rows[0]["compile_seconds"] > 0 and "compile_seconds" not in rows[1]
    assert rows[-1]["env_steps"] == TINY.num_updates * TINY.batch_size
    assert len(rows[-1]["eval/return_per_seed"]) == TINY.num_seeds
    for key in ("preset", "env", "updates", "env_steps", "wall_seconds", "final_metrics", "eval"):
        assert key in summary
    assert rd.read_json("summary.json") == summary
    assert summary["preset"] == "tiny" and summary["updates"] == TINY.num_updates
    assert len(summary["eval"]["absolute_return_per_seed"]) == TINY.num_seeds
    assert (rd.plots / "returns.png").exists() and not (rd.plots / "evaluation.png").exists()
    _, meta, steps = _checkpoint(run)
    assert steps == [2, 3]  # keep_checkpoints=2 rotates the oldest out
    assert meta["format_version"] >= 1 and meta["epoch"] == EPOCHS


def test_checkpoint_holds_the_observation_statistics(full_run):
    run, _ = full_run
    state, _, _ = _checkpoint(run)
    warmup = TINY.num_envs * (TINY.obs_norm_warmup_steps + 1)
    expected = warmup + TINY.num_updates * TINY.batch_size
    np.testing.assert_array_equal(np.asarray(state.learner.obs_stats.count), [expected] * 2)
    assert np.all(np.asarray(state.learner.obs_stats.m2) > 0)
    assert np.all(np.asarray(state.learner.update_step) == TINY.num_updates)


def test_existing_run_directory_is_never_overwritten(full_run):
    run, _ = full_run
    with pytest.raises(FileExistsError, match="resume"):
        train_ppo(TINY, run, progress=False)


def test_a_run_another_training_holds_is_refused(full_run):
    run, _ = full_run
    rows = RunDir(run).metrics_path.read_text()
    with RunDir(run).lock(), pytest.raises(RunInUseError, match="in use"):
        train_ppo(TINY, run, resume=True, progress=False)
    assert RunDir(run).metrics_path.read_text() == rows


def test_resume_refuses_a_different_config(full_run):
    run, _ = full_run
    with pytest.raises(ValueError, match="actor_lr"):
        train_ppo(dataclasses.replace(TINY, actor_lr=1e-3), run, resume=True, progress=False)
    longer = dataclasses.replace(TINY, num_updates=2 * TINY.num_updates)
    with pytest.raises(ValueError, match="learning-rate schedule, so a PPO run's length cannot"):
        train_ppo(longer, run, resume=True, progress=False)


def test_many_processes_are_refused_before_anything_is_written(tmp_path, monkeypatch):
    monkeypatch.setattr(jax, "process_count", lambda: 2)
    with pytest.raises(ValueError, match="PPO training runs in one process"):
        train_ppo(TINY, tmp_path / "two", progress=False)
    assert not (tmp_path / "two").exists()


def test_stop_and_resume_gives_the_same_state_as_an_uninterrupted_run(full_run, tmp_path):
    run, _ = full_run
    split = tmp_path / "split"
    first = train_ppo(TINY, split, num_evals=1, progress=False)
    assert first["epochs"] == 1 and "absolute" not in first["eval"]
    summary = train_ppo(TINY, split, resume=True, progress=False)
    assert summary["epochs"] == EPOCHS
    full_state, _, _ = _checkpoint(run)
    split_state, _, _ = _checkpoint(split)
    _assert_trees_equal(split_state, full_state)  # params, optimisers, stats, envs, keys, best
    assert _same_rows(RunDir(split).read_metrics(), RunDir(run).read_metrics())


def test_resume_goes_back_past_a_damaged_checkpoint_and_ends_as_the_whole_run(full_run, tmp_path):
    run, _ = full_run
    damaged = tmp_path / "damaged"
    shutil.copytree(run, damaged)
    # (the arrays' folder gone; a damaged array file also falls back, but orbax's other reads
    # in flight then report to a closed event loop, which pytest counts as warnings)
    shutil.rmtree(RunDir(damaged).checkpoints / str(EPOCHS) / "state")
    summary = train_ppo(TINY, damaged, resume=True, progress=False)
    assert summary["epochs"] == EPOCHS
    _assert_trees_equal(_checkpoint(damaged)[0], _checkpoint(run)[0])
    assert _same_rows(RunDir(damaged).read_metrics(), RunDir(run).read_metrics())


def test_sigint_finishes_the_epoch_saves_and_returns(full_run, tmp_path, monkeypatch):
    keep_best = ppo_learner.keep_best  # (what a run's evaluation keeps the best with)

    def interrupted(*args):
        signal.raise_signal(signal.SIGINT)  # as if Ctrl-C came during the first epoch
        return keep_best(*args)

    monkeypatch.setattr(ppo_learner, "keep_best", interrupted)
    stopped = tmp_path / "stopped"
    before = signal.getsignal(signal.SIGINT)  # SIG_IGN under nohup, else Python's default
    summary = train_ppo(TINY, stopped, progress=False)
    assert summary["epochs"] == 1
    assert signal.getsignal(signal.SIGINT) is before  # the handler found is restored
    _, meta, steps = _checkpoint(stopped)
    assert steps == [1] and meta["epoch"] == 1
    monkeypatch.setattr(ppo_learner, "keep_best", keep_best)
    train_ppo(TINY, stopped, resume=True, progress=False)
    _assert_trees_equal(_checkpoint(stopped)[0], _checkpoint(full_run[0])[0])


def test_loaded_agent_acts_greedily_with_the_saved_params_and_statistics(full_run):
    run, _ = full_run
    state, _, _ = _checkpoint(run)
    loaded = load_agent(run)
    assert loaded.env.name == TINY.env and loaded.config == TINY and loaded.step == EPOCHS
    assert loaded.seed == int(np.argmax(np.asarray(state.best_return)))
    states, _ = jax.vmap(loaded.env.init)(jax.random.split(jax.random.PRNGKey(0), 5))
    out = jax.jit(loaded.policy)(states, jax.random.PRNGKey(1))
    assert out.action.shape == (5,) and out.weights.shape == (5, loaded.env.num_actions)
    np.testing.assert_allclose(np.asarray(out.weights).sum(-1), 1.0, rtol=1e-5)
    best = jax.tree.map(lambda x: x[loaded.seed], (state.best_params, state.best_obs_stats))
    expected = make_ppo(TINY).act(
        best[0], best[1], jax.vmap(loaded.env.observe)(states), None, greedy=True
    )
    np.testing.assert_array_equal(np.asarray(loaded.act(states, jax.random.PRNGKey(2))), expected)
    latest = load_agent(run, which="latest", seed=1)
    _assert_trees_equal(
        latest.agent.params.params, jax.tree.map(lambda x: x[1], state.learner.params)
    )
    result = play_match(
        loaded.env, loaded.agent, None, jax.random.PRNGKey(3), num_games=4, max_steps=20
    )
    assert result.num_games == 4
    one, _ = loaded.env.init(jax.random.PRNGKey(4))
    with pytest.raises(ValueError, match="policy takes a batch of"):
        loaded.policy(one, jax.random.PRNGKey(5))


def test_the_top_level_loader_takes_a_checkpoint_directory_and_loads_that_step(full_run):
    import turbozero

    run, _ = full_run
    steps = _checkpoint(run)[2]
    assert len(steps) >= 2
    loaded = turbozero.load_agent(RunDir(run).checkpoints / str(steps[0]), which="latest")
    assert loaded.step == steps[0]
    assert turbozero.load_agent(run).step == steps[-1]


def test_alphazero_only_options_are_refused_for_a_ppo_run(full_run, capsys):
    import turbozero
    from turbozero.cli import main

    run, _ = full_run
    with pytest.raises(ValueError, match="num_simulations is not for PPO runs"):
        turbozero.load_agent(run, 8)
    with pytest.raises(ValueError, match="weights is not for PPO runs"):
        turbozero.load_agent(run, weights="trained")
    with pytest.raises(ValueError, match="weights must be 'playing' or 'trained', got 'raw'"):
        turbozero.load_agent(run, weights="raw")
    assert main(["eval", str(run), "--simulations", "8"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --simulations is not for PPO runs")
    assert len(err.splitlines()) == 1  # one line: a refusal of the command, no hint
    assert main(["eval", str(run), "--vs", "perfect", "--games", "2"]) == 2
    assert "--vs is for two-player games" in capsys.readouterr().err
    assert main(["eval", str(run), "--opening-moves", "2", "--games", "2"]) == 2
    assert "--opening-moves is for two-player games" in capsys.readouterr().err


def test_evaluate_run_reports_the_mean_and_std_return(full_run):
    run, _ = full_run
    out = evaluate_run(run, num_episodes=3)
    assert out["episodes"] == 3 and out["env"] == TINY.env
    assert 0 < out["return_mean"] <= TINY.eval_max_steps
    assert 0 <= out["return_std"] <= out["return_mean"]  # returns in (0, eval_max_steps]
    with pytest.raises(ValueError, match="which"):
        load_agent(run, which="worst")
    with pytest.raises(ValueError, match="num_episodes"):
        evaluate_run(run, num_episodes=0)


def test_a_nan_evaluation_neither_becomes_nor_erases_a_seeds_best():
    """Seed 0 evaluates 5, then NaN (diverged), then 9: its best is 5, then still 5 (not NaN,
    which no later return would beat), then 9 with the parameters of that evaluation."""
    ppo = make_ppo(dataclasses.replace(TINY, num_seeds=2))
    ckpt = ppo_train.initial_checkpoint(ppo)

    def with_params(c, value):
        params = jax.tree.map(lambda x: x * 0 + value, c.learner.params)
        return c._replace(learner=c.learner.replace(params=params))

    for value, returns in ((1.0, [5.0, 5.0]), (2.0, [float("nan"), 4.0]), (3.0, [9.0, 9.0])):
        ckpt = ppo_learner.keep_best(with_params(ckpt, value), jax.numpy.array(returns))
        if value == 2.0:  # seed 0 keeps its best of the first evaluation, parameters too
            assert np.asarray(ckpt.best_return).tolist() == [5.0, 5.0]
            leaf = np.asarray(jax.tree.leaves(ckpt.best_params)[0])
            assert np.all(leaf[0] == 1.0) and np.all(leaf[1] == 1.0)
    assert np.asarray(ckpt.best_return).tolist() == [9.0, 9.0]
    leaf = np.asarray(jax.tree.leaves(ckpt.best_params)[0])
    assert np.all(leaf[0] == 3.0) and np.all(leaf[1] == 3.0)


def test_turbozero_eval_plays_a_continuous_action_run(tmp_path, capsys):
    from turbozero.cli import main

    cfg = dataclasses.replace(
        TINY, env="gymnax:Pendulum-v1", num_seeds=1, num_updates=2, normalize_observations=False
    )
    run = tmp_path / "pendulum"
    train_ppo(cfg, run, progress=False)
    capsys.readouterr()
    assert main(["eval", str(run), "--games", "3", "--max-steps", "7", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["env"] == "gymnax:Pendulum-v1" and out["games"] == 3
    assert -16.3 * 7 <= out["mean_return"] < 0  # Pendulum's reward per step is in [-16.3, 0]
    # read by a person: every game cut by --max-steps, said to be the time limit's doing
    assert main(["eval", str(run), "--games", "3", "--max-steps", "7"]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if "truncated:" in x)
    assert line.split(":", 1)[1].startswith(" 3 of 3 (ended by the time limit, not by the game")


def test_a_ppo_run_larger_than_the_machines_memory_is_refused_before_anything_is_written(
    tmp_path, capsys
):
    from turbozero.cli import main

    out = tmp_path / "run"
    code = main(["train", "ppo_cartpole", "--out", str(out), "--set", "num_envs=1000000000"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "more than this machine's" in err[0], err
    assert not out.exists()


def test_ppo_runs_log_to_tensorboard_and_wandb_and_may_switch_them_on_at_resume(
    tmp_path, monkeypatch
):
    import sys
    import types

    scalars, inits = [], []

    class Writer:
        def __init__(self, logdir, purge_step=None):
            pass

        def add_scalar(self, name, value, step):
            scalars.append((name, step))

        def flush(self):
            pass

        def close(self):
            pass

    run_stub = types.SimpleNamespace(log=lambda d, step: None, finish=lambda: None)
    monkeypatch.setitem(sys.modules, "tensorboardX", types.SimpleNamespace(SummaryWriter=Writer))
    monkeypatch.setitem(
        sys.modules, "wandb", types.SimpleNamespace(init=lambda **kw: inits.append(kw) or run_stub)
    )
    cfg = dataclasses.replace(TINY, num_updates=4)
    run = tmp_path / "run"
    train_ppo(cfg, run, progress=False, num_evals=1)
    assert scalars == [] and inits == []
    on = dataclasses.replace(cfg, tensorboard=True, wandb_project="proj")
    train_ppo(on, run, resume=True, progress=False)  # where it logs may change on resume
    steps = 2 * TINY.num_updates_per_eval * TINY.batch_size  # the resumed second epoch
    assert ("eval/return", steps) in scalars and inits[0]["project"] == "proj"
    assert json.loads((run / "config.json").read_text())["config"]["tensorboard"] is True
    with pytest.raises(ValueError, match="num_updates"):
        train_ppo(dataclasses.replace(on, num_updates=6), run, resume=True, progress=False)
