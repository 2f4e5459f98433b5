"""A whole (tiny) run: files in the run directory, exact resume, no silent overwrite."""

from __future__ import annotations

import jax
import numpy as np
import pytest

from tests.alphazero.test_selfplay_and_trainer import TINY
from tests.conftest import drawing_plots
from turbozero.alphazero import train
from turbozero.io.checkpoint import Checkpointer
from turbozero.io.rundir import RunDir

CFG = TINY.with_overrides(
    [
        "eval_every=1",
        "eval_opponents=random,best",
        "elo_pool_size=2",
        "elo_games_per_opponent=4",
        "eval_accuracy=true",
        "ema_decay=0.9",  # (the weights' moving average plays: resumed and loaded as well)
    ]
)


def _params(run):
    ck = Checkpointer(RunDir(run).checkpoints)
    meta = ck.restore_meta()
    from turbozero.alphazero import make_alphazero

    az = make_alphazero(CFG)
    state = az.init(jax.random.PRNGKey(0))
    pool = [state.params for _ in meta["pool_names"]]
    restored, _ = ck.restore({"train": state, "best": state.params, "pool": pool})
    ck.close()
    return {"params": restored["train"].params, "ema": restored["train"].ema}, meta


@pytest.fixture(scope="module")
def full_run(tmp_path_factory):
    run = tmp_path_factory.mktemp("runs") / "full"
    with drawing_plots():
        summary = train(CFG, run, preset="test", progress=False)
    return run, summary


def test_run_directory_holds_config_metrics_summary_plots_checkpoints(full_run):
    run, summary = full_run
    rd = RunDir(run)
    assert rd.is_run()
    rows = rd.read_metrics()
    assert [r["epoch"] for r in rows] == [1, 2]
    assert [r["env_steps"] for r in rows] == [72, 144]  # 8 games x 9 moves per epoch
    # self-play and training are compiled before the first epoch's clock starts (its throughput
    # is comparable with the rest); the time is reported apart
    assert rows[0]["compile_seconds"] > 0 and "compile_seconds" not in rows[1]
    for r in rows:
        assert {"epoch", "env_steps", "wall_seconds"} <= set(r)
        # where an epoch's time goes: self-play, gradient steps, evaluation
        assert {"selfplay_seconds", "train_seconds", "eval_seconds"} <= set(r)
        parts = r["selfplay_seconds"] + r["train_seconds"] + r["eval_seconds"]
        assert 0 < parts <= r["wall_seconds"]  # (the run's wall-clock so far)
    for k in ("preset", "env", "epochs", "env_steps", "wall_seconds", "final_metrics", "eval"):
        assert k in summary
    assert "eval/random/win" in summary["eval"]
    assert "elo" in rows[1] and "eval/best/score" in rows[1]
    assert list(rd.games.glob("latest.html"))
    assert (rd.plots / "losses.png").exists() and (rd.plots / "strength.png").exists()
    assert not (rd.plots / "evaluation.png").exists()  # strength.png holds the evaluation
    for r in rows:  # move accuracy over tic-tac-toe's 4,520 positions at every evaluation
        assert 0.0 <= r["eval/accuracy/result"] <= 1.0
        assert r["eval/accuracy/best"] == r["eval/accuracy/result"]  # win/draw/loss labels
    assert (rd.path / "best").exists()
    assert summary["epochs"] == 2


def test_existing_run_directory_is_never_overwritten(systems, full_run):
    run, _ = full_run
    with pytest.raises(FileExistsError, match="resume"):
        train(CFG, run, progress=False, systems=systems)


def test_stop_and_resume_gives_the_same_parameters_as_an_uninterrupted_run(
    systems, full_run, tmp_path
):
    run, _ = full_run
    split = tmp_path / "split"
    train(CFG, split, progress=False, num_epochs=1, systems=systems)
    train(CFG, split, progress=False, resume=True, systems=systems)
    a, meta_a = _params(run)
    b, meta_b = _params(split)
    assert meta_a["epoch"] == meta_b["epoch"] == 2
    jax.tree_util.tree_map(np.testing.assert_array_equal, a, b)
    assert [r["epoch"] for r in RunDir(split).read_metrics()] == [1, 2]


