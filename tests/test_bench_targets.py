"""`bench/search.py`: the speed targets a row misses (the issue's rules, as printed), and its rows
of games with chance run."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench"


@pytest.fixture(scope="module")
def bench_search():
    import sys

    sys.path.insert(0, str(BENCH))
    try:
        spec = importlib.util.spec_from_file_location("bench_search", BENCH / "search.py")
        assert spec and spec.loader
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.path.remove(str(BENCH))


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


@pytest.mark.slow  # 60-90 s of compiling mctx's stochastic policy and ours on two games
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
