"""`train(config, run_dir)`: the whole AlphaZero run on the host side, around compiled pieces."""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import functools
import hashlib
import inspect
import json
import math
import re
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import flax.linen as nn
import jax
import numpy as np
from jax.experimental import multihost_utils

from turbozero.alphazero.config import AlphaZeroConfig
from turbozero.alphazero.evaluate import Evaluator
from turbozero.alphazero.rebuild import record_parts
from turbozero.alphazero.sharding import Sharder
from turbozero.alphazero.trainer import TrainState, make_alphazero
from turbozero.io.checkpoint import Checkpointer
from turbozero.io.logger import MetricsLogger, check_logging_extras
from turbozero.io.plots import plot_run
from turbozero.io.resources import check_fits_in_memory
from turbozero.io.rundir import RunDir
from turbozero.io.signals import StopFlag
from turbozero.nets import param_count
from turbozero.runtime import configure_or_say_why
from turbozero.search import compiler_options, tree_bytes
from turbozero.validate import check_count, is_digits

ALGORITHM = "alphazero"


def _nbytes(tree: Any) -> int:
    return int(sum(np.prod(x.shape) * x.dtype.itemsize for x in jax.tree_util.tree_leaves(tree)))


def default_run_dir(preset: str | None) -> Path:
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    return Path("runs") / f"{preset or 'alphazero'}-{stamp}"


class _CompiledAhead:
    """A jitted `fn(state, n)` (static `n`) compiled ahead of its first call for each `n`, so
    that a caller can keep the compilation out of what it times."""

    def __init__(self, jitted: Any):
        self.jitted = jitted
        self.compiled: dict[int, Any] = {}

    def prepare(self, state: Any, n: int) -> float:
        """Compile for `n` unless done already; the seconds it took (0 if it was done)."""
        if n in self.compiled:
            return 0.0
        t = time.perf_counter()
        self.compiled[n] = self.jitted.lower(state, n).compile()
        return time.perf_counter() - t

    def __call__(self, state: Any, n: int) -> Any:
        self.prepare(state, n)
        compiled = self.compiled[n]
        try:
            return compiled(state)
        except ValueError as err:
            # a compiled program takes its inputs only in the layout it was compiled for (where
            # `jit` would recompile): lay out a state that arrives otherwise. Checked by the
            # call rather than by `device_put` on every call, which costs more than a small
            # training step (650 us against 340 us for tic_tac_toe's). The refused call has
            # not run, so nothing was donated.
            if "shardings" not in str(err):
                raise
            return compiled(jax.device_put(state, compiled.input_shardings[0][0]))


def positions_played(cfg: AlphaZeroConfig, epochs: int) -> int:
    """Self-play positions after `epochs` epochs (the warm-up's included), counted in Python:
    the state's int32 counter wraps past 2**31 positions, which a long GPU run can reach."""
    return cfg.num_games * (cfg.warmup_steps + epochs * cfg.collection_steps_per_epoch)


def agree(decision: bool) -> bool:
    """Process 0's `decision`, on every process (a collective: all must call it together)."""
    if jax.process_count() == 1:
        return decision
    return bool(multihost_utils.broadcast_one_to_all(np.asarray(decision)))


#: settings a resumed run may change: where it stops and where it logs (none changes what an
#: epoch computes)
RESUME_MAY_CHANGE = (
    "num_epochs",
    "max_wall_seconds",
    "tensorboard",
    "wandb_project",
    "eval_record_games",
)


def _same_on_every_process(settings: dict[str, Any]) -> None:
    """Refuse, on every process, a run whose processes were given different settings (each
    would compile and stop differently, and wait for the others at a collective forever)."""
    if jax.process_count() == 1:
        return
    text = json.dumps(settings, sort_keys=True, default=str)
    words = np.frombuffer(hashlib.sha256(text.encode()).digest()[:16], np.int32)
    every = np.asarray(multihost_utils.process_allgather(words))  # [processes, 4]
    differ = [i for i in range(every.shape[0]) if not np.array_equal(every[i], every[0])]
    if differ:
        raise ValueError(
            f"process(es) {differ} were started with other settings than process 0 (config, "
            f"--resume or the epoch count): every process of a run must run the same command"
        )


