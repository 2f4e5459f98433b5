"""Metrics logging: `metrics.jsonl` always; a rich progress bar on a terminal, plain lines
otherwise; TensorBoard and Weights & Biases when switched on in the config (optional extras)."""

from __future__ import annotations

import secrets
import sys
from typing import TYPE_CHECKING, Any

from turbozero.io.errors import MissingExtraError
from turbozero.io.rundir import RunDir

if TYPE_CHECKING:
    from turbozero.gamespec import Judge

#: training numbers shown on each epoch's line (when the row has them), in this order
SHOWN = (
    "loss",
    "policy_loss",
    "value_loss",
    "actor_loss",
    "critic_loss",
    "entropy",
    "positions_per_s",
    "env_steps_per_s",
    "eval/return",
    "eval/network/return",
    "eval/random/return",
    "elo",
)


def _is_stat_mean(key: str) -> bool:
    """`eval/NAME/mean`: the mean over an evaluation's games of a figure the game reports."""
    return key.startswith("eval/") and key.endswith("/mean") and key.count("/") == 2


def _number(v: Any) -> str:
    if isinstance(v, bool):
        return str(v).lower()
    if isinstance(v, float):
        return f"{v:.4g}" if abs(v) < 1e4 else f"{v:,.0f}"
    return str(v)


def _clock(seconds: float) -> str:
    seconds = max(0, round(seconds))
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


def accuracy_text(result: float, positions: int | None) -> str:
    """`99.96% (2 mistakes of 4,520)`: a share of positions whose move kept the result, with the
    count a reader can act on (at one decimal, 2 mistakes in 4,520 read as 100.0%)."""
    if not positions:
        return f"{result:.2%}"
    mistakes = round((1.0 - result) * positions)
    return f"{result:.2%} ({mistakes:,} mistake{'' if mistakes == 1 else 's'} of {positions:,})"


def epoch_line(
    row: dict[str, Any],
    total: int,
    seconds_left: float | None,
    judge: Judge | None = None,
    *,
    evaluations_unmeasured: int = 0,
) -> str:
    """One epoch as a line a person reads: `Epoch 14/80: loss=2.185 ... | vs random W/D/L
    100/0/0% | accuracy 99.96% (2 mistakes of 4,520; best move 71.8%) | 0:00:12 left`; `judge`
    (the game's) words its own figures (`Judge.log_text`)."""
    parts = [f"Epoch {row['epoch']}/{total}:"]
    parts += [f"{k.removeprefix('eval/')}={_number(row[k])}" for k in SHOWN if k in row]
    # a game's own figures over the evaluation's games (`Env.episode_stats`): 2048's largest
    # tile as `max_tile/mean=388`, said as the mean it is
    parts += [f"{k[5:]}={_number(v)}" for k, v in row.items() if _is_stat_mean(k)]
    if "elo/games" in row:  # what the rating rests on (a 1-1 start reads as elo=0)
        parts.append(f"({int(row['elo/games'])} games)")
    if row.get("waiting_for_positions"):
        parts.append("waiting for positions (no training step yet)")
    opponents = [k[5:-4] for k in row if k.startswith("eval/") and k.endswith("/win")]
    for name in opponents:
        w, d, lost = (row.get(f"eval/{name}/{x}", 0.0) for x in ("win", "draw", "loss"))
        parts.append(f"| vs {name} W/D/L {w:.0%}/{d:.0%}/{lost:.0%}")
        if f"eval/{name}/random_score" in row:  # (the baseline: what random play scores)
            parts.append(f"(random play scores {row[f'eval/{name}/random_score']:.0%})")
        if row.get(f"eval/{name}/truncated"):
            parts.append(f"({row[f'eval/{name}/truncated']:.0%} cut off at max_episode_steps)")
    if "eval/best/score" in row:
        parts.append(f"| vs best {row['eval/best/score']:.2f}")
    if "eval/accuracy/result" in row:
        text = accuracy_text(row["eval/accuracy/result"], row.get("eval/accuracy/positions"))
        best = f"best move {row['eval/accuracy/best']:.1%}"
        text = f"{text[:-1]}; {best})" if text.endswith(")") else f"{text} ({best})"
        parts.append(f"| accuracy {text}")
    judged = None if judge is None or judge.log_text is None else judge.log_text(row)
    if judged:  # an engine's judgement (backgammon's gnubg), in its own words
        parts.append(f"| {judged}")
    if seconds_left is not None:
        more = evaluations_unmeasured  # (due, their cost not known before the first one)
        plus = f" + {more} evaluation{'s' if more > 1 else ''}" if more else ""
        parts.append(f"| {_clock(seconds_left)} left{plus}")
    return " ".join(parts)


