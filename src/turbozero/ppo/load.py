"""Agents from PPO run directories: `load_agent` for the arena (`play_match`, `turbozero eval`),
`evaluate_run` for training's own evaluation episodes. (The play page serves two-player games,
so not PPO's one-player environments.)

    loaded = load_agent("runs/ppo_cartpole-...")          # best parameters of the best seed
    states, _ = jax.vmap(loaded.env.init)(jax.random.split(key, 8))
    actions = loaded.act(states, key)                      # [8] greedy actions
    result = play_match(loaded.env, loaded.agent, None, key, num_games=32, max_steps=500)

`load_agent` returns a `LoadedAgent`: the `turbozero.arena.Agent` (`agent`), the environment it acts
in (`env`, built from the run's config) and the run's `config`; `act` and `policy` delegate to the
agent. (An `Agent` is a frozen pytree that holds only its parameters, so the environment travels
beside it.) The agent's parameters are `PPOAgentParams`: the actor-critic variables and the
observation-normalisation statistics they were trained with, so the policy sees the observations
exactly as in training.
"""

from __future__ import annotations

import dataclasses
import functools
import os
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from turbozero.arena.agents import AgentOutput, LoadedAgent, legal_mask, make_agent, masked_softmax
from turbozero.io.checkpoint import check_which, restore_checkpoint
from turbozero.io.experiment import read_run_config
from turbozero.io.rundir import find_run_dir
from turbozero.ppo import normalize as obs_norm
from turbozero.ppo.learner import PPO, make_ppo
from turbozero.ppo.networks import ActorCriticParams, Categorical, MultiCategorical
from turbozero.ppo.train import abstract_checkpoint
from turbozero.types import PRNGKey, PyTree


class PPOAgentParams(NamedTuple):
    """The parameters of a PPO agent (one seed).

    Attributes:
        params: actor and critic variables.
        obs_stats: observation statistics (`[*O]`), used when the config normalises observations.
    """

    params: ActorCriticParams
    obs_stats: obs_norm.RunningStats


@dataclasses.dataclass(frozen=True, eq=False)
class PPOPolicy:
    """`policy_fn(PPOAgentParams, states [B, ...], key) -> AgentOutput` of a PPO actor-critic.

    The action is the mode of the policy (greedy) or a sample (`sample=True`); illegal actions are
    masked. For discrete actions `weights` is the masked policy `[B, A]` (for the multi-discrete
    head, the probability of each flat action: its components' in order, each masked given the
    earlier ones); for continuous ones (`action [B, D]` float32, within the bounds) `weights` is
    zeros `[B, D]`, as a density has no per-action weights. `value` is the critic's estimate
    `[B]`. Hashed by identity.
    """

    ppo: PPO
    sample: bool = False

    def __call__(self, params: PPOAgentParams, states: PyTree, key: PRNGKey) -> AgentOutput:
        env, ppo = self.ppo.env, self.ppo
        observations = jax.vmap(env.observe)(states)
        mask = None if env.continuous else legal_mask(env, states)
        action = ppo.act(
            params.params,
            params.obs_stats,
            observations,
            key,
            greedy=not self.sample,
            action_mask=mask,
        )
        obs = observations.astype(jnp.float32)
        if ppo.config.normalize_observations:
            obs = obs_norm.normalize(params.obs_stats, obs, clip=ppo.config.obs_clip)
        value = ppo.network.value(params.params.critic, obs)
        dist = ppo.network.policy(params.params.actor, obs)
        if isinstance(dist, Categorical):
            assert mask is not None
            weights = masked_softmax(dist.logits, mask)
        elif isinstance(dist, MultiCategorical):
            assert mask is not None and env.action_components is not None
            joint = dist._replace(mask=jnp.reshape(mask, (-1, *env.action_components)))
            weights = masked_softmax(joint.joint_log_probs(), mask)
        else:
            weights = jnp.zeros(action.shape, jnp.float32)
        return AgentOutput(action, weights, value)


def best_seed(scores: np.ndarray) -> int:
    """The seed with the highest evaluation return; a diverged one (NaN) only if all are."""
    return int(np.argmax(np.where(np.isnan(scores), -np.inf, scores)))


