"""The host side of a training run, once for every algorithm: `run_experiment(algorithm, ...)`.

An algorithm gives its own steps as an `Algorithm` (start a state, run one epoch, evaluate, what a
checkpoint holds and how it comes back, its part of the summary); the runner does the rest:

- the run directory: created, or reopened on resume with its saved config compared, and locked
  for this training (`RunDir`);
- resuming from the newest checkpoint that reads back whole, and redoing exactly what an
  interrupted attempt wrote after it (its metric rows);
- one metric row per epoch to `metrics.jsonl`, the console and the loggers (`MetricsLogger`);
  checkpoints every `checkpoint_every` epochs and when the run stops;
- stopping: Ctrl-C or SIGTERM finishes the epoch, saves and returns (a second one aborts at once),
  so a crash or an abort loses at most the epochs since the last checkpoint; a wall-clock budget;
- `summary.json` after every epoch, and the plots at the end.

With several processes (`jax.distributed`), process 0 writes the run directory and decides for all
of them (`agree`): whether the run may start, when its time is up and when to stop.

`turbozero.alphazero.train`, `turbozero.ppo.train` and `turbozero.td.train` hold the algorithms'
steps; the end of this module holds what their `train` functions share (`RunHooks`, whose `train`
is PPO's and TD's, `read_run_config`, `train_in_one_process`; `turbozero.config.resolve_config`
beside the presets).
"""

from __future__ import annotations

import contextlib
import datetime
import hashlib
import json
import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, NamedTuple, Protocol

import jax
import numpy as np
from jax.experimental import multihost_utils

from turbozero.algorithms import algorithm
from turbozero.config import resolve_config
from turbozero.gamespec import Judge, game_module_of, game_spec
from turbozero.io import outside
from turbozero.io.checkpoint import Checkpointer
from turbozero.io.logger import MetricsLogger, check_logging_extras
from turbozero.io.migrations import FORMAT_VERSION
from turbozero.io.plots import plot_run
from turbozero.io.resources import check_fits_in_memory
from turbozero.io.rundir import RunDir
from turbozero.io.signals import StopFlag
from turbozero.runtime import configure_or_say_why
from turbozero.struct import pytree_bytes
from turbozero.validate import check_count

Row = dict[str, Any]


class Run(NamedTuple):
    """What an algorithm's steps are given while its run goes on.

    Attributes:
        dir: the run directory.
        log: the metrics logger; `log.info` prints a line (process 0 only).
        checkpoints: the run's checkpoints (`RUN/checkpoints`).
        flag: Ctrl-C and SIGTERM; a step that takes long calls `flag.check_abort()` between its
            parts, so that a second Ctrl-C aborts at once.
        primary: this is process 0, the one that writes the run directory.
        cleanup: what ends with the run (its lock, the checkpointers).
    """

    dir: RunDir
    log: MetricsLogger
    checkpoints: Checkpointer
    flag: StopFlag
    primary: bool
    cleanup: contextlib.ExitStack

    def checkpointer(self, directory: str | os.PathLike[str], *, keep: int | None) -> Checkpointer:
        """A writer of checkpoints in `directory`, closed when the run ends."""
        return _writer(directory, keep, self.cleanup)


