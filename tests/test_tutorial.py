"""The tutorial's code runs with only its imports renamed (toy sizes)."""

from __future__ import annotations

import re
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from turbozero.tutorial import ApproxEloTester, MuZeroPUCTSelector, PUCTSelector

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow  # a whole training, eval and resume through subprocesses (about 40 s cold)
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
    assert "loss=" in lines[0] and "policy_loss=" in lines[0] and "value_loss=" in lines[0]
    assert re.search(r"elo=-?[\d.]+ \(\d+ games\)", lines[1]), lines[1]  # what it rests on
    assert (tmp_path / "run" / "metrics.jsonl").exists()
    # the CLI rebuilds the tutorial's game, network, loss and optimizer: eval and resume work,
    # told to trust the run (its config.json names this file's functions)
    run = str(tmp_path / "run")
    cli = [sys.executable, "-m", "turbozero.cli"]
    for args in (
        ["eval", run, "--games", "2", "--json", "--trust-run"],
        ["train", "--out", run, "--resume", "--set", "num_epochs=3", "--trust-run"],
    ):
        done = subprocess.run([*cli, *args], capture_output=True, text=True, timeout=600, cwd=ROOT)
        assert done.returncode == 0, done.stderr[-3000:]
    assert "Epoch 3/3" in done.stdout


def test_misspelt_num_opponenets_is_accepted_with_a_deprecation_warning():
    with pytest.warns(DeprecationWarning, match="num_opponents"):
        t = ApproxEloTester(total_epochs=10, episodes_per_opponent=3, num_opponenets=4)
    assert t.num_opponents == 4 and t.episodes_per_opponent == 4
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert ApproxEloTester(num_opponents=2).num_opponents == 2


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(num_opponents=0),
        dict(num_opponents=-1),
        dict(episodes_per_opponent=0),
        dict(episodes_per_opponent=-7),
        dict(episodes_per_opponent=2.5),
    ],
)
def test_elo_tester_refuses_counts_below_one_naming_the_argument(kwargs):
    (name,) = kwargs
    with pytest.raises(ValueError, match=rf"ApproxEloTester\({name}\) must be an int >= 1"):
        ApproxEloTester(**kwargs)
    if name == "num_opponents":  # the misspelt keyword, named as given
        with pytest.warns(DeprecationWarning), pytest.raises(ValueError, match="num_opponenets"):
            ApproxEloTester(num_opponenets=kwargs[name])


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


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"num_iterations": 0}, r"num_iterations must be in \[1, 16777215\]"),
        ({"num_iterations": 8.5}, "num_iterations must be an int"),
        ({"max_nodes": 1}, r"max_nodes must be in \[2, 16777216\]"),
        ({"dirichlet_epsilon": 2.0}, r"dirichlet_epsilon must be a finite number in \[0, 1\]"),
        ({"temperature": -1.0}, "temperature must be >= 0"),
        ({"branching_factor": 0}, "branching_factor must be an int >= 1"),
        ({"action_selector": PUCTSelector(c=-1.0)}, r"PUCTSelector\(c\) must be"),
        ({"action_selector": MuZeroPUCTSelector(c1=0.0)}, r"MuZeroPUCTSelector\(c1\) must be"),
    ],
)
def test_evaluator_errors_name_the_tutorial_arguments(kwargs, message):
    from turbozero.nets import PolicyValueMLP
    from turbozero.tutorial import MCTS, AlphaZero, make_nn_eval_fn

    args = dict(
        eval_fn=make_nn_eval_fn(PolicyValueMLP(num_actions=3), lambda s: s),
        num_iterations=4,
        max_nodes=8,
        branching_factor=3,
    )
    with pytest.raises(ValueError, match=message):
        AlphaZero(MCTS)(**{**args, **kwargs})


