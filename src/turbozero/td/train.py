"""`train_td`: the host loop around the compiled TD learner, writing a run directory.

Each epoch runs `steps_per_epoch` turns of every game in one compiled call. Every `eval_every`
epochs (and when the run stops) the network plays `eval_games` games against each of
`eval_opponents` (colours alternating) and, with `eval_accuracy`, is judged by the game's
move-quality measure (backgammon: gnubg's error rate); the network with the most points a game
against the first opponent is kept as the best. The run directory is the runner's
(`turbozero.io.experiment`): `config.json` (`"algorithm": "td"`), `checkpoints/`,
`metrics.jsonl`, `summary.json`, `plots/`.

A checkpoint holds `CheckpointState`: the whole `TDState` (network, Adam, every game's position
and dice, the PRNG key), the best network with its points a game, and the evaluation key, so a
resumed run continues exactly. Ctrl-C or SIGTERM finishes the epoch, saves and returns.
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

from turbozero.arena.agents import Agent
from turbozero.arena.match import match_memory_bytes, play_match, points_interval
from turbozero.arena.opponents import make_opponent
from turbozero.config import get_preset
from turbozero.envs.core import Env
from turbozero.games import game_spec
from turbozero.io.experiment import Run, run_experiment, stamped_run_dir
from turbozero.io.logger import check_logging_extras
from turbozero.io.resources import check_fits_in_memory
from turbozero.io.rundir import RunDir
from turbozero.runtime import configure_or_say_why
from turbozero.struct import pytree_bytes
from turbozero.td.config import TDConfig
from turbozero.td.learner import TD, TDState, make_td, td_agent, training_bytes
from turbozero.types import Array, Params, PRNGKey
from turbozero.validate import check_count

ALGORITHM = "td"
#: settings a resumed TD run may change (where it stops, logs and how it is evaluated; not the
#: opponents, whose first one's points rank the best network)
RESUME_MAY_CHANGE = (
    "num_epochs",
    "max_wall_seconds",
    "tensorboard",
    "wandb_project",
    "eval_every",
    "eval_games",
    "eval_accuracy",
    "eval_accuracy_positions",
    "checkpoint_every",
    "keep_checkpoints",
)


class CheckpointState(NamedTuple):
    """What a TD checkpoint holds.

    Attributes:
        learner: the `TDState`.
        best_params: the network with the most points a game against the first opponent.
        best_points: `[]` those points (-inf before the first evaluation).
        eval_key: consumed by the next evaluation.
    """

    learner: TDState
    best_params: Params
    best_points: Array
    eval_key: PRNGKey


def initial_checkpoint(td: TD) -> CheckpointState:
    """The state a run starts from (`jit` it)."""
    eval_key, key = jax.random.split(jax.random.PRNGKey(td.config.seed))
    learner = td.init(key)
    return CheckpointState(learner, learner.params, jnp.float32(-jnp.inf), eval_key)


def abstract_checkpoint(td: TD) -> Any:
    """Shapes and dtypes of a run's `CheckpointState` (nothing computed); to restore into."""
    return jax.eval_shape(functools.partial(initial_checkpoint, td))


def read_run_config(run: RunDir) -> tuple[TDConfig, str | None]:
    """The `TDConfig` and preset name stored in a TD run directory."""
    saved = run.read_config(ALGORITHM)
    return TDConfig.from_record(saved["config"]), saved.get("preset")


def eval_opponents(env: Env, config: TDConfig) -> dict[str, Agent]:
    """The evaluation's opponents by name, built once (a missing engine is named at once)."""
    return {name: make_opponent(env, name) for name in config.eval_opponents}


def evaluate_params(
    agent: Agent,
    env: Env,
    opponents: Mapping[str, Agent],
    key: PRNGKey,
    *,
    games: int,
    positions: Any = None,
) -> dict[str, Any]:
    """The metrics of one evaluation of `agent` (a `td_agent`): per opponent `eval/NAME/win`,
    `/draw`, `/loss`, `/points` (a game, mean) with `/points_low` and `/points_high` (95%), over
    `games` games with colours alternating, and the game's move-quality figures on `positions`
    (None: not judged)."""
    out: dict[str, Any] = {}
    for i, (name, opponent) in enumerate(opponents.items()):
        r = play_match(env, agent, opponent, jax.random.fold_in(key, i), num_games=games)
        low, high = points_interval(r)
        out[f"eval/{name}/win"] = r.wins / r.num_games
        out[f"eval/{name}/draw"] = r.draws / r.num_games
        out[f"eval/{name}/loss"] = r.losses / r.num_games
        out[f"eval/{name}/points"] = float(r.mean_return_a)
        out[f"eval/{name}/points_low"], out[f"eval/{name}/points_high"] = low, high
    if positions is not None:
        spec = game_spec(env.name)
        assert spec is not None and spec.judge is not None
        out.update(spec.judge.measure(env, agent, positions, jax.random.fold_in(key, 1000)))
    return out


