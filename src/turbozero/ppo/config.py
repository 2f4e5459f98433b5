"""`PPOConfig`, the typed configuration of an Anakin PPO run, and its presets.

One update collects `num_envs * rollout_length` transitions (per seed and per device), then runs
`epochs` passes of `num_minibatches` shuffled minibatches over them. One compiled `update` call runs
`num_updates_per_eval` updates; a run is `num_updates` updates in all.
"""

from __future__ import annotations

import dataclasses

from turbozero.config import (
    INT32_MAX,
    ConfigError,
    RunSettings,
    check_choice,
    check_range,
    register_preset,
)

LOSSES = ("clip", "kl_penalty", "dpo")
#: the policy's action heads (`turbozero.ppo.networks`), listed once; the config adds "auto"
HEADS = ("categorical", "gaussian", "tanh_gaussian", "beta", "multi_discrete")
ACTION_HEADS = ("auto", *HEADS)
SCHEDULES = ("constant", "linear")
ACTIVATIONS = ("tanh", "relu", "gelu", "silu", "elu")


@dataclasses.dataclass(frozen=True)
class PPOConfig(RunSettings):
    """Hyperparameters of PPO (see the field comments; ranges are checked in `validate`); the
    run settings are the shared group's (`RunSettings`)."""

    env: str = "gymnax:CartPole-v1"  # environment id for `turbozero.envs.make`
    one_hot_observations: bool = False  # jumanji: small integer fields as one-hot flags
    num_seeds: int = 1  # independent agents trained in parallel (vmap) by `train_ppo`
    # Scale.
    num_envs: int = 4  # parallel environments per seed (per device)
    rollout_length: int = 128  # steps per environment per update
    num_updates: int = 100  # updates in the whole run
    num_updates_per_eval: int = 10  # updates per compiled call, between evaluations
    epochs: int = 4
    num_minibatches: int = 4
    # Objective.
    gamma: float = 0.99
    gae_lambda: float = 0.95
    loss: str = "clip"  # "clip" (clipped surrogate), "kl_penalty" or "dpo" (Lu et al. 2022)
    clip_eps: float = 0.2  # policy ratio clipping radius (loss="clip")
    kl_coef: float = 3.0  # KL penalty weight (loss="kl_penalty")
    dpo_alpha: float = 2.0  # DPO drift's scale where the advantage is >= 0 (loss="dpo")
    dpo_beta: float = 0.6  # DPO drift's scale where the advantage is < 0 (loss="dpo")
    value_clip_eps: float = 0.2  # value clipping radius; 0 turns value clipping off
    ent_coef: float = 0.01
    vf_coef: float = 0.5  # the critic's loss weight (its own Adam mostly undoes it; clipping not)
    standardize_advantages: bool = True  # once per update over its whole batch, all devices
    reward_scale: float = 1.0  # rewards are multiplied by this before GAE
    # Optimisation (separate Adam optimisers for the actor and the critic).
    actor_lr: float = 3e-4
    critic_lr: float = 3e-4
    lr_schedule: str = "linear"  # "constant" or "linear" decay to 0 over the run
    max_grad_norm: float = 0.5  # global-norm clipping of each network's gradients
    adam_eps: float = 1e-5
    # Observation normalisation (running mean/var, part of the learner state).
    normalize_observations: bool = False
    obs_norm_warmup_steps: int = 16  # random-action steps per environment to seed the statistics
    obs_clip: float = 10.0
    # Networks.
    actor_hidden: tuple[int, ...] = (64, 64)
    critic_hidden: tuple[int, ...] = (64, 64)
    activation: str = "tanh"
    layer_norm: bool = False
    # The policy's distribution: "auto" (categorical for discrete actions, Gaussian for continuous
    # ones), "categorical", "gaussian" (clipped to the bounds when stepping), "tanh_gaussian" or
    # "beta" (both within finite bounds), "multi_discrete" (one categorical per component).
    action_head: str = "auto"  # auto, categorical, gaussian, tanh_gaussian, beta, multi_discrete
    init_log_std: float = 0.0  # the Gaussian heads' (gaussian, tanh_gaussian) only
    # Evaluation.
    eval_episodes: int = 16
    eval_greedy: bool = True  # mode of the policy (True) or samples (False)
    eval_max_steps: int = 1000  # an evaluation episode is cut after this many steps
    absolute_eval_factor: int = 10  # the best params are re-evaluated with this many x episodes

    def validate(self) -> None:
        if not isinstance(self.env, str) or not self.env:
            raise ConfigError(f"env must be a non-empty environment id, got {self.env!r}")
        if self.one_hot_observations and not self.env.startswith("jumanji:"):
            raise ConfigError(
                f"one_hot_observations is for jumanji's environments ('jumanji:...'), not "
                f"{self.env!r}"
            )
        super().validate()  # (the run group)
        check_range("num_seeds", self.num_seeds, low=1)
        for name in (
            "num_envs",
            "rollout_length",
            "num_updates",
            "num_updates_per_eval",
            "epochs",
            "num_minibatches",
            "eval_episodes",
            "eval_max_steps",
            "absolute_eval_factor",
        ):
            check_range(name, getattr(self, name), low=1)
        check_range("obs_norm_warmup_steps", self.obs_norm_warmup_steps, low=0)
        batch = self.num_envs * self.rollout_length
        if batch % self.num_minibatches:
            raise ConfigError(
                f"num_minibatches must divide num_envs * rollout_length = {self.num_envs} * "
                f"{self.rollout_length} = {batch}, got num_minibatches={self.num_minibatches}"
            )
        if self.num_updates % self.num_updates_per_eval:
            raise ConfigError(
                f"num_updates_per_eval must divide num_updates = {self.num_updates}, got "
                f"num_updates_per_eval={self.num_updates_per_eval}"
            )
        check_range("gamma", self.gamma, low=0.0, high=1.0)
        check_range("gae_lambda", self.gae_lambda, low=0.0, high=1.0)
        check_choice("loss", self.loss, LOSSES)
        check_range("clip_eps", self.clip_eps, low=0.0, low_inclusive=False)
        check_range("kl_coef", self.kl_coef, low=0.0)
        check_range("dpo_alpha", self.dpo_alpha, low=0.0, low_inclusive=False)
        check_range("dpo_beta", self.dpo_beta, low=0.0, low_inclusive=False)
        check_range("value_clip_eps", self.value_clip_eps, low=0.0)
        check_range("ent_coef", self.ent_coef, low=0.0)
        check_range("vf_coef", self.vf_coef, low=0.0, low_inclusive=False)
        check_range("reward_scale", self.reward_scale, low=0.0, low_inclusive=False)
        check_range("actor_lr", self.actor_lr, low=0.0, low_inclusive=False)
        check_range("init_log_std", self.init_log_std, low=-20.0, high=5.0)
        check_range("critic_lr", self.critic_lr, low=0.0, low_inclusive=False)
        check_choice("lr_schedule", self.lr_schedule, SCHEDULES)
        steps = self.num_updates * self.epochs * self.num_minibatches
        if self.lr_schedule == "linear" and steps > INT32_MAX:
            # (the decay counts optimizer steps in int32 inside the compiled update)
            raise ConfigError(
                f"lr_schedule='linear' decays over num_updates * epochs * num_minibatches = "
                f"{steps:,} optimizer steps, more than int32 holds ({INT32_MAX:,}): lower one "
                f"of the three, or use lr_schedule='constant'"
            )
        check_range("max_grad_norm", self.max_grad_norm, low=0.0, low_inclusive=False)
        check_range("adam_eps", self.adam_eps, low=0.0, low_inclusive=False)
        check_range("obs_clip", self.obs_clip, low=0.0, low_inclusive=False)
        for name in ("actor_hidden", "critic_hidden"):
            sizes = getattr(self, name)
            if any(int(s) < 1 for s in sizes):
                raise ConfigError(f"{name} must hold layer sizes >= 1, got {tuple(sizes)}")
        check_choice("activation", self.activation, ACTIVATIONS)
        check_choice("action_head", self.action_head, ACTION_HEADS)

    @property
    def batch_size(self) -> int:
        """Transitions collected per update (per seed and device)."""
        return self.num_envs * self.rollout_length

    @property
    def minibatch_size(self) -> int:
        return self.batch_size // self.num_minibatches

    @property
    def num_evals(self) -> int:
        """Compiled `update` calls (and evaluations) in a run."""
        return self.num_updates // self.num_updates_per_eval


