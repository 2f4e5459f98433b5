"""`bench/search.py`: the speed targets a row misses (the issue's rules, as printed), and its rows
of games with chance run; `bench/learning.py`'s judge. Checks of the benchmark scripts (about
100 s cold in all): they run in `make check`, beside the benchmarks they guard."""

from __future__ import annotations

import contextlib
import importlib.util
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

BENCH = Path(__file__).resolve().parent.parent / "bench"


@contextlib.contextmanager
def bench_module(name: str):
    """`bench/NAME.py` imported as a module, with `bench/` importable (its `common`) meanwhile."""
    import sys

    sys.path.insert(0, str(BENCH))
    try:
        spec = importlib.util.spec_from_file_location(f"bench_{name}", BENCH / f"{name}.py")
        assert spec and spec.loader
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.path.remove(str(BENCH))


@pytest.fixture(scope="module")
def bench_search():
    with bench_module("search") as module:
        yield module


def _row(net, sims, ratio, ours, floor, growth):
    return {
        "net": net,
        "simulations": sims,
        "ratio": ratio,
        "ours_sims_per_s": ours,
        "floor_sims_per_s": floor,
        "ours_cost_growth": growth,
    }


def test_each_target_is_judged_on_the_rows_it_concerns(bench_search):
    missed = bench_search.missed_targets
    # tiny network: twice mctx; the floor does not count
    assert missed(_row("tiny", 32, 2.0, 1.0, 9.0, 1.0), 32) == []
    assert missed(_row("tiny", 32, 1.99, 1.0, 9.0, 1.0), 32) == ["ours/mctx 1.99 < 2.0"]
    # ResNets: mctx's speed and within 1.15x of the floor
    assert missed(_row("resnet2x16", 32, 1.0, 100.0, 115.0, 1.0), 32) == []
    assert missed(_row("resnet6x64", 32, 0.9, 100.0, 120.0, 1.0), 32) == [
        "ours/mctx 0.90 < 1.0",
        "floor/ours 1.20 > 1.15",
    ]
    # cost growth: judged at 128 simulations against a group that started at 32
    assert missed(_row("tiny", 128, 3.0, 1.0, 1.0, 1.31), 32) == ["cost growth 1.31 > 1.3"]
    assert missed(_row("tiny", 128, 3.0, 1.0, 1.0, 1.31), 64) == []
    assert missed(_row("tiny", 64, 3.0, 1.0, 1.0, 1.9), 32) == []


