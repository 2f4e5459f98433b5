"""`train_ppo`: the host loop around the compiled learner, writing a run directory.

Each iteration runs one compiled call of `num_updates_per_eval` updates for all `num_seeds` seeds
(`vmap`), evaluates every seed, keeps each seed's best parameters (by mean evaluation return) and
appends one row to `metrics.jsonl`. At the end the best parameters are re-evaluated with
`absolute_eval_factor` times as many episodes (the "absolute metric") and `summary.json` is written.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from turbozero.config import get_preset
from turbozero.ppo.config import PPOConfig
from turbozero.ppo.learner import LearnerState, absolute_evaluate, make_ppo

CheckpointFn = Callable[[int, LearnerState], None]


def _mean_row(tree: dict[str, Any], prefix: str = "") -> dict[str, float]:
    return {prefix + k: float(np.mean(np.asarray(v))) for k, v in tree.items()}


def _chunk_metrics(metrics: dict[str, Any]) -> dict[str, Any]:
    """Seed-mean training metrics of one call (`[S, U]` leaves): the last update's losses, and
    episode statistics over every episode that finished during the call (None if none did)."""
    out: dict[str, Any] = {k: np.asarray(v)[:, -1] for k, v in metrics.items()}
    episodes = np.asarray(metrics["episodes"])
    total = float(episodes.sum())
    for name in ("episode_return", "episode_length"):
        weighted = float((np.asarray(metrics[name]) * episodes).sum())
        out[name] = np.float64(weighted / total) if total > 0 else np.float64("nan")
    out["episodes"] = np.float64(total / episodes.shape[0])
    return out


def train_ppo(
    config: PPOConfig | str,
    run_dir: str | None = None,
    *,
    progress: bool = True,
    preset: str | None = None,
    checkpoint_fn: CheckpointFn | None = None,
) -> dict[str, Any]:
    """Train `config.num_seeds` PPO agents in parallel and return the run summary.

    Args:
        config: a `PPOConfig`, or the name of a registered PPO preset.
        run_dir: directory to create (refused if it exists and is not empty); None writes nothing.
        progress: print one line per evaluation to stderr.
        preset: the preset name to record (filled in when `config` is a preset name).
        checkpoint_fn: hook called as `checkpoint_fn(epoch, state)` after every evaluation with the
            seed-batched `LearnerState` (leaves `[S, ...]`); the place for orbax checkpoints.

    Returns:
        The summary: `preset`, `env`, `updates`, `env_steps` (per seed), `wall_seconds`,
        `final_metrics` (training metrics of the last call, seed means; episode statistics over
        the episodes finished during that call) and `eval` (last evaluation and the
        absolute metric, seed means and per-seed lists).
    """
    if isinstance(config, str):
        preset = preset or config
        spec = get_preset(config)
        if spec.algorithm != "ppo":
            raise ValueError(f"preset {config!r} is for {spec.algorithm!r}, not ppo")
        config = spec.make()  # type: ignore[assignment]
    assert isinstance(config, PPOConfig)
    from turbozero.io import RunDir

    run = RunDir(run_dir).create() if run_dir is not None else None
    if run is not None:
        run.write_json("config.json", {"algorithm": "ppo", "preset": preset, **config.to_dict()})

    ppo = make_ppo(config)
    seeds = config.num_seeds
    keys = jax.random.split(jax.random.PRNGKey(config.seed), seeds + 1)
    eval_key, seed_keys = keys[0], keys[1:]
    init = jax.jit(jax.vmap(ppo.init))
    update = jax.jit(jax.vmap(ppo.update))
    evaluate = jax.jit(jax.vmap(ppo.evaluate))
    evaluate_abs = jax.jit(jax.vmap(absolute_evaluate(ppo)))

    @jax.jit
    def keep_best(best, best_return, params, stats, returns):
        better = returns > best_return

        def pick(new, old):
            return jnp.where(better.reshape((-1,) + (1,) * (new.ndim - 1)), new, old)

        best = jax.tree.map(pick, (params, stats), best)
        return best, jnp.maximum(best_return, returns)

    start = time.perf_counter()
    state = init(seed_keys)
    best = (state.params, state.obs_stats)
    best_return = jnp.full((seeds,), -jnp.inf)
    steps_per_call = config.num_updates_per_eval * config.batch_size
    train_metrics: dict[str, Any] = {}
    eval_metrics: dict[str, Any] = {}
    for epoch in range(config.num_evals):
        state, train_metrics = update(state)
        eval_key, k = jax.random.split(eval_key)
        eval_metrics = evaluate(state.params, state.obs_stats, jax.random.split(k, seeds))
        best, best_return = keep_best(
            best, best_return, state.params, state.obs_stats, eval_metrics["return_mean"]
        )
        last = _chunk_metrics(train_metrics)
        env_steps = (epoch + 1) * steps_per_call
        row = {
            "epoch": epoch,
            "env_steps": env_steps,
            "updates": (epoch + 1) * config.num_updates_per_eval,
            "wall_seconds": time.perf_counter() - start,
            **_mean_row(last, "train/"),
            **_mean_row(eval_metrics, "eval/"),
            "eval/return_per_seed": np.asarray(eval_metrics["return_mean"]).tolist(),
        }
        if run is not None:
            run.append_metrics(row)
        if checkpoint_fn is not None:  # checkpoints (orbax) plug in here
            checkpoint_fn(epoch, state)
        if progress:
            print(
                f"[ppo] epoch {epoch + 1}/{config.num_evals} steps {env_steps} "
                f"train_return {row['train/episode_return']:.1f} "
                f"eval_return {row['eval/return_mean']:.1f} ({row['wall_seconds']:.1f}s)",
                file=sys.stderr,
                flush=True,
            )
    eval_key, k = jax.random.split(eval_key)
    absolute = evaluate_abs(best[0], best[1], jax.random.split(k, seeds))
    wall = time.perf_counter() - start
    last = _chunk_metrics(train_metrics)
    summary = {
        "preset": preset,
        "env": config.env,
        "updates": config.num_updates,
        "env_steps": config.num_evals * steps_per_call,
        "seeds": seeds,
        "wall_seconds": wall,
        "final_metrics": _mean_row(last),
        "eval": {
            **_mean_row(eval_metrics),
            "return_per_seed": np.asarray(eval_metrics["return_mean"]).tolist(),
            "absolute": _mean_row(absolute),
            "absolute_return_per_seed": np.asarray(absolute["return_mean"]).tolist(),
            "absolute_episodes": config.eval_episodes * config.absolute_eval_factor,
        },
    }
    if run is not None:
        run.write_json("summary.json", summary)
    return summary
