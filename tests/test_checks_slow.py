"""Slow checks for `make check`: every game's conformance, learning to a skill level, the
tutorial at full size, two processes joined by jax.distributed."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests.subprocesses import pythonpath
from turbozero import envs

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow


@pytest.mark.parametrize("game", sorted(envs.GAMES))
def test_conformance_check_passes_on_every_advertised_game(game):
    envs.check(envs.make(game), batch_size=2, num_steps=16)


def _turbozero(*args: str, timeout: int) -> str:
    return _run(ROOT / ".venv" / "bin" / "turbozero", *args, timeout=timeout)


def _bench(script: str, *args: str, timeout: int = 1200) -> str:
    """`bench/SCRIPT` run with this checkout's Python; its standard output."""
    return _run(ROOT / ".venv" / "bin" / "python", ROOT / "bench" / script, *args, timeout=timeout)


def _run(*command: object, timeout: int) -> str:
    proc = subprocess.run(
        [str(c) for c in command], capture_output=True, text=True, timeout=timeout, cwd=ROOT
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


def test_tic_tac_toe_preset_reaches_perfect_play_within_10_minutes(tmp_path):
    """`make train`'s preset: never loses to the perfect player, and plays a move that keeps
    the game's value in all 4,520 reachable positions (`bench/learning.py` times it)."""
    run = tmp_path / "ttt"
    # the 10 minutes are the subprocess's timeout (a budget, not a speed claim: the measured
    # time is in docs/benchmarks.md, "Learning")
    _turbozero("train", "tic_tac_toe", "--out", str(run), timeout=600)
    out = json.loads(
        _turbozero(
            "eval",
            str(run),
            "--vs",
            "perfect",
            "--games",
            "200",
            "--opening-moves",
            "0",
            "--json",
            timeout=600,
        )
    )
    assert out["losses"] == 0, out  # never loses, from either side
    assert out["as_first"][2] == 0 and out["as_second"][2] == 0
    own = json.loads(
        _turbozero(
            "eval",
            str(run),
            "--vs",
            str(run),
            "--games",
            "2",
            "--opening-moves",
            "0",
            "--json",
            timeout=600,
        )
    )
    assert own["draws"] == 2, own  # draws against itself
    accuracy = json.loads(_turbozero("eval", str(run), "--accuracy", "--json", timeout=600))
    # a value-keeping move in every reachable position, at the preset's own simulation count
    assert accuracy["positions"] == 4520 and accuracy["accuracy_result"] == 1.0, accuracy
    assert all(r["result"] == 1.0 for r in accuracy["by_result"].values()), accuracy


def test_the_readme_tour_leaves_the_agent_it_promises(tmp_path):
    """The README's tour, its trainings and evaluations as written: no loss to the perfect
    player and a value-keeping move in all 4,520 positions, as the README says."""
    from tests.test_docs import _tour

    run = str(tmp_path / "runs" / "ttt")
    outputs = []
    for line in _tour().splitlines():
        command = line.split("#")[0].split()
        if (
            command[:2]
            in (
                [".venv/bin/turbozero", "train"],
                [".venv/bin/turbozero", "eval"],
            )
            and "--list" not in command
        ):
            args = [run if a == "runs/ttt" else a for a in command[1:]]
            outputs.append(_turbozero(*args, timeout=600))
    versus, accuracy = (json.loads(o) for o in outputs[-2:])
    assert versus["losses"] == 0, versus
    assert accuracy["positions"] == 4520 and accuracy["accuracy_result"] == 1.0, accuracy


def test_bench_learning_shows_the_tic_tac_toe_preset_perfect_beside_its_baseline():
    """`bench/learning.py`'s default (what `make bench` runs): both recipes, 60 s each; the
    preset makes no value-losing move in 4,520 positions, the baseline recipe does."""
    proc = subprocess.run(
        [str(ROOT / ".venv" / "bin" / "python"), str(ROOT / "bench" / "learning.py")],
        capture_output=True,
        text=True,
        timeout=1200,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith('{"recipe')]
    by_recipe = {r["recipe"]: r for r in rows}
    assert set(by_recipe) == {"candidate", "baseline"}, rows
    assert by_recipe["candidate"]["accuracy_result"] == 1.0, by_recipe["candidate"]
    assert by_recipe["candidate"]["seconds"] <= 60.0 + 15.0  # the budget (checked per epoch)
    assert by_recipe["baseline"]["mistakes"] > 0, by_recipe["baseline"]


def test_bench_chance_measures_a_2048_run_with_its_widening_ablation(tmp_path):
    """`bench/chance.py` as its docstring says, on a short 2048 run (20 s, 8 games in
    parallel): one row with the four agents, the `--widening` agent and their differences
    from the sampled search, and the run kept under `--keep`."""
    out = _bench(
        "chance.py",
        *("--game", "2048", "--budget", "20", "--games", "4", "--simulations", "4"),
        *("--widening", "0.5", "--set", "num_games=8", "--keep", str(tmp_path)),
    )
    rows = [json.loads(line) for line in out.splitlines() if '"game": "2048"' in line]
    assert len(rows) == 1, out
    row = rows[0]
    for agent in ("nodes", "nodes_w0.5", "sampled", "network", "random"):
        assert row[agent]["score_low"] <= row[agent]["score"] <= row[agent]["score_high"], row
    for agent in ("nodes", "nodes_w0.5"):
        low, high = row[f"{agent}_minus_sampled_low"], row[f"{agent}_minus_sampled_high"]
        assert low <= row[f"{agent}_minus_sampled"] <= high, row
    assert row["simulations"] == 4 and row["widening"] == 1.0 and row["epochs"] >= 1, row
    assert (tmp_path / "20480" / "config.json").exists()


def test_bench_engines_plays_a_backgammon_td_run_at_both_depths(tmp_path):
    """`bench/engines.py --run` on a few-step TD run, as its docstring says: a row per engine
    and a quality row at each of `--depths`, the search's agent named by its depth."""
    run = tmp_path / "bg"
    settings = ("num_epochs=1", "steps_per_epoch=2", "num_games=4", "eval_games=2")
    _turbozero(
        "train", "backgammon", "--out", str(run), *(a for s in settings for a in ("--set", s)),
        *("--set", "eval_accuracy_positions=4"), timeout=600,
    )  # fmt: skip
    out = _bench(
        "engines.py", "--run", str(run), "--run-games", "2", "--positions", "4", "--no-ladder",
        *("--depths", "0", "1"),
    )  # fmt: skip
    rows = [json.loads(line) for line in out.splitlines() if '"depth"' in line]
    assert [(r["depth"], r.get("b", "quality")) for r in rows] == [
        (d, b) for d in (0, 1) for b in ("gnubg:0", "pubeval", "quality")
    ], out
    for r in rows:
        assert r["a"].endswith(":depth1") == (r["depth"] == 1), r
        if "b" in r:
            assert r["wins"] + r["losses"] == 2 and r["ms_per_move"] > 0, r


def test_bench_afterstates_measures_a_2048_td_run_at_both_depths(tmp_path):
    """`bench/afterstates.py` as its docstring says, on a 20-second run: the random policy's
    row, then the TD agent's at 1 ply and with the expectimax, each with its intervals."""
    out = _bench(
        "afterstates.py",
        *("--budget", "20", "--games", "8", "--deep-games", "2", "--set", "eval_games=8"),
        *("--set", "eval_every=1", "--keep", str(tmp_path / "run")),
    )
    rows = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    assert [r["agent"] for r in rows] == ["random", "td depth 0", "td depth 1"], out
    for r in rows:
        assert r["score_low"] <= r["score"] <= r["score_high"] and r["ms_per_move"] > 0, r
        low, high = r["reached_2048_ci95"]
        assert low <= r["reached_2048"] <= high, r
    assert rows[1]["vs_random"] > 1 and rows[1]["minutes"] <= 1.0, rows[1]


def test_connect_four_preset_beats_random_and_rollout_mcts_after_30_minutes(tmp_path):
    run = tmp_path / "c4"
    _turbozero("train", "connect_four", "--out", str(run), timeout=2400)
    vs_random = json.loads(
        _turbozero(
            "eval",
            str(run),
            "--vs",
            "random",
            "--games",
            "200",
            "--simulations",
            "64",
            "--json",
            timeout=1200,
        )
    )
    vs_mcts = json.loads(
        _turbozero(
            "eval",
            str(run),
            "--vs",
            "mcts:200",
            "--games",
            "100",
            "--simulations",
            "64",
            "--json",
            timeout=3600,
        )
    )
    assert vs_random["wins"] / vs_random["games"] >= 0.95, vs_random
    assert vs_mcts["score"] >= 0.70, vs_mcts
    # the solver's measure at the preset's own play search (512 simulations), on the 1,000
    # positions a run evaluates on: its seeds 0, 6 and 4 ended at 98.6%, 98.4% and 97.7% on a
    # 2-core CPU (98.1-98.2% on 10,000; docs/benchmarks.md); the target is 98% (judged
    # by bench/learning.py), and the bar leaves room for a slower machine's fewer epochs
    accuracy = json.loads(_turbozero("eval", str(run), "--accuracy", "--json", timeout=600))
    assert accuracy["positions"] == 1000 and accuracy["accuracy_result"] >= 0.97, accuracy


@pytest.mark.parametrize("preset", ["minesweeper", "maze"])
def test_jumanji_puzzle_preset_searched_agent_doubles_the_random_return(preset):
    """`bench/puzzles.py` at the preset's own budget: the searched agent's mean return is at
    least twice the random policy's over 256 games. The network alone is reported beside it
    (on Minesweeper the search sees the mines; docs/benchmarks.md, "AlphaZero on jumanji
    puzzles")."""
    proc = subprocess.run(
        [
            str(ROOT / ".venv" / "bin" / "python"),
            str(ROOT / "bench" / "puzzles.py"),
            "--preset",
            preset,
            "--games",
            "256",
        ],
        capture_output=True,
        text=True,
        timeout=1800,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    (row,) = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith('{"preset')]
    assert row["searched"] >= 2 * row["random"] > 0, row


def test_tutorial_runs_at_the_tutorial_sizes(tmp_path):
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "examples" / "tutorial_othello.py"),
            "--out",
            str(tmp_path / "run"),
        ],
        capture_output=True,
        text=True,
        timeout=3600,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = [line for line in proc.stdout.splitlines() if line.startswith("Epoch ")]
    assert len(lines) == 10 and all("elo=" in line for line in lines[1:])