register_preset(
    "ppo_cartpole",
    "PPO on gymnax CartPole-v1 (4 envs x 128 steps, ~0.5M steps)",
    algorithm="ppo",
    settings={
        "env": "gymnax:CartPole-v1",
        "num_envs": 4,
        "rollout_length": 128,
        "num_updates": 1000,
        "num_updates_per_eval": 50,
        "epochs": 4,
        "num_minibatches": 4,
        "actor_lr": 2.5e-4,
        "critic_lr": 2.5e-4,
        "eval_max_steps": 500,
    },
)

register_preset(
    "ppo_acrobot",
    "PPO on gymnax Acrobot-v1 (16 envs x 128 steps, ~0.5M steps)",
    algorithm="ppo",
    settings={
        "env": "gymnax:Acrobot-v1",
        "num_envs": 16,
        "rollout_length": 128,
        "num_updates": 240,
        "num_updates_per_eval": 20,
        "epochs": 4,
        "num_minibatches": 8,
        "actor_lr": 1e-3,
        "critic_lr": 1e-3,
        "normalize_observations": True,
        "eval_max_steps": 500,
    },
)

register_preset(
    "ppo_pendulum",
    "PPO on gymnax Pendulum-v1 (continuous, 16 envs x 128 steps, ~2M steps)",
    algorithm="ppo",
    settings={
        "env": "gymnax:Pendulum-v1",
        "num_envs": 16,
        "rollout_length": 128,
        "num_updates": 1000,
        "num_updates_per_eval": 50,
        "epochs": 10,
        "num_minibatches": 32,
        "gamma": 0.95,
        "gae_lambda": 0.95,
        "ent_coef": 0.0,
        "actor_lr": 1e-3,
        "critic_lr": 1e-3,
        "reward_scale": 0.1,
        "normalize_observations": True,
        "eval_max_steps": 200,
    },
)