def _restore(
    path: str | os.PathLike[str], which: str, seed: int | None, step: int | None
) -> tuple[PPO, PPOAgentParams, int, int]:
    check_which(which)
    run = find_run_dir(path)
    config, _ = read_run_config(run, "ppo")
    if seed is not None and not 0 <= seed < config.num_seeds:
        raise ValueError(f"seed must be in [0, {config.num_seeds}), got {seed}")
    ppo = make_ppo(config)
    ckpt, meta, step = restore_checkpoint(run.checkpoints, abstract_checkpoint(ppo), step=step)
    if which == "best":
        params, stats = ckpt.best_params, ckpt.best_obs_stats
        scores = np.asarray(ckpt.best_return)
    else:
        params, stats = ckpt.learner.params, ckpt.learner.obs_stats
        per_seed = meta.get("eval", {}).get("eval/return_per_seed")
        scores = np.asarray(per_seed if per_seed else np.zeros(config.num_seeds), np.float64)
    if seed is None:
        seed = best_seed(scores)
    one = jax.tree.map(lambda x: x[seed], PPOAgentParams(params, stats))
    return ppo, one, seed, int(step)


def load_agent(
    path: str | os.PathLike[str],
    *,
    which: str = "best",
    sample: bool = False,
    seed: int | None = None,
    step: int | None = None,
) -> LoadedAgent:
    """Restore a PPO agent from a run directory written by `train_ppo`.

    Args:
        path: the run directory.
        which: "best" (each seed's parameters with the highest evaluation return, as stored in the
            checkpoint) or "latest" (the parameters being trained at the checkpoint).
        sample: act by sampling the policy instead of taking its mode.
        seed: which of the run's `num_seeds` agents; None takes the best-scoring one (by best
            evaluation return for "best", by the last evaluation for "latest").
        step: checkpoint step (epoch) to load; None takes the newest.

    Raises:
        FileNotFoundError: no run directory or no checkpoint in it.
        ValueError: not a PPO run, `which` or `seed` out of range; orbax errors for a missing step.
    """
    ppo, params, seed, step = _restore(path, which, seed, step)
    name = f"ppo:{ppo.config.env}:{which}@{step}"
    agent = make_agent(PPOPolicy(ppo, sample=bool(sample)), params, name=name)
    path = find_run_dir(path).path
    return LoadedAgent(agent, ppo.env, ppo.config, path, step, "ppo", seed=seed)


def load(
    path: str | os.PathLike[str], *, which: str, step: int | None, temperature: float = 0.0
) -> LoadedAgent:
    """`load_agent` as `turbozero.load_agent` calls it (`turbozero.algorithms`): the best
    seed's agent, greedy at `temperature` 0 and sampling its policy above."""
    return load_agent(path, which=which, sample=temperature > 0, step=step)


def evaluate_run(
    path: str | os.PathLike[str],
    *,
    num_episodes: int,
    which: str = "best",
    seed: int | None = None,
    eval_seed: int = 0,
    max_steps: int | None = None,
) -> dict[str, Any]:
    """Evaluate a PPO run's agent on `num_episodes` fresh episodes, as training evaluates.

    The episodes run as in training's evaluation (`PPO.evaluate`, policy mode unless the config
    sets `eval_greedy=False`), cut after `max_steps` (default: the config's `eval_max_steps`).

    Args:
        path: the run directory.
        num_episodes: >= 1 episodes, all run in parallel.
        which, seed: as in `load_agent`.
        eval_seed: seed of the evaluation episodes.
        max_steps: >= 1, override of `eval_max_steps`.

    Returns:
        `return_mean`, `return_std`, `return_min`, `return_max`, `length_mean`, `finished`
        (the fraction of episodes that ended within `max_steps`; floats) and
        `episodes`, `env`, `which`, `seed`, `step`.
    """
    if num_episodes < 1:
        raise ValueError(f"num_episodes must be >= 1, got {num_episodes}")
    if max_steps is not None and max_steps < 1:
        raise ValueError(f"max_steps must be >= 1, got {max_steps}")
    ppo, params, seed, step = _restore(path, which, seed, None)
    if max_steps is not None and max_steps != ppo.config.eval_max_steps:
        ppo = make_ppo(dataclasses.replace(ppo.config, eval_max_steps=int(max_steps)))
    evaluate = jax.jit(functools.partial(ppo.evaluate, num_episodes=int(num_episodes)))
    stats = evaluate(params.params, params.obs_stats, jax.random.PRNGKey(eval_seed))
    return {
        **{k: float(v) for k, v in stats.items()},
        "episodes": int(num_episodes),
        "env": ppo.config.env,
        "which": which,
        "seed": seed,
        "step": step,
    }