TWO_HOSTS = textwrap.dedent(
    """
    import json, sys
    import turbozero
    turbozero.configure()  # joins the processes named by the TURBOZERO_* variables
    import jax
    import numpy as np
    from tests.alphazero.test_selfplay_and_trainer import TINY
    from turbozero.alphazero import make_alphazero
    from turbozero.alphazero.sharding import Sharder
    cfg = TINY
    az = make_alphazero(cfg)
    sh = Sharder(cfg)
    shape = jax.eval_shape(az.init, jax.random.PRNGKey(0))
    state = sh.jit_init(az.init)(jax.random.PRNGKey(0))
    state, _ = sh.jit_step(az.collect, shape)(state, 9)
    state, m = sh.jit_step(az.train_steps, shape)(state, 2)
    leaves = [np.asarray(x.addressable_data(0)) for x in jax.tree_util.tree_leaves(state.params)]
    # decisions (stop, out of time) are process 0's on every process
    from turbozero.alphazero.train import agree, train
    pid = jax.process_index()
    agreed = [agree(pid == 1), agree(pid == 0)]
    # a whole run: both processes train, only process 0 writes the metrics and summary
    cfg = TINY.with_overrides(["eval_opponents=random,best", "elo_pool_size=2",
                               "elo_games_per_opponent=2"])
    summary = train(cfg, sys.argv[1], progress=False)
    # a crash after epoch 2 saved a best network and before its training checkpoint landed;
    # both processes resume: epoch 2 is redone from epoch 1's checkpoint, the stray best/2 goes
    import pathlib, shutil
    from jax.experimental import multihost_utils
    run = pathlib.Path(sys.argv[1])
    def rows():
        keep = ("epoch", "loss", "policy_loss", "value_loss", "eval/score", "elo")
        lines = (run / "metrics.jsonl").read_text().splitlines()
        return [{k: v for k, v in json.loads(l).items() if k in keep} for l in lines]
    def best():
        return sorted(int(p.name) for p in (run / "best").iterdir() if p.name.isdigit())
    first, best_first = rows(), best()
    multihost_utils.sync_global_devices("read")
    if pid == 0:
        shutil.rmtree(run / "checkpoints" / "2")
        if not (run / "best" / "2").exists():
            shutil.copytree(run / "best" / "1", run / "best" / "2")
    multihost_utils.sync_global_devices("crashed")
    resumed = train(cfg, run, resume=True, progress=False)
    # refusals reach every process: process 0's checks of the run directory (here: it exists,
    # no --resume), and settings that differ between the processes
    refusals = []
    for attempt in (lambda: train(cfg, run, progress=False),
                    lambda: train(cfg.with_overrides([f"seed={pid}"]), str(run) + "-other",
                                  progress=False)):
        try:
            attempt()
            refusals.append("none")
        except Exception as e:
            refusals.append(f"{type(e).__name__}: {e}")
    print("RESULT" + json.dumps({"refusals": refusals,
                                 "devices": len(jax.devices()), "local": len(jax.local_devices()),
                                 "sum": float(sum(l.sum() for l in leaves)), "agreed": agreed,
                                 "epochs": summary["epochs"], "resumed": resumed["epochs"],
                                 "rows": [first, rows()], "best": [best_first, best()]}))
    """
)