#: what a TD run's memory refusal names, and the settings it says to lower
MEMORY_WHAT = (
    "the TD run (network, Adam, the games and an evaluation's or a step's work)",
    "lower num_games, hidden or eval_games",
)


def memory_bytes(run: _TDRun) -> int:
    """Bytes a TD run holds at its peak, from shapes alone: the checkpoint state twice (the
    compiled epoch's input and output) and the larger of a training step's work and an
    evaluation match's."""
    state = pytree_bytes(abstract_checkpoint(run.td))
    agents = [run.agent, *run.opponents.values()]
    evaluation = max(
        (
            match_memory_bytes(run.env, [run.agent, opp], run.config.eval_games)
            for opp in agents[1:]
        ),
        default=0,
    )
    return 2 * state + max(training_bytes(run.td), evaluation)


#: why a resumed TD run may not change a setting
RESUME_NOTES: Mapping[str, str] = {}


class _TDRun:
    """TD's steps in the experiment runner (`turbozero.io.experiment.Algorithm`)."""

    name = ALGORITHM
    resume_may_change: tuple[str, ...] = RESUME_MAY_CHANGE
    resume_notes: Mapping[str, str] = RESUME_NOTES

    def __init__(self, config: TDConfig, td: TD):
        import turbozero.envs

        self.config, self.td = config, td
        self.env_name = config.env
        self.env = turbozero.envs.make(config.env)
        self.max_wall_seconds = config.max_wall_seconds
        self.turns_per_epoch = config.num_games * config.steps_per_epoch
        self.compiled: Any = None
        self.positions: Any = None
        # built once, so that every evaluation reuses one compiled match per opponent
        self.opponents = eval_opponents(self.env, config)
        self.agent = td_agent(td, self.env, None, name="td")
        self.eval_row: dict[str, Any] = {}
        self.final_metrics: dict[str, float] = {}

    def record(self, saved: dict[str, Any] | None, run_dir: RunDir) -> dict[str, Any]:
        return {}

    def describe(self) -> str:
        cfg = self.config
        return (
            f"{cfg.num_games} games x {cfg.steps_per_epoch} turns/epoch, value net "
            f"{tuple(cfg.hidden)}, {cfg.num_epochs} epochs"
        )

    def start(self, run: Run) -> None:
        cfg = self.config
        if cfg.eval_accuracy:
            spec = game_spec(cfg.env)
            assert spec is not None and spec.judge is not None
            self.positions = spec.judge.positions(self.env, cfg.eval_accuracy_positions, 0)

    def init(self) -> CheckpointState:
        return jax.jit(functools.partial(initial_checkpoint, self.td))()

    def restore_target(self, meta: dict[str, Any]) -> Any:
        return abstract_checkpoint(self.td)

    def restored(self, run: Run, tree: CheckpointState, meta: dict[str, Any]) -> CheckpointState:
        self.final_metrics = dict(meta.get("final_metrics", {}))
        self.eval_row = dict(meta.get("eval", {}))
        return tree

    def resumed(self, run: Run, state: CheckpointState, epoch: int) -> None:
        pass

    def epoch(
        self, run: Run, state: CheckpointState, epoch: int
    ) -> tuple[CheckpointState, dict[str, Any]]:
        """`steps_per_epoch` turns of every game, in one compiled call."""
        steps = self.config.steps_per_epoch
        compile_seconds = 0.0
        if self.compiled is None:  # compiled before the clock starts, reported apart
            t = time.perf_counter()
            self.compiled = self.td.train.lower(state.learner, steps).compile()
            compile_seconds = time.perf_counter() - t
        t0 = time.perf_counter()
        learner, metrics = self.compiled(state.learner)
        jax.block_until_ready(learner)
        run.flag.check_abort()
        seconds = time.perf_counter() - t0
        self.final_metrics = {
            "loss": float(np.mean(np.asarray(metrics["loss"]))),
            "games": float(np.sum(np.asarray(metrics["games"]))),
        }
        row = {
            "turns_per_s": self.turns_per_epoch / max(seconds, 1e-9),
            **({"compile_seconds": compile_seconds} if compile_seconds else {}),
            **self.final_metrics,
        }
        return state._replace(learner=learner), row

    def evaluate(
        self, run: Run, state: CheckpointState, epoch: int, *, out_of_time: bool
    ) -> tuple[CheckpointState, dict[str, Any]]:
        """Every `eval_every` epochs, the last one and when time is up; keeps the best."""
        cfg = self.config
        if not (epoch % cfg.eval_every == 0 or epoch == cfg.num_epochs or out_of_time):
            return state, {}
        eval_key, key = jax.random.split(state.eval_key)
        params = state.learner.params
        agent = self.agent.replace(params=params)
        row = evaluate_params(
            agent, self.env, self.opponents, key, games=cfg.eval_games, positions=self.positions
        )
        points = row[f"eval/{cfg.eval_opponents[0]}/points"]
        better = points > float(state.best_points)
        state = state._replace(
            eval_key=eval_key,
            best_params=params if better else state.best_params,
            best_points=jnp.float32(points) if better else state.best_points,
        )
        row["best_points"] = float(state.best_points)
        self.eval_row = row
        return state, row

    def env_steps(self, epoch: int) -> int:
        return epoch * self.turns_per_epoch

    def checkpoint(self, state: CheckpointState, epoch: int) -> tuple[Any, dict[str, Any]]:
        return state, {
            "turns": self.env_steps(epoch),
            "final_metrics": self.final_metrics,
            "eval": self.eval_row,
            "best_points": float(state.best_points),
        }

    def summary(
        self, state: CheckpointState, epoch: int, row: dict[str, Any], *, final: bool
    ) -> dict[str, Any]:
        return {
            "turns": self.env_steps(epoch),
            "final_metrics": self.final_metrics,
            "eval": {k.removeprefix("eval/"): v for k, v in self.eval_row.items()},
            "best_points": float(state.best_points),
        }


