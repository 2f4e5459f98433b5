"""Learning checks (slow, `make check`): the PPO presets learn their environments within 5e5 steps,
and so do DPO and the bounded action heads; the multi-discrete head within 1e6 steps.

A check passes when an evaluation (greedy, `eval_episodes` episodes) during the run reaches the
threshold; every evaluation in these runs happens at or before the step budget per seed.
Timings (2 shared CPU cores, compile included) are in each test's docstring; the figures are in
docs/benchmarks.md ("PPO losses and action heads").
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from turbozero.config import get_preset
from turbozero.io.rundir import RunDir
from turbozero.ppo import PPOConfig, train_ppo

MAX_STEPS = 500_000


def _best_per_seed(run, max_steps: int = MAX_STEPS) -> np.ndarray:
    """`[S]` highest evaluation return of each seed at or before `max_steps` steps."""
    rows = [r for r in RunDir(run).read_metrics() if r["env_steps"] <= max_steps]
    assert rows, "no evaluation within the step budget"
    return np.max(np.array([r["eval/return_per_seed"] for r in rows], np.float64), axis=0)


def _preset(name: str, max_steps: int = MAX_STEPS, **changes) -> PPOConfig:
    cfg = dataclasses.replace(get_preset(name).make(), **changes)  # type: ignore[type-var]
    assert cfg.num_updates * cfg.batch_size <= max_steps
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


@pytest.mark.slow
def test_dpo_on_cartpole_reaches_475_within_5e5_steps_for_4_of_5_seeds(tmp_path):
    """The CartPole check with Discovered Policy Optimisation's loss (alpha 2, beta 0.6) in
    place of clipping; ~35 s on 2 shared CPU cores."""
    cfg = _preset("ppo_cartpole", num_seeds=5, num_updates=960, num_updates_per_eval=40, loss="dpo")
    train_ppo(cfg, tmp_path / "dpo", preset="ppo_cartpole", progress=False)
    best = _best_per_seed(tmp_path / "dpo")
    assert np.sum(best >= 475.0) >= 4, f"best evaluation return per seed: {best.tolist()}"


@pytest.mark.slow
@pytest.mark.parametrize("head", ["tanh_gaussian", "beta"])
def test_bounded_heads_on_pendulum_reach_minus_200_within_5e5_steps_for_3_of_4_seeds(
    tmp_path, head
):
    """The Pendulum check's settings with the policy's torques squashed (tanh) or drawn from a
    Beta, both within [-2, 2]; ~60-75 s each on 2 shared CPU cores."""
    cfg = _preset(
        "ppo_pendulum",
        num_seeds=4,
        seed=1,
        num_updates=240,
        num_updates_per_eval=40,
        action_head=head,
    )
    train_ppo(cfg, tmp_path / head, preset="ppo_pendulum", progress=False)
    best = _best_per_seed(tmp_path / head)
    assert np.sum(best >= -200.0) >= 3, f"best evaluation return per seed: {best.tolist()}"


MINESWEEPER_STEPS = 1_000_000
#: the multi-discrete check's settings (2 seeds, 64 envs x 32 steps, 480 updates = 983,040 steps
#: per seed): the board one-hot (10 flags per cell) for ReLU networks; see docs/benchmarks.md,
#: "PPO losses and action heads", for the settings tried before
MINESWEEPER_CHECK = PPOConfig(
    env="jumanji:Minesweeper-v0",
    one_hot_observations=True,
    action_head="multi_discrete",
    num_seeds=2,
    num_envs=64,
    rollout_length=32,
    num_updates=480,
    num_updates_per_eval=40,
    epochs=4,
    num_minibatches=8,
    actor_hidden=(256, 256),
    critic_hidden=(256, 256),
    activation="relu",
    actor_lr=1e-3,
    critic_lr=1e-3,
    ent_coef=0.003,
    reward_scale=0.1,
    eval_episodes=128,
    eval_max_steps=100,
)


def _random_return(env, episodes: int = 2048) -> float:
    """Mean return of uniformly random legal actions (the arena's random agent)."""
    import jax

    from turbozero.arena import play_match
    from turbozero.arena.agents import random_agent

    result = play_match(
        env, random_agent(env), None, jax.random.PRNGKey(0), num_games=episodes, max_steps=100
    )
    return float(result.mean_return_a)


@pytest.mark.slow
def test_multi_discrete_head_on_minesweeper_doubles_the_random_return_within_1e6_steps(tmp_path):
    """jumanji Minesweeper-v0 (10 x 10, 10 mines; reward 1 per safe cell revealed, a mine or a
    revealed cell ends the episode) with one categorical for the row and one for the column,
    the column masked given the row, the board one-hot. Uniformly random legal cells score about
    8.5. ~6 min on 2 shared CPU cores."""
    from turbozero import envs

    cfg = MINESWEEPER_CHECK
    env = envs.make(cfg.env)
    assert env.action_components == (10, 10)
    baseline = _random_return(env)
    assert cfg.num_updates * cfg.batch_size <= MINESWEEPER_STEPS
    train_ppo(cfg, tmp_path / "minesweeper", progress=False)
    best = _best_per_seed(tmp_path / "minesweeper", max_steps=MINESWEEPER_STEPS)
    assert np.sum(best >= 2 * baseline) >= 2, (
        f"best evaluation return per seed: {best.tolist()}, random: {baseline:.2f}"
    )