def test_two_processes_joined_by_jax_distributed_train_agree_and_resume(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    procs = []
    # output to files (a full pipe would block one process and so both), polled together (one
    # that fails ends the other instead of leaving it waiting for its peer)
    with contextlib.ExitStack() as files:
        for pid in range(2):
            env = dict(
                os.environ,
                PYTHONPATH=pythonpath(),
                TURBOZERO_COORDINATOR=f"127.0.0.1:{port}",
                TURBOZERO_NUM_PROCESSES="2",
                TURBOZERO_PROCESS_ID=str(pid),
                TURBOZERO_CPU_COLLECTIVES="gloo",
                XLA_FLAGS="--xla_force_host_platform_device_count=1",
            )
            out = files.enter_context(open(tmp_path / f"{pid}.out", "w"))
            err = files.enter_context(open(tmp_path / f"{pid}.err", "w"))
            procs.append(
                subprocess.Popen(
                    [sys.executable, "-c", TWO_HOSTS, str(tmp_path / "run")],
                    env=env,
                    cwd=ROOT,
                    stdout=out,
                    stderr=err,
                )
            )
        deadline = time.monotonic() + 900
        try:
            while any(p.poll() is None for p in procs) and time.monotonic() < deadline:
                if any(p.poll() not in (None, 0) for p in procs):
                    break
                time.sleep(0.5)
        finally:
            for p in procs:
                p.kill()
                p.wait()
    results = []
    for pid, p in enumerate(procs):
        assert p.returncode == 0, (tmp_path / f"{pid}.err").read_text()[-3000:]
        results.append(json.loads((tmp_path / f"{pid}.out").read_text().split("RESULT", 1)[1]))
    assert all(r["devices"] == 2 and r["local"] == 1 for r in results)
    assert results[0]["sum"] == pytest.approx(results[1]["sum"], rel=1e-6)
    assert all(r["agreed"] == [False, True] and r["epochs"] == 2 for r in results)
    lines = (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(line)["epoch"] for line in lines] == [1, 2]
    # the resumed run redid epoch 2 exactly (the same losses, scores and ratings), wrote no
    # duplicate rows, and kept no best network from the crashed attempt's epoch 2
    first, again = results[0]["rows"]
    assert [r["epoch"] for r in first] == [1, 2] and again == first
    assert all(r["resumed"] == 2 and r["best"][1] == r["best"][0] for r in results)
    assert results[0]["refusals"][0].startswith("FileExistsError: run directory")
    assert results[1]["refusals"][0].startswith("RuntimeError: process 0 refused")
    assert all(r["refusals"][1].startswith("ValueError: process(es) [1]") for r in results)
