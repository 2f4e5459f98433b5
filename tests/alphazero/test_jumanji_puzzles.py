"""AlphaZero on jumanji's puzzles end to end, at tiny sizes: the minesweeper preset with its
user reward through training, evaluation (searched and network alone), resume, load_agent and
`turbozero eval`; and the config's `reward_fn`."""

from __future__ import annotations

import json

import jax
import numpy as np
import pytest

import turbozero
from turbozero.alphazero import make_alphazero, train
from turbozero.arena import play_match, random_agent
from turbozero.config import ConfigError, get_preset
from turbozero.io.checkpoint import Checkpointer
from turbozero.io.rundir import RunDir

pytest.importorskip("jumanji")

TINY = [
    "num_games=4",
    "network.hidden=16",
    "search.num_simulations=4",
    "search.max_nodes=5",
    "memory_capacity=16",
    "train_batch_size=8",
    "warmup_steps=4",
    "collection_steps_per_epoch=4",
    "train_steps_per_epoch=2",
    "num_epochs=2",
    "max_wall_seconds=0",
    "eval_every=1",
    "eval_games=4",
    "devices=1",
]
CFG = get_preset("minesweeper").make().with_overrides(TINY)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    out = tmp_path_factory.mktemp("runs") / "mines"
    train(CFG, out, preset="minesweeper", progress=False)
    return out


def _latest_params(out):
    ck = Checkpointer(RunDir(out).checkpoints)
    try:
        return ck.restore_meta()["epoch"], turbozero.load_agent(out, which="latest").params
    finally:
        ck.close()


def test_one_player_evaluation_reports_the_searched_agent_and_the_network_alone(run):
    rows = [r for r in RunDir(run).read_metrics() if "eval/return" in r]
    assert [r["epoch"] for r in rows] == [1, 2]
    for r in rows:
        assert r["eval/network/return"] >= 0 and r["eval/return"] >= 0
        assert r["eval/score"] == r["eval/return"]  # (the best network is the searched one's)
    # the random policy's return beside them, played once from the seed: the same every epoch
    # (and on a resume), and what play_match of a random agent gives with that key
    assert rows[0]["eval/random/return"] == rows[1]["eval/random/return"] >= 0
    cfg = CFG.resolved()
    env = make_alphazero(cfg).env
    key = jax.random.fold_in(jax.random.PRNGKey(cfg.seed), 0x7A4D)
    random_games = play_match(
        env,
        random_agent(env),
        None,
        key,
        num_games=4,
        max_steps=cfg.max_episode_steps,
        opening_moves=cfg.eval_opening_moves,
    )
    assert rows[0]["eval/random/return"] == pytest.approx(float(random_games.mean_return_a))
    saved = json.loads((run / "config.json").read_text())
    assert saved["config"]["reward_fn"] == "uncovered_share"


@pytest.mark.slow  # (a whole resumed training; resuming: test_resume.py)
def test_a_stopped_puzzle_run_resumes_to_the_same_network(systems, run, tmp_path):
    split = tmp_path / "split"
    train(CFG, split, progress=False, num_epochs=1, systems=systems)
    train(CFG, split, progress=False, resume=True, systems=systems)
    (epoch_a, a), (epoch_b, b) = _latest_params(run), _latest_params(split)
    assert epoch_a == epoch_b == 2
    jax.tree_util.tree_map(np.testing.assert_array_equal, a, b)


@pytest.mark.slow  # (a training, then load and eval through the CLI)
def test_load_agent_and_eval_rebuild_the_game_with_the_runs_reward(run, capsys):
    from turbozero.cli import main

    loaded = turbozero.load_agent(run)
    assert loaded.env.name == "jumanji:Minesweeper-v0" and loaded.env.deterministic
    state, _ = jax.vmap(loaded.env.init)(jax.random.split(jax.random.PRNGKey(0), 2))
    assert loaded.act(state, jax.random.PRNGKey(1)).shape == (2,)
    assert main(["eval", str(run), "--games", "4", "--json"]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["games"] == 4 and out["env"] == "jumanji:Minesweeper-v0"
    # uncovered_share pays at most 0.9 a move; jumanji's own reward pays 1 per safe cell
    assert 0 <= out["mean_return"] <= 0.9 * out["mean_length"]
    assert main(["eval", str(run), "--vs", "random"]) == 2
    assert "--vs is for two-player games" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("overrides", "error"),
    [
        (["env=2048"], "reward_fn='uncovered_share' replaces a jumanji game's reward; env '2048'"),
        (["reward_fn=uncovered_shares"], "Did you mean 'uncovered_share'"),
    ],
)
def test_a_config_reward_fn_must_name_a_jumanji_reward(overrides, error):
    with pytest.raises(ConfigError, match=error):
        CFG.with_overrides(overrides)


def test_a_config_reward_fn_that_cannot_be_imported_is_refused_when_the_game_is_built(tmp_path):
    from turbozero.alphazero import make_alphazero

    cfg = CFG.with_overrides(["reward_fn=no_such_module_zz:reward"])
    with pytest.raises(ValueError, match="reward_fn 'no_such_module_zz:reward' cannot be"):
        make_alphazero(cfg)
