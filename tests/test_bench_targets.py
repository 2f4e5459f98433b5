"""The benchmark scripts through their command lines, as a user runs them: `bench/search.py`'s
speed targets and its rows of games with chance, `bench/chance.py`'s pooling, `bench/learning.py`'s
judge and recipes, `bench/transfer.py` at toy sizes. About 100 s cold in all: they run in `make
check`, beside the benchmarks they guard."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

BENCH = Path(__file__).resolve().parent.parent / "bench"


def bench(
    script: str, *argv: object, timeout: int = 900
) -> tuple[subprocess.CompletedProcess, list]:
    """`python bench/SCRIPT.py ARGV...`: the finished process and its JSON rows."""
    proc = subprocess.run(
        [sys.executable, str(BENCH / f"{script}.py"), *map(str, argv)],
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    rows = [json.loads(x) for x in proc.stdout.splitlines() if x.startswith("{")]
    return proc, rows


def _row(net, sims, ratio, ours, floor, growth, selector="puct"):
    return {
        "game": "connect_four",
        "batch": 64,
        "selector": selector,
        "net": net,
        "simulations": sims,
        "ratio": ratio,
        "ours_sims_per_s": ours,
        "floor_sims_per_s": floor,
        "ours_cost_growth": growth,
    }


def test_each_target_is_judged_on_the_rows_it_concerns(tmp_path):
    """`bench/search.py --judge ROWS`: a tiny network must be twice mctx (the floor does not
    count); a ResNet mctx's speed and within 1.15x of the floor; the cost growth is judged at
    128 simulations, in a group that started at 32."""
    rows = [
        _row("tiny", 32, 2.0, 1.0, 9.0, 1.0, "puct"),
        _row("tiny", 32, 1.99, 1.0, 9.0, 1.0, "gumbel"),
        _row("resnet2x16", 32, 1.0, 100.0, 115.0, 1.0),
        _row("resnet6x64", 32, 0.9, 100.0, 120.0, 1.0),
        _row("tiny", 128, 3.0, 1.0, 1.0, 1.31, "puct"),  # its group starts at 32
        _row("tiny", 64, 3.0, 1.0, 1.0, 1.0, "muzero_puct"),
        _row("tiny", 128, 3.0, 1.0, 1.0, 1.31, "muzero_puct"),  # its group starts at 64
        _row("tiny", 64, 3.0, 1.0, 1.0, 1.9, "gumbel"),  # not judged at 64
    ]
    saved = tmp_path / "rows.jsonl"
    saved.write_text('{"machine": {}}\n' + "".join(json.dumps(r) + "\n" for r in rows))
    proc, judged = bench("search", "--judge", saved, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert [r["missed_targets"] for r in judged] == [
        [],
        ["ours/mctx 1.99 < 2.0"],
        [],
        ["ours/mctx 0.90 < 1.0", "floor/ours 1.20 > 1.15"],
        ["cost growth 1.31 > 1.3"],
        [],
        [],
        [],
    ]
    assert "5 of 8 rows meet every target" in proc.stderr


def test_the_ppo_peer_imports_without_turbozeros_dependencies():
    """`bench/ppo.py --peer-only` runs in a side environment with rejax and gymnax only: run as
    a script with turbozero and its dependencies unimportable, its imports must not reach them
    (`--help` stops it after its imports)."""
    blocked = ["turbozero", "pgx", "optax", "orbax", "flax"]
    code = (
        "import runpy, sys\n"
        f"for name in {blocked!r}:\n"
        "    sys.modules[name] = None\n"
        f"sys.argv = [{str(BENCH / 'ppo.py')!r}, '--help']\n"
        f"runpy.run_path(sys.argv[0], run_name='__main__')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "--peer-only" in done.stdout


def test_the_chance_rows_run_against_stochastic_mctx():
    """`--chance`'s code path on a tiny case (2 games, 2 simulations; each game with one of the
    selectors, to compile less): every row names its peer and deterministic reference, and no
    search chose an illegal move."""
    tiny = ["--chance", "--batch", "2", "--sims", "2", "--repeats", "1", "--positions", "2"]
    rows, err = [], ""
    for game, selector in (("2048", "gumbel"), ("backgammon", "muzero_puct")):
        proc, found = bench("search", *tiny, "--games", game, "--selectors", selector)
        assert proc.returncode == 0, proc.stderr[-2000:]
        rows, err = rows + found[-1:], err + proc.stderr
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
    files = []
    for i, row in enumerate(rows):
        files.append(tmp_path / f"set{i}.jsonl")
        files[-1].write_text('{"machine": {}}\n' + json.dumps(row) + "\n")
    return bench("chance", "--pool", *files, timeout=300)


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


def _judged(*argv: object) -> list[dict]:
    """`bench/learning.py --judge ...`'s rows (its first line, the machine, left out)."""
    proc, rows = bench("learning", "--judge", *argv)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return rows[1:]


