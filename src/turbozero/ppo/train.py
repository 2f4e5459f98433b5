"""`train_ppo`: the run hooks of PPO for the experiment runner (`turbozero.io.experiment`).

Each epoch runs one compiled call of `num_updates_per_eval` updates for all `num_seeds` seeds
(`vmap`), evaluates every seed and keeps each seed's best parameters and observation statistics
(by mean evaluation return; `turbozero.ppo.learner.keep_best`). At the end the best parameters
are re-evaluated with `absolute_eval_factor` times as many episodes (the "absolute metric").

A checkpoint holds `CheckpointState` (`turbozero.ppo.learner`): the seed-batched `LearnerState`,
each seed's best parameters and statistics with their evaluation return, and the evaluation
key. Resuming from it continues the run exactly: `N` epochs, then a resumed run to `N + M`,
ends with the same parameters as `N + M` epochs in one go. Ctrl-C or SIGTERM finishes the
current epoch, saves and returns (a second Ctrl-C aborts at once).
"""

from __future__ import annotations

from typing import Any

import jax
import numpy as np

from turbozero.io.experiment import Run, RunHooks
from turbozero.ppo.config import PPOConfig
from turbozero.ppo.learner import (
    CheckpointState,
    absolute_entries,
    abstract_checkpoint,
    epoch_metrics,
    initial_checkpoint,
    make_ppo,
    make_seed_evaluation,
)

ALGORITHM = "ppo"
#: settings a resumed PPO run may change, from its groups: where it logs (its length spans the
#: LR schedule)
RESUME_MAY_CHANGE = PPOConfig.resume_may_change()
__all__ = ["CheckpointState", "abstract_checkpoint", "train_ppo"]


#: why a resumed PPO run may not change a setting, said when it is refused
RESUME_NOTES = {
    "num_updates": "num_updates also spans the learning-rate schedule, so a PPO run's length "
    "cannot change when it resumes: start a new run to train longer",
}


class PPORun(RunHooks):
    """PPO's steps in the experiment runner: an epoch is one compiled call of
    `num_updates_per_eval` updates for every seed; each is then evaluated and keeps its best
    parameters. The state is a `CheckpointState`.

    `train` (`train_ppo`) stops after `num_evals` epochs (compiled calls, each followed by an
    evaluation) in total, default `config.num_evals`, to which a later `resume` continues; the
    learning-rate schedule always spans `config.num_updates`.
    """

    name = ALGORITHM
    config_class = PPOConfig
    stop_argument = "num_evals"
    resume_may_change = RESUME_MAY_CHANGE
    resume_notes = RESUME_NOTES

    def __init__(self, config: PPOConfig):
        super().__init__(config)
        self.max_wall_seconds = 0.0  # (PPO runs have no wall-clock budget)
        self.ppo = make_ppo(config)  # before the run directory: a refused setting leaves none
        self.steps_per_epoch = config.num_updates_per_eval * config.batch_size  # per seed
        self.epochs = config.num_evals
        self.update = jax.jit(jax.vmap(self.ppo.update))
        # every seed after every epoch; each keeps its best parameters (`keep_best`)
        self.evaluation = make_seed_evaluation(self.ppo)

    def describe(self) -> str:
        cfg = self.config
        return (
            f"{cfg.num_seeds} seed(s) x {cfg.num_envs} envs, {self.steps_per_epoch:,} "
            f"steps/epoch per seed, {cfg.num_evals} epochs"
        )

    def initial_state(self) -> CheckpointState:
        return initial_checkpoint(self.ppo)

    def memory(self) -> tuple[int, str, str]:
        """The state alone: a lower bound (the rollouts come on top), so a refused run could
        never fit."""
        what = "the PPO state (environments, networks, optimizer)"
        lower = "lower num_seeds, num_envs or the network's hidden sizes"
        return self.state_bytes(), what, lower

    def epoch(self, run: Run, state: CheckpointState, epoch: int) -> tuple[CheckpointState, dict]:
        """`num_updates_per_eval` updates of every seed, in one compiled call."""
        cfg = self.config
        (learner, metrics), seconds, timing = self.timed_call(run, self.update, state.learner)
        self.final_metrics = epoch_metrics(metrics)
        row = {
            "updates": epoch * cfg.num_updates_per_eval,
            "env_steps_per_s": self.steps_per_epoch * cfg.num_seeds / max(seconds, 1e-9),
            **timing,
            **self.final_metrics,
        }
        return state._replace(learner=learner), row

    def checkpoint(self, state: CheckpointState, epoch: int) -> tuple[Any, dict[str, Any]]:
        return state, self.saved_record(
            updates=epoch * self.config.num_updates_per_eval,
            env_steps=self.env_steps(epoch),
            best_return_per_seed=np.asarray(state.best_return).tolist(),
        )

    def summary(self, state: CheckpointState, epoch: int, row: dict, *, final: bool) -> dict:
        """`seeds` and `updates` (per seed, as `env_steps`) done so far, `final_metrics`
        (training metrics of the last epoch, seed means; episode statistics over the episodes
        finished during it), `eval` (the last evaluation, seed means and per-seed returns, and
        once the run is complete the best parameters re-evaluated with `absolute_eval_factor`
        times the episodes: `absolute`, `absolute_entries`)."""
        cfg = self.config
        updates = epoch * cfg.num_updates_per_eval
        record = self.summary_record(seeds=cfg.num_seeds, updates=updates)
        if final and epoch == cfg.num_evals:
            record["eval"].update(absolute_entries(self.ppo, state))
        return record


#: train `config.num_seeds` PPO agents in parallel; returns the summary (`RunHooks.train`)
train_ppo = PPORun.train
