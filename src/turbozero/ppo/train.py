"""`train_ppo`: the host loop around the compiled learner, writing a run directory.

Each iteration ("epoch") runs one compiled call of `num_updates_per_eval` updates for all
`num_seeds` seeds (`vmap`), evaluates every seed, keeps each seed's best parameters and observation
statistics (by mean evaluation return), appends one row to `metrics.jsonl` and, every
`checkpoint_every` epochs, saves a checkpoint. At the end the best parameters are re-evaluated with
`absolute_eval_factor` times as many episodes (the "absolute metric"), `summary.json` and the plots
are written.

Run directory (see `turbozero.io.rundir`):

    RUN/config.json      {"algorithm": "ppo", "preset": ..., "config": PPOConfig.to_dict()}
    RUN/checkpoints/     orbax, one step per saved epoch; the newest `keep_checkpoints` are kept
    RUN/metrics.jsonl    one row per epoch (1-based `epoch`, `env_steps` per seed, losses, eval/*)
    RUN/summary.json     preset, env, updates, env_steps, wall_seconds, final_metrics, eval
    RUN/plots/           PNGs of metrics.jsonl

A checkpoint holds `CheckpointState`: the seed-batched `LearnerState` (parameters, both optimiser
states, observation-normalisation statistics, the training environments and the PRNG key), each
seed's best parameters and statistics with their evaluation return, and the evaluation key. Resuming
from it continues the run exactly: `N` epochs, then a resumed run to `N + M`, ends with the same
parameters as `N + M` epochs in one go. Ctrl-C or SIGTERM finishes the current epoch, saves and
returns (a second Ctrl-C aborts at once).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from turbozero.config import get_preset
from turbozero.io.experiment import Run, run_experiment, stamped_run_dir
from turbozero.io.logger import check_logging_extras
from turbozero.io.resources import check_fits_in_memory
from turbozero.io.rundir import RunDir
from turbozero.ppo import normalize as obs_norm
from turbozero.ppo.config import PPOConfig
from turbozero.ppo.learner import PPO, LearnerState, absolute_evaluate, make_ppo
from turbozero.ppo.networks import ActorCriticParams
from turbozero.runtime import configure_or_say_why
from turbozero.struct import pytree_bytes
from turbozero.types import Array, PRNGKey
from turbozero.validate import check_count

ALGORITHM = "ppo"


class CheckpointState(NamedTuple):
    """What a PPO checkpoint holds (`S` seeds; every leaf has a leading `[S]` axis but the key).

    Attributes:
        learner: the seed-batched `LearnerState`.
        best_params: each seed's parameters with the highest mean evaluation return so far.
        best_obs_stats: the observation statistics those parameters were evaluated with.
        best_return: `[S]` that evaluation return (-inf before the first evaluation).
        eval_key: PRNG key consumed by the next evaluation.
    """

    learner: LearnerState
    best_params: ActorCriticParams
    best_obs_stats: obs_norm.RunningStats
    best_return: Array
    eval_key: PRNGKey


#: settings a resumed PPO run may change (where it logs; its length spans the LR schedule)
RESUME_MAY_CHANGE = ("tensorboard", "wandb_project")


def seed_keys(config: PPOConfig) -> tuple[PRNGKey, Array]:
    """The evaluation key and the `[S]` initialisation keys of a run."""
    keys = jax.random.split(jax.random.PRNGKey(config.seed), config.num_seeds + 1)
    return keys[0], keys[1:]


def initial_checkpoint(ppo: PPO) -> CheckpointState:
    """The `CheckpointState` a run starts from (`jit` it: it initialises every seed)."""
    eval_key, keys = seed_keys(ppo.config)
    learner = jax.vmap(ppo.init)(keys)
    return CheckpointState(
        learner=learner,
        best_params=learner.params,
        best_obs_stats=learner.obs_stats,
        best_return=jnp.full((ppo.config.num_seeds,), -jnp.inf, jnp.float32),
        eval_key=eval_key,
    )


def abstract_checkpoint(ppo: PPO) -> Any:
    """Shapes and dtypes of a run's `CheckpointState` (nothing is computed); to restore into."""
    return jax.eval_shape(functools.partial(initial_checkpoint, ppo))


def read_run_config(run: RunDir) -> tuple[PPOConfig, str | None]:
    """The `PPOConfig` and preset name stored in a PPO run directory.

    Raises:
        FileNotFoundError: if `run` has no config.json.
        ValueError: if the run is not a PPO run.
    """
    saved = run.read_config(ALGORITHM)
    return PPOConfig.from_record(saved["config"]), saved.get("preset")


def _floats(tree: dict[str, Any], prefix: str = "") -> dict[str, float]:
    """Seed means of a dict of arrays."""
    return {prefix + k: float(np.mean(np.asarray(v))) for k, v in tree.items()}