def test_the_ppo_peer_imports_without_turbozeros_dependencies():
    """`bench/ppo.py --peer-only` runs in a side environment with rejax and gymnax only: its
    imports must not reach turbozero (hence pgx, optax, orbax, flax)."""
    import subprocess
    import sys

    blocked = ["turbozero", "pgx", "optax", "orbax", "flax"]
    code = (
        "import sys\n"
        f"for name in {blocked!r}:\n"
        "    sys.modules[name] = None\n"
        f"sys.path.insert(0, {str(BENCH)!r})\n"
        "import ppo\n"
        "assert callable(ppo.peer) and callable(ppo.main)\n"
        "print('imported')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "imported" in done.stdout


def test_the_chance_rows_run_against_stochastic_mctx(bench_search, capsys):
    """`--chance`'s code path on a tiny case (2 games, 2 simulations; each game with one of the
    selectors, to compile less): every row names its peer and deterministic reference, and no
    search chose an illegal move."""
    import json

    tiny = ["--chance", "--batch", "2", "--sims", "2", "--repeats", "1", "--positions", "2"]
    bench_search.main([*tiny, "--games", "2048", "--selectors", "gumbel"])
    bench_search.main([*tiny, "--games", "backgammon", "--selectors", "muzero_puct"])
    out, err = capsys.readouterr()
    rows = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    assert [(r["game"], r["selector"], r["net"]) for r in rows] == [
        ("2048", "gumbel", "tiny"),
        ("backgammon", "muzero_puct", "tiny"),
    ]
    for row in rows:
        assert row["peer"] == "mctx.stochastic_muzero_policy"
        assert row["deterministic_game"] == "connect_four"
        assert (row["ours_max_nodes"], row["mctx_max_nodes"]) == (5, 3)
        assert row["ours_sims_per_s"] > 0 and row["mctx_sims_per_s"] > 0
        assert row["cost_per_sim_vs_deterministic"] > 0
    assert "illegal" not in err


def _chance_row(sims, games, seed, nodes, sampled, half):
    row = {"game": "2048", "simulations": sims, "games": games, "seed": seed, "run": "r"}
    for agent, score in (("nodes", nodes), ("sampled", sampled), ("random", 1000.0)):
        row[agent] = {"score": score, "score_low": score - half, "score_high": score + half}
    diff, diff_half = nodes - sampled, half * 2**0.5
    row.update(
        nodes_minus_sampled=diff,
        nodes_minus_sampled_low=diff - diff_half,
        nodes_minus_sampled_high=diff + diff_half,
    )
    return row


def _pool(tmp_path, *rows):
    import json
    import subprocess
    import sys

    files = []
    for i, row in enumerate(rows):
        files.append(tmp_path / f"set{i}.jsonl")
        files[-1].write_text('{"machine": {}}\n' + json.dumps(row) + "\n")
    proc = subprocess.run(
        [sys.executable, str(BENCH / "chance.py"), "--pool", *map(str, files)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    lines = [json.loads(x) for x in proc.stdout.splitlines() if x.startswith("{")]
    return proc, lines


def test_pooled_2048_sets_weigh_means_by_games_and_add_standard_errors(tmp_path):
    """`bench/chance.py --pool`: a set of 100 games and one of 300 pool to the games-weighted
    mean, and the pooled interval's half-width is 1.96 * sqrt(sum((n_i / N * se_i)^2))."""
    proc, lines = _pool(
        tmp_path,
        _chance_row(256, 100, 0, 12_000.0, 10_000.0, 1_000.0),
        _chance_row(256, 300, 1, 11_000.0, 11_000.0, 500.0),
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    (row,) = lines
    z = 1.959964
    se = ((0.25 * 1_000.0 / z) ** 2 + (0.75 * 500.0 / z) ** 2) ** 0.5
    assert row["games"] == 400 and row["simulations"] == 256
    assert row["nodes"]["score"] == 11_250.0 and row["sampled"]["score"] == 10_750.0
    assert abs(row["nodes"]["score_high"] - (11_250.0 + z * se)) < 0.1, row
    assert row["nodes_minus_sampled"] == 500.0
    assert abs(row["nodes_minus_sampled_low"] - (500.0 - z * se * 2**0.5)) < 0.1, row
    assert row["trained_vs_random"] == 11.25


def test_pooling_refuses_sets_at_different_budgets_or_one_set_twice(tmp_path):
    proc, _ = _pool(
        tmp_path,
        _chance_row(256, 100, 0, 1.0, 1.0, 1.0),
        _chance_row(128, 100, 1, 1.0, 1.0, 1.0),
    )
    assert proc.returncode == 2 and "different simulations [128, 256]" in proc.stderr
    same = _chance_row(256, 100, 0, 1.0, 1.0, 1.0)
    proc, _ = _pool(tmp_path, same, same)
    assert proc.returncode == 2 and "appear twice" in proc.stderr


@pytest.fixture(scope="module")
def averaged_run(tmp_path_factory):
    """A tiny tic-tac-toe run whose weights' moving average plays (`ema_decay`)."""
    from tests.alphazero.test_selfplay_and_trainer import TINY
    from turbozero.alphazero import train

    run = tmp_path_factory.mktemp("judge") / "run"
    config = TINY.with_overrides(["ema_decay=0.9"])
    train(config, run, progress=False)
    return run, config


def _judged(learning, argv, capsys) -> list[dict]:
    import json

    capsys.readouterr()
    learning.main(argv)
    lines = capsys.readouterr().out.splitlines()
    return [json.loads(line) for line in lines if line.startswith("{")][1:]


def test_judging_a_run_again_asks_its_latest_network_with_each_play_setting(averaged_run, capsys):
    """`bench/learning.py --judge RUN`: one row per pair of settings; the row with the run's own
    PUCT constant is `turbozero.load_agent`'s agent's accuracy at those simulations, by phase
    and by result too."""
    import jax

    import turbozero
    from turbozero.arena.accuracy import move_accuracy, positions_for

    run, config = averaged_run
    own = config.search.c_puct
    with bench_module("learning") as learning:
        argv = ["--judge", str(run), "--play-simulations", "4", "--play-c-puct", f"{own},9"]
        rows = _judged(learning, argv, capsys)
    assert [(r["simulations"], r["c_puct"]) for r in rows] == [(4, own), (4, 9.0)]
    loaded = turbozero.load_agent(run, 4, which="latest")
    acc = move_accuracy(
        loaded.env, loaded.agent, positions_for("tic_tac_toe"), jax.random.PRNGKey(0)
    )
    assert rows[0]["accuracy_result"] == round(acc.result, 5)
    assert rows[0]["positions"] == 4520 and rows[0]["epoch"] == config.num_epochs
    assert rows[0]["phases"] == acc.phases and rows[0]["by_result"] == acc.by_result


def test_judging_pairs_the_trained_weights_with_their_average_over_several_networks(
    averaged_run, capsys
):
    """`--play-weights playing,trained` asks each network's trained weights beside their
    moving average, on the same positions and key; with several RUNs a summary line per
    setting holds the mean over them and the summed mistakes."""
    import jax

    import turbozero
    from turbozero.arena.accuracy import move_accuracy, positions_for
    from turbozero.io.rundir import RunDir

    run, _ = averaged_run
    step = max(RunDir(run).checkpoints.glob("[0-9]*"), key=lambda p: int(p.name))
    with bench_module("learning") as learning:
        argv = ["--judge", str(run), str(step), "--play-simulations", "4"]
        rows = _judged(learning, [*argv, "--play-weights", "playing,trained"], capsys)
    judged, summary = rows[:4], rows[4:]
    assert [r["weights"] for r in judged] == ["playing", "trained"] * 2
    trained = turbozero.load_agent(run, 4, which="latest", weights="trained")
    acc = move_accuracy(
        trained.env, trained.agent, positions_for("tic_tac_toe"), jax.random.PRNGKey(0)
    )
    assert judged[1]["accuracy_result"] == judged[3]["accuracy_result"] == round(acc.result, 5)
    assert [(r["weights"], r["networks"]) for r in summary] == [("playing", 2), ("trained", 2)]
    assert summary[1]["mistakes"] == judged[1]["mistakes"] + judged[3]["mistakes"]
    assert summary[1]["positions"] == 2 * 4520
    with bench_module("learning") as learning, pytest.raises(SystemExit):
        learning.main(["--judge", str(run), "--play-weights", "playing,raw"])


def test_judging_with_first_play_urgency_adds_a_row_per_value(averaged_run, capsys):
    """`--judge RUN --play-fpu zero,node`: one row each, "zero" the run's own search (the
    class default of `search.fpu`), "node" another."""
    run, _ = averaged_run
    with bench_module("learning") as learning:
        plain = _judged(learning, ["--judge", str(run), "--play-simulations", "8"], capsys)
        argv = ["--judge", str(run), "--play-simulations", "8", "--play-fpu", "zero,node"]
        rows = _judged(learning, argv, capsys)
        with pytest.raises(SystemExit):
            learning.main(["--judge", str(run), "--play-fpu", "parent"])
    assert [r["fpu"] for r in rows] == ["zero", "node"]
    assert rows[0]["accuracy_result"] == plain[0]["accuracy_result"]
    assert plain[0]["fpu"] == "zero"


def test_judging_with_a_first_play_reduction_adds_a_row_per_value(averaged_run, capsys):
    """`--judge RUN --play-fpu network --play-fpu-reduction 0,2`: one row per reduction, 0
    the plain rule; a reduction outside [0, 2] is refused before anything is judged."""
    run, _ = averaged_run
    with bench_module("learning") as learning:
        argv = ["--judge", str(run), "--play-simulations", "8", "--play-fpu", "network"]
        plain = _judged(learning, argv, capsys)
        rows = _judged(learning, [*argv, "--play-fpu-reduction", "0,2"], capsys)
        with pytest.raises(SystemExit):
            learning.main([*argv, "--play-fpu-reduction", "2.5"])
    assert [(r["fpu"], r["fpu_reduction"]) for r in rows] == [("network", 0.0), ("network", 2.0)]
    assert rows[0]["accuracy_result"] == plain[0]["accuracy_result"]
    assert plain[0]["fpu_reduction"] == 0.0  # the class default


def test_judging_on_a_larger_connect_four_set_reports_the_positions_beyond_the_runs_own(
    tmp_path, monkeypatch, capsys
):
    """`--play-positions N`: the labelled set of N positions, whose first ones are the run's
    own (same seed), and the accuracy on the rest apart (`fresh_*`): the run's own mistakes
    plus the fresh ones are the larger set's. A game whose set is fixed is refused."""
    from tests.alphazero.test_selfplay_and_trainer import TINY
    from turbozero.alphazero import train

    monkeypatch.setenv("TURBOZERO_CACHE", str(tmp_path / "cache"))
    run = tmp_path / "c4"
    config = TINY.with_overrides(
        ["env=connect_four", "max_episode_steps=42", "num_epochs=1", "eval_accuracy_positions=24"]
    )
    train(config, run, progress=False)
    with bench_module("learning") as learning:
        base = ["--judge", str(run), "--play-simulations", "4"]
        own = _judged(learning, base, capsys)
        rows = _judged(learning, [*base, "--play-positions", "40"], capsys)
        with pytest.raises(SystemExit):
            learning.main([*base, "--play-positions", "0"])
    assert "fresh_positions" not in own[0]
    assert own[0]["positions"] == 24 and rows[0]["positions"] == 40
    assert rows[0]["fresh_positions"] == 16
    assert rows[0]["mistakes"] == own[0]["mistakes"] + rows[0]["fresh_mistakes"]
    fresh_share = 1 - rows[0]["fresh_mistakes"] / 16
    assert rows[0]["fresh_accuracy_result"] == pytest.approx(fresh_share, abs=1e-5)


def test_judging_refuses_a_larger_set_for_a_game_whose_set_is_fixed(averaged_run, capsys):
    run, _ = averaged_run
    with bench_module("learning") as learning, pytest.raises(SystemExit, match="fixed"):
        learning.main(["--judge", str(run), "--play-positions", "5000"])


@pytest.mark.parametrize("preset", ["tic_tac_toe", "connect_four"])
def test_the_learning_baseline_is_the_preset_as_it_was_before_the_strength_work(preset):
    """`bench/learning.py`'s baseline overrides turn today's preset back into the one the
    strength work started from (every later change to the preset must be undone there too)."""
    import turbozero.alphazero.config  # noqa: F401  (registers the presets)
    from turbozero.alphazero.config import AlphaZeroConfig, NetworkConfig, SearchConfig
    from turbozero.config import get_preset

    with bench_module("learning") as learning:
        baseline = get_preset(preset).make().with_overrides(learning.BASELINES[preset])
    common = dict(augment=True, eval_accuracy=True)
    before = {
        "tic_tac_toe": AlphaZeroConfig(
            env="tic_tac_toe",
            num_games=64,
            network=NetworkConfig(kind="mlp", hidden=(64, 64)),
            search=SearchConfig(num_simulations=32, max_nodes=48, c_puct=1.25),
            temperature=1.0,
            temperature_moves=4,
            max_episode_steps=9,
            memory_capacity=64,
            learning_rate=3e-3,
            train_batch_size=256,
            warmup_steps=9,
            collection_steps_per_epoch=9,
            train_steps_per_epoch=24,
            num_epochs=30,
            eval_every=5,
            eval_games=64,
            eval_opponents=("random", "perfect"),
            **common,
        ),
        "connect_four": AlphaZeroConfig(
            env="connect_four",
            num_games=128,
            network=NetworkConfig(kind="resnet", num_blocks=2, num_channels=32),
            search=SearchConfig(num_simulations=32, max_nodes=64),
            temperature_moves=10,
            max_episode_steps=42,
            memory_capacity=128,
            train_batch_size=512,
            warmup_steps=16,
            collection_steps_per_epoch=16,
            train_steps_per_epoch=32,
            num_epochs=1000,
            max_wall_seconds=1800.0,
            eval_every=10,
            eval_games=32,
            eval_opponents=("random",),
            **common,
        ),
    }[preset]
    assert baseline == before


def test_the_learning_bench_refuses_a_negative_first_seed(capsys):
    """`bench/learning.py --first-seed N` starts its seeds at N, which must be >= 0."""
    with bench_module("learning") as learning, pytest.raises(SystemExit):
        learning.main(["--first-seed", "-1"])
    assert "--first-seed >= 0" in capsys.readouterr().err


def test_the_learning_bench_runs_the_seeds_from_its_first_seed_on(monkeypatch, capsys):
    """`--first-seed 2 --seeds 2` trains seeds 2 and 3, each recipe once per seed."""
    with bench_module("learning") as learning:
        asked = []

        def fake(preset, overrides, budget, seed, out):
            asked.append((seed, out.name))
            return {"seed": seed}

        monkeypatch.setattr(learning, "run_recipe", fake)
        learning.main(["--first-seed", "2", "--seeds", "2", "--budget", "1"])
        with pytest.raises(SystemExit):
            learning.main(["--first-seed", str(2**32 - 1), "--seeds", "2"])
    assert asked == [(2, "candidate2"), (2, "baseline2"), (3, "candidate3"), (3, "baseline3")]
    assert "must be <= 4294967295" in capsys.readouterr().err


def test_the_transfer_benchmark_trains_both_recipes_and_plays_every_match(tmp_path):
    """`bench/transfer.py` through its command line at toy sizes: a row per run (the old side
    with the first recipe's overrides) and a row per match, each match with its games played
    and a score inside its interval."""
    import json
    import subprocess
    import sys

    proc = subprocess.run(
        [
            sys.executable,
            str(BENCH / "transfer.py"),
            "--game",
            "othello",
            "--budget",
            "15",
            "--games",
            "4",
            "--mcts",
            "4",
            "--mcts-games",
            "2",
            "--simulations",
            "4",
            "--keep",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = [json.loads(x) for x in proc.stdout.splitlines() if x.startswith("{")]
    runs = [r for r in rows if "side" in r]
    assert [r["side"] for r in runs] == ["new", "old"]
    assert "learning_rate=0.001" in runs[1]["overrides"] and runs[0]["epochs"] >= 1
    old = json.loads((tmp_path / "othello-old" / "config.json").read_text())["config"]
    new = json.loads((tmp_path / "othello-new" / "config.json").read_text())["config"]
    assert (old["root_value_weight"], new["root_value_weight"]) == (0.0, 0.75)
    assert (old["network"]["value_bins"], new["network"]["value_bins"]) == (0, 3)
    matches = [r for r in rows if "score" in r]
    assert [(m["a"], m["b"]) for m in matches] == [
        ("new", "old"),
        ("new", "mcts:4"),
        ("old", "mcts:4"),
    ]
    assert [m["games"] for m in matches] == [4, 2, 2]
    for m in matches:
        assert m["score_low"] <= m["score"] <= m["score_high"]
        assert m["wins"] + m["draws"] + m["losses"] == m["games"]
