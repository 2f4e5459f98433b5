"""Tiny runs of the games with chance: 2048 reports its tiles, backgammon its games against its
own network, and the agents loaded from them search with room for their chance nodes."""

from __future__ import annotations

import pytest

from turbozero.alphazero import AlphaZeroConfig, NetworkConfig, SearchConfig, train
from turbozero.config import ConfigError
from turbozero.io.rundir import RunDir
from turbozero.loading import load_agent


def _tiny(env: str, **changes) -> AlphaZeroConfig:
    changes.setdefault(
        "search", SearchConfig(selector="muzero_puct", num_simulations=4, max_nodes=9)
    )
    return AlphaZeroConfig(
        env=env,
        num_games=4,
        network=NetworkConfig(kind="mlp", hidden=(16,)),
        max_episode_steps=24,
        memory_capacity=24,
        train_batch_size=8,
        warmup_steps=2,
        collection_steps_per_epoch=2,
        train_steps_per_epoch=1,
        num_epochs=1,
        eval_every=1,
        eval_games=4,
        **changes,
    )


@pytest.fixture(scope="module")
def run_2048(tmp_path_factory):
    run = tmp_path_factory.mktemp("chance") / "2048"
    search = SearchConfig(selector="muzero_puct", num_simulations=4, max_nodes=9, discount=0.99)
    train(_tiny("2048", value_scale=20.0, eval_opponents=(), search=search), run, progress=False)
    return run


def test_a_2048_evaluation_reports_the_tiles_of_its_games(run_2048):
    row = RunDir(run_2048).read_metrics()[-1]
    for name in ("max_tile", "reached_1024", "reached_2048"):
        assert f"eval/{name}/mean" in row and f"eval/{name}/max" in row
    assert 4 <= row["eval/max_tile/mean"] <= row["eval/max_tile/max"]
    assert row["eval/reached_2048/mean"] <= row["eval/reached_1024/mean"] <= 1


def test_an_agent_loaded_from_a_chance_run_has_two_nodes_per_simulation(run_2048):
    loaded = load_agent(run_2048, num_simulations=6)
    search = loaded.agent.policy_fn.search
    assert search.env.chance is not None and search.max_nodes == 13


def test_an_agent_loaded_from_a_discounted_run_searches_with_its_discount(run_2048):
    assert load_agent(run_2048).agent.policy_fn.search.spec.discount == 0.99


@pytest.mark.slow  # (a whole backgammon training; the "network" opponent: test_train_run.py)
def test_backgammon_evaluation_plays_random_and_its_own_network(systems, tmp_path):
    cfg = _tiny("backgammon", value_scale=3.0, eval_opponents=("random", "network"))
    run = tmp_path / "bg"
    train(cfg, run, progress=False, systems=systems)
    row = RunDir(run).read_metrics()[-1]
    for opponent in ("random", "network"):
        total = sum(row[f"eval/{opponent}/{r}"] for r in ("win", "draw", "loss"))
        assert total == pytest.approx(1.0)


def test_network_is_an_opponent_only_of_two_player_games():
    with pytest.raises(ValueError, match="eval_opponents"):
        _tiny("2048", eval_opponents=("network",)).check_new_run(num_players=1)


@pytest.mark.parametrize(
    "overrides, named",
    [
        (["search.num_simulations=3000000"], r"eval_simulations=12000000 .*\(left out, it is 4x"),
        (["eval_simulations=9000000"], r"eval_simulations=9000000 .* in \[1, 8388607\]$"),
        (["eval_simulations=0", "search.num_simulations=9000000"], "search.num_simulations="),
    ],
)
def test_evaluation_simulations_a_chance_tree_cannot_hold_are_refused_by_name(overrides, named):
    cfg = _tiny("2048").with_overrides(overrides)
    cfg.check_new_run(1)  # (a game without chance holds them)
    with pytest.raises(ConfigError, match=named):
        cfg.check_new_run(1, chance=True)
    _tiny("2048", eval_simulations=8388607).check_new_run(1, chance=True)