class Algorithm(Protocol):
    """The steps of one algorithm's run, called by `run_experiment` in this order: `record`,
    `describe`, `start`; `init`, or `restore_target` and `restored` (then `resumed` on resume);
    per epoch `epoch`, `evaluate`, `checkpoint` (when saved) and `summary`.

    A state is whatever the algorithm trains (a pytree); an epoch is numbered from 1.

    Attributes:
        name: the algorithm's name, recorded in `config.json` and the summary (one of
            `turbozero.algorithms`).
        config: its typed config (`turbozero.config.Config`: `to_dict`, `from_dict`, `diff`,
            `keep_checkpoints`, `checkpoint_every`, and the loggers' `tensorboard` and
            `wandb_project`).
        env_name: the environment's name, for the summary and the first line.
        max_wall_seconds: stop once the run has trained this long in all (0: no limit).
        resume_may_change: config settings a resumed run may change (where it stops and logs).
        resume_notes: why a setting may not change, said when a resume changing it is refused.
    """

    name: str
    config: Any
    env_name: str
    max_wall_seconds: float
    resume_may_change: tuple[str, ...]
    resume_notes: Mapping[str, str]

    def record(self, saved: dict[str, Any] | None, run_dir: RunDir) -> dict[str, Any]:
        """The entries `config.json` holds beside `algorithm`, `preset` and `config`: of a new
        run (`saved` is None), or of a resumed one whose `config.json` is `saved`, refused with
        a `ValueError` if it was trained with other parts than this run has."""
        ...

    def describe(self) -> str:
        """What this run trains, for its first line (`turbozero NAME on ENV: ...`)."""
        ...

    def start(self, run: Run) -> None:
        """Make what the run needs once its directory and logger are open (e.g. checkpointers
        of its own with `run.checkpointer`)."""
        ...

    def init(self) -> Any:
        """The state a new run starts from."""
        ...

    def restore_target(self, meta: dict[str, Any]) -> Any:
        """The structure, shapes and dtypes to restore a checkpoint with side record `meta`
        into (`Checkpointer.restore_newest`)."""
        ...

    def restored(self, run: Run, tree: Any, meta: dict[str, Any]) -> Any:
        """The state a restored checkpoint (`tree`, `meta`) holds; the algorithm takes back what
        else it saved there (see `checkpoint`)."""
        ...

    def resumed(self, run: Run, state: Any, epoch: int) -> None:
        """Undo what an interrupted attempt wrote after the checkpoint of `epoch` (0: none)."""
        ...

    def epoch(self, run: Run, state: Any, epoch: int) -> tuple[Any, Row]:
        """Run epoch `epoch` (training, not evaluation); the new state and the row's metrics."""
        ...

    def evaluate(self, run: Run, state: Any, epoch: int, *, out_of_time: bool) -> tuple[Any, Row]:
        """Evaluate after `epoch` if it is on the algorithm's schedule, or `out_of_time` (the run
        stops after this epoch); the state and the metrics for the row (empty if not evaluated)."""
        ...

    def env_steps(self, epoch: int) -> int:
        """Environment steps after `epoch` epochs (the rows' and the summary's `env_steps`)."""
        ...

    def checkpoint(self, state: Any, epoch: int) -> tuple[Any, dict[str, Any]]:
        """What to save of `state` after `epoch`: the tree of arrays, and the side record's own
        entries (the runner adds `config`, `epoch` and `wall_seconds`)."""
        ...

    def summary(self, state: Any, epoch: int, row: Row, *, final: bool) -> dict[str, Any]:
        """The summary's own entries after `epoch`, whose metric row is `row`; `final` once the
        run has ended (after its last epoch, or having nothing left to train)."""
        ...


def stamped_run_dir(name: str) -> Path:
    """`runs/NAME-YYYYmmdd-HHMMSS`: where a run goes that was given no directory."""
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    return Path("runs") / f"{name}-{stamp}"


def agree(decision: bool) -> bool:
    """Process 0's `decision`, on every process (a collective: all must call it together)."""
    if jax.process_count() == 1:
        return decision
    return bool(multihost_utils.broadcast_one_to_all(np.asarray(decision)))


def check_same_on_every_process(settings: dict[str, Any], run_dir: str | Path | None) -> None:
    """Refuse, on every process, a run whose processes were given different settings (each
    would compile and stop differently, and wait for the others at a collective forever), or
    no run directory (each would stamp its own). Call it before building anything.

    Raises:
        ValueError: naming what differs.
    """
    if jax.process_count() == 1:
        return
    if run_dir is None:
        raise ValueError(
            f"a run over {jax.process_count()} processes needs its run directory named (run_dir, "
            f"--out), the same on every process: each would otherwise stamp its own"
        )
    text = json.dumps(settings, sort_keys=True, default=str)
    words = np.frombuffer(hashlib.sha256(text.encode()).digest()[:16], np.int32)
    every = np.asarray(multihost_utils.process_allgather(words))  # [processes, 4]
    differ = [i for i in range(every.shape[0]) if not np.array_equal(every[i], every[0])]
    if differ:
        raise ValueError(
            f"process(es) {differ} were started with other settings than process 0 (config, "
            f"--resume or the epoch count): every process of a run must run the same command"
        )


