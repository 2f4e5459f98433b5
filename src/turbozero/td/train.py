"""`train_td`: the run hooks of TD learning for the experiment runner (`turbozero.io.experiment`).

Each epoch runs `steps_per_epoch` turns of every game in one compiled call. Every `eval_every`
epochs (and when the run stops) the network plays `eval_games` games against each of
`eval_opponents` (colours alternating) and, with `eval_accuracy`, is judged by the game's
move-quality measure (backgammon: gnubg's error rate); the network with the most points a game
against the first opponent is kept as the best. A checkpoint holds `CheckpointState`
(`turbozero.td.learner`), so a resumed run continues exactly; Ctrl-C or SIGTERM finishes the
epoch, saves and returns.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from turbozero.arena.match import match_memory_bytes, play_opponents
from turbozero.arena.opponents import make_opponent
from turbozero.config import resolve_config
from turbozero.games import game_spec
from turbozero.io.experiment import Run, RunHooks, train_in_one_process
from turbozero.struct import pytree_bytes
from turbozero.td.config import TDConfig
from turbozero.td.learner import (
    CheckpointState,
    abstract_checkpoint,
    initial_checkpoint,
    make_td,
    td_agent,
    training_bytes,
)

ALGORITHM = "td"
#: settings a resumed TD run may change: where it stops and logs, and its evaluation's size and
#: schedule (its run and eval groups but the game, the seed and the opponents, whose first
#: one's points rank the best network)
RESUME_MAY_CHANGE = tuple(
    name
    for name in TDConfig.GROUPS["run"] + TDConfig.GROUPS["eval"]
    if name not in ("env", "seed", "eval_opponents")
)


class TDRun(RunHooks):
    """TD's steps in the experiment runner: an epoch is one compiled call of `steps_per_epoch`
    turns of every game; an evaluation plays the opponents and keeps the best network."""

    name = ALGORITHM
    config_class = TDConfig
    resume_may_change = RESUME_MAY_CHANGE

    def __init__(self, config: TDConfig):
        import turbozero.envs

        super().__init__(config)
        self.td = make_td(config)
        self.env = turbozero.envs.make(config.env)
        self.num_players = self.env.num_players
        self.steps_per_epoch = config.num_games * config.steps_per_epoch  # turns
        self.epochs = config.num_epochs
        spec = game_spec(config.env)
        self.judge = spec.judge if spec is not None and config.eval_accuracy else None
        self.positions: Any = None
        # built once, so that every evaluation reuses one compiled match per opponent
        self.opponents = {name: make_opponent(self.env, name) for name in config.eval_opponents}
        self.agent = td_agent(self.td, self.env, None, name="td")

    def memory(self) -> tuple[int, str, str]:
        """The checkpoint state twice (the compiled epoch's input and output) and the larger of
        a step's and an evaluation match's work."""
        state = pytree_bytes(abstract_checkpoint(self.td))
        games, agent = self.config.eval_games, self.agent
        matches = [match_memory_bytes(self.env, [agent, o], games) for o in self.opponents.values()]
        what = "the TD run (network, Adam, the games and an evaluation's or a step's work)"
        nbytes = 2 * state + max(training_bytes(self.td), *matches)
        return nbytes, what, "lower num_games, hidden or eval_games"

    def describe(self) -> str:
        cfg = self.config
        return (
            f"{cfg.num_games} games x {cfg.steps_per_epoch} turns/epoch, value net "
            f"{tuple(cfg.hidden)}, {cfg.num_epochs} epochs"
        )

    def start(self, run: Run) -> None:
        if self.judge is not None:
            self.positions = self.judge.positions(self.env, self.config.eval_accuracy_positions, 0)

    def initial_state(self) -> CheckpointState:
        return initial_checkpoint(self.td)

    def epoch(self, run: Run, state: CheckpointState, epoch: int) -> tuple[CheckpointState, dict]:
        """`steps_per_epoch` turns of every game, in one compiled call."""
        steps = (self.config.steps_per_epoch,)
        (learner, metrics), seconds, row = self.timed_call(
            run, self.td.train, state.learner, static=steps
        )
        self.final_metrics = {
            "loss": float(np.mean(np.asarray(metrics["loss"]))),
            "games": float(np.sum(np.asarray(metrics["games"]))),
        }
        row = {"turns_per_s": self.steps_per_epoch / max(seconds, 1e-9), **row}
        return state._replace(learner=learner), {**row, **self.final_metrics}

    def evaluate(
        self, run: Run, state: CheckpointState, epoch: int, *, out_of_time: bool
    ) -> tuple[CheckpointState, dict[str, Any]]:
        """Every `eval_every` epochs, the last one and when time is up; keeps the best."""
        cfg = self.config
        if not (epoch % cfg.eval_every == 0 or epoch == cfg.num_epochs or out_of_time):
            return state, {}
        eval_key, key = jax.random.split(state.eval_key)
        agent = self.agent.replace(params=state.learner.params)
        row = play_opponents(
            self.env, agent, self.opponents, key, games=cfg.eval_games, judge=self.judge,
            positions=self.positions,
        )  # fmt: skip
        points = row[f"eval/{cfg.eval_opponents[0]}/points"]
        better = points > float(state.best_points)
        state = state._replace(
            eval_key=eval_key,
            best_params=state.learner.params if better else state.best_params,
            best_points=jnp.float32(points) if better else state.best_points,
        )
        self.eval_row = {**row, "best_points": float(state.best_points)}
        return state, self.eval_row

    def checkpoint(self, state: CheckpointState, epoch: int) -> tuple[Any, dict[str, Any]]:
        best = float(state.best_points)
        return state, self.saved_record(turns=self.env_steps(epoch), best_points=best)

    def summary(self, state: CheckpointState, epoch: int, row: dict, *, final: bool) -> dict:
        best = float(state.best_points)
        return self.summary_record(turns=self.env_steps(epoch), best_points=best)


def train_td(
    config: TDConfig | str,
    run_dir: str | Path | None = None,
    *,
    resume: bool = False,
    preset: str | None = None,
    progress: bool | None = None,
    num_epochs: int | None = None,
    check_memory: bool = True,
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
        check_memory: refuse a run that would not fit in this machine's memory (`TooLargeError`,
            before anything is written); False to try anyway.

    Returns:
        The summary: `turns` played, `wall_seconds`, `final_metrics` (the last epoch's loss and
        finished games), `eval` (the last evaluation) and `best_points`.

    Raises:
        FileExistsError: `run_dir` exists and `resume` is False.
        ValueError: `resume` with a different config, or a run of another algorithm.
    """
    config, preset = resolve_config(config, preset, algorithm=ALGORITHM, config_class=TDConfig)
    return train_in_one_process(
        TDRun, config, preset, run_dir, resume=resume, progress=progress,
        stop_after=("num_epochs", num_epochs), check_memory=check_memory,
    )  # fmt: skip