def _chunk_metrics(metrics: dict[str, Any]) -> dict[str, float]:
    """Seed-mean training metrics of one call (`[S, U]` leaves): the last update's losses, and
    episode statistics over every episode that finished during the call (NaN if none did)."""
    out = _floats({k: np.asarray(v)[:, -1] for k, v in metrics.items()})
    episodes = np.asarray(metrics["episodes"])
    total = float(episodes.sum())
    for name in ("episode_return", "episode_length"):
        weighted = float((np.asarray(metrics[name]) * episodes).sum())
        out[name] = weighted / total if total > 0 else float("nan")
    out["episodes"] = total / episodes.shape[0]
    return out


def _eval_row(metrics: dict[str, Any]) -> dict[str, Any]:
    """`eval/return` (the seeds' mean of each seed's mean episode return), the other statistics
    likewise as means over seeds of per-seed values (`eval/return_max` is the mean of each
    seed's best episode, not the best over all seeds), and `eval/return_per_seed`."""
    row = {
        ("eval/return" if k == "return_mean" else f"eval/{k}"): v
        for k, v in _floats(metrics).items()
    }
    row["eval/return_per_seed"] = np.asarray(metrics["return_mean"]).tolist()
    return row


@jax.jit
def _keep_best(ckpt: CheckpointState, returns: Array) -> CheckpointState:
    """Keep each seed's parameters whose evaluation beat its best so far; a NaN evaluation (a
    diverged seed) never counts as better and leaves the stored best return as it was."""
    better = returns > ckpt.best_return  # False for NaN

    def pick(new: Array, old: Array) -> Array:
        return jnp.where(better.reshape((-1,) + (1,) * (new.ndim - 1)), new, old)

    params, stats = jax.tree.map(
        pick,
        (ckpt.learner.params, ckpt.learner.obs_stats),
        (ckpt.best_params, ckpt.best_obs_stats),
    )
    return ckpt._replace(
        best_params=params,
        best_obs_stats=stats,
        best_return=jnp.where(better, returns, ckpt.best_return),
    )


def default_run_dir(preset: str | None) -> Path:
    """`runs/PRESET-TIMESTAMP` (`runs/ppo-TIMESTAMP` without a preset)."""
    return stamped_run_dir(preset or ALGORITHM)


def _resolve_config(config: PPOConfig | str, preset: str | None) -> tuple[PPOConfig, str | None]:
    if isinstance(config, str):
        preset = preset or config
        spec = get_preset(config)
        if spec.algorithm != ALGORITHM:
            raise ValueError(f"preset {config!r} is for {spec.algorithm!r}, not {ALGORITHM}")
        config = spec.make()  # type: ignore[assignment]
    if not isinstance(config, PPOConfig):
        raise TypeError(f"config must be a PPOConfig or a preset name, got {type(config).__name__}")
    return config, preset


#: why a resumed PPO run may not change a setting, said when it is refused
RESUME_NOTES = {
    "num_updates": "num_updates also spans the learning-rate schedule, so a PPO run's length "
    "cannot change when it resumes: start a new run to train longer",
}