def open_run_dir(
    rd: RunDir,
    algorithm: Algorithm,
    *,
    resume: bool,
    preset: str | None,
    cleanup: contextlib.ExitStack,
) -> str | None:
    """Create or reopen the run directory, holding its lock in `cleanup`; the preset name to
    record. Refuses an existing run without `resume`, and a resumed run of another algorithm,
    with settings it may not change or with other parts (`Algorithm.record`)."""
    config = algorithm.config
    if not resume:
        record = {
            "format": FORMAT_VERSION,
            "algorithm": algorithm.name,
            "preset": preset,
            "config": config.to_dict(),
        }
        module = game_module_of(str(getattr(config, "env", "")))
        if module is not None:  # (a game of one's own: eval, play and --resume import it)
            record["game_module"] = module
        record.update(algorithm.record(None, rd))  # (before the directory: it may refuse)
        rd.create()
        cleanup.enter_context(rd.lock())
        rd.write_json("config.json", record)
        return preset
    rd.create(resume=True)
    cleanup.enter_context(rd.lock())
    saved = rd.read_config(algorithm.name)
    diff = type(config).from_dict(saved["config"]).diff(config)
    refused = {k: v for k, v in diff.items() if k not in algorithm.resume_may_change}
    if refused:
        notes = "".join(f" ({why})" for k, why in algorithm.resume_notes.items() if k in refused)
        raise ValueError(
            f"config differs from the run's saved config (saved, given): {refused}{notes}; a "
            f"resumed run may change only {', '.join(algorithm.resume_may_change)} (`turbozero "
            f"train --out RUN --resume` starts from the run's own config.json)"
        )
    entries = algorithm.record(saved, rd)
    preset = saved.get("preset") or preset
    changed = {k: v for k, v in entries.items() if saved.get(k) != v}
    if diff or changed:  # what the run now runs with
        record = {**saved, "preset": preset, "config": config.to_dict(), **changed}
        rd.write_json("config.json", record)
    return preset


def _open_on_every_process(
    rd: RunDir,
    algorithm: Algorithm,
    *,
    resume: bool,
    preset: str | None,
    cleanup: contextlib.ExitStack,
    primary: bool,
) -> str | None:
    """`open_run_dir` on process 0, whose refusal every process raises (the others would wait
    for it at their first collective)."""
    refusal: Exception | None = None
    if not primary:
        rd.path.mkdir(parents=True, exist_ok=True)
    else:
        try:
            preset = open_run_dir(rd, algorithm, resume=resume, preset=preset, cleanup=cleanup)
        except Exception as err:  # told to every process below, then raised here
            refusal = err
    if agree(refusal is not None):
        if refusal is not None:
            raise refusal
        raise RuntimeError(
            "process 0 refused to start this run (its output says why); this process stops too"
        )
    return preset


def _writer(
    directory: str | os.PathLike[str], keep: int | None, cleanup: contextlib.ExitStack
) -> Checkpointer:
    """A writing `Checkpointer`, closed as `cleanup` ends: not after an abort (a second Ctrl-C
    leaves at once), and after an error without hiding it."""
    checkpointer = Checkpointer(directory, keep=keep, writer=True)

    def close(kind: type[BaseException] | None, *_: Any) -> None:
        if kind is None:
            checkpointer.close()
        elif not issubclass(kind, KeyboardInterrupt):
            with contextlib.suppress(Exception):
                checkpointer.close()

    cleanup.push(close)
    return checkpointer


