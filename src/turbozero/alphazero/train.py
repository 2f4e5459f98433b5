"""`train(config, run_dir)`: the whole AlphaZero run on the host side, around compiled pieces."""

from __future__ import annotations

import contextlib
import datetime
import signal
import sys
import time
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from turbozero.alphazero.config import AlphaZeroConfig
from turbozero.alphazero.trainer import AlphaZero, TrainState, make_alphazero, make_selector
from turbozero.arena import (
    Agent,
    alphazero_agent,
    perfect_agent,
    play_match,
    random_agent,
    rollout_mcts_agent,
)
from turbozero.io.checkpoint import Checkpointer
from turbozero.io.logger import MetricsLogger
from turbozero.io.plots import plot_run
from turbozero.io.rundir import RunDir
from turbozero.nets import param_count
from turbozero.search import tree_bytes

ALGORITHM = "alphazero"


def _nbytes(tree: Any) -> int:
    return int(sum(np.prod(x.shape) * x.dtype.itemsize for x in jax.tree_util.tree_leaves(tree)))


class _StopFlag:
    """Ctrl-C / SIGTERM: finish the current step, save, exit cleanly."""

    def __init__(self) -> None:
        self.stop = False
        self._old: dict[int, Any] = {}

    def __enter__(self) -> _StopFlag:
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(ValueError):  # not the main thread
                self._old[sig] = signal.signal(sig, self._handle)
        return self

    def _handle(self, signum, frame) -> None:
        if self.stop:  # a second Ctrl-C: stop now
            raise KeyboardInterrupt
        self.stop = True
        print("\nstopping after the current step (again to abort)...", file=sys.stderr)

    def __exit__(self, *exc) -> None:
        for sig, old in self._old.items():
            signal.signal(sig, old)


class Evaluator:
    """Plays the current network against the configured opponents (compiled once per run)."""

    def __init__(self, az: AlphaZero):
        cfg = az.config
        self.az = az
        env = az.env
        sims = cfg.eval_simulations or cfg.search.num_simulations
        self.sims = sims
        self.agent: Agent | None = None
        self.best_agent: Agent | None = None
        self.opponents: dict[str, Agent] = {}
        self.make_agent = lambda params, name: alphazero_agent(
            env,
            az.eval_fn,
            params,
            num_simulations=sims,
            max_nodes=max(sims + 1, 2),
            selector=make_selector(cfg),
            name=name,
        )
        for opp in cfg.eval_opponents:
            if opp == "random":
                self.opponents[opp] = random_agent(env)
            elif opp == "perfect":
                self.opponents[opp] = perfect_agent(env)
            elif opp.startswith("mcts:"):
                self.opponents[opp] = rollout_mcts_agent(env, num_simulations=int(opp[5:]))

    def __call__(self, params, best_params, key) -> dict[str, float]:
        cfg = self.az.config
        env = self.az.env
        if self.agent is None:
            self.agent = self.make_agent(params, "current")
        agent = self.agent.replace(params=params)
        out: dict[str, float] = {}
        if env.num_players == 1:
            r = play_match(
                env, agent, None, key, num_games=cfg.eval_games, max_steps=cfg.max_episode_steps
            )
            out["eval/return"] = float(r.mean_return_a)
            out["eval/score"] = float(r.mean_return_a)
            return out
        scores = []
        for i, (name, opp) in enumerate(self.opponents.items()):
            r = play_match(
                env,
                agent,
                opp,
                jax.random.fold_in(key, i),
                num_games=cfg.eval_games,
                max_steps=cfg.max_episode_steps,
            )
            out[f"eval/{name}/win"] = r.wins / r.num_games
            out[f"eval/{name}/draw"] = r.draws / r.num_games
            out[f"eval/{name}/loss"] = r.losses / r.num_games
            scores.append(r.score)
        if "best" in cfg.eval_opponents and best_params is not None:
            if self.best_agent is None:
                self.best_agent = self.make_agent(best_params, "best")
            best = self.best_agent.replace(params=best_params)
            r = play_match(
                env,
                agent,
                best,
                jax.random.fold_in(key, 99),
                num_games=cfg.eval_games,
                max_steps=cfg.max_episode_steps,
                opening_moves=2,
            )
            out["eval/best/score"] = r.score
        out["eval/score"] = float(np.mean(scores)) if scores else out.get("eval/best/score", 0.0)
        return out


