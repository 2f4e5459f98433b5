"""Metrics logging: `metrics.jsonl` always; a rich progress bar on a terminal, plain lines
otherwise; TensorBoard and Weights & Biases when switched on in the config (optional extras)."""

from __future__ import annotations

import secrets
import sys
from typing import Any

from turbozero.io.errors import MissingExtraError
from turbozero.io.rundir import RunDir

SHOWN = (
    "loss",
    "policy_loss",
    "value_loss",
    "positions_per_s",
    "waiting_for_positions",  # no training step this epoch: too few finished positions yet
    "eval/score",
    "eval/return",
    "elo",
)


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


def _fmt(v: Any) -> str:
    return f"{v:.4f}" if isinstance(v, float) else str(v)


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
    ):
        """`enabled=False` (processes other than 0 of a multi-host run) writes and shows nothing."""
        self.enabled = enabled
        self.run_dir = run_dir
        self.total = total_epochs
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
                TextColumn("{task.fields[info]}"),
            )
            self._progress.start()
            self._task = self._progress.add_task("train", total=self.total, info="")
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._progress is not None:
            self._progress.stop()
        if self._tb is not None:
            self._tb.close()
        if self._wandb is not None:
            self._wandb.finish()

    def info(self, message: str) -> None:
        if not self.enabled:
            return
        if self._progress is not None:
            self._progress.console.print(message)
        else:
            print(message, flush=True)

    def epoch(self, row: dict[str, Any]) -> None:
        if not self.enabled:
            return
        self.run_dir.append_metrics(row)
        shown = {k: _fmt(row[k]) for k in SHOWN if k in row}
        if self._progress is not None:
            info = "  ".join(f"{k}={v}" for k, v in shown.items())
            self._progress.update(self._task, completed=row["epoch"], info=info)
            self._progress.console.print(f"Epoch {row['epoch']}: {shown}")
        else:
            print(f"Epoch {row['epoch']}: {shown}", flush=True)
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