class _PPORun:
    """PPO's steps in the experiment runner (`turbozero.io.experiment.Algorithm`): an epoch is
    one compiled call of `num_updates_per_eval` updates for every seed; each is then evaluated
    and keeps its best parameters. The state is a `CheckpointState`."""

    name = ALGORITHM
    resume_may_change: tuple[str, ...] = RESUME_MAY_CHANGE
    max_wall_seconds = 0.0  # (PPO runs have no wall-clock budget)

    def __init__(self, config: PPOConfig, ppo: PPO):
        self.config, self.ppo = config, ppo
        self.env_name = config.env
        self.resume_notes: Mapping[str, str] = RESUME_NOTES
        self.steps_per_epoch = config.num_updates_per_eval * config.batch_size  # per seed
        self.update = jax.jit(jax.vmap(ppo.update))
        self.compiled_update: Any = None  # compiled at the first epoch, outside its clock
        self.evaluate_seeds = jax.jit(jax.vmap(ppo.evaluate))
        self.final_metrics: dict[str, float] = {}  # the latest epoch's training metrics
        self.eval_row: dict[str, Any] = {}  # and its evaluation

    def record(self, saved: dict[str, Any] | None, run_dir: RunDir) -> dict[str, Any]:
        return {}

    def describe(self) -> str:
        cfg = self.config
        return (
            f"{cfg.num_seeds} seed(s) x {cfg.num_envs} envs, {self.steps_per_epoch:,} "
            f"steps/epoch per seed, {cfg.num_evals} epochs"
        )

    def start(self, run: Run) -> None:
        pass

    def init(self) -> CheckpointState:
        return jax.jit(functools.partial(initial_checkpoint, self.ppo))()

    def restore_target(self, meta: dict[str, Any]) -> Any:
        return abstract_checkpoint(self.ppo)

    def restored(self, run: Run, tree: CheckpointState, meta: dict[str, Any]) -> CheckpointState:
        self.final_metrics = dict(meta.get("final_metrics", {}))
        self.eval_row = dict(meta.get("eval", {}))
        return tree

    def resumed(self, run: Run, state: CheckpointState, epoch: int) -> None:
        pass

    def epoch(
        self, run: Run, state: CheckpointState, epoch: int
    ) -> tuple[CheckpointState, dict[str, Any]]:
        """`num_updates_per_eval` updates of every seed, in one compiled call."""
        cfg = self.config
        compile_seconds = 0.0
        if self.compiled_update is None:  # compiled before the clock starts, reported apart
            t = time.perf_counter()
            self.compiled_update = self.update.lower(state.learner).compile()
            compile_seconds = time.perf_counter() - t
        t0 = time.perf_counter()
        learner, train_metrics = self.compiled_update(state.learner)
        jax.block_until_ready(learner)
        run.flag.check_abort()
        seconds = time.perf_counter() - t0
        self.final_metrics = _chunk_metrics(train_metrics)
        row = {
            "updates": epoch * cfg.num_updates_per_eval,
            "env_steps_per_s": self.steps_per_epoch * cfg.num_seeds / max(seconds, 1e-9),
            **({"compile_seconds": compile_seconds} if compile_seconds else {}),
            **self.final_metrics,
        }
        return state._replace(learner=learner), row

    def evaluate(
        self, run: Run, state: CheckpointState, epoch: int, *, out_of_time: bool
    ) -> tuple[CheckpointState, dict[str, Any]]:
        """Every seed after every epoch; each keeps its best parameters (`_keep_best`)."""
        eval_key, key = jax.random.split(state.eval_key)
        learner = state.learner
        keys = jax.random.split(key, self.config.num_seeds)
        returns = self.evaluate_seeds(learner.params, learner.obs_stats, keys)
        state = _keep_best(state._replace(eval_key=eval_key), returns["return_mean"])
        self.eval_row = _eval_row(returns)
        return state, self.eval_row

    def env_steps(self, epoch: int) -> int:
        return epoch * self.steps_per_epoch

    def checkpoint(self, state: CheckpointState, epoch: int) -> tuple[Any, dict[str, Any]]:
        return state, {
            "updates": epoch * self.config.num_updates_per_eval,
            "env_steps": self.env_steps(epoch),
            "final_metrics": self.final_metrics,
            "eval": self.eval_row,
            "best_return_per_seed": np.asarray(state.best_return).tolist(),
        }

    def summary(
        self, state: CheckpointState, epoch: int, row: dict[str, Any], *, final: bool
    ) -> dict[str, Any]:
        """Once the run is complete, `eval` adds the best parameters re-evaluated with
        `absolute_eval_factor` times the episodes (`absolute`)."""
        cfg = self.config
        evaluation = {k.removeprefix("eval/"): v for k, v in self.eval_row.items()}
        if final and epoch == cfg.num_evals:
            _, key = jax.random.split(state.eval_key)
            absolute = jax.jit(jax.vmap(absolute_evaluate(self.ppo)))(
                state.best_params, state.best_obs_stats, jax.random.split(key, cfg.num_seeds)
            )
            evaluation.update(
                absolute=_floats(absolute),
                absolute_return_per_seed=np.asarray(absolute["return_mean"]).tolist(),
                absolute_episodes=cfg.eval_episodes * cfg.absolute_eval_factor,
            )
        return {
            "seeds": cfg.num_seeds,
            "updates": epoch * cfg.num_updates_per_eval,
            "final_metrics": self.final_metrics,
            "eval": evaluation,
        }


def train_ppo(
    config: PPOConfig | str,
    run_dir: str | Path | None = None,
    *,
    resume: bool = False,
    preset: str | None = None,
    progress: bool | None = None,
    num_evals: int | None = None,
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
    config, preset = _resolve_config(config, preset)
    if num_evals is not None:
        num_evals = check_count("num_evals", num_evals, low=1)
    configure_or_say_why()
    if jax.process_count() > 1:
        raise ValueError(
            f"PPO training runs in one process (its seeds vmapped on one device), "
            f"but {jax.process_count()} processes were joined (TURBOZERO_COORDINATOR): run it "
            f"without the TURBOZERO_* variables; many hosts are for AlphaZero training"
        )
    ppo = make_ppo(config)  # before the run directory: a refused setting leaves nothing behind
    check_logging_extras(config)
    # (a lower bound: the rollouts come on top, so a refused run could never fit)
    state_bytes = pytree_bytes(abstract_checkpoint(ppo))
    check_fits_in_memory(
        state_bytes,
        "the PPO state (environments, networks, optimizer)",
        lower="lower num_seeds, num_envs or the network's hidden sizes",
    )
    return run_experiment(
        _PPORun(config, ppo),
        RunDir(run_dir or default_run_dir(preset)),
        resume=resume,
        preset=preset,
        last_epoch=config.num_evals if num_evals is None else min(num_evals, config.num_evals),
        progress=progress,
    )
