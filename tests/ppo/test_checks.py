"""Learning checks (slow, `make check`): the PPO presets learn their environments within 5e5 steps.

A check passes when an evaluation (greedy, `eval_episodes` episodes) during the run reaches the
threshold; every evaluation in these runs happens at or before 5e5 environment steps per seed.
Timings (2 shared CPU cores, compile included) are in each test's docstring.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from turbozero.config import get_preset
from turbozero.io.rundir import RunDir
from turbozero.ppo import PPOConfig, train_ppo

MAX_STEPS = 500_000


def _best_per_seed(run) -> np.ndarray:
    """`[S]` highest evaluation return of each seed at or before `MAX_STEPS` steps."""
    rows = [r for r in RunDir(run).read_metrics() if r["env_steps"] <= MAX_STEPS]
    assert rows, "no evaluation within the step budget"
    return np.max(np.array([r["eval/return_per_seed"] for r in rows], np.float64), axis=0)


def _preset(name: str, **changes) -> PPOConfig:
    cfg = dataclasses.replace(get_preset(name).make(), **changes)  # type: ignore[type-var]
    assert cfg.num_updates * cfg.batch_size <= MAX_STEPS
    return cfg


@pytest.mark.slow
def test_cartpole_reaches_475_within_5e5_steps_for_4_of_5_seeds(tmp_path):
    """5 seeds trained at once (vmap); ~50 s on 2 shared CPU cores, every seed first reached
    475 between 2e4 and 1e5 steps."""
    cfg = _preset("ppo_cartpole", num_seeds=5, num_updates=960, num_updates_per_eval=40)
    train_ppo(cfg, tmp_path / "cartpole", preset="ppo_cartpole", progress=False)
    best = _best_per_seed(tmp_path / "cartpole")
    assert np.sum(best >= 475.0) >= 4, f"best evaluation return per seed: {best.tolist()}"


@pytest.mark.slow
def test_acrobot_reaches_minus_100_within_5e5_steps(tmp_path):
    """The `ppo_acrobot` preset as registered; ~30 s on 2 shared CPU cores, first >= -100 at
    1.2e5 steps, about -80 at the end."""
    cfg = _preset("ppo_acrobot")
    train_ppo(cfg, tmp_path / "acrobot", preset="ppo_acrobot", progress=False)
    best = _best_per_seed(tmp_path / "acrobot")
    assert best[0] >= -100.0, f"best evaluation return: {best.tolist()}"


@pytest.mark.slow
def test_pendulum_reaches_minus_200_within_5e5_steps_for_3_of_4_seeds(tmp_path):
    """The `ppo_pendulum` preset (continuous actions, a Gaussian policy) with 4 seeds at once and
    240 updates (its learning rate decays over those); uniform random torques score about -1200
    here. ~35 s on 2 shared CPU cores; in the run that set the threshold the seeds scored -161 to
    -497 at the first evaluation (8e4 steps) and their best were -111, -120, -143 and -182."""
    cfg = _preset("ppo_pendulum", num_seeds=4, seed=1, num_updates=240, num_updates_per_eval=40)
    train_ppo(cfg, tmp_path / "pendulum", preset="ppo_pendulum", progress=False)
    best = _best_per_seed(tmp_path / "pendulum")
    assert np.sum(best >= -200.0) >= 3, f"best evaluation return per seed: {best.tolist()}"