def _refused(*argv: object) -> str:
    """`bench/learning.py ARGV`, which must stop with a usage error; its stderr."""
    proc, rows = bench("learning", *argv)
    assert proc.returncode != 0 and not rows[1:], (proc.returncode, rows)
    return proc.stderr


def _accuracy(run: Path, *flags: str) -> dict:
    """`turbozero eval RUN --accuracy --json FLAGS...` (the judge's figures, asked of the CLI)."""
    import contextlib
    import io

    from turbozero.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["eval", str(run), "--accuracy", "--json", *flags]) == 0
    return json.loads(out.getvalue())


def test_judging_a_run_again_asks_its_latest_network_with_each_play_setting(averaged_run):
    """`bench/learning.py --judge RUN`: one row per pair of settings; the row with the run's own
    PUCT constant is `turbozero eval --accuracy`'s at those simulations, by phase and by result
    too."""
    run, config = averaged_run
    own = config.search.c_puct
    rows = _judged(run, "--play-simulations", 4, "--play-c-puct", f"{own},9")
    assert [(r["simulations"], r["c_puct"]) for r in rows] == [(4, own), (4, 9.0)]
    for row, c in zip(rows, (own, 9), strict=True):
        acc = _accuracy(
            run, "--which", "latest", "--simulations", "4", "--set", f"search.c_puct={c}"
        )
        assert acc["search"]["c_puct"] == c
        assert row["accuracy_result"] == round(acc["accuracy_result"], 5)
        assert row["phases"] == acc["phases"] and row["by_result"] == acc["by_result"]
    assert rows[0]["positions"] == 4520 and rows[0]["epoch"] == config.num_epochs


def test_judging_pairs_the_trained_weights_with_their_average_over_several_networks(
    averaged_run,
):
    """`--play-weights playing,trained` asks each network's trained weights beside their
    moving average, on the same positions and key; with several RUNs a summary line per
    setting holds the mean over them and the summed mistakes."""
    from turbozero.io.rundir import RunDir

    run, _ = averaged_run
    step = max(RunDir(run).checkpoints.glob("[0-9]*"), key=lambda p: int(p.name))
    rows = _judged(run, step, "--play-simulations", 4, "--play-weights", "playing,trained")
    judged, summary = rows[:4], rows[4:]
    assert [r["weights"] for r in judged] == ["playing", "trained"] * 2
    acc = _accuracy(run, "--which", "latest", "--simulations", "4", "--weights", "trained")
    assert judged[1]["accuracy_result"] == judged[3]["accuracy_result"]
    assert judged[1]["accuracy_result"] == round(acc["accuracy_result"], 5)
    assert [(r["weights"], r["networks"]) for r in summary] == [("playing", 2), ("trained", 2)]
    assert summary[1]["mistakes"] == judged[1]["mistakes"] + judged[3]["mistakes"]
    assert summary[1]["positions"] == 2 * 4520
    assert "'raw' is not one of" in _refused("--judge", run, "--play-weights", "playing,raw")


def test_judging_with_first_play_urgency_adds_a_row_per_value(averaged_run):
    """`--judge RUN --play-fpu zero,node,network`: one row each; the row with the run's own
    `search.fpu` is the run's own search."""
    run, _ = averaged_run
    plain = _judged(run, "--play-simulations", 8)
    rows = _judged(run, "--play-simulations", 8, "--play-fpu", "zero,node,network")
    assert [r["fpu"] for r in rows] == ["zero", "node", "network"]
    (own,) = [r for r in rows if r["fpu"] == plain[0]["fpu"]]
    assert own["accuracy_result"] == plain[0]["accuracy_result"]
    assert "'parent' is not one of" in _refused("--judge", run, "--play-fpu", "parent")


