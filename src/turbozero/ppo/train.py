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

from pathlib import Path
from typing import Any

import jax
import numpy as np

from turbozero.config import resolve_config
from turbozero.io.experiment import Run, RunHooks, train_in_one_process
from turbozero.ppo.config import PPOConfig
from turbozero.ppo.learner import (
    CheckpointState,
    absolute_evaluate,
    abstract_checkpoint,
    epoch_metrics,
    eval_row,
    initial_checkpoint,
    keep_best,
    make_ppo,
    seed_means,
)
from turbozero.struct import pytree_bytes

ALGORITHM = "ppo"
#: settings a resumed PPO run may change (where it logs; its length spans the LR schedule)
RESUME_MAY_CHANGE = ("tensorboard", "wandb_project")
__all__ = ["CheckpointState", "abstract_checkpoint", "train_ppo"]


#: why a resumed PPO run may not change a setting, said when it is refused
RESUME_NOTES = {
    "num_updates": "num_updates also spans the learning-rate schedule, so a PPO run's length "
    "cannot change when it resumes: start a new run to train longer",
}


class PPORun(RunHooks):
    """PPO's steps in the experiment runner: an epoch is one compiled call of
    `num_updates_per_eval` updates for every seed; each is then evaluated and keeps its best
    parameters. The state is a `CheckpointState`."""

    name = ALGORITHM
    config_class = PPOConfig
    resume_may_change = RESUME_MAY_CHANGE
    resume_notes = RESUME_NOTES

    def __init__(self, config: PPOConfig):
        super().__init__(config)
        self.max_wall_seconds = 0.0  # (PPO runs have no wall-clock budget)
        self.ppo = make_ppo(config)  # before the run directory: a refused setting leaves none
        self.steps_per_epoch = config.num_updates_per_eval * config.batch_size  # per seed
        self.epochs = config.num_evals
        self.update = jax.jit(jax.vmap(self.ppo.update))
        self.evaluate_seeds = jax.jit(jax.vmap(self.ppo.evaluate))

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
        return pytree_bytes(abstract_checkpoint(self.ppo)), what, lower

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

    def evaluate(
        self, run: Run, state: CheckpointState, epoch: int, *, out_of_time: bool
    ) -> tuple[CheckpointState, dict[str, Any]]:
        """Every seed after every epoch; each keeps its best parameters (`keep_best`)."""
        eval_key, key = jax.random.split(state.eval_key)
        learner = state.learner
        keys = jax.random.split(key, self.config.num_seeds)
        returns = self.evaluate_seeds(learner.params, learner.obs_stats, keys)
        state = keep_best(state._replace(eval_key=eval_key), returns["return_mean"])
        self.eval_row = eval_row(returns)
        return state, self.eval_row

    def checkpoint(self, state: CheckpointState, epoch: int) -> tuple[Any, dict[str, Any]]:
        return state, self.saved_record(
            updates=epoch * self.config.num_updates_per_eval,
            env_steps=self.env_steps(epoch),
            best_return_per_seed=np.asarray(state.best_return).tolist(),
        )

    def summary(self, state: CheckpointState, epoch: int, row: dict, *, final: bool) -> dict:
        """Once the run is complete, `eval` adds the best parameters re-evaluated with
        `absolute_eval_factor` times the episodes (`absolute`)."""
        cfg = self.config
        updates = epoch * cfg.num_updates_per_eval
        record = self.summary_record(seeds=cfg.num_seeds, updates=updates)
        if final and epoch == cfg.num_evals:
            _, key = jax.random.split(state.eval_key)
            absolute = jax.jit(jax.vmap(absolute_evaluate(self.ppo)))(
                state.best_params, state.best_obs_stats, jax.random.split(key, cfg.num_seeds)
            )
            record["eval"].update(
                absolute=seed_means(absolute),
                absolute_return_per_seed=np.asarray(absolute["return_mean"]).tolist(),
                absolute_episodes=cfg.eval_episodes * cfg.absolute_eval_factor,
            )
        return record


def train_ppo(
    config: PPOConfig | str,
    run_dir: str | Path | None = None,
    *,
    resume: bool = False,
    preset: str | None = None,
    progress: bool | None = None,
    num_evals: int | None = None,
    check_memory: bool = True,
) -> dict[str, Any]:
    """Train `config.num_seeds` PPO agents in parallel; returns the summary (also `summary.json`).

    Args:
        config: a `PPOConfig`, or the name of a registered PPO preset.
        run_dir: where to write; defaults to `runs/PRESET-TIMESTAMP`. An existing run directory is
            an error unless `resume`.
        resume: continue the run in `run_dir` from its latest checkpoint, exactly (its saved config
            must equal `config`). Without a checkpoint yet, the run starts from scratch.
        preset: the preset name to record (filled in when `config` is a preset name).
        progress: rich progress bar (default: when stdout is a terminal); plain lines otherwise.
        num_evals: stop after this many epochs (compiled calls, each followed by an evaluation) in
            total, default `config.num_evals`; a later `resume` continues to `config.num_evals`.
            The learning-rate schedule always spans `config.num_updates`.
        check_memory: refuse a run whose state would not fit in this machine's memory
            (`TooLargeError`, before anything is written); False to try anyway.

    Returns:
        The summary: `preset`, `env`, `updates` and `env_steps` (per seed) done so far,
        `wall_seconds` (over resumes), `final_metrics` (training metrics of the last epoch, seed
        means; episode statistics over the episodes finished during it), `eval` (the last
        evaluation, seed means and per-seed returns, and once the run is complete `absolute`: the
        best parameters re-evaluated with `absolute_eval_factor` times the episodes).

    Raises:
        FileExistsError: `run_dir` exists and `resume` is False, or another training holds it
            (`RunInUseError`).
        FileNotFoundError: `resume` and `run_dir` is not a run directory.
        ValueError: `resume` with a different config or a run of another algorithm.
    """
    config, preset = resolve_config(config, preset, algorithm=ALGORITHM, config_class=PPOConfig)
    return train_in_one_process(
        PPORun, config, preset, run_dir, resume=resume, progress=progress,
        stop_after=("num_evals", num_evals), check_memory=check_memory,
    )  # fmt: skip
