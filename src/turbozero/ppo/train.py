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

import contextlib
import datetime
import functools
import time
from pathlib import Path
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from turbozero.config import get_preset
from turbozero.io.checkpoint import Checkpointer
from turbozero.io.logger import MetricsLogger, check_logging_extras
from turbozero.io.plots import plot_run
from turbozero.io.resources import check_fits_in_memory
from turbozero.io.rundir import RunDir
from turbozero.io.signals import StopFlag
from turbozero.ppo import normalize as obs_norm
from turbozero.ppo.config import PPOConfig
from turbozero.ppo.learner import PPO, LearnerState, absolute_evaluate, make_ppo
from turbozero.ppo.networks import ActorCriticParams
from turbozero.runtime import configure_or_say_why
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
    return PPOConfig.from_dict(saved["config"]), saved.get("preset")


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
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    return Path("runs") / f"{preset or 'ppo'}-{stamp}"


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
    with contextlib.ExitStack() as cleanup:
        return _train_ppo(config, run_dir, resume, preset, progress, num_evals, cleanup)


def _train_ppo(
    config: PPOConfig | str,
    run_dir: str | Path | None,
    resume: bool,
    preset: str | None,
    progress: bool | None,
    num_evals: int | None,
    cleanup: contextlib.ExitStack,
) -> dict[str, Any]:
    config, preset = _resolve_config(config, preset)
    cfg = config
    if num_evals is not None:
        num_evals = check_count("num_evals", num_evals, low=1)
    configure_or_say_why()
    if jax.process_count() > 1:
        raise ValueError(
            f"PPO training runs in one process (its seeds vmapped on one device), "
            f"but {jax.process_count()} processes were joined (TURBOZERO_COORDINATOR): run it "
            f"without the TURBOZERO_* variables; many hosts are for AlphaZero training"
        )
    ppo = make_ppo(cfg)  # before the run directory: a refused setting leaves nothing behind
    check_logging_extras(cfg)
    # (a lower bound: the rollouts come on top, so a refused run could never fit)
    state_bytes = sum(
        int(np.prod(x.shape)) * x.dtype.itemsize
        for x in jax.tree_util.tree_leaves(abstract_checkpoint(ppo))
    )
    check_fits_in_memory(state_bytes, "the PPO state (environments, networks, optimizer)")
    rd = RunDir(run_dir or default_run_dir(preset))
    if resume:
        rd.create(resume=True)
        cleanup.enter_context(rd.lock())
        stored, saved_preset = read_run_config(rd)
        diff = {k: v for k, v in stored.diff(cfg).items() if k not in RESUME_MAY_CHANGE}
        if diff:
            why = (
                " (num_updates also spans the learning-rate schedule, so a PPO run's length "
                "cannot change when it resumes: start a new run to train longer)"
                if "num_updates" in diff
                else ""
            )
            raise ValueError(
                f"config differs from the run's saved config (saved, given): {diff}{why}; "
                f"`turbozero train --out RUN --resume` starts from the run's own config.json"
            )
        preset = saved_preset or preset
        if stored != cfg:  # the run directory records the loggers it now writes to
            rd.write_json(
                "config.json", {"algorithm": ALGORITHM, "preset": preset, "config": cfg.to_dict()}
            )
    else:
        rd.create()
        cleanup.enter_context(rd.lock())
        rd.write_json(
            "config.json", {"algorithm": ALGORITHM, "preset": preset, "config": cfg.to_dict()}
        )
    last_epoch = cfg.num_evals if num_evals is None else min(int(num_evals), cfg.num_evals)
    seeds = cfg.num_seeds
    update = jax.jit(jax.vmap(ppo.update))
    evaluate = jax.jit(jax.vmap(ppo.evaluate))
    ckpt_io = Checkpointer(rd.checkpoints, keep=cfg.keep_checkpoints, writer=True)
    log = MetricsLogger(rd, total_epochs=last_epoch, progress=progress, config=cfg)
    steps_per_epoch = cfg.num_updates_per_eval * cfg.batch_size

    epoch, saved_epoch, wall0 = 0, -1, 0.0
    final_metrics: dict[str, float] = {}
    eval_row: dict[str, Any] = {}
    log.info(
        f"turbozero ppo on {cfg.env}: {seeds} seed(s) x {cfg.num_envs} envs, "
        f"{steps_per_epoch:,} steps/epoch per seed, {cfg.num_evals} epochs -> {rd.path}"
    )
    if resume and ckpt_io.latest_step() is not None:
        ckpt, meta, skipped = ckpt_io.restore_newest(lambda _: abstract_checkpoint(ppo))
        for message in skipped:
            log.info(f"passed over a damaged checkpoint: {message}")
        epoch = saved_epoch = int(meta["epoch"])
        wall0 = float(meta.get("wall_seconds", 0.0))
        final_metrics = dict(meta.get("final_metrics", {}))
        eval_row = dict(meta.get("eval", {}))
        rd.truncate_metrics(epoch)
        log.info(f"resumed {rd.path} from epoch {epoch}")
    else:
        if resume:
            log.info("no checkpoint yet; starting from scratch")
            rd.truncate_metrics(0)
        ckpt = jax.jit(functools.partial(initial_checkpoint, ppo))()

    def save(epoch: int, wall: float) -> None:
        nonlocal saved_epoch
        saved_epoch = epoch
        ckpt_io.save(
            epoch,
            ckpt,
            {
                "config": cfg.to_dict(),
                "epoch": epoch,
                "updates": epoch * cfg.num_updates_per_eval,
                "env_steps": epoch * steps_per_epoch,
                "wall_seconds": wall,
                "final_metrics": final_metrics,
                "eval": eval_row,
                "best_return_per_seed": np.asarray(ckpt.best_return).tolist(),
            },
        )

    def summary(wall: float) -> dict[str, Any]:
        return {
            "preset": preset,
            "env": cfg.env,
            "algorithm": ALGORITHM,
            "seeds": seeds,
            "epochs": epoch,
            "updates": epoch * cfg.num_updates_per_eval,
            "env_steps": epoch * steps_per_epoch,
            "wall_seconds": wall,
            "final_metrics": final_metrics,
            "eval": {k.removeprefix("eval/"): v for k, v in eval_row.items()},
        }

    start = time.perf_counter() - wall0
    wall = wall0
    compiled_update = None
    with StopFlag() as flag, log:
        while epoch < last_epoch and not flag.stop:
            compile_seconds = 0.0
            if compiled_update is None:  # compiled before the clock starts, reported apart
                tc = time.perf_counter()
                compiled_update = update.lower(ckpt.learner).compile()
                compile_seconds = time.perf_counter() - tc
            t0 = time.perf_counter()
            learner, train_metrics = compiled_update(ckpt.learner)
            jax.block_until_ready(learner)
            flag.check_abort()
            t1 = time.perf_counter()
            eval_key, k = jax.random.split(ckpt.eval_key)
            returns = evaluate(learner.params, learner.obs_stats, jax.random.split(k, seeds))
            ckpt = _keep_best(
                ckpt._replace(learner=learner, eval_key=eval_key), returns["return_mean"]
            )
            epoch += 1
            wall = time.perf_counter() - start
            final_metrics = _chunk_metrics(train_metrics)
            eval_row = _eval_row(returns)
            row = {
                "epoch": epoch,
                "env_steps": epoch * steps_per_epoch,
                "updates": epoch * cfg.num_updates_per_eval,
                "wall_seconds": wall,
                "env_steps_per_s": steps_per_epoch * seeds / max(t1 - t0, 1e-9),
                **({"compile_seconds": compile_seconds} if compile_seconds else {}),
                **final_metrics,
                **eval_row,
            }
            log.epoch(row)
            flag.check_abort()
            if epoch % cfg.checkpoint_every == 0 or epoch == last_epoch or flag.stop:
                save(epoch, wall)
            rd.write_json("summary.json", summary(wall))
        if saved_epoch != epoch:  # stopped between an epoch and its (skipped) checkpoint
            save(epoch, wall)
        if flag.stop and epoch < last_epoch:
            log.stopped(epoch)
        out = summary(wall)
        if epoch == cfg.num_evals:
            eval_key, k = jax.random.split(ckpt.eval_key)
            absolute = jax.jit(jax.vmap(absolute_evaluate(ppo)))(
                ckpt.best_params, ckpt.best_obs_stats, jax.random.split(k, seeds)
            )
            out["eval"].update(
                absolute=_floats(absolute),
                absolute_return_per_seed=np.asarray(absolute["return_mean"]).tolist(),
                absolute_episodes=cfg.eval_episodes * cfg.absolute_eval_factor,
            )
            rd.write_json("summary.json", out)
    ckpt_io.close()
    plot_run(rd.read_metrics(), rd.plots)
    log.info(
        f"done: {epoch}/{cfg.num_evals} epochs, {epoch * steps_per_epoch:,} steps -> {rd.path}"
    )
    return out
