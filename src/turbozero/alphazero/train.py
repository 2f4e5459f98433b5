"""`train(config, run_dir)`: the whole AlphaZero run on the host side, around compiled pieces."""

from __future__ import annotations

import concurrent.futures
import dataclasses
import functools
import hashlib
import inspect
import math
import re
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from turbozero.alphazero.config import AlphaZeroConfig, settled
from turbozero.alphazero.evaluate import Evaluator
from turbozero.alphazero.learner import (
    AlphaZeroSystem,
    Systems,
    TrainState,
    acting_params,
    make_alphazero,
)
from turbozero.alphazero.rebuild import record_parts, resumed_parts
from turbozero.alphazero.sharding import Sharder
from turbozero.io.experiment import (
    Run,
    agree,
    check_same_on_every_process,
    run_experiment,
    stamped_run_dir,
)
from turbozero.io.logger import check_logging_extras
from turbozero.io.resources import check_fits_in_memory
from turbozero.io.rundir import RunDir
from turbozero.nets import param_count
from turbozero.runtime import configure_or_say_why
from turbozero.search import compiler_options, tree_bytes
from turbozero.struct import pytree_bytes
from turbozero.validate import check_count, is_digits

ALGORITHM = "alphazero"


def default_run_dir(preset: str | None) -> Path:
    """`runs/PRESET-TIMESTAMP` (`runs/alphazero-TIMESTAMP` without a preset)."""
    return stamped_run_dir(preset or ALGORITHM)


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


def _fork(state: TrainState) -> TrainState:
    """A copy of `state` in buffers of its own for `overlap`'s gradient steps, with a key apart
    from the one self-play goes on with."""
    copy = jax.tree_util.tree_map(jnp.copy, state)
    return copy.replace(key=jax.random.fold_in(state.key, 1))


def positions_played(cfg: AlphaZeroConfig, epochs: int) -> int:
    """Self-play positions after `epochs` epochs (the warm-up's included), counted in Python:
    the state's int32 counter wraps past 2**31 positions, which a long GPU run can reach."""
    return cfg.num_games * (cfg.warmup_steps + epochs * cfg.collection_steps_per_epoch)


#: settings a resumed run may change, from its groups: where it stops and where it logs, what
#: its evaluations draw and their share of the clock (none changes what an epoch computes)
RESUME_MAY_CHANGE = AlphaZeroConfig.resume_may_change()


def _canonical(x: Any, seen: frozenset[int] = frozenset()) -> str:
    """A description of `x` that is the same in every process and Python session: dataclass
    fields (a flax module's) by name, sets sorted, functions by name (not by the module path a
    library may move them to), bound methods with their object; no memory addresses, no
    hash-dependent orders, no library's display format. Long texts are hashed. (Runs recorded
    by an older version are brought to today's description by `turbozero.io.migrations`.)"""
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


