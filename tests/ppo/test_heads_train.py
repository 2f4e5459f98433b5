"""Every loss and action head through a whole run: `train_ppo` writes checkpoints a resumed run
continues exactly, `load_agent` acts in the environment's action space, and `evaluate_run` and
`turbozero eval` play the run (tiny budgets). Whole trainings, one per head (about 160 s cold in
all): they run in `make check`; each head's update and loss are checked in `make test`
(tests/ppo/test_heads.py), and resume, loading and eval for the default head
(tests/ppo/test_train.py)."""

from __future__ import annotations

import dataclasses
import json

import jax
import numpy as np
import pytest

from turbozero.arena import play_match
from turbozero.io.checkpoint import Checkpointer
from turbozero.io.rundir import RunDir
from turbozero.ppo import PPOConfig, evaluate_run, load_agent, make_ppo, train_ppo
from turbozero.ppo.train import abstract_checkpoint

pytestmark = pytest.mark.slow

TINY = PPOConfig(
    num_envs=2,
    rollout_length=8,
    num_updates=4,
    num_updates_per_eval=2,
    epochs=1,
    num_minibatches=2,
    actor_hidden=(8,),
    critic_hidden=(8,),
    eval_episodes=2,
    eval_max_steps=10,
    absolute_eval_factor=1,
)
#: case -> the run's config changes (every loss, every head that is not "auto")
CASES = {
    "dpo": dict(env="gymnax:CartPole-v1", loss="dpo"),
    "tanh_gaussian": dict(env="gymnax:Pendulum-v1", action_head="tanh_gaussian", loss="kl_penalty"),
    "beta": dict(
        env="gymnax:Pendulum-v1", action_head="beta", loss="dpo", normalize_observations=True
    ),
    "multi_discrete": dict(
        env="jumanji:Minesweeper-v0", action_head="multi_discrete", one_hot_observations=True
    ),
}


def _restore(run, config):
    ck = Checkpointer(RunDir(run).checkpoints, keep=None)
    try:
        return ck.restore(abstract_checkpoint(make_ppo(config)))[0]
    finally:
        ck.close()


@pytest.fixture(scope="module", params=list(CASES))
def runs(request, tmp_path_factory):
    """The case's config, a run of two epochs, and one stopped after the first and resumed."""
    config = dataclasses.replace(TINY, **CASES[request.param])  # type: ignore[arg-type]
    root = tmp_path_factory.mktemp(request.param)
    train_ppo(config, root / "full", progress=False)
    train_ppo(config, root / "split", progress=False, num_evals=1)
    train_ppo(config, root / "split", progress=False, resume=True)
    return config, root / "full", root / "split"


def test_a_resumed_run_ends_as_the_uninterrupted_one(runs):
    config, full, split = runs
    a, b = _restore(full, config), _restore(split, config)
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


def test_the_loaded_agent_acts_in_the_environments_action_space(runs):
    config, full, _ = runs
    for which, sample in (("best", False), ("latest", True)):
        loaded = load_agent(full, which=which, sample=sample)
        env = loaded.env
        states, _ = jax.vmap(env.init)(jax.random.split(jax.random.PRNGKey(0), 6))
        out = loaded.policy(states, jax.random.PRNGKey(1))
        action = np.asarray(out.action)
        if env.continuous:
            assert action.shape == (6, 1) and ((action >= -2.0) & (action <= 2.0)).all()
            assert np.asarray(out.weights).shape == (6, 1)
        else:
            assert action.shape == (6,) and ((action >= 0) & (action < env.num_actions)).all()
            weights = np.asarray(out.weights)  # the policy over the flat actions
            assert weights.shape == (6, env.num_actions)
            np.testing.assert_allclose(weights.sum(-1), 1.0, rtol=1e-5)
        result = play_match(
            env, loaded.agent, None, jax.random.PRNGKey(2), num_games=2, max_steps=5
        )
        assert np.isfinite(result.mean_return_a)
    assert loaded.config == config


def test_evaluate_run_and_turbozero_eval_play_the_run(runs, capsys):
    from turbozero.cli import main

    _, full, _ = runs
    stats = evaluate_run(full, num_episodes=2, max_steps=5)
    assert stats["episodes"] == 2 and np.isfinite(stats["return_mean"])
    capsys.readouterr()
    assert main(["eval", str(full), "--games", "2", "--max-steps", "5", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["games"] == 2 and np.isfinite(out["mean_return"])