def test_the_latest_agent_of_a_run_with_a_moving_average_plays_the_average(full_run):
    import turbozero

    run, _ = full_run
    saved, _ = _params(run)
    agent = turbozero.load_agent(run, which="latest").agent
    jax.tree_util.tree_map(np.testing.assert_array_equal, agent.params, saved["ema"])
    ema, trained = (jax.tree_util.tree_leaves(saved[k]) for k in ("ema", "params"))
    assert any(np.any(a != b) for a, b in zip(ema, trained, strict=True))


def test_the_trained_weights_of_a_run_with_a_moving_average_load_from_a_training_checkpoint(
    full_run,
):
    """`weights="trained"` loads what the gradient steps produced (the average's paired
    comparison); the best network is saved alone, so asking it for them is refused."""
    import turbozero

    run, _ = full_run
    saved, _ = _params(run)
    agent = turbozero.load_agent(run, which="latest", weights="trained").agent
    jax.tree_util.tree_map(np.testing.assert_array_equal, agent.params, saved["params"])
    with pytest.raises(ValueError, match="weights='trained' reads a training checkpoint"):
        turbozero.load_agent(run, weights="trained")
    with pytest.raises(ValueError, match="weights must be 'playing' or 'trained', got 'raw'"):
        turbozero.load_agent(run, which="latest", weights="raw")


def test_an_agent_plays_with_the_search_settings_it_is_given_and_keeps_the_runs_others(
    full_run,
):
    """`load_agent(search=...)` changes PUCT's play settings only, each checked as in a
    config; the run's own values, given again, play the same moves as the run's agent."""
    import turbozero
    from turbozero.envs import make

    run, _ = full_run
    own = turbozero.load_agent(run, 4, which="latest")
    other = turbozero.load_agent(run, 4, which="latest", search={"c_puct": 3.0, "fpu": "node"})
    changed = {"c_puct": 3.0, "fpu": "node"}
    assert {k: getattr(other.config.search, k) for k in changed} == changed
    run_search = own.config.search.to_dict()
    assert {k: v for k, v in other.config.search.to_dict().items() if k not in changed} == {
        k: v for k, v in run_search.items() if k not in changed
    }
    same = turbozero.load_agent(run, 4, which="latest", search={"c_puct": own.config.search.c_puct})
    env = make("tic_tac_toe")
    states = jax.vmap(lambda k: env.init(k)[0])(jax.random.split(jax.random.PRNGKey(1), 8))
    key = jax.random.PRNGKey(2)
    np.testing.assert_array_equal(same.act(states, key), own.act(states, key))
    with pytest.raises(ValueError, match="num_simulations cannot change at play"):
        turbozero.load_agent(run, which="latest", search={"num_simulations": 8})
    with pytest.raises(ValueError, match=r"search\.c_puct"):
        turbozero.load_agent(run, which="latest", search={"c_puct": -1.0})