def test_judging_with_a_first_play_reduction_adds_a_row_per_value(averaged_run):
    """`--judge RUN --play-fpu network --play-fpu-reduction 0,2`: one row per reduction, 0
    the plain rule; a reduction outside [0, 2] is refused before anything is judged."""
    run, _ = averaged_run
    argv = [run, "--play-simulations", 8, "--play-fpu", "network"]
    plain = _judged(*argv)
    rows = _judged(*argv, "--play-fpu-reduction", "0,2")
    assert [(r["fpu"], r["fpu_reduction"]) for r in rows] == [("network", 0.0), ("network", 2.0)]
    assert rows[0]["accuracy_result"] == plain[0]["accuracy_result"]
    assert plain[0]["fpu_reduction"] == 0.0  # the class default
    assert "fpu_reduction" in _refused("--judge", *argv, "--play-fpu-reduction", "0,2.5")


def test_judging_on_a_larger_connect_four_set_reports_the_positions_beyond_the_runs_own(
    tmp_path, monkeypatch
):
    """`--play-positions N`: the labelled set of N positions, whose first ones are the run's
    own (same seed), and the accuracy on the rest apart (`fresh_*`): the run's own mistakes
    plus the fresh ones are the larger set's."""
    from tests.alphazero.test_selfplay_and_trainer import TINY
    from turbozero.alphazero import train

    monkeypatch.setenv("TURBOZERO_CACHE", str(tmp_path / "cache"))
    run = tmp_path / "c4"
    config = TINY.with_overrides(
        ["env=connect_four", "max_episode_steps=42", "num_epochs=1", "eval_accuracy_positions=24"]
    )
    train(config, run, progress=False)
    own = _judged(run, "--play-simulations", 4)
    rows = _judged(run, "--play-simulations", 4, "--play-positions", 40)
    assert "--play-positions must be" in _refused("--judge", run, "--play-positions", 0)
    assert "fresh_positions" not in own[0]
    assert own[0]["positions"] == 24 and rows[0]["positions"] == 40
    assert rows[0]["fresh_positions"] == 16
    assert rows[0]["mistakes"] == own[0]["mistakes"] + rows[0]["fresh_mistakes"]
    fresh_share = 1 - rows[0]["fresh_mistakes"] / 16
    assert rows[0]["fresh_accuracy_result"] == pytest.approx(fresh_share, abs=1e-5)


def test_judging_refuses_a_larger_set_for_a_game_whose_set_is_fixed(averaged_run):
    run, _ = averaged_run
    proc, _ = bench("learning", "--judge", run, "--play-positions", 5000)
    assert proc.returncode != 0 and "whose set is fixed" in proc.stderr


