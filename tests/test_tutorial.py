"""The tutorial's code runs with only its imports renamed (toy sizes)."""

from __future__ import annotations

import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from turbozero.tutorial import ApproxEloTester, MuZeroPUCTSelector, PUCTSelector

ROOT = Path(__file__).resolve().parents[1]


def test_tutorial_othello_runs_at_toy_scale_and_prints_losses_and_elo(tmp_path):
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "examples" / "tutorial_othello.py"),
            "--toy",
            "--out",
            str(tmp_path / "run"),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = [line for line in proc.stdout.splitlines() if line.startswith("Epoch ")]
    assert len(lines) == 2
    assert "'loss'" in lines[0] and "'policy_loss'" in lines[0] and "'value_loss'" in lines[0]
    assert "'elo'" in lines[1]
    assert (tmp_path / "run" / "metrics.jsonl").exists()


def test_misspelt_num_opponenets_is_accepted_with_a_deprecation_warning():
    with pytest.warns(DeprecationWarning, match="num_opponents"):
        t = ApproxEloTester(total_epochs=10, episodes_per_opponent=3, num_opponenets=4)
    assert t.num_opponents == 4 and t.episodes_per_opponent == 4
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert ApproxEloTester(num_opponents=2).num_opponents == 2


def test_selectors_map_to_our_rules():
    from turbozero.nets import PolicyValueMLP
    from turbozero.tutorial import MCTS, AlphaZero, make_nn_eval_fn

    ev = AlphaZero(MCTS)(
        eval_fn=make_nn_eval_fn(PolicyValueMLP(num_actions=3), lambda s: s),
        num_iterations=4,
        max_nodes=8,
        branching_factor=3,
        action_selector=MuZeroPUCTSelector(),
    )
    assert ev.selector().name == "muzero_puct"
    assert ev.selector().options["pb_c_init"] == 1.25
    ev2 = AlphaZero(MCTS)(
        eval_fn=make_nn_eval_fn(PolicyValueMLP(num_actions=3), lambda s: s),
        num_iterations=4,
        max_nodes=8,
        branching_factor=3,
        action_selector=PUCTSelector(c=2.0),
    )
    assert ev2.selector().options["c_puct"] == 2.0
    with pytest.raises(ValueError, match="num_simulations"):
        AlphaZero(MCTS)(
            eval_fn=make_nn_eval_fn(PolicyValueMLP(num_actions=3), lambda s: s),
            num_iterations=0,
            max_nodes=8,
            branching_factor=3,
        )