def default_run_dir(preset: str | None) -> Path:
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    return Path("runs") / f"{preset or 'alphazero'}-{stamp}"


def train(
    config: AlphaZeroConfig,
    run_dir: str | Path | None = None,
    *,
    resume: bool = False,
    preset: str | None = None,
    progress: bool | None = None,
    num_epochs: int | None = None,
) -> dict[str, Any]:
    """Run AlphaZero training; returns the summary (also written to `summary.json`).

    Args:
        config: the typed config (its `seed` fixes the run).
        run_dir: where to write; defaults to `runs/PRESET-TIMESTAMP`. An existing run directory
            is an error unless `resume`.
        resume: continue the run in `run_dir` from its latest checkpoint, exactly.
        preset: the preset name, recorded in the run directory.
        progress: rich progress bar (default: when stdout is a terminal).
        num_epochs: stop after this many epochs in total (default `config.num_epochs`); a later
            `resume` continues to `config.num_epochs`.
    """
    rd = RunDir(run_dir or default_run_dir(preset))
    if resume:
        rd.create(resume=True)
        saved = rd.read_json("config.json")
        if saved.get("algorithm") != ALGORITHM:
            raise ValueError(f"{rd.path} is a {saved.get('algorithm')!r} run, not {ALGORITHM!r}")
        stored = AlphaZeroConfig.from_dict(saved["config"])
        if stored != config:
            diff = {
                k: (v, config.to_dict()[k])
                for k, v in stored.to_dict().items()
                if config.to_dict()[k] != v and k != "num_epochs"
            }
            if diff:
                raise ValueError(f"config differs from the run's saved config: {diff}")
        preset = saved.get("preset", preset)
    else:
        rd.create()
        rd.write_json(
            "config.json", {"algorithm": ALGORITHM, "preset": preset, "config": config.to_dict()}
        )
    cfg = config
    az = make_alphazero(cfg)
    env = az.env
    state = az.init(jax.random.PRNGKey(cfg.seed))
    costs = {
        "tree_bytes": tree_bytes(env, cfg.num_games, cfg.search.max_nodes),
        "memory_bytes": _nbytes(state.selfplay.memory),
        "parameters": param_count(state.params),
        "positions_per_epoch": cfg.num_games * cfg.collection_steps_per_epoch,
    }
    log = MetricsLogger(
        rd, progress=progress, total_epochs=num_epochs or cfg.num_epochs, config=cfg
    )
    log.info(
        f"turbozero alphazero on {env.name}: {costs['parameters']:,} parameters, trees "
        f"{costs['tree_bytes'] / 2**20:.1f} MiB, memory {costs['memory_bytes'] / 2**20:.1f} MiB, "
        f"{costs['positions_per_epoch']:,} positions/epoch -> {rd.path}"
    )
    ckpt = Checkpointer(rd.checkpoints, keep=cfg.keep_checkpoints)
    best_ckpt = Checkpointer(rd.path / "best", keep=1)
    collect = jax.jit(az.collect, static_argnums=1, donate_argnums=0)
    train_steps = jax.jit(az.train_steps, static_argnums=1, donate_argnums=0)
    evaluator = Evaluator(az)
    best_params = None
    best_score = -np.inf
    eval_metrics: dict[str, float] = {}
    wall0 = 0.0

    def save(state: TrainState, extra: dict[str, Any]) -> None:
        to_save = (
            state
            if cfg.save_memory
            else state.replace(selfplay=state.selfplay.replace(memory=None))
        )
        ckpt.save(
            int(state.epoch),
            {"train": to_save, "best": best_params or state.params},
            {
                "config": cfg.to_dict(),
                "best_score": float(best_score),
                "has_best": best_params is not None,
                "eval": eval_metrics,
                **extra,
            },
        )

    if resume and ckpt.latest_step() is not None:
        like = {"train": state, "best": state.params}
        if not cfg.save_memory:
            like["train"] = state.replace(selfplay=state.selfplay.replace(memory=None))
        restored, meta = ckpt.restore(like)
        if not cfg.save_memory:
            restored["train"] = restored["train"].replace(
                selfplay=restored["train"].selfplay.replace(memory=state.selfplay.memory)
            )
        state = restored["train"]
        best_params = restored["best"] if meta.get("has_best") else None
        best_score = meta.get("best_score", -np.inf)
        eval_metrics = meta.get("eval", {})
        wall0 = meta.get("wall_seconds", 0.0)
        rd.truncate_metrics(int(state.epoch))
        log.info(f"resumed from epoch {int(state.epoch)}")
    elif resume:
        log.info("no checkpoint yet; starting from scratch")

    start = time.perf_counter() - wall0
    last_epoch = num_epochs or cfg.num_epochs
    with _StopFlag() as flag, log:
        if int(state.epoch) == 0 and int(state.env_steps) == 0 and cfg.warmup_steps:
            state, _ = collect(state, cfg.warmup_steps)
        while int(state.epoch) < last_epoch and not flag.stop:
            t0 = time.perf_counter()
            state, sp = collect(state, cfg.collection_steps_per_epoch)
            jax.block_until_ready(state.key)
            t1 = time.perf_counter()
            available = int(state.selfplay.memory.positions_sampleable)
            row: dict[str, Any] = {}
            if available >= cfg.train_batch_size and cfg.train_steps_per_epoch:
                state, lm = train_steps(state, cfg.train_steps_per_epoch)
                row.update({k: float(v) for k, v in lm.items()})
                t2 = time.perf_counter()
                row["train_steps_per_s"] = cfg.train_steps_per_epoch / max(t2 - t1, 1e-9)
            else:
                t2 = t1
                row["waiting_for_positions"] = True
            state = state.replace(epoch=state.epoch + 1)
            epoch = int(state.epoch)
            sp = {k: float(v) for k, v in sp.items()}
            steps = cfg.collection_steps_per_epoch * cfg.num_games
            row.update(
                {
                    "positions_per_s": steps / max(t1 - t0, 1e-9),
                    "simulations_per_s": steps * cfg.search.num_simulations / max(t1 - t0, 1e-9),
                    "tree_fullness": sp["tree_fullness_sum"] / steps,
                    "search_depth": sp["search_depth_sum"] / steps,
                    "full_events": sp["full_events"],
                    "episodes": sp["episodes"],
                    "memory_sampleable": available,
                }
            )
            if sp["episodes"]:
                row["episode_length"] = sp["episode_length_sum"] / sp["episodes"]
                if env.num_players == 1:
                    row["episode_return"] = sp["episode_return_sum"] / sp["episodes"]
            if epoch % cfg.eval_every == 0 or epoch == last_epoch:
                key = jax.random.fold_in(jax.random.PRNGKey(cfg.seed + 1), epoch)
                eval_metrics = evaluator(state.params, best_params, key)
                row.update(eval_metrics)
                score = eval_metrics.get("eval/score", 0.0)
                better = (
                    score >= best_score
                    if "eval/best/score" not in eval_metrics
                    else (eval_metrics["eval/best/score"] >= 0.5)
                )
                if best_params is None or better:
                    best_params = jax.tree_util.tree_map(jnp.copy, state.params)
                    best_score = score
                    best_ckpt.save(
                        epoch,
                        {"params": best_params},
                        {
                            "config": cfg.to_dict(),
                            "epoch": epoch,
                            "eval": eval_metrics,
                        },
                    )
            wall = time.perf_counter() - start
            row.update(epoch=epoch, env_steps=int(state.env_steps), wall_seconds=wall)
            log.epoch(row)
            if epoch % cfg.checkpoint_every == 0 or epoch == last_epoch or flag.stop:
                save(state, {"wall_seconds": wall, "epoch": epoch})
            summary = {
                "preset": preset,
                "env": env.name,
                "algorithm": ALGORITHM,
                "epochs": epoch,
                "env_steps": int(state.env_steps),
                "wall_seconds": wall,
                "final_metrics": {k: v for k, v in row.items() if not k.startswith("eval/")},
                "eval": eval_metrics,
                "costs": costs,
            }
            rd.write_json("summary.json", summary)
    ckpt.close()
    best_ckpt.close()
    plot_run(rd.read_metrics(), rd.plots)
    log.info(f"done: {int(state.epoch)} epochs, {int(state.env_steps):,} positions -> {rd.path}")
    return rd.read_json("summary.json") if rd.summary_path.exists() else {}