def _start_or_resume(algorithm: Algorithm, run: Run, resume: bool) -> tuple[Any, int, float]:
    """The state to train from, its epoch and the wall-clock seconds trained before: the newest
    checkpoint that reads back on resume (a fresh start if there is none yet), else `init`."""
    log, checkpoints = run.log, run.checkpoints
    epoch, wall0 = 0, 0.0
    if resume and checkpoints.latest_step() is not None:
        tree, meta, skipped = checkpoints.restore_newest(algorithm.restore_target)
        for message in skipped:
            log.info(f"passed over a damaged checkpoint: {message}")
        state = algorithm.restored(run, tree, meta)
        epoch, wall0 = int(meta["epoch"]), float(meta.get("wall_seconds", 0.0))
        log.info(f"resumed from epoch {epoch}")
    else:
        if resume:
            log.info("no checkpoint yet; starting from scratch")
        state = algorithm.init()
    if resume:
        # what the interrupted attempt wrote after its last checkpoint is redone exactly
        if run.primary:
            run.dir.truncate_metrics(epoch)
        algorithm.resumed(run, state, epoch)
        budget = algorithm.max_wall_seconds
        if budget and wall0 >= budget:
            raise ValueError(
                f"the run has used its max_wall_seconds={budget:g} ({wall0:.0f} s trained); to "
                f"train on, resume with a larger max_wall_seconds (--set max_wall_seconds=...) "
                f"or 0 for no limit"
            )
    return state, epoch, wall0


def _run_epoch(
    algorithm: Algorithm, run: Run, state: Any, epoch: int, start: float
) -> tuple[Any, Row, bool]:
    """Train and evaluate epoch `epoch` of a run whose clock started at `start`; the state, the
    epoch's metric row and whether the run is out of time."""
    state, row = algorithm.epoch(run, state, epoch)
    budget = algorithm.max_wall_seconds
    # decided by process 0 for all: each process has its own clock and signals, and a process
    # that evaluated, saved or stopped alone would wait for the others forever
    out_of_time = agree(bool(budget) and time.perf_counter() - start >= budget)
    state, evaluation = algorithm.evaluate(run, state, epoch, out_of_time=out_of_time)
    row.update(evaluation)
    wall = time.perf_counter() - start
    row.update(epoch=epoch, env_steps=algorithm.env_steps(epoch), wall_seconds=wall)
    return state, row, out_of_time


def _save(algorithm: Algorithm, run: Run, state: Any, epoch: int, wall: float) -> None:
    """Checkpoint `state` as step `epoch`."""
    tree, meta = algorithm.checkpoint(state, epoch)
    meta = {**meta, "config": algorithm.config.to_dict(), "epoch": epoch, "wall_seconds": wall}
    run.checkpoints.save(epoch, tree, meta)


def _summary(
    algorithm: Algorithm,
    preset: str | None,
    state: Any,
    epoch: int,
    wall: float,
    row: Row,
    *,
    final: bool,
) -> dict[str, Any]:
    """The run's summary after `epoch` epochs: what every run reports, and the algorithm's."""
    return {
        "preset": preset,
        "env": algorithm.env_name,
        "algorithm": algorithm.name,
        "epochs": epoch,
        "env_steps": algorithm.env_steps(epoch),
        "wall_seconds": wall,
        **algorithm.summary(state, epoch, row, final=final),
    }