def short_run_note(cfg: AlphaZeroConfig) -> str | None:
    """A plain note at the start of a run too short for a game to end, or None.

    Training waits for positions of ended games (their outcomes are the value targets), and a
    game ends by the latest at `max_episode_steps` moves, `collection_steps_per_epoch` moves per
    epoch: a run of fewer epochs may train nothing (2048 and backgammon games run to hundreds of
    moves). Says how many epochs make sure of one.
    """
    moves = cfg.num_epochs * cfg.collection_steps_per_epoch
    if moves >= cfg.max_episode_steps:
        return None
    needed = -(-cfg.max_episode_steps // cfg.collection_steps_per_epoch)
    return (
        f"note: {cfg.num_epochs} epochs play {moves} moves of each game, and games of {cfg.env} "
        f"may run to max_episode_steps={cfg.max_episode_steps}; training starts only once games "
        f"have ended, so it may not start. {needed} epochs make sure of it (--set "
        f"num_epochs={needed}); `turbozero train --list` shows each preset's quick setting"
    )


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


def reanalysis_tree_bytes(config: AlphaZeroConfig, az: AlphaZeroSystem) -> int:
    """Bytes of the trees reanalysis searches in each epoch's `collect` (0 without it): they
    are not part of the training state, but are allocated beside it while it runs."""
    if not config.reanalyse_positions:
        return 0
    env = az.selfplay.search.env
    return tree_bytes(env, config.reanalyse_positions, config.search.max_nodes)


class _AlphaZeroRun:
    """AlphaZero's steps in the experiment runner (`turbozero.io.experiment.Algorithm`): an epoch
    self-plays every game `collection_steps_per_epoch` moves on, then takes
    `train_steps_per_epoch` gradient steps on the replay memory; an evaluation (on the config's
    schedule) plays the network against the opponents and keeps the best one in `RUN/best`."""

    name = ALGORITHM
    resume_may_change: tuple[str, ...] = RESUME_MAY_CHANGE

    def __init__(
        self,
        config: AlphaZeroConfig,
        az: AlphaZeroSystem,
        sharder: Sharder,
        state_shape: TrainState,
        parts: dict[str, Any],
        recipes: dict[str, Any],
        systems: Systems | None = None,
    ):
        self.config, self.az, self.sharder = config, az, sharder
        self.state_shape = state_shape  # (shapes and dtypes)
        self.parts, self.recipes = parts, recipes
        self.env_name = az.env.name
        self.num_players = az.env.num_players  # (2: the play page serves its agent)
        self.max_wall_seconds = config.max_wall_seconds
        self.resume_notes: Mapping[str, str] = {}
        # process 0 decides the best network for all: a process whose evaluation came out
        # otherwise (another device's rounding) must neither keep another best nor skip a save
        self.evaluator = Evaluator(az, decide=agree, systems=systems)
        self.eval_metrics: dict[str, Any] = {}  # the latest evaluation's
        # seconds spent training and evaluating (for `eval_share`), and when the last one ended
        self.spent, self.mark = {"train": 0.0, "eval": 0.0}, time.perf_counter()
        self.costs = {
            # (self-play's trees, and with reanalysis the trees its searches build each epoch)
            "tree_bytes": tree_bytes(az.env, config.num_games, config.search.max_nodes)
            + reanalysis_tree_bytes(config, az),
            "memory_bytes": pytree_bytes(self.state_shape.selfplay.memory),
            "parameters": param_count(self.state_shape.params),
            "positions_per_epoch": config.num_games * config.collection_steps_per_epoch,
            "devices": sharder.num_devices,
        }
        self.most_sampleable, self.warned_waiting = 0, False

    def record(self, saved: dict[str, Any] | None, run_dir: RunDir) -> dict[str, Any]:
        """The parts given from Python (`describe_parts`) and their recipes (`rebuild`); a
        resumed run must be given the parts it was trained with."""
        parts = describe_parts(self.parts)
        if saved is None:
            return {"parts": parts, **({"rebuild": self.recipes} if self.recipes else {})}
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
        done = [int(p.name) for p in run_dir.checkpoints.glob("*") if is_digits(p.name)]
        if done and self.config.num_epochs < max(done):
            # (checked before config.json is rewritten: it would record an end already passed)
            raise ValueError(
                f"num_epochs={self.config.num_epochs} is below the {max(done)} epochs this run "
                f"has done; a resumed run can only go on (a larger num_epochs) or stop where it is"
            )
        rebuild = {**saved.get("rebuild", {}), **self.recipes}
        return {"rebuild": rebuild} if rebuild else {}

    def describe(self) -> str:
        costs = self.costs
        return (
            f"{costs['parameters']:,} parameters, trees {costs['tree_bytes'] / 2**20:.1f} MiB, "
            f"memory {costs['memory_bytes'] / 2**20:.1f} MiB, {costs['positions_per_epoch']:,} "
            f"positions/epoch, {costs['devices']} device(s)"
        )

    def start(self, run: Run) -> None:
        cfg = self.config
        warning = cfg.search.capacity_warning(self.az.selfplay.search.env.chance is not None)
        if warning:
            run.log.info(warning)
        short = short_run_note(cfg)
        if short:
            run.log.info(short)
        self.best = run.checkpointer(run.dir.path / "best", keep=1)
        self.initial = self.sharder.jit_init(self.az.init)(jax.random.PRNGKey(cfg.seed))
        jit_step, shape = self.sharder.jit_step, self.state_shape
        options = compiler_options()
        self.collect = _CompiledAhead(jit_step(self.az.collect, shape, compiler_options=options))
        self.train_steps = _CompiledAhead(jit_step(self.az.train_steps, shape))
        if self.sharder.overlap:
            self.fork = jax.jit(_fork, out_shardings=self.sharder.shardings(shape))
            self.pool = concurrent.futures.ThreadPoolExecutor(1, "turbozero-selfplay")
            run.cleanup.callback(self.pool.shutdown)
        run.cleanup.callback(self.evaluator.beside.shutdown)
        self.mark = time.perf_counter()

    def init(self) -> TrainState:
        return self.initial

    def _strip(self, state: TrainState) -> TrainState:
        """`state` without its replay memory, unless the config saves it."""
        if self.config.save_memory:
            return state
        return state.replace(selfplay=state.selfplay.replace(memory=None))

    def restore_target(self, meta: dict[str, Any]) -> dict[str, Any]:
        like = self.initial
        return {"train": self._strip(like), **self.evaluator.like_tree(meta, like.params)}

    def restored(self, run: Run, tree: dict[str, Any], meta: dict[str, Any]) -> TrainState:
        state = tree.pop("train")
        if not self.config.save_memory:
            state = state.replace(
                selfplay=state.selfplay.replace(memory=self.initial.selfplay.memory)
            )
            run.log.info(
                "save_memory=false: the replay memory starts empty again, so training from "
                "here differs from an uninterrupted run"
            )
        self.evaluator.restore(tree, meta)
        self.eval_metrics = meta.get("eval", {})
        self.spent = {**self.spent, **meta.get("clock", {})}
        return state

    def resumed(self, run: Run, state: TrainState, epoch: int) -> None:
        """Delete a "best" network of the epochs redone (saving that step again would fail),
        and save the checkpoint's best network again where a crash lost it."""
        self.best.delete_after(epoch)
        # `best/` is saved before the checkpoint of its epoch and keeps one network: a crash
        # between the two leaves a `best/` newer than the checkpoint (deleted just now), so it
        # gets the best network the checkpoint knows back
        if self.evaluator.best_params is not None and self.evaluator.best_name:
            best_epoch = int(self.evaluator.best_name.removeprefix("epoch_"))
            if self.best.latest_step() != best_epoch:
                rows = [r for r in run.dir.read_metrics() if r.get("epoch") == best_epoch]
                made = rows[-1] if rows else {}  # its epoch's row: the evaluation it had
                evaluation = {k: v for k, v in made.items() if k.startswith(("eval/", "elo"))}
                self._save_best(best_epoch, evaluation)

    def epoch(self, run: Run, state: TrainState, epoch: int) -> tuple[TrainState, dict[str, Any]]:
        """Self-play, then the gradient steps once the memory holds a batch."""
        cfg = self.config
        first = not self.collect.compiled  # this process compiles its programs now
        if first:
            run.log.info(
                "compiling self-play and the gradient steps (minutes the first time on a "
                "machine; cached for later runs) ..."
            )
        started = time.perf_counter()
        if int(state.epoch) == 0 and int(state.env_steps) == 0 and cfg.warmup_steps:
            state, _ = self.collect(state, cfg.warmup_steps)
        # compiled before the clock starts (the first epoch of a process otherwise reads as a
        # throughput far below the rest); the time it took is reported apart
        compile_seconds = self.collect.prepare(state, cfg.collection_steps_per_epoch)
        if cfg.train_steps_per_epoch:
            compile_seconds += self.train_steps.prepare(state, 1)
        if first:
            run.log.info(f"compiled in {time.perf_counter() - started:.1f} s")
        row: dict[str, Any] = {"compile_seconds": compile_seconds} if compile_seconds else {}
        if compile_seconds:  # the one-off start: compiling, and the warm-up moves if any
            row["startup_seconds"] = time.perf_counter() - started
        if (
            self.sharder.overlap
            and cfg.train_steps_per_epoch
            and int(state.selfplay.memory.positions_sampleable) >= cfg.train_batch_size
        ):
            return self._overlapped_epoch(run, state, epoch, row)
        state, selfplay, selfplay_seconds = self._collect(state)
        run.flag.check_abort()
        available = int(state.selfplay.memory.positions_sampleable)
        if cfg.train_steps_per_epoch and available >= cfg.train_batch_size:
            state, learned = self._learn(run, state, epoch)
            row.update(learned)
        elif cfg.train_steps_per_epoch:  # (none asked for: not waiting)
            row["waiting_for_positions"] = True
            self._warn_if_starved(run, state, available)
            if epoch >= cfg.num_epochs:  # the run ends without having learned
                run.log.info(self._never_trained(state, epoch, available))
        state = state.replace(epoch=state.epoch + 1)
        row.update(self._selfplay_row(selfplay, selfplay_seconds, available))
        return state, row

    def _collect(self, state: TrainState) -> tuple[TrainState, dict[str, Any], float]:
        """The epoch's self-play moves; their sums and the seconds they took."""
        t = time.perf_counter()
        state, selfplay = self.collect(state, self.config.collection_steps_per_epoch)
        jax.block_until_ready(state.key)
        return state, selfplay, time.perf_counter() - t

    def _overlapped_epoch(
        self, run: Run, state: TrainState, epoch: int, row: dict[str, Any]
    ) -> tuple[TrainState, dict[str, Any]]:
        """`overlap`: self-play on the pool's thread while this thread takes the gradient steps
        on a copy of the state, so on a CPU the two keep more cores busy than either alone. The
        self-play moves use the weights the epoch starts with (as in sequence), and the gradient
        steps draw from the memory as it was before those moves (in sequence they also see the
        epoch's `num_games * collection_steps_per_epoch` new positions). Each side donates its
        own buffers; the result is the same for a seed whatever the threads' timing."""
        learner = self.fork(state)
        pending = self.pool.submit(self._collect, state)
        try:
            learner, learned = self._learn(run, learner, epoch)
        except BaseException:
            concurrent.futures.wait([pending])  # (its computation holds this process's buffers)
            raise
        state, selfplay, selfplay_seconds = pending.result()
        run.flag.check_abort()
        state = state.replace(
            params=learner.params,
            opt_state=learner.opt_state,
            train_steps=learner.train_steps,
            ema=learner.ema,
            epoch=state.epoch + 1,
        )
        available = int(state.selfplay.memory.positions_sampleable)
        row.update(learned)
        row.update(self._selfplay_row(selfplay, selfplay_seconds, available))
        return state, row

    def _learn(self, run: Run, state: TrainState, epoch: int) -> tuple[TrainState, dict[str, Any]]:
        """`train_steps_per_epoch` gradient steps; their mean losses and speed.

        Raises:
            FloatingPointError: the loss is no longer a number (the epoch is not saved: it
                would push the last good checkpoint out, `keep_checkpoints`).
        """
        cfg = self.config
        t = time.perf_counter()
        step_metrics = []
        for _ in range(cfg.train_steps_per_epoch):
            state, metrics = self.train_steps(state, 1)
            step_metrics.append(metrics)
            run.flag.check_abort()
        step_metrics = jax.device_get(step_metrics)
        row = {k: float(np.mean([m[k] for m in step_metrics])) for k in step_metrics[0]}
        if not math.isfinite(row["loss"]):
            kept = run.checkpoints.latest_step()
            raise FloatingPointError(
                f"training diverged in epoch {epoch}: the loss is {row['loss']}; the run stops "
                f"without saving that epoch ("
                + (f"its checkpoint of epoch {kept} is intact" if kept else "no checkpoint")
                + "); try a new run with a lower learning_rate or max_grad_norm"
            )
        seconds = time.perf_counter() - t
        row["train_steps_per_s"] = cfg.train_steps_per_epoch / max(seconds, 1e-9)
        row["train_seconds"] = seconds
        return state, row

    def _never_trained(self, state: TrainState, epoch: int, available: int) -> str:
        """The plain statement of a run that ends before its first gradient step."""
        cfg = self.config
        finished = int(state.selfplay.memory.episodes_finished)
        per_game = int(state.env_steps) // max(cfg.num_games, 1)
        return (
            f"no training step in {epoch} epochs: {finished} games ended ({per_game} moves "
            f"played in each of the {cfg.num_games}), leaving {available} positions where a "
            f"step needs train_batch_size={cfg.train_batch_size}; the network was not trained. "
            f"Games of {cfg.env} need more epochs (--set num_epochs=...) or more moves per "
            f"epoch (collection_steps_per_epoch={cfg.collection_steps_per_epoch})"
        )

    def _warn_if_starved(self, run: Run, state: TrainState, available: int) -> None:
        """Say once that the memory may never hold a batch: episodes still running hold slots
        that cannot be sampled, so once every slot has been written twice over, a batch still
        out of reach may never be (the config check can only bound the memory's size). Where
        every episode so far was cut at `max_episode_steps` and dropped, say that at once: no
        game of this length may ever end (the config check cannot know a game's length)."""
        cfg = self.config
        self.most_sampleable = max(self.most_sampleable, available)
        memory = state.selfplay.memory
        finished, dropped = int(memory.episodes_finished), int(memory.episodes_dropped)
        if dropped and not finished and not self.warned_waiting:
            self.warned_waiting = True
            run.log.info(
                f"warning: no game has ended within max_episode_steps={cfg.max_episode_steps}: "
                f"all {dropped} episodes so far were cut off there and dropped "
                f"(truncation={cfg.truncation!r}), so no position can be trained on; raise "
                f"max_episode_steps to the game's length, or set truncation=bootstrap"
            )
        capacity = settled(cfg.memory_capacity, "memory_capacity")
        filled = int(state.env_steps) >= 2 * cfg.num_games * capacity
        if filled and not self.warned_waiting:
            self.warned_waiting = True
            run.log.info(
                f"still waiting for {cfg.train_batch_size} finished positions "
                f"(train_batch_size) after the memory was filled twice; the most so far "
                f"was {self.most_sampleable}: running episodes hold part of memory_capacity="
                f"{cfg.memory_capacity} per game, so raise memory_capacity or lower "
                f"train_batch_size"
            )

    def _selfplay_row(self, sums: dict[str, Any], seconds: float, available: int) -> dict[str, Any]:
        """Self-play's speed, search statistics and episodes, from the epoch's sums."""
        cfg = self.config
        sp = {k: float(v) for k, v in sums.items()}
        steps = cfg.collection_steps_per_epoch * cfg.num_games
        row = {
            "selfplay_seconds": seconds,
            "positions_per_s": steps / max(seconds, 1e-9),
            # (self-play's seconds include the reanalysis, whose searches count here too)
            "simulations_per_s": (steps + cfg.reanalyse_positions)
            * cfg.search.num_simulations
            / max(seconds, 1e-9),
            "tree_fullness": sp["tree_fullness_sum"] / steps,
            "search_depth": sp["search_depth_sum"] / steps,
            "full_events": sp["full_events"],
            "episodes": sp["episodes"],
            "memory_sampleable": available,
        }
        if "reanalysed" in sp:
            row["reanalysed"] = sp["reanalysed"]
            if sp["reanalyse_targets"]:
                shift = sp["reanalyse_policy_shift_sum"] / sp["reanalyse_targets"]
                row["reanalyse_policy_shift"] = shift
        if sp["episodes"]:
            row["episode_length"] = sp["episode_length_sum"] / sp["episodes"]
            if self.az.env.num_players == 1:
                row["episode_return"] = sp["episode_return_sum"] / sp["episodes"]
        return row

    def evaluate(
        self, run: Run, state: TrainState, epoch: int, *, out_of_time: bool
    ) -> tuple[TrainState, dict[str, Any]]:
        cfg = self.config
        now = time.perf_counter()
        self.spent["train"] += now - self.mark
        self.mark = now
        if not self._evaluation_due(epoch, out_of_time=out_of_time):
            return state, {}
        key = jax.random.fold_in(jax.random.PRNGKey(cfg.seed + 1), epoch)
        params = jax.tree_util.tree_map(
            lambda x: np.asarray(x.addressable_data(0)), acting_params(state)
        )  # replicated: every process holds all of it
        t = time.perf_counter()
        self.eval_metrics = self.evaluator(
            params, epoch, key, run.dir.games if run.primary else None
        )
        row = {**self.eval_metrics, "eval_seconds": time.perf_counter() - t}
        self.spent["eval"] += row["eval_seconds"]
        if self.evaluator.improved:  # (process 0's verdict on every process)
            self._save_best(epoch, self.eval_metrics)
        self.mark = time.perf_counter()
        return state, row

    def _evaluation_due(self, epoch: int, *, out_of_time: bool) -> bool:
        """Whether epoch `epoch` ends with an evaluation: the last one always does; one on the
        schedule does unless the evaluations so far took more than `eval_share` of the time."""
        cfg = self.config
        if epoch == cfg.num_epochs or out_of_time:
            return True
        # (the schedule is the config's, not this call's `num_epochs`: a run stopped early and
        # resumed evaluates, and so plays its Elo games, as an uninterrupted one)
        if epoch % cfg.eval_every or not cfg.eval_share:
            return epoch % cfg.eval_every == 0
        spent = self.spent
        over = spent["eval"] > cfg.eval_share * (spent["train"] + spent["eval"])
        return not agree(over)  # (process 0's clock decides for all)

    def _save_best(self, epoch: int, evaluation: dict[str, Any]) -> None:
        """`best/` holds the evaluator's best network, made best at `epoch`."""
        params = {"params": self.sharder.replicate(self.evaluator.best_params)}
        meta = {
            "kind": "params",
            "config": self.config.to_dict(),
            "epoch": epoch,
            "eval": evaluation,
        }
        self.best.save(epoch, params, meta)

    def env_steps(self, epoch: int) -> int:
        return positions_played(self.config, epoch)

    def checkpoint(self, state: TrainState, epoch: int) -> tuple[Any, dict[str, Any]]:
        evaluator = self.evaluator
        tree = {
            "train": self._strip(state),
            **self.sharder.replicate(evaluator.state_tree(state.params)),
        }
        meta = {"kind": "train", "eval": self.eval_metrics, "clock": dict(self.spent)}
        return tree, {**meta, **evaluator.state_meta()}

    def summary(
        self, state: TrainState, epoch: int, row: dict[str, Any], *, final: bool
    ) -> dict[str, Any]:
        return {
            "final_metrics": {k: v for k, v in row.items() if not k.startswith("eval/")},
            "eval": self.eval_metrics,
            "costs": self.costs,
        }


def run(
    config: AlphaZeroConfig,
    run_dir: str | Path | None,
    *,
    resume: bool,
    preset: str | None,
    check_memory: bool = True,
    trust: bool = False,
) -> dict[str, Any]:
    """`train` as a command runs it (`turbozero.algorithms`): a resumed run's parts given from
    Python are rebuilt from the recipes its `config.json` records, importing code it names only
    with `trust` (`--trust-run`)."""
    parts, rebuild = (None, None)
    if resume and run_dir is not None:
        parts, rebuild = resumed_parts(run_dir, trust=trust)
    return train_alphazero(
        config,
        run_dir,
        resume=resume,
        preset=preset,
        check_memory=check_memory,
        parts=parts,
        rebuild=rebuild,
    )


def train_alphazero(
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
    systems: Systems | None = None,
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
        systems: a cache of compiled systems the caller keeps across runs in one process (a
            sweep, a test suite: `turbozero.alphazero.Systems`); None builds them for this run.

    Raises:
        RunInUseError: another training holds `run_dir` (a `FileExistsError`).
        FloatingPointError: the training loss stopped being a finite number (the parameters
            diverged); that epoch is not saved, so the latest checkpoint keeps finite ones.
    """
    if num_epochs is not None:
        num_epochs = check_count("num_epochs", num_epochs, low=1)
        if num_epochs > config.num_epochs:
            # (the evaluation schedule and the last evaluation follow the config's num_epochs)
            raise ValueError(
                f"num_epochs={num_epochs} stops a run after config.num_epochs="
                f"{config.num_epochs}: it is where to stop early; to train longer, set the "
                f"config's num_epochs"
            )
    # config.json records what the game (or a network given in `parts`) chose for the run
    config = config.resolved((parts or {}).get("module"))
    check_logging_extras(config)  # (before anything is built or written)
    configure_or_say_why()  # joins a multi-host run; the CPU loop option if still possible
    settings = {"config": config.to_dict(), "resume": resume, "num_epochs": num_epochs}
    check_same_on_every_process(settings, run_dir)
    # Everything that can refuse the configuration (the game's id, the search's settings, the
    # devices, the evaluation opponents) is built before the run directory is, so a refused
    # setting leaves nothing behind that would block the corrected command.
    sharder = Sharder(config)
    az = make_alphazero(config, **(parts or {}), mesh=sharder.mesh, systems=systems)
    recipes = record_parts(parts or {}, rebuild, describe_parts)
    if not resume:
        config.check_new_run(az.env.num_players, chance=az.env.chance is not None)
    state_shape = jax.eval_shape(az.init, jax.random.PRNGKey(0))
    if check_memory:
        what = "the training state (trees, replay memory, network and optimizer)"
        if sharder.overlap:
            what += ", twice (overlap's gradient steps work on a copy)"
        if config.reanalyse_positions:
            what += " and the reanalysis trees"
        copies = 2 if sharder.overlap else 1
        check_fits_in_memory(
            copies * pytree_bytes(state_shape) + reanalysis_tree_bytes(config, az), what
        )
    algorithm = _AlphaZeroRun(config, az, sharder, state_shape, parts or {}, recipes, systems)
    if check_memory:  # (an evaluation's matches are played beside the training state)
        check_fits_in_memory(
            pytree_bytes(state_shape) + algorithm.evaluator.memory_bytes(),
            "the training state and an evaluation's match (its searches' trees)",
            lower="lower eval_games or eval_simulations (or pass --skip-memory-check to try "
            "anyway)",
        )
    return run_experiment(
        algorithm,
        RunDir(run_dir or default_run_dir(preset)),
        resume=resume,
        preset=preset,
        last_epoch=num_epochs or config.num_epochs,
        progress=progress,
    )


#: `train_alphazero`'s name before 0.1.0, kept for one release (the entry points now name their
#: algorithm: `train_alphazero`, `train_ppo`, `train_td`)
train = train_alphazero