def _canonical(x: Any, seen: frozenset[int] = frozenset()) -> str:
    """A description of `x` that is the same in every process and Python session: dataclass
    fields (a flax module's) by name, sets sorted, functions by name (not by the module path a
    library may move them to), bound methods with their object; no memory addresses, no
    hash-dependent orders, no library's display format. Long texts are hashed."""
    if id(x) in seen:
        return "<cycle>"
    seen = seen | {id(x)}

    def c(y: Any) -> str:
        return _canonical(y, seen)

    if dataclasses.is_dataclass(x) and not isinstance(x, type):
        skip = ("parent", "name") if isinstance(x, nn.Module) else ()
        fields = [f for f in dataclasses.fields(x) if f.name not in skip]
        inner = ", ".join(f"{f.name}={c(getattr(x, f.name, '<unset>'))}" for f in fields)
        text = f"{type(x).__name__}({inner})"
    elif isinstance(x, set | frozenset):
        text = "{" + ", ".join(sorted(map(c, x))) + "}"
    elif isinstance(x, dict):
        text = "{" + ", ".join(f"{k}: {v}" for k, v in sorted((c(k), c(v)) for k, v in x.items()))
        text += "}"
    elif isinstance(x, list):
        text = "[" + ", ".join(map(c, x)) + "]"
    elif isinstance(x, tuple):
        text = "(" + ", ".join(map(c, x)) + ("," if len(x) == 1 else "") + ")"
    elif isinstance(x, functools.partial):
        args = [c(a) for a in x.args] + [f"{k}={c(v)}" for k, v in sorted(x.keywords.items())]
        text = f"partial({', '.join([c(x.func), *args])})"
    elif inspect.ismethod(x):
        text = f"{c(x.__self__)}.{x.__func__.__name__}"
    elif callable(x) and hasattr(x, "__qualname__"):
        text = x.__qualname__
    elif isinstance(x, np.ndarray | jax.Array):
        digest = hashlib.sha256(np.asarray(x).tobytes()).hexdigest()[:12]
        text = f"array{tuple(x.shape)}:{x.dtype}:{digest}"
    elif x is None or isinstance(x, bool | int | float | str):
        text = repr(x)
    else:
        text = type(x).__name__ + ":" + re.sub(r" at 0x[0-9a-fA-F]+", "", repr(x))
    if len(text) > 2000:
        return f"{text[:200]}...sha256:{hashlib.sha256(text.encode()).hexdigest()[:16]}"
    return text


def describe_parts(parts: dict[str, Any]) -> dict[str, str]:
    """What a run directory records of the parts given from Python (`train(parts=...)`, the
    tutorial's `Trainer`), so that resuming with other ones is refused: the game's name and
    sizes, the flax module's fields, the selector's settings, the loss's function and bound
    arguments, the number of augmentations. An optax optimizer is not described (its settings
    live in closures); its state's structure is checked when the checkpoint is read."""
    out = {}
    for name, part in sorted(parts.items()):
        if part is None or name == "optimizer":
            continue
        if name == "env":
            out[name] = (
                f"{part.name} ({part.num_players} players, {part.num_actions} actions, "
                f"observation {tuple(part.observation_shape)})"
            )
        elif name == "augment_fns":
            out[name] = f"{len(list(part))} functions"
        else:
            out[name] = _canonical(part)
    return out