def run_experiment(
    algorithm: Algorithm,
    run_dir: RunDir,
    *,
    resume: bool,
    preset: str | None,
    last_epoch: int,
    progress: bool | None,
) -> dict[str, Any]:
    """Train `algorithm` in `run_dir` until `last_epoch` epochs are done, a stop signal or the
    wall-clock budget; returns the summary (also written to `summary.json`).

    Args:
        algorithm: the algorithm's steps, built (and its settings checked) beforehand, so that a
            refused setting leaves no run directory behind.
        run_dir: where the run is written.
        resume: continue the run in `run_dir` from its newest readable checkpoint, exactly.
        preset: the preset name to record (a resumed run keeps the one it recorded).
        last_epoch: stop after this many epochs in all.
        progress: rich progress bar (default: when stdout is a terminal); plain lines otherwise.

    Raises:
        FileExistsError: `run_dir` exists and `resume` is False, or another training holds it
            (`RunInUseError`).
        FileNotFoundError: `resume` and `run_dir` is not a run directory.
        ValueError: `resume` with settings the run may not change, a run of another algorithm,
            or a run that has used its wall-clock budget.
    """
    primary = jax.process_index() == 0  # only process 0 writes logs, summaries and plots
    config = algorithm.config
    with contextlib.ExitStack() as cleanup:
        cleanup.enter_context(outside.ending_those_started())  # (its opponents' engines)
        preset = _open_on_every_process(
            run_dir, algorithm, resume=resume, preset=preset, cleanup=cleanup, primary=primary
        )
        judge = judge_of(algorithm.env_name)
        log = MetricsLogger(
            run_dir,
            progress=progress,
            total_epochs=last_epoch,
            config=config,
            enabled=primary,
            judge=judge,
        )
        cleanup.callback(log.close)  # (where the run fails before its epochs' `with log`)
        log.info(
            f"turbozero {algorithm.name} on {algorithm.env_name}: {algorithm.describe()} -> "
            f"{run_dir.path}"
        )
        checkpoints = _writer(run_dir.checkpoints, config.keep_checkpoints, cleanup)
        run = Run(run_dir, log, checkpoints, StopFlag(), primary, cleanup)
        algorithm.start(run)
        state, epoch, wall = _start_or_resume(algorithm, run, resume)
        start = time.perf_counter() - wall
        row: Row | None = None
        stop = out_of_time = False
        with run.flag as flag, log:
            while epoch < last_epoch and not stop:
                epoch += 1
                state, row, out_of_time = _run_epoch(algorithm, run, state, epoch, start)
                wall = row["wall_seconds"]
                log.epoch(row)
                flag.check_abort()
                stop = out_of_time or agree(flag.stop)
                if out_of_time:
                    log.info(
                        f"max_wall_seconds={algorithm.max_wall_seconds} reached at epoch {epoch}"
                    )
                if epoch % config.checkpoint_every == 0 or epoch == last_epoch or stop:
                    _save(algorithm, run, state, epoch, wall)
                if primary:
                    summary = _summary(algorithm, preset, state, epoch, wall, row, final=False)
                    run_dir.write_json("summary.json", summary)
            if stop and not out_of_time and epoch < last_epoch:
                log.stopped(epoch)
            if row is None:  # nothing left to train: where the checkpoint left the run (the
                # file may be a crashed attempt's, written after epochs the resume redid)
                rows = [r for r in run_dir.read_metrics() if r.get("epoch") == epoch]
                row = rows[-1] if rows else {}
            summary = _summary(algorithm, preset, state, epoch, wall, row, final=True)
            if primary and epoch:
                run_dir.write_json("summary.json", summary)
        if primary:
            plot_run(run_dir.read_metrics(), run_dir.plots, judge=judge)
        log.info(
            f"done: {epoch}/{last_epoch} epochs, {algorithm.env_steps(epoch):,} environment "
            f"steps -> {run_dir.path}"
        )
        # (a run that names code, its game's module or the recipes that rebuild parts given
        # from Python, is opened with the user's word)
        if primary:
            names_code = {"game_module", "rebuild"} & set(run_dir.read_json("config.json"))
            trust = " --trust-run" if names_code else ""
            play = f", or play it: turbozero play {run_dir.path}{trust}"
            log.info(
                f"next: turbozero eval {run_dir.path}{trust}{play if _playable(algorithm) else ''}"
            )
        return summary


def _playable(algorithm: Algorithm) -> bool:
    """Whether the play page serves the run's agent (a two-player game's)."""
    return int(getattr(algorithm, "num_players", 0)) == 2