@pytest.mark.parametrize("preset", ["tic_tac_toe", "connect_four"])
def test_the_learning_baseline_is_the_preset_as_it_was_before_the_strength_work(preset):
    """`bench/learning.py`'s baseline (its `--dry-run` line) is today's preset turned back into
    the one the strength work started from (every later change to the preset must be undone
    there too)."""
    from turbozero.alphazero.config import AlphaZeroConfig, NetworkConfig, SearchConfig

    common = dict(augment=True, eval_accuracy=True)
    # the class defaults of that day where today's differ (docs/configuration.md)
    first = dict(
        root_value_weight=0.0, ema_decay=0.0, ema_selfplay=False, overlap=False, eval_simulations=0
    )
    before = {
        "tic_tac_toe": AlphaZeroConfig(
            env="tic_tac_toe",
            num_games=64,
            network=NetworkConfig(kind="mlp", hidden=(64, 64), value_bins=0),
            search=SearchConfig(num_simulations=32, max_nodes=48, c_puct=1.25, fpu="zero"),
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
            **first,
        ),
        "connect_four": AlphaZeroConfig(
            env="connect_four",
            num_games=128,
            network=NetworkConfig(kind="resnet", num_blocks=2, num_channels=32, value_bins=0),
            search=SearchConfig(num_simulations=32, max_nodes=64, fpu="zero"),
            learning_rate=1e-3,
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
            **first,
        ),
    }[preset]
    proc, rows = bench("learning", "--preset", preset, "--budget", 1800, "--dry-run", timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    baseline = next(r for r in rows if r.get("recipe") == "baseline")
    expected = before.with_overrides(["max_wall_seconds=1800", "seed=0"]).resolved()
    assert AlphaZeroConfig.from_dict(baseline["config"]) == expected


def test_the_learning_bench_refuses_a_negative_first_seed():
    """`bench/learning.py --first-seed N` starts its seeds at N, which must be >= 0."""
    assert "--first-seed >= 0" in _refused("--first-seed", -1, "--dry-run")


def test_the_learning_bench_runs_the_seeds_from_its_first_seed_on():
    """`--first-seed 2 --seeds 2` trains seeds 2 and 3, each recipe once per seed; the last
    seed must fit a seed's range."""
    proc, rows = bench("learning", "--first-seed", 2, "--seeds", 2, "--budget", 1, "--dry-run")
    assert proc.returncode == 0, proc.stderr[-2000:]
    runs = [(r["seed"], r["recipe"]) for r in rows if "recipe" in r]
    assert runs == [(2, "candidate"), (2, "baseline"), (3, "candidate"), (3, "baseline")]
    assert [r["config"]["seed"] for r in rows if "recipe" in r] == [2, 2, 3, 3]
    assert "must be <= 4294967295" in _refused("--first-seed", 2**32 - 1, "--seeds", 2, "--dry-run")


def test_the_transfer_benchmark_trains_both_recipes_and_plays_every_match(tmp_path):
    """`bench/transfer.py` through its command line at toy sizes: a row per run (the old side
    with the first recipe's overrides) and a row per match, each match with its games played
    and a score inside its interval."""
    argv = ["--game", "othello", "--budget", 15, "--games", 4, "--mcts", 4, "--mcts-games", 2]
    proc, rows = bench("transfer", *argv, "--simulations", 4, "--keep", tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
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
    # an ablation: the new recipe with one lever changed, against the kept old run
    ablated = tmp_path / "ablated"
    argv = [*argv, "--simulations", 4, "--set", "temperature_moves=15"]
    proc, rows = bench("transfer", *argv, "--old-run", tmp_path / "othello-old", "--keep", ablated)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert [r["side"] for r in rows if "side" in r] == ["new"]
    assert "temperature_moves=15" in rows[1]["overrides"]
    assert not (ablated / "othello-old").exists()
    assert [m["games"] for m in rows if "score" in m] == [4, 2, 2]
    proc, _ = bench("transfer", *argv, "--old-run", ablated / "nothing")
    assert proc.returncode == 2 and "not a run directory" in proc.stderr
    proc, _ = bench("transfer", "--game", "othello", "--set", "temperature_moves=-1")
    assert proc.returncode == 2 and "temperature_moves" in proc.stderr


def test_bench_td_measures_the_learner_against_rating_every_listed_play():
    """`bench/td.py` at a toy size: a row per network with both throughputs and their ratio."""
    proc, rows = bench("td", "--hidden", "8", "--games", "8", "--steps", "2", "--repeats", "1")
    assert proc.returncode == 0, proc.stderr[-2000:]
    (row,) = [r for r in rows if "turns_per_s" in r]
    assert row["hidden"] == [8] and row["games"] == 8
    assert row["turns_per_s"] > 0 and row["rate_all_turns_per_s"] > 0
    ratio = row["rate_all_turns_per_s"] / row["turns_per_s"]
    assert row["speedup"] == pytest.approx(1 / ratio, rel=0.05)


def test_the_colours_bench_counts_every_game_once_for_the_first_mover():
    """`bench/colours.py`: each kind's row counts each game once, from the first mover's side,
    with the score inside its interval; a kind it does not know is refused."""
    proc, rows = bench(
        "colours", "--game", "tic_tac_toe", "--agents", "random,mcts:4", "--games", 20
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = [r for r in rows if "agent" in r]
    assert [r["agent"] for r in rows] == ["random", "mcts:4"]
    for r in rows:
        assert r["first_wins"] + r["first_draws"] + r["first_losses"] == 20
        low, high = r["first_score_ci95"]
        assert low <= r["first_score"] <= high
        assert r["first_score"] == (r["first_wins"] + 0.5 * r["first_draws"]) / 20
    proc, _ = bench("colours", "--game", "tic_tac_toe", "--agents", "greedy", "--games", 2)
    assert proc.returncode != 0 and "'greedy' is not one of" in proc.stderr
