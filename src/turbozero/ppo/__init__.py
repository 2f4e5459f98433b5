"""Anakin-style PPO: rollouts, GAE, losses and updates compiled as one program per call.

Importing this package registers the PPO presets (`ppo_cartpole`, `ppo_acrobot`, `ppo_pendulum`).
"""

from turbozero.ppo.autoreset import AutoResetEnv, AutoResetState, StepOutput, make_autoreset
from turbozero.ppo.config import PPOConfig
from turbozero.ppo.distributions import (
    Categorical,
    DiagGaussian,
    MultiCategorical,
    ScaledBeta,
    TanhGaussian,
)
from turbozero.ppo.gae import truncated_gae
from turbozero.ppo.learner import (
    PPO,
    Hyperparams,
    LearnerState,
    Transition,
    absolute_evaluate,
    make_ppo,
    stack_hyperparams,
)
from turbozero.ppo.load import LoadedAgent, PPOAgentParams, evaluate_run, load_agent
from turbozero.ppo.losses import (
    clipped_value_loss,
    dpo_loss,
    entropy_bonus,
    ppo_clip_loss,
    ppo_kl_penalty_loss,
)
from turbozero.ppo.networks import ActorCritic, ActorCriticParams, make_actor_critic
from turbozero.ppo.normalize import RunningStats
from turbozero.ppo.train import CheckpointState, train_ppo

__all__ = [
    "PPO",
    "ActorCritic",
    "ActorCriticParams",
    "AutoResetEnv",
    "AutoResetState",
    "Categorical",
    "CheckpointState",
    "DiagGaussian",
    "Hyperparams",
    "LearnerState",
    "LoadedAgent",
    "MultiCategorical",
    "PPOAgentParams",
    "PPOConfig",
    "RunningStats",
    "ScaledBeta",
    "StepOutput",
    "TanhGaussian",
    "Transition",
    "absolute_evaluate",
    "clipped_value_loss",
    "dpo_loss",
    "entropy_bonus",
    "evaluate_run",
    "load_agent",
    "make_actor_critic",
    "make_autoreset",
    "make_ppo",
    "ppo_clip_loss",
    "ppo_kl_penalty_loss",
    "stack_hyperparams",
    "train_ppo",
    "truncated_gae",
]