# ----------------------------------------------------------------------------- the shared kit
# What every algorithm's `train` and run hooks need beyond the runner: written once here.


class RunHooks:
    """A base for an algorithm's run hooks (`Algorithm`), with the steps most algorithms leave
    as they are: `record` adds nothing to `config.json`, `start` and `resumed` do nothing, `init`
    runs `initial_state` compiled and `restore_target` gives its shapes, `evaluate` runs
    `evaluation` when `evaluation_due` and keeps its row, `restored` takes back the last epoch's
    `final_metrics` and evaluation `eval` (as `checkpoint` saved them, see `saved_record`) and
    returns the tree, `checkpoint` saves the whole state with `progress` (which `summary` also
    reports), `env_steps` counts `steps_per_epoch` an epoch. The subclass sets `name` and
    `config_class`, gives `config` (its `env`, and `max_wall_seconds` and `eval_every` where it
    has them, are read from it), `initial_state` and `evaluation`, and sets `steps_per_epoch` and
    `epochs` (the config's last epoch). `train` trains it in one process: it is the algorithm's
    `train_<name>` function (`train_ppo`, `train_td`), stopped early by `stop_argument`.
    """

    name: str
    config_class: type
    epochs: int
    #: `evaluation(state) -> (state, row)`, an evaluation of `state` (a method or a function the
    #: subclass sets): the state after it (its evaluation key consumed, its best kept) and its
    #: metrics for the row
    evaluation: Callable[[Any], tuple[Any, Row]]
    resume_may_change: tuple[str, ...] = ()
    resume_notes: Mapping[str, str] = {}
    steps_per_epoch: int = 0
    #: `train`'s argument that stops a run after so many epochs in all (the config's name for
    #: them: `num_epochs`, or PPO's `num_evals`)
    stop_argument: str = "num_epochs"
    #: whether the evaluation under way is the run's last (its last epoch, or its time is up):
    #: work worth doing once, such as drawing the game records, waits for it
    final_evaluation: bool = False

    @classmethod
    def train(
        cls,
        config: Any,
        run_dir: str | Path | None = None,
        *,
        resume: bool = False,
        preset: str | None = None,
        progress: bool | None = None,
        check_memory: bool = True,
        **stop_after: int | None,
    ) -> dict[str, Any]:
        """Train the algorithm in this process (`train_in_one_process`); returns the summary (also
        `summary.json`). It is the algorithm's `train_<name>` (`train_ppo`, `train_td`) and the
        registry's `run` (`turbozero.algorithms`).

        Args:
            config: a config of the algorithm (`config_class`), or the name of one of its presets.
            run_dir: where to write; defaults to `runs/PRESET-TIMESTAMP`. An existing run
                directory is an error unless `resume`.
            resume: continue the run in `run_dir` from its newest checkpoint, exactly: its saved
                config must equal `config` but for the settings a resumed run may change
                (`resume_may_change`). Without a checkpoint yet, the run starts from scratch.
            preset: the preset name to record (filled in when `config` is a preset name).
            progress: rich progress bar (default: when stdout is a terminal); plain lines
                otherwise.
            check_memory: refuse a run whose state would not fit in this machine's memory
                (`TooLargeError`, before anything is written); False to try anyway.
            **stop_after: `stop_argument=N`: stop after `N` epochs in all (default: the config's
                last epoch, to which a later `resume` continues).

        Returns:
            The summary: `preset`, `env`, `algorithm`, `epochs`, `env_steps` and `wall_seconds`
            (over resumes) so far, and the algorithm's own entries (`summary`).

        Raises:
            FileExistsError: `run_dir` exists and `resume` is False, or another training holds it
                (`RunInUseError`).
            FileNotFoundError: `resume` and `run_dir` is not a run directory.
            ValueError: `resume` with a different config or a run of another algorithm; a preset
                of another algorithm.
            TypeError: `config` is neither a config of the algorithm nor a preset name; a
                keyword argument that is none of these.
        """
        for argument in stop_after:
            if argument != cls.stop_argument:  # (as Python says it of a function's arguments)
                raise TypeError(
                    f"train_{cls.name}() got an unexpected keyword argument {argument!r}"
                )
        return train_in_one_process(
            cls,
            config,
            run_dir,
            stop_after=(cls.stop_argument, stop_after.get(cls.stop_argument)),
            resume=resume,
            preset=preset,
            progress=progress,
            check_memory=check_memory,
        )

    def initial_state(self) -> Any:
        """The state a new run starts from (traced: `init` compiles it)."""
        raise NotImplementedError

    def evaluation_due(self, epoch: int, *, out_of_time: bool) -> bool:
        """Whether epoch `epoch` ends with an evaluation: every `eval_every` epochs of the config
        (every epoch where it has none), the last one and when time is up (`out_of_time`)."""
        every = int(getattr(self.config, "eval_every", 1))
        return epoch % every == 0 or epoch == self.epochs or out_of_time

    def progress(self, state: Any, epoch: int) -> dict[str, Any]:
        """What a checkpoint's side record and the summary hold of the run after `epoch` beside
        the last epoch's metrics and evaluation (`saved_record`, `summary_record`): nothing."""
        return {}

    def memory(self) -> tuple[int, str, str] | None:
        """`(bytes, what, settings to lower)`: the run's memory at its peak, estimated from
        shapes alone before anything is allocated (`check_fits_in_memory`); None: not known."""
        return None

    def state_bytes(self) -> int:
        """Bytes of the state a run starts from, from `initial_state`'s shapes alone."""
        return pytree_bytes(jax.eval_shape(self.initial_state))

    def init(self) -> Any:
        return jax.jit(self.initial_state)()

    def restore_target(self, meta: dict[str, Any]) -> Any:
        return jax.eval_shape(self.initial_state)

    def env_steps(self, epoch: int) -> int:
        return epoch * self.steps_per_epoch

    def __init__(self, config: Any):
        self.config = config
        self.env_name = config.env
        self.max_wall_seconds = float(getattr(config, "max_wall_seconds", 0.0))
        self.final_metrics: dict[str, float] = {}  # the last epoch's training metrics
        self.eval_row: Row = {}  # and the last evaluation's
        self._compiled: Any = None

    def record(self, saved: dict[str, Any] | None, run_dir: RunDir) -> dict[str, Any]:
        return {}

    def start(self, run: Run) -> None:
        pass

    def restored(self, run: Run, tree: Any, meta: dict[str, Any]) -> Any:
        self.final_metrics = dict(meta.get("final_metrics", {}))
        self.eval_row = dict(meta.get("eval", {}))
        return tree

    def resumed(self, run: Run, state: Any, epoch: int) -> None:
        pass

    def evaluate(self, run: Run, state: Any, epoch: int, *, out_of_time: bool) -> tuple[Any, Row]:
        """`evaluation` after the epochs `evaluation_due` says, its row kept as the last
        evaluation's (checkpoints and the summary hold it); no row after the others."""
        if not self.evaluation_due(epoch, out_of_time=out_of_time):
            return state, {}
        self.final_evaluation = epoch == self.epochs or out_of_time
        start = time.perf_counter()
        state, self.eval_row = self.evaluation(state)
        # (the row says what it cost: the time left counts the evaluations still due)
        return state, {**self.eval_row, "eval_seconds": time.perf_counter() - start}

    def checkpoint(self, state: Any, epoch: int) -> tuple[Any, dict[str, Any]]:
        return state, self.saved_record(**self.progress(state, epoch))

    def summary(self, state: Any, epoch: int, row: Row, *, final: bool) -> dict[str, Any]:
        return self.summary_record(**self.progress(state, epoch))

    def saved_record(self, **entries: Any) -> dict[str, Any]:
        """A checkpoint's side record: `entries`, the last epoch's metrics and evaluation."""
        return {**entries, "final_metrics": self.final_metrics, "eval": self.eval_row}

    def summary_record(self, **entries: Any) -> dict[str, Any]:
        """The summary's own entries: `entries`, the last epoch's metrics, and the last
        evaluation with its keys' `eval/` left off."""
        evaluation = {k.removeprefix("eval/"): v for k, v in self.eval_row.items()}
        return {**entries, "final_metrics": self.final_metrics, "eval": evaluation}

    def timed_call(
        self, run: Run, program: Any, *args: Any, static: tuple[Any, ...] = ()
    ) -> tuple[Any, float, Row]:
        """`program(*args, *static)` (a `jax.jit`ted function whose last arguments `static` are
        static), compiled at its first call before the clock starts; `(out, seconds, row)` with
        the row's `compile_seconds` on the first call. A second Ctrl-C during the call aborts at
        its end."""
        row: Row = {}
        if self._compiled is None:
            t = time.perf_counter()
            self._compiled = program.lower(*args, *static).compile()
            row["compile_seconds"] = time.perf_counter() - t
        t0 = time.perf_counter()
        out = jax.block_until_ready(self._compiled(*args))
        run.flag.check_abort()
        return out, time.perf_counter() - t0, row