def check_logging_extras(config: Any) -> None:
    """Refuse a config whose loggers are not installed, before a run directory is made.

    Raises:
        MissingExtraError: naming the setting and the extra to install.
    """
    import importlib

    for setting, on, module, extra in (
        ("tensorboard=true", getattr(config, "tensorboard", False), "tensorboardX", "tensorboard"),
        ("wandb_project", getattr(config, "wandb_project", None), "wandb", "wandb"),
    ):
        if on:
            try:
                importlib.import_module(module)
            except ImportError:
                raise MissingExtraError(setting, extra, module) from None


class MetricsLogger:
    """Write each epoch's row to the run directory and show progress."""

    def __init__(
        self,
        run_dir: RunDir,
        *,
        total_epochs: int,
        progress: bool | None = None,
        config: Any = None,
        enabled: bool = True,
        judge: Judge | None = None,
    ):
        """`enabled=False` (processes other than 0 of a multi-host run) writes and shows nothing."""
        self.enabled = enabled
        self.judge = judge  # the game's judge: its figures' words in the epoch lines
        self.run_dir = run_dir
        self.total = total_epochs
        self.budget = float(getattr(config, "max_wall_seconds", 0.0) or 0.0)
        #: epochs between evaluations (and one after the last): those still due cost time too
        self.eval_every = max(1, int(getattr(config, "eval_every", 1) or 1))
        self._first: tuple[int, float] | None = None  # (epoch, wall_seconds) of this process's
        # first row: the rate since then estimates the time left
        self._evals: list[float] = []  # this process's evaluations' seconds (rows' eval_seconds)
        self._evaluated_since_first = 0.0  # seconds of evaluations after the first row
        self.progress_on = enabled and (sys.stdout.isatty() if progress is None else progress)
        self._progress: Any = None
        self._task: Any = None
        self._tb: Any = None
        self._wandb: Any = None
        self._tb_writer: Any = None  # the class; the writer is made at the first row
        if enabled and config is not None and getattr(config, "tensorboard", False):
            check_logging_extras(config)
            from tensorboardX import SummaryWriter

            self._tb_writer = SummaryWriter
        if enabled and config is not None and getattr(config, "wandb_project", None):
            check_logging_extras(config)
            import wandb

            # one W&B run per run directory: a resumed run continues it
            id_file = run_dir.path / "wandb_id"
            if not id_file.exists():
                id_file.write_text(secrets.token_hex(4))
            self._wandb = wandb.init(
                project=config.wandb_project,
                config=config.to_dict(),
                id=id_file.read_text().strip(),
                resume="allow",
            )

    def __enter__(self) -> MetricsLogger:
        if self.progress_on:
            from rich.progress import (
                BarColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
                TimeRemainingColumn,
            )

            self._progress = Progress(
                TextColumn("[bold]epoch {task.completed}/{task.total}"),
                BarColumn(),
                TimeElapsedColumn(),
                TextColumn("eta"),
                TimeRemainingColumn(),
            )
            self._progress.start()
            self._task = self._progress.add_task("train", total=self.total)
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        """Stop the progress bar and close the TensorBoard writer and the W&B run; again, it
        does nothing (the runner also calls it where a run fails before its first epoch, the W&B
        run already started)."""
        progress, tb, run = self._progress, self._tb, self._wandb
        self._progress = self._tb = self._wandb = self._tb_writer = None
        if progress is not None:
            progress.stop()
        if tb is not None:
            tb.close()
        if run is not None:
            run.finish()

    def stopped(self, epoch: int) -> None:
        """Say that a stop signal ended the run early, and how to go on."""
        self.info(
            f"stopped at epoch {epoch}/{self.total}; saved. Go on with: turbozero train --out "
            f"{self.run_dir.path} --resume"
        )

    def info(self, message: str) -> None:
        if not self.enabled:
            return
        if self._progress is not None:
            self._progress.console.print(message)
        else:
            print(message, flush=True)

    def seconds_left(self, row: dict[str, Any]) -> float | None:
        """Time to the last epoch at this process's pace, or to the wall-clock budget.

        The pace leaves out the evaluations (a row's `eval_seconds`), which are added back at
        their mean cost for each one still due (`evaluations_after`); the first row's pace also
        leaves out the one-off start it paid for (`startup_seconds`: compiling and the warm-up
        moves; else `compile_seconds`), which the epochs after it do not pay again; later rows
        use the pace since the first. Call it once per row, in order.
        """
        epoch, wall = int(row["epoch"]), float(row.get("wall_seconds", 0.0))
        evaluating = float(row.get("eval_seconds", 0.0))
        if "eval_seconds" in row:
            self._evals.append(evaluating)
        if self._first is None:
            self._first = (epoch, wall)
            once = row.get("startup_seconds", row.get("compile_seconds", 0.0))
            working = max(0.0, wall - float(once) - evaluating)
            per_epoch = working / epoch if epoch else None  # (the first row: its own pace)
        else:
            self._evaluated_since_first += evaluating
            done = epoch - self._first[0]
            training = wall - self._first[1] - self._evaluated_since_first
            per_epoch = max(0.0, training) / done if done > 0 else None
        if per_epoch is None:
            return None
        left = per_epoch * max(0, self.total - epoch)
        if self._evals:
            left += sum(self._evals) / len(self._evals) * self.evaluations_after(epoch)
        if self.budget:
            left = min(left, max(0.0, self.budget - wall))
        return left

    def evaluations_after(self, epoch: int) -> int:
        """The evaluations still due after `epoch`: every `eval_every` epochs and after the last
        (one a run's schedule may skip, `eval_share`, is counted all the same)."""
        if epoch >= self.total:
            return 0
        due = self.total // self.eval_every - epoch // self.eval_every
        return due + (1 if self.total % self.eval_every else 0)

    def epoch(self, row: dict[str, Any]) -> None:
        if not self.enabled:
            return
        self.run_dir.append_metrics(row)
        if self._progress is not None:
            self._progress.update(self._task, completed=row["epoch"])
            self._progress.console.print(epoch_line(row, self.total, None, self.judge))
        else:
            left = self.seconds_left(row)
            unmeasured = 0 if self._evals else self.evaluations_after(int(row["epoch"]))
            line = epoch_line(row, self.total, left, self.judge, evaluations_unmeasured=unmeasured)
            print(line, flush=True)
        step = int(row.get("env_steps", row["epoch"]))
        numeric = {k: v for k, v in row.items() if isinstance(v, int | float)}
        if self._tb is None and self._tb_writer is not None:
            # events at or after this row's step are a crashed attempt's (a resumed run redoes
            # them): TensorBoard drops them rather than plot those epochs twice
            self._tb = self._tb_writer(str(self.run_dir.path / "tensorboard"), purge_step=step)
        if self._tb is not None:
            for k, v in numeric.items():
                self._tb.add_scalar(k, v, step)
            # on disk with the row (the writer otherwise holds events up to two minutes, which
            # a crash loses although their epochs were checkpointed)
            self._tb.flush()
        if self._wandb is not None:
            self._wandb.log(numeric, step=step)