def _open_run_dir(
    rd: RunDir,
    config: AlphaZeroConfig,
    resume: bool,
    preset: str | None,
    parts: dict[str, str],
    cleanup: contextlib.ExitStack,
    recipes: dict[str, Any] | None = None,
) -> str | None:
    """Process 0: create or reopen the run directory, holding its lock in `cleanup`; the
    preset name to record. Refuses an existing run without `resume`, and a resumed run of
    another algorithm, with settings it may not change or with other `parts` (described by
    `describe_parts`)."""
    if resume:
        rd.create(resume=True)
        cleanup.enter_context(rd.lock())
        saved = rd.read_config(ALGORITHM)
        stored = AlphaZeroConfig.from_dict(saved["config"])
        diff = stored.diff(config)
        refused = {k: v for k, v in diff.items() if k not in RESUME_MAY_CHANGE}
        if refused:
            raise ValueError(
                f"config differs from the run's saved config (saved, given): {refused}; a "
                f"resumed run may change only {', '.join(RESUME_MAY_CHANGE)} (`turbozero train "
                f"--out RUN --resume` starts from the run's own config.json)"
            )
        if "parts" in saved and saved["parts"] != parts:
            names = sorted(set(saved["parts"]) | set(parts))
            other = {
                n: (saved["parts"].get(n), parts.get(n))
                for n in names
                if saved["parts"].get(n) != parts.get(n)
            }
            raise ValueError(
                f"the parts given differ from those the run was trained with (saved, given): "
                f"{other}; a resumed run must be given the same game, network and loss"
            )
        done = [int(p.name) for p in rd.checkpoints.glob("*") if is_digits(p.name)]
        if done and config.num_epochs < max(done):
            # (checked before config.json is rewritten: it would record an end already passed)
            raise ValueError(
                f"num_epochs={config.num_epochs} is below the {max(done)} epochs this run has "
                f"done; a resumed run can only go on (a larger num_epochs) or stop where it is"
            )
        preset = saved.get("preset", preset)
        rebuild = {**saved.get("rebuild", {}), **(recipes or {})}
        if diff or rebuild != saved.get("rebuild", {}):  # what the run now runs with
            updated = {**saved, "config": config.to_dict()}
            if rebuild:
                updated["rebuild"] = rebuild
            rd.write_json("config.json", updated)
        return preset
    rd.create()
    cleanup.enter_context(rd.lock())
    record: dict[str, Any] = {
        "algorithm": ALGORITHM,
        "preset": preset,
        "config": config.to_dict(),
        "parts": parts,
    }
    if recipes:
        record["rebuild"] = recipes
    rd.write_json("config.json", record)
    return preset