def judge_of(env: Any) -> Judge | None:
    """The judge of the game `env` names (`GameSpec.judge`), whose figures the log and the plots
    word and draw as it says; None for games without one (and a name that is no game)."""
    spec = game_spec(env) if isinstance(env, str) else None
    return None if spec is None else spec.judge


def read_run_config(run: RunDir, name: str) -> tuple[Any, str | None]:
    """The config (its registered config class's) and the preset name a run directory of the
    algorithm `name` holds.

    Raises:
        FileNotFoundError: `run` has no config.json.
        ValueError: the run is another algorithm's.
    """
    saved = run.read_config(name)
    return algorithm(name).config_class().from_dict(saved["config"]), saved.get("preset")


def train_in_one_process(
    hooks_class: Any,
    config: Any,
    run_dir: str | Path | None = None,
    *,
    stop_after: tuple[str, int | None] | None = None,
    resume: bool = False,
    preset: str | None = None,
    progress: bool | None = None,
    check_memory: bool = True,
) -> dict[str, Any]:
    """An algorithm's `train` that runs in one process, once for all of them: `config` (a config of
    `hooks_class.config_class` or the name of one of its algorithm's presets, resolved by
    `turbozero.config.resolve_config`) made into `hooks_class(config)` (a `RunHooks`), a run joined
    to others refused, the loggers' extras and (with `check_memory`) the memory `hooks.memory()`
    estimates checked before the run directory exists, then `run_experiment` in `run_dir` (default
    `runs/PRESET-TIMESTAMP`) until `stop_after` (`(argument name, epochs or None)`: where to stop
    early) or the config's last epoch. `RunHooks.train` says the rest, and what it raises.
    """
    name, config_class = hooks_class.name, hooks_class.config_class
    cfg, preset = resolve_config(config, preset, algorithm=name, config_class=config_class)
    argument, stop = stop_after or ("", None)
    if stop is not None:
        stop = check_count(argument, stop, low=1)
    configure_or_say_why()
    title = algorithm(name).title
    if jax.process_count() > 1:
        raise ValueError(
            f"{title} training runs in one process, but {jax.process_count()} processes were "
            f"joined (TURBOZERO_COORDINATOR): run it without the TURBOZERO_* variables; many "
            f"hosts are for AlphaZero training"
        )
    hooks = hooks_class(cfg)
    check_logging_extras(cfg)
    memory = hooks.memory() if check_memory else None
    if memory is not None:
        nbytes, what, lower = memory
        check_fits_in_memory(nbytes, what, lower=lower)
    return run_experiment(
        hooks,
        RunDir(run_dir or stamped_run_dir(preset or hooks.name)),
        resume=resume,
        preset=preset,
        last_epoch=min(stop or hooks.epochs, hooks.epochs),
        progress=progress,
    )