def test_eval_accuracy_plays_with_the_weights_and_search_settings_asked(full_run, capsys):
    """`turbozero eval --accuracy --weights trained --set search.c_puct=2`: the report names
    the weights and the search it played with; a setting that cannot change at play, or a
    value of the wrong type, is refused in one line."""
    import json

    from turbozero.cli import main

    run, _ = full_run
    argv = ["eval", str(run), "--accuracy", "--json", "--which", "latest", "--simulations", "4"]
    assert main([*argv, "--weights", "trained", "--set", "search.c_puct=2"]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["weights"] == "trained" and out["search"]["c_puct"] == 2.0
    assert out["positions"] == 4520 and 0.0 <= out["accuracy_result"] <= 1.0
    assert main([*argv, "--set", "search.max_nodes=8"]) == 2
    assert "the search's play settings only" in capsys.readouterr().err
    assert main([*argv, "--set", "search.c_puct=high"]) == 2
    assert "c_puct" in capsys.readouterr().err


def test_eval_reports_the_random_opening_moves_it_played(full_run, capsys):
    """Evaluation games start with random moves by default (so even the perfect tic-tac-toe
    player can lose them); the report says how many there were."""
    import json

    from turbozero.cli import main

    run, _ = full_run
    assert main(["eval", str(run), "--vs", "random", "--games", "2", "--json"]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["opening_moves"] == 2 and out["wins"] + out["draws"] + out["losses"] == 2
    assert out["truncated"] == 0 and out["agent"].startswith(run.name + "@")
    # games cut at --max-steps are draws by the rules: the report says how many were cut
    assert main(["eval", str(run), "--games", "2", "--max-steps", "1", "--json"]) == 0
    cut = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert cut["truncated"] == 2 and cut["draws"] == 2 and cut["mean_length"] == 1
    # the default opening leaves the agent a move; one asked for that leaves none is refused
    assert cut["opening_moves"] == 0
    assert main(["eval", str(run), "--opening-moves", "3", "--max-steps", "3"]) == 2
    assert "--opening-moves (3) must be below --max-steps (3)" in capsys.readouterr().err
    assert main(["eval", str(run), "--seed", "99999999999999999999999"]) == 2
    assert "--seed must be in [-2147483648, 4294967295]" in capsys.readouterr().err
    # counts the compiled match cannot hold: one line each, before anything is built
    for flag, value in (("--opening-moves", "99999999999"), ("--max-steps", "99999999999")):
        assert main(["eval", str(run), flag, value]) == 2
        assert f"{flag} must be in [" in capsys.readouterr().err
    assert main(["eval", str(run), "--games", "99999999999998"]) == 2
    assert "--games must be in [1, 1048576]" in capsys.readouterr().err
    # a path inside the run that does not exist is not the run itself
    assert main(["eval", str(run / "typo")]) == 2
    assert "does not exist" in capsys.readouterr().err
    # a folder of the run that holds no network is not read as the run either
    for inside in ("plots", "checkpoints"):
        assert main(["eval", str(run / inside), "--games", "2"]) == 2
        err = capsys.readouterr().err
        assert "is not a run directory" in err and "(checkpoints/N or best/N)" in err


def test_zero_simulations_are_refused_not_read_as_the_default(full_run, capsys):
    import turbozero
    from turbozero.cli import main

    run, _ = full_run
    with pytest.raises(ValueError, match="num_simulations must be an int >= 1"):
        turbozero.load_agent(run, 0)
    loaded = turbozero.load_agent(run)
    one, _ = loaded.env.init(jax.random.PRNGKey(0))
    with pytest.raises(ValueError, match=r"act takes a batch of 'tic_tac_toe' states"):
        loaded.act(one, jax.random.PRNGKey(1))
    batch = jax.tree_util.tree_map(lambda x: x[None], one)
    assert loaded.act(batch, jax.random.PRNGKey(1)).shape == (1,)
    for flag, value in (("--simulations", "0"), ("--games", "0"), ("--opening-moves", "-1")):
        assert main(["eval", str(run), flag, value]) == 2
        assert f"error: {flag} must be" in capsys.readouterr().err


def test_a_refused_setting_leaves_no_run_directory_behind(systems, tmp_path):
    run = tmp_path / "refused"
    bad = CFG.with_overrides(["search.selector=gumbel", "search.reuse=true"])
    with pytest.raises(ValueError, match="reuse"):
        train(bad, run, progress=False, systems=systems)
    assert not run.exists()
    # so the corrected command runs in the same place (no "already exists")
    good = CFG.with_overrides(["num_epochs=1", "eval_opponents=random", "elo_pool_size=0"])
    assert train(good, run, progress=False, systems=systems)["epochs"] == 1


def test_cli_reports_refused_settings_in_one_error_line(tmp_path, capsys):
    from turbozero.cli import main

    assert main(["config", "tic_tac_toe", "--set", "search=3"]) == 2
    assert "search is a section" in capsys.readouterr().err
    assert main(["config", "tic_tac_toe", "--set", "network=mlp"]) == 2
    assert "network is a section (NetworkConfig), not a value" in capsys.readouterr().err
    assert main(["train", "--set", "num_epochs=3", "--out", str(tmp_path / "x")]) == 2
    assert "give a preset to train" in capsys.readouterr().err
    assert main(["train", "tic_tac_toe", "--resume"]) == 2
    assert "--resume needs --out" in capsys.readouterr().err
    out = tmp_path / "gumbel"
    args = ["--set", "search.selector=gumbel", "--set", "search.reuse=true", "--out", str(out)]
    assert main(["train", "tic_tac_toe", *args]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: reuse=True is not supported") and "Traceback" not in err
    assert not out.exists()


def test_plot_of_a_run_without_metrics_says_so(tmp_path, capsys):
    from turbozero.cli import main

    rd = RunDir(tmp_path / "empty")
    rd.create()
    rd.write_json("config.json", {"algorithm": "alphazero", "config": CFG.to_dict()})
    assert main(["plot", str(rd.path)]) == 2
    assert "has no metrics yet (metrics.jsonl does not exist)" in capsys.readouterr().err
    assert main(["plot", str(tmp_path)]) == 2
    assert "is not a run directory" in capsys.readouterr().err


def test_positions_is_refused_where_it_would_change_nothing(full_run, capsys):
    """`--positions` sizes Connect Four's labelled set: without `--accuracy`, or for
    tic-tac-toe (whose set is all of its positions), it was silently ignored."""
    from turbozero.cli import main

    run, _ = full_run
    assert main(["eval", str(run), "--positions", "0"]) == 2
    assert "add --accuracy" in capsys.readouterr().err
    assert main(["eval", str(run), "--accuracy", "--positions", "0"]) == 2
    assert "--positions must be in [1, 100000], got 0" in capsys.readouterr().err
    assert main(["eval", str(run), "--accuracy", "--positions", "5"]) == 2
    assert "tic_tac_toe's set is all of its positions" in capsys.readouterr().err


def test_plot_takes_a_checkpoint_path_as_eval_and_play_do(full_run, capsys):
    from turbozero.cli import main

    run, _ = full_run
    step = sorted(p for p in RunDir(run).checkpoints.iterdir() if p.name.isdigit())[-1]
    assert main(["plot", str(step)]) == 0
    assert str(RunDir(run).plots / "losses.png") in capsys.readouterr().out


def test_cli_resume_starts_from_the_runs_own_config(full_run, tmp_path, capsys):
    """`train --out RUN --resume` needs neither the preset nor the first command's `--set`s;
    a new `num_epochs` is recorded in the run's config.json; anything else is refused by
    dotted key."""
    import shutil

    from turbozero.cli import main

    run = tmp_path / "copy"
    shutil.copytree(full_run[0], run)
    assert main(["train", "--out", str(run), "--resume", "--set", "num_epochs=3"]) == 0
    assert [r["epoch"] for r in RunDir(run).read_metrics()] == [1, 2, 3]
    assert RunDir(run).read_json("config.json")["config"]["num_epochs"] == 3
    capsys.readouterr()
    assert main(["train", "--out", str(run), "--resume", "--set", "search.c_puct=2"]) == 2
    err = capsys.readouterr().err
    assert "(saved, given): {'search.c_puct': (1.25, 2.0)}" in err and "may change only" in err
    assert main(["train", "connect_four", "--out", str(run), "--resume"]) == 2
    assert "is a run of preset 'test', not 'connect_four'" in capsys.readouterr().err
    # an end below the epochs done is refused, and config.json keeps the end it had
    assert main(["train", "--out", str(run), "--resume", "--set", "num_epochs=2"]) == 2
    assert "num_epochs=2 is below the 3 epochs this run has done" in capsys.readouterr().err
    assert RunDir(run).read_json("config.json")["config"]["num_epochs"] == 3


def test_a_run_directory_that_cannot_be_made_is_one_line_of_error(tmp_path, capsys):
    from turbozero.cli import main

    (tmp_path / "file").write_text("not a folder")
    assert main(["train", "tic_tac_toe", "--out", str(tmp_path / "file" / "run")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: Not a directory") and "Traceback" not in err


def test_an_abort_prints_one_line_not_a_traceback(monkeypatch, capsys, tmp_path):
    """A second Ctrl-C raises KeyboardInterrupt wherever the program is (e.g. inside XLA),
    and a first one before the first epoch: the CLI says what is kept and exits 130, promising
    a checkpoint only where one was written."""
    from turbozero import cli

    def abort(args):
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "cmd_train", abort)
    assert cli.main(["train", "tic_tac_toe"]) == 130
    err = capsys.readouterr().err
    assert "interrupted (a run's last checkpoint is kept" in err and "Traceback" not in err
    run = tmp_path / "run"
    (run / "checkpoints").mkdir(parents=True)
    assert cli.main(["train", "tic_tac_toe", "--out", str(run)]) == 130
    err = capsys.readouterr().err.strip()
    assert err.endswith("before the first checkpoint: --resume starts the run from the beginning")
    (run / "checkpoints" / "2").mkdir()
    assert cli.main(["train", "--out", str(run), "--resume"]) == 130
    assert "interrupted (the last checkpoint is kept" in capsys.readouterr().err
    # the other commands keep nothing: no word of checkpoints there
    monkeypatch.setattr(cli, "cmd_plot", abort)
    assert cli.main(["plot", "anywhere"]) == 130
    err = capsys.readouterr().err
    assert err.strip() == "interrupted"


@pytest.mark.parametrize("num_epochs", [0, -3, 1.5, 3])
def test_train_refuses_a_number_of_epochs_outside_one_to_the_configs_before_writing(
    systems, tmp_path, num_epochs
):
    """`num_epochs` stops a run early; past the config's own end the last evaluation (which
    follows the config) would come mid-run and the real last epoch go unevaluated."""
    message = "must be an int >= 1" if num_epochs != 3 else "stops a run after config.num_epochs=2"
    with pytest.raises(ValueError, match=message):
        train(TINY, tmp_path / "run", progress=False, num_epochs=num_epochs, systems=systems)
    assert not (tmp_path / "run").exists()


def test_a_run_whose_loss_diverges_stops_without_saving_the_diverged_epoch(systems, tmp_path):
    """A learning rate of 1e30 sends the parameters to infinity within the first epoch's two
    training steps: the run raises instead of checkpointing non-numbers (which would push the
    last good checkpoint out) and writes no metric row for that epoch."""
    cfg = TINY.with_overrides(
        ["learning_rate=1e30", "num_epochs=3", "eval_opponents=random", "elo_pool_size=0"]
    )
    with pytest.raises(FloatingPointError, match=r"training diverged in epoch 1: the loss is"):
        train(cfg, tmp_path / "run", progress=False, systems=systems)
    assert Checkpointer(tmp_path / "run" / "checkpoints").all_steps() == []
    assert RunDir(tmp_path / "run").read_metrics() == []


def test_games_never_ending_within_max_episode_steps_are_reported_in_the_log_and_the_eval(
    systems, tmp_path, capsys
):
    """Tic-tac-toe cannot end in 3 moves: every episode is cut and dropped, nothing is ever
    trained on, and evaluation games cut off there count as draws. The run says so in its
    first epoch (the memory advice came only after it filled twice, and named the wrong
    cause), and the epoch line shows the share of evaluation games cut off."""
    import json

    cfg = TINY.with_overrides(["max_episode_steps=3", "eval_opponents=random", "num_epochs=1"])
    train(cfg, tmp_path / "short", progress=False, systems=systems)
    out = capsys.readouterr().out
    assert "no game has ended within max_episode_steps=3" in out and "truncation" in out
    assert "memory_capacity" not in out  # (not the cause)
    assert "(100% cut off at max_episode_steps)" in out
    rows = [json.loads(x) for x in (tmp_path / "short" / "metrics.jsonl").read_text().splitlines()]
    assert rows[-1]["eval/random/truncated"] == 1.0 and rows[-1]["eval/random/draw"] == 1.0


def test_a_batch_the_memory_never_holds_is_reported_and_no_training_is_no_waiting(
    systems, tmp_path, capsys
):
    """Running episodes hold memory slots: 8 games x 9 slots pass the size check for a batch
    of 72, yet fewer positions are ever finished at once. The run says so instead of waiting
    in silence; and an epoch without training steps by choice is not "waiting"."""
    import json

    cfg = TINY.with_overrides(
        ["memory_capacity=9", "train_batch_size=72", "eval_opponents=", "num_epochs=2"]
    )
    train(cfg, tmp_path / "starved", progress=False, systems=systems)
    out = capsys.readouterr().out
    assert "still waiting for 72 finished positions" in out and "memory_capacity=9" in out
    # a run that ends without a step says so plainly, once, with what it would take
    assert out.count("no training step in 2 epochs") == 1
    assert "the network was not trained" in out and "num_epochs" in out
    rows = [
        json.loads(x) for x in (tmp_path / "starved" / "metrics.jsonl").read_text().splitlines()
    ]
    assert all(row.get("waiting_for_positions") for row in rows)

    # no training steps asked for, and fewer finished positions than a batch: not waiting
    idle = TINY.with_overrides(
        ["train_steps_per_epoch=0", "train_batch_size=120", "eval_opponents=", "num_epochs=2"]
    )
    train(idle, tmp_path / "idle", progress=False, systems=systems)
    rows = [json.loads(x) for x in (tmp_path / "idle" / "metrics.jsonl").read_text().splitlines()]
    assert not any(row.get("waiting_for_positions") for row in rows) and len(rows) == 2
    assert "no training step" not in capsys.readouterr().out


@pytest.mark.parametrize(
    ("setting", "module", "extra"),
    [("tensorboard=true", "tensorboardX", "tensorboard"), ("wandb_project=x", "wandb", "wandb")],
)
def test_a_missing_logging_extra_is_one_line_and_leaves_no_run(
    tmp_path, monkeypatch, capsys, setting, module, extra
):
    import sys

    from turbozero.cli import main

    monkeypatch.setitem(sys.modules, module, None)  # not installed
    out = tmp_path / "run"
    assert main(["train", "tic_tac_toe", "--out", str(out), "--set", setting]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"pip install 'turbozero[{extra}]'" in err[0]
    assert not out.exists()


def test_a_resumed_run_may_switch_its_loggers(systems, full_run, tmp_path, monkeypatch):
    import shutil
    import sys
    import types

    scalars = []

    class Writer:  # stands in for tensorboardX's (an optional extra)
        def __init__(self, logdir, purge_step=None):
            pass

        def add_scalar(self, key, value, step):
            scalars.append((key, step))

        def flush(self):
            pass

        def close(self):
            pass

    monkeypatch.setitem(sys.modules, "tensorboardX", types.SimpleNamespace(SummaryWriter=Writer))
    run = tmp_path / "copy"
    shutil.copytree(full_run[0], run)
    config = CFG.with_overrides(["tensorboard=true", "num_epochs=3"])
    summary = train(config, run, resume=True, progress=False, systems=systems)
    assert summary["epochs"] == 3
    assert ("loss", 216) in scalars  # the resumed epoch 3 (72 positions an epoch)


def test_ctrl_c_during_eval_prints_interrupted_and_exits_130(full_run):
    import os
    import signal
    import subprocess
    import sys
    import threading
    import time

    from tests.subprocesses import pythonpath

    run, _ = full_run
    # JAX logs each program it has compiled or read from the cache: the match's is `run`
    env = {**os.environ, "PYTHONPATH": pythonpath(), "JAX_LOG_COMPILES": "1"}
    cmd = [sys.executable, "-m", "turbozero.cli", "eval", str(run), "--games", "2000"]
    cmd += ["--simulations", "200", "--vs", "mcts:200"]
    proc = subprocess.Popen(cmd, env=env, stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    watchdog = threading.Timer(120, proc.kill)  # (should the line never come: fail, not hang)
    watchdog.start()
    for line in proc.stderr:
        if "Finished XLA compilation of jit(run)" in line:
            break
    watchdog.cancel()
    time.sleep(0.5)  # inside the match, which takes minutes
    assert proc.poll() is None, "the match ended before the interrupt"
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130
    assert err.strip().splitlines()[-1] == "interrupted" and "Traceback" not in err


def test_a_run_larger_than_the_machines_memory_is_refused_before_anything_is_written(
    systems, tmp_path, capsys
):
    from turbozero.cli import main
    from turbozero.io.errors import TooLargeError

    out = tmp_path / "run"
    code = main(["train", "tic_tac_toe", "--out", str(out), "--set", "num_games=2000000000"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1
    assert "GiB, more than this machine's" in err[0] and "--skip-memory-check" in err[0]
    assert not out.exists()
    with pytest.raises(TooLargeError):
        train(CFG.with_overrides(["num_games=2000000000"]), out, progress=False, systems=systems)
    # a run that fits starts as before (the check is on by default everywhere else)
    from turbozero.io.resources import check_fits_in_memory

    check_fits_in_memory(1 << 20, "x", memory=1 << 21)
    with pytest.raises(TooLargeError, match=r"about 0\.0 GiB"):
        check_fits_in_memory(1 << 22, "x", memory=1 << 21)


def test_the_memory_check_counts_the_trees_reanalysis_builds_each_epoch(systems, tmp_path):
    """Half a million positions reanalysed with 4,000-node trees need far more than any machine
    here, though the training state alone (the same config without reanalysis) is small."""
    from turbozero.alphazero import make_alphazero
    from turbozero.alphazero.train import reanalysis_tree_bytes
    from turbozero.io.errors import TooLargeError
    from turbozero.search import tree_bytes

    big = ["memory_capacity=8192", "search.max_nodes=4000", "augment=true"]
    cfg = TINY.with_overrides([*big, "reanalyse_positions=524288"])
    az = make_alphazero(cfg)
    trees = reanalysis_tree_bytes(cfg, az)
    assert trees == tree_bytes(az.selfplay.search.env, 524288, 4000) > 1 << 39  # 512 GiB
    assert reanalysis_tree_bytes(TINY.with_overrides(big), az) == 0
    out = tmp_path / "run"
    with pytest.raises(TooLargeError, match="reanalysis trees"):
        train(cfg, out, progress=False, systems=systems)
    assert not out.exists()


def test_training_says_once_when_its_tree_cannot_hold_a_search_and_what_it_compiles(
    systems, tmp_path, capsys
):
    config = TINY.with_overrides(["search.num_simulations=16", "num_epochs=1"])  # 12 nodes
    train(config, tmp_path / "run", progress=False, systems=systems)
    out = capsys.readouterr().out
    assert out.count("warning: search.max_nodes=12 holds fewer nodes than") == 1
    # the minutes of compiling a first run can take are said, with their length
    lines = out.splitlines()
    (at,) = [i for i, line in enumerate(lines) if line.startswith("compiling self-play")]
    assert lines[at + 1].startswith("compiled in ") and lines[at + 2].startswith("Epoch 1/1")


def test_the_resume_help_names_every_setting_a_resumed_run_may_change(capsys):
    from turbozero.alphazero.train import RESUME_MAY_CHANGE as ALPHAZERO
    from turbozero.cli import main
    from turbozero.ppo.train import RESUME_MAY_CHANGE as PPO

    with pytest.raises(SystemExit):
        main(["train", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    resume = text[text.index("--resume continue") :]
    alphazero, ppo = resume[: resume.index("PPO:")], resume[resume.index("PPO:") :]
    assert all(name in alphazero for name in ALPHAZERO), alphazero
    assert all(name in ppo for name in PPO) and "num_epochs" not in ppo, ppo


def test_the_evaluation_plays_its_own_network_as_an_opponent_in_two_player_games(systems, tmp_path):
    run = tmp_path / "run"
    train(
        TINY.with_overrides(["eval_opponents=random,network"]), run, progress=False, systems=systems
    )
    row = RunDir(run).read_metrics()[-1]
    for opponent in ("random", "network"):
        total = sum(row[f"eval/{opponent}/{r}"] for r in ("win", "draw", "loss"))
        assert total == pytest.approx(1.0)


def test_an_evaluation_against_a_fixed_opponent_carries_random_plays_score(systems, tmp_path):
    """The baseline a match is read against: random play's score against the same opponent,
    played once per process from a key of the seed (none against random play itself)."""
    run = tmp_path / "run"
    config = TINY.with_overrides(["eval_opponents=random,mcts:2", "num_epochs=2"])
    train(config, run, progress=False, systems=systems)
    rows = [r for r in RunDir(run).read_metrics() if "eval/mcts:2/win" in r]
    assert len(rows) == 2 and "eval/random/random_score" not in rows[0]
    baseline = {r["eval/mcts:2/random_score"] for r in rows}
    assert len(baseline) == 1 and 0.0 <= baseline.pop() <= 1.0