def _ttt_trainer(**changes):
    """A `Trainer` over pgx tic-tac-toe given as functions, as the tutorial writes them."""
    import optax
    import pgx

    from turbozero.nets import PolicyValueMLP
    from turbozero.tutorial import (
        MCTS,
        AlphaZero,
        EpisodeReplayBuffer,
        StepMetadata,
        Trainer,
        make_nn_eval_fn,
    )

    game = pgx.make("tic_tac_toe")

    def metadata(s):
        return StepMetadata(
            rewards=s.rewards,
            action_mask=s.legal_action_mask,
            terminated=s.terminated,
            cur_player_id=s.current_player,
            step=s._step_count,
        )

    def step(state, action):
        state = game.step(state, action)
        return state, metadata(state)

    def init(key):
        state = game.init(key)
        return state, metadata(state)

    nn = PolicyValueMLP(num_actions=9, hidden=(16,))
    evaluator = AlphaZero(MCTS)(
        eval_fn=make_nn_eval_fn(nn, lambda s: s.observation),
        num_iterations=4,
        max_nodes=8,
        branching_factor=9,
        action_selector=changes.pop("action_selector", PUCTSelector()),
    )
    args = dict(
        batch_size=4,
        train_batch_size=8,
        env_step_fn=step,
        env_init_fn=init,
        state_to_nn_input_fn=lambda s: s.observation,
        nn=nn,
        optimizer=optax.adam(1e-3),
        evaluator=evaluator,
        memory_buffer=EpisodeReplayBuffer(capacity=16),
        max_episode_steps=9,
        collection_steps_per_epoch=9,
        env_name="tic_tac_toe",
    )
    return Trainer(**{**args, **changes})


def test_testers_refuse_zero_episodes():
    from turbozero.tutorial import BaselineTester, TwoPlayerTester

    for tester in (TwoPlayerTester, lambda n: BaselineTester("random", n)):
        with pytest.raises(ValueError, match=r"num_episodes\) must be an int >= 1"):
            tester(0)


def test_trainer_records_its_selector_and_checks_data_transform_fns():
    from turbozero.alphazero import square_symmetries
    from turbozero.tutorial import BaselineTester

    t = _ttt_trainer(action_selector=MuZeroPUCTSelector(c1=1.5, c2=100.0))
    assert t.config.search.selector == "muzero_puct"
    assert (t.config.search.pb_c_init, t.config.search.pb_c_base) == (1.5, 100.0)
    assert _ttt_trainer(data_transform_fns=square_symmetries(3)).data_transform_fns
    with pytest.raises(ValueError, match=r"data_transform_fns entry 0 \(square_symmetries\)"):
        _ttt_trainer(data_transform_fns=[square_symmetries])
    with pytest.raises(ValueError, match="of shapes"):
        _ttt_trainer(data_transform_fns=[lambda obs, policy, mask: (obs, policy)])
    with pytest.raises(ValueError, match="batch_size must be in"):
        _ttt_trainer(batch_size=0)
    with pytest.raises(ValueError, match="needs a built-in game with a perfect player"):
        _ttt_trainer(testers=[BaselineTester("perfect", 4)])


def test_a_trainer_run_loads_from_python_with_its_game_and_network(tmp_path, capsys):
    import json

    import jax

    import turbozero
    from turbozero.alphazero import square_symmetries
    from turbozero.cli import main

    # the tutorial's own optimizer (not the config's) and augmentations: neither is recorded
    # in the run directory, and neither may stop the latest network from loading
    t = _ttt_trainer(
        ckpt_dir=str(tmp_path / "run"), seed=7, data_transform_fns=square_symmetries(3)
    )
    t.train_loop(num_epochs=1)  # no key, no seed: the Trainer's seed
    assert json.loads((tmp_path / "run" / "config.json").read_text())["config"]["seed"] == 7
    with pytest.raises(ValueError, match=r"load_agent\(path, env=\.\.\., module=\.\.\.\)"):
        turbozero.load_agent(tmp_path / "run")
    assert main(["eval", str(tmp_path / "run"), "--games", "2"]) == 2
    assert "trainer.env" in capsys.readouterr().err
    states, _ = jax.vmap(t.env.init)(jax.random.split(jax.random.PRNGKey(0), 2))
    legal = jax.vmap(t.env.metadata)(states).action_mask
    for which in ("best", "latest"):
        loaded = turbozero.load_agent(tmp_path / "run", env=t.env, module=t.nn, which=which)
        assert loaded.epoch == 1
        actions = loaded.act(states, jax.random.PRNGKey(1))
        assert actions.shape == (2,) and bool(legal[jax.numpy.arange(2), actions].all())