def _resolve_config(config: TDConfig | str, preset: str | None) -> tuple[TDConfig, str | None]:
    if isinstance(config, str):
        preset = preset or config
        spec = get_preset(config)
        if spec.algorithm != ALGORITHM:
            raise ValueError(f"preset {config!r} is for {spec.algorithm!r}, not {ALGORITHM}")
        config = spec.make()  # type: ignore[assignment]
    if not isinstance(config, TDConfig):
        raise TypeError(f"config must be a TDConfig or a preset name, got {type(config).__name__}")
    return config, preset


def train_td(
    config: TDConfig | str,
    run_dir: str | Path | None = None,
    *,
    resume: bool = False,
    preset: str | None = None,
    progress: bool | None = None,
    num_epochs: int | None = None,
) -> dict[str, Any]:
    """Train a TD value network; returns the summary (also `summary.json`).

    Args:
        config: a `TDConfig`, or the name of a registered TD preset.
        run_dir: where to write; defaults to `runs/PRESET-TIMESTAMP`. An existing run directory
            is an error unless `resume`.
        resume: continue the run in `run_dir` from its newest checkpoint, exactly.
        preset: the preset name to record (filled in when `config` is a preset name).
        progress: rich progress bar (default: when stdout is a terminal).
        num_epochs: stop after this many epochs in all (default `config.num_epochs`).

    Returns:
        The summary: `turns` played, `wall_seconds`, `final_metrics` (the last epoch's loss and
        finished games), `eval` (the last evaluation) and `best_points`.

    Raises:
        FileExistsError: `run_dir` exists and `resume` is False.
        ValueError: `resume` with a different config, or a run of another algorithm.
    """
    config, preset = _resolve_config(config, preset)
    if num_epochs is not None:
        num_epochs = check_count("num_epochs", num_epochs, low=1)
    configure_or_say_why()
    if jax.process_count() > 1:
        raise ValueError(
            f"TD training runs in one process, but {jax.process_count()} processes were joined "
            f"(TURBOZERO_COORDINATOR): run it without the TURBOZERO_* variables"
        )
    td = make_td(config)
    check_logging_extras(config)
    last = config.num_epochs if num_epochs is None else min(num_epochs, config.num_epochs)
    algorithm = _TDRun(config, td)
    what, lower = MEMORY_WHAT
    check_fits_in_memory(memory_bytes(algorithm), what, lower=lower)  # (before the run dir)
    return run_experiment(
        algorithm,
        RunDir(run_dir or stamped_run_dir(preset or ALGORITHM)),
        resume=resume,
        preset=preset,
        last_epoch=last,
        progress=progress,
    )