def train(
    config: AlphaZeroConfig,
    run_dir: str | Path | None = None,
    *,
    resume: bool = False,
    preset: str | None = None,
    progress: bool | None = None,
    num_epochs: int | None = None,
    parts: dict[str, Any] | None = None,
    check_memory: bool = True,
    rebuild: Mapping[str, str] | None = None,
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
        parts: pieces that replace what the config builds (see `make_alphazero`), e.g. a user's
            own `env` and flax `module`; a resumed run must be given the same parts (the run
            records them, see `describe_parts`, and refuses others).
        check_memory: refuse a run whose training state would not fit in this machine's memory
            (`TooLargeError`, before anything is allocated or written); False to try anyway.
        rebuild: `{part name: "pkg.module:function" or "path/file.py:function"}`, a function of
            no arguments returning that part, for parts the run directory cannot record by
            itself (see `turbozero.alphazero.rebuild`); with it, `turbozero eval`, `play` and
            `train --resume` rebuild the run's parts.

    Raises:
        RunInUseError: another training holds `run_dir` (a `FileExistsError`).
        FloatingPointError: the training loss stopped being a finite number (the parameters
            diverged); that epoch is not saved, so the latest checkpoint keeps finite ones.
    """
    with contextlib.ExitStack() as cleanup:
        return _train(
            config,
            run_dir,
            resume,
            preset,
            progress,
            num_epochs,
            parts,
            check_memory,
            cleanup,
            rebuild,
        )


def _train(
    config: AlphaZeroConfig,
    run_dir: str | Path | None,
    resume: bool,
    preset: str | None,
    progress: bool | None,
    num_epochs: int | None,
    parts: dict[str, Any] | None,
    check_memory: bool,
    cleanup: contextlib.ExitStack,
    rebuild: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    if num_epochs is not None:
        num_epochs = check_count("num_epochs", num_epochs, low=1)
        if num_epochs > config.num_epochs:
            # (the evaluation schedule and the last evaluation follow the config's num_epochs)
            raise ValueError(
                f"num_epochs={num_epochs} stops a run after config.num_epochs="
                f"{config.num_epochs}: it is where to stop early; to train longer, set the "
                f"config's num_epochs"
            )
    check_logging_extras(config)  # (before anything is built or written)
    configure_or_say_why()  # joins a multi-host run; the CPU loop option if still possible
    primary = jax.process_index() == 0  # only process 0 writes logs, summaries and plots
    if jax.process_count() > 1 and run_dir is None:
        raise ValueError(
            f"a run over {jax.process_count()} processes needs its run directory named (run_dir, "
            f"--out), the same on every process: each would otherwise stamp its own"
        )
    _same_on_every_process({"config": config.to_dict(), "resume": resume, "num_epochs": num_epochs})
    # Everything that can refuse the configuration (the game's id, the search's settings, the
    # devices, the evaluation opponents) is built before the run directory is, so a refused
    # setting leaves nothing behind that would block the corrected command.
    sharder = Sharder(config)
    az = make_alphazero(config, **(parts or {}), mesh=sharder.mesh)
    recipes = record_parts(parts or {}, rebuild, describe_parts)
    if not resume:
        config.check_new_run(az.env.num_players)
    state_shape = jax.eval_shape(az.init, jax.random.PRNGKey(0))
    if check_memory:
        what = "the training state (trees, replay memory, network and optimizer)"
        check_fits_in_memory(_nbytes(state_shape), what)
    # process 0 decides the best network for all: a process whose evaluation came out otherwise
    # (another device's rounding) must neither keep another best nor skip a save the others make
    evaluator = Evaluator(az, decide=agree)
    rd = RunDir(run_dir or default_run_dir(preset))
    setup_error: Exception | None = None
    if not primary:
        rd.path.mkdir(parents=True, exist_ok=True)
    else:
        try:
            described = describe_parts(parts or {})
            preset = _open_run_dir(rd, config, resume, preset, described, cleanup, recipes)
        except Exception as err:  # told to every process below, then raised here
            setup_error = err
    # the checks above are process 0's: the others learn of a refusal rather than wait for it
    # at their first collective
    if agree(setup_error is not None):
        if setup_error is not None:
            raise setup_error
        raise RuntimeError(
            "process 0 refused to start this run (its output says why); this process stops too"
        )
    cfg = config
    env = az.env
    state = sharder.jit_init(az.init)(jax.random.PRNGKey(cfg.seed))
    costs = {
        "tree_bytes": tree_bytes(env, cfg.num_games, cfg.search.max_nodes),
        "memory_bytes": _nbytes(state.selfplay.memory),
        "parameters": param_count(state.params),
        "positions_per_epoch": cfg.num_games * cfg.collection_steps_per_epoch,
        "devices": sharder.num_devices,
    }
    log = MetricsLogger(
        rd,
        progress=progress,
        total_epochs=num_epochs or cfg.num_epochs,
        config=cfg,
        enabled=primary,
    )
    log.info(
        f"turbozero alphazero on {env.name}: {costs['parameters']:,} parameters, trees "
        f"{costs['tree_bytes'] / 2**20:.1f} MiB, memory {costs['memory_bytes'] / 2**20:.1f} MiB, "
        f"{costs['positions_per_epoch']:,} positions/epoch, {sharder.num_devices} device(s) "
        f"-> {rd.path}"
    )
    if cfg.search.capacity_warning():
        log.info(cfg.search.capacity_warning() or "")
    ckpt = Checkpointer(rd.checkpoints, keep=cfg.keep_checkpoints, writer=True)
    best_ckpt = Checkpointer(rd.path / "best", keep=1, writer=True)
    collect = _CompiledAhead(
        sharder.jit_step(az.collect, state_shape, compiler_options=compiler_options())
    )
    train_steps = _CompiledAhead(sharder.jit_step(az.train_steps, state_shape))
    eval_metrics: dict[str, Any] = {}
    wall0 = 0.0

    def strip(s: TrainState) -> TrainState:
        if cfg.save_memory:
            return s
        return s.replace(selfplay=s.selfplay.replace(memory=None))

    def save(state: TrainState, extra: dict[str, Any]) -> None:
        tree = {"train": strip(state), **sharder.replicate(evaluator.state_tree(state.params))}
        meta = {
            "kind": "train",
            "config": cfg.to_dict(),
            "eval": eval_metrics,
            **evaluator.state_meta(),
            **extra,
        }
        ckpt.save(int(state.epoch), tree, meta)

    def save_best(epoch: int, eval_at: dict[str, Any]) -> None:
        """`best/` holds the evaluator's best network, made best at `epoch`."""
        params = {"params": sharder.replicate(evaluator.best_params)}
        meta = {"kind": "params", "config": cfg.to_dict(), "epoch": epoch, "eval": eval_at}
        best_ckpt.save(epoch, params, meta)

    if resume and ckpt.latest_step() is not None:
        restored, meta, skipped = ckpt.restore_newest(
            lambda meta: {"train": strip(state), **evaluator.like_tree(meta, state.params)}
        )
        for message in skipped:
            log.info(f"passed over a damaged checkpoint: {message}")
        train_state = restored.pop("train")
        if not cfg.save_memory:
            train_state = train_state.replace(
                selfplay=train_state.selfplay.replace(memory=state.selfplay.memory)
            )
            log.info(
                "save_memory=false: the replay memory starts empty again, so training from "
                "here differs from an uninterrupted run"
            )
        state = train_state
        evaluator.restore(restored, meta)
        eval_metrics = meta.get("eval", {})
        wall0 = meta.get("wall_seconds", 0.0)
        log.info(f"resumed from epoch {int(state.epoch)}")
    elif resume:
        log.info("no checkpoint yet; starting from scratch")
    if resume:
        # what the interrupted attempt wrote after its last checkpoint is redone exactly: its
        # metric rows and any "best" network it saved (saving that step again would fail)
        if primary:
            rd.truncate_metrics(int(state.epoch))
        best_ckpt.delete_after(int(state.epoch))
        # `best/` is saved before the checkpoint of its epoch and keeps one network: a crash
        # between the two leaves a `best/` newer than the checkpoint (deleted just now), so it
        # gets the best network the checkpoint knows back
        if evaluator.best_params is not None and evaluator.best_name:
            best_epoch = int(evaluator.best_name.removeprefix("epoch_"))
            if best_ckpt.latest_step() != best_epoch:
                rows = [r for r in rd.read_metrics() if r.get("epoch") == best_epoch]
                made = rows[-1] if rows else {}  # its epoch's row: the evaluation it had
                save_best(
                    best_epoch, {k: v for k, v in made.items() if k.startswith(("eval/", "elo"))}
                )
        if cfg.max_wall_seconds and wall0 >= cfg.max_wall_seconds:
            ckpt.close()
            best_ckpt.close()
            raise ValueError(
                f"the run has used its max_wall_seconds={cfg.max_wall_seconds:g} "
                f"({wall0:.0f} s trained); to train on, resume with a larger max_wall_seconds "
                f"(--set max_wall_seconds=...) or 0 for no limit"
            )

    def make_summary(epoch: int, wall: float, row: dict[str, Any]) -> dict[str, Any]:
        return {
            "preset": preset,
            "env": env.name,
            "algorithm": ALGORITHM,
            "epochs": epoch,
            "env_steps": positions_played(cfg, epoch),
            "wall_seconds": wall,
            "final_metrics": {k: v for k, v in row.items() if not k.startswith("eval/")},
            "eval": eval_metrics,
            "costs": costs,
        }

    start = time.perf_counter() - wall0
    last_epoch = num_epochs or cfg.num_epochs
    with StopFlag() as flag, log:
        if int(state.epoch) == 0 and int(state.env_steps) == 0 and cfg.warmup_steps:
            state, _ = collect(state, cfg.warmup_steps)
        stop = False
        summary: dict[str, Any] = {}
        most_sampleable, warned_waiting = 0, False
        while int(state.epoch) < last_epoch and not stop:
            # compiled before the clock starts (the first epoch of a process otherwise reads
            # as a throughput far below the rest); the time it took is reported apart
            compile_seconds = collect.prepare(state, cfg.collection_steps_per_epoch)
            if cfg.train_steps_per_epoch:
                compile_seconds += train_steps.prepare(state, 1)
            t0 = time.perf_counter()
            state, sp = collect(state, cfg.collection_steps_per_epoch)
            jax.block_until_ready(state.key)
            flag.check_abort()
            t1 = time.perf_counter()
            available = int(state.selfplay.memory.positions_sampleable)
            t_train = time.perf_counter()  # (the first count above compiles its sum)
            row: dict[str, Any] = {"compile_seconds": compile_seconds} if compile_seconds else {}
            waiting = available < cfg.train_batch_size
            if not waiting and cfg.train_steps_per_epoch:
                step_metrics = []
                for _ in range(cfg.train_steps_per_epoch):
                    state, lm = train_steps(state, 1)
                    step_metrics.append(lm)
                    flag.check_abort()
                step_metrics = jax.device_get(step_metrics)
                row.update(
                    {k: float(np.mean([m[k] for m in step_metrics])) for k in step_metrics[0]}
                )
                if not math.isfinite(row["loss"]):
                    # the parameters are no longer numbers: saving them would push the last
                    # good checkpoint out (`keep_checkpoints`), so the run stops here
                    kept = ckpt.latest_step()
                    ckpt.close()
                    best_ckpt.close()
                    raise FloatingPointError(
                        f"training diverged in epoch {int(state.epoch) + 1}: the loss is "
                        f"{row['loss']}; the run stops without saving that epoch ("
                        + (f"its checkpoint of epoch {kept} is intact" if kept else "no checkpoint")
                        + "); try a new run with a lower learning_rate or max_grad_norm"
                    )
                t2 = time.perf_counter()
                row["train_steps_per_s"] = cfg.train_steps_per_epoch / max(t2 - t_train, 1e-9)
                row["train_seconds"] = t2 - t_train
            elif waiting and cfg.train_steps_per_epoch:  # (none asked for: not waiting)
                row["waiting_for_positions"] = True
                most_sampleable = max(most_sampleable, available)
                # Episodes still running hold slots of the memory that cannot be sampled: once
                # every slot has been written twice over, a batch still out of reach may never
                # be (the config check can only bound the memory's size).
                filled = int(state.env_steps) >= 2 * cfg.num_games * cfg.memory_capacity
                if filled and not warned_waiting:
                    warned_waiting = True
                    log.info(
                        f"still waiting for {cfg.train_batch_size} finished positions "
                        f"(train_batch_size) after the memory was filled twice; the most so far "
                        f"was {most_sampleable}: running episodes hold part of memory_capacity="
                        f"{cfg.memory_capacity} per game, so raise memory_capacity or lower "
                        f"train_batch_size"
                    )
            state = state.replace(epoch=state.epoch + 1)
            epoch = int(state.epoch)
            sp = {k: float(v) for k, v in sp.items()}
            steps = cfg.collection_steps_per_epoch * cfg.num_games
            row.update(
                {
                    "selfplay_seconds": t1 - t0,
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
            elapsed = time.perf_counter() - start
            # decided by process 0 for all: each process has its own clock and signals, and a
            # process that evaluated, saved or stopped alone would wait for the others forever
            out_of_time = agree(bool(cfg.max_wall_seconds) and elapsed >= cfg.max_wall_seconds)
            # (the schedule is the config's, not this call's `num_epochs`: a run stopped
            # early and resumed evaluates, and so plays its Elo games, as an uninterrupted one)
            if epoch % cfg.eval_every == 0 or epoch == cfg.num_epochs or out_of_time:
                key = jax.random.fold_in(jax.random.PRNGKey(cfg.seed + 1), epoch)
                params = jax.tree_util.tree_map(
                    lambda x: np.asarray(x.addressable_data(0)), state.params
                )  # replicated: every process holds all of it
                t_eval = time.perf_counter()
                eval_metrics = evaluator(params, epoch, key, rd.games if primary else None)
                row.update(eval_metrics)
                row["eval_seconds"] = time.perf_counter() - t_eval
                # (process 0's verdict on every process: `Evaluator(decide=agree)`)
                if evaluator.improved:
                    save_best(epoch, eval_metrics)
            wall = time.perf_counter() - start
            row.update(epoch=epoch, env_steps=positions_played(cfg, epoch), wall_seconds=wall)
            log.epoch(row)
            flag.check_abort()
            stop = out_of_time or agree(flag.stop)
            if out_of_time:
                log.info(f"max_wall_seconds={cfg.max_wall_seconds} reached at epoch {epoch}")
            if epoch % cfg.checkpoint_every == 0 or epoch == last_epoch or stop:
                save(state, {"wall_seconds": wall, "epoch": epoch})
            summary = make_summary(epoch, wall, row)
            if primary:
                rd.write_json("summary.json", summary)
        if stop and not out_of_time and int(state.epoch) < last_epoch:
            log.stopped(int(state.epoch))
    ckpt.close()
    best_ckpt.close()
    if primary:
        plot_run(rd.read_metrics(), rd.plots)
    epochs = int(state.epoch)
    log.info(f"done: {epochs} epochs, {positions_played(cfg, epochs):,} positions -> {rd.path}")
    if not summary:  # nothing left to train: where the checkpoint left the run (the file may
        # be a crashed attempt's, written after epochs that the resume has redone or dropped)
        rows = [r for r in rd.read_metrics() if r.get("epoch") == epochs]
        summary = make_summary(epochs, wall0, rows[-1] if rows else {})
        if primary and epochs:
            rd.write_json("summary.json", summary)
    return summary
