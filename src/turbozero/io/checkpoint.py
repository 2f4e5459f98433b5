"""Checkpoints with orbax: atomic saves (written to a temporary directory, then renamed), rotation
of the last K, and a JSON side record (format version, config, counters) per checkpoint."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import jax
import orbax.checkpoint as ocp

from turbozero.io.errors import CheckpointError

# 2: packed search-tree layout; 3: int32 state words, edge rows PROBS, CHILD, PRIOR
FORMAT_VERSION = 3


class Checkpointer:
    """Save and restore whole training states (any pytree of arrays) under one directory."""

    def __init__(self, directory: str | os.PathLike[str], *, keep: int | None = 3):
        if keep is not None and keep < 1:
            raise ValueError(f"keep must be >= 1 or None (keep all), got {keep}")
        self.directory = Path(directory).absolute()
        self.manager = ocp.CheckpointManager(
            self.directory,
            options=ocp.CheckpointManagerOptions(
                max_to_keep=keep, create=True, enable_async_checkpointing=False
            ),
            item_names=("state", "meta"),
        )

    def save(self, step: int, state: Any, meta: dict[str, Any]) -> None:
        """Save `state` and `meta` as `step`, replacing a checkpoint of that step if any."""
        meta = {**meta, "format_version": FORMAT_VERSION, "step": int(step)}
        if step in self.manager.all_steps():
            self.manager.delete(step)
        self.manager.save(
            step,
            args=ocp.args.Composite(
                state=ocp.args.StandardSave(state), meta=ocp.args.JsonSave(meta)
            ),
            force=True,
        )
        self.manager.wait_until_finished()

    def latest_step(self) -> int | None:
        return self.manager.latest_step()

    def all_steps(self) -> list[int]:
        return list(self.manager.all_steps())

    def delete_after(self, step: int) -> None:
        """Delete the checkpoints of steps after `step`."""
        for s in self.all_steps():
            if s > step:
                self.manager.delete(s)

    def restore_meta(self, step: int | None = None) -> dict[str, Any]:
        step = self.latest_step() if step is None else step
        if step is None:
            raise FileNotFoundError(f"no checkpoint in {self.directory}")
        out = self.manager.restore(step, args=ocp.args.Composite(meta=ocp.args.JsonRestore()))
        return dict(out["meta"])

    def restore(self, like: Any, step: int | None = None) -> tuple[Any, dict[str, Any]]:
        """Restore the state with the structure, shapes and dtypes of `like`.

        Raises:
            FileNotFoundError: when there is no checkpoint.
            CheckpointError: when the checkpoint was written in another format version, or its
                state does not have `like`'s structure (another configuration).
        """
        step = self.latest_step() if step is None else step
        if step is None:
            raise FileNotFoundError(f"no checkpoint in {self.directory}")
        version = self.restore_meta(step).get("format_version")
        if version != FORMAT_VERSION:
            raise CheckpointError(
                f"checkpoint format {version} in {self.directory} is not the supported version "
                f"{FORMAT_VERSION}: it was written by another turbozero version; start a new run "
                f"(another --out) or resume it with the version that wrote it"
            )
        abstract = jax.tree_util.tree_map(ocp.utils.to_shape_dtype_struct, like)
        try:
            out = self.manager.restore(
                step,
                args=ocp.args.Composite(
                    state=ocp.args.StandardRestore(abstract), meta=ocp.args.JsonRestore()
                ),
            )
        except ValueError as e:
            if "do not match" not in str(e) and "not compatible with the stored shape" not in str(
                e
            ):
                raise
            raise CheckpointError(
                f"the checkpoint in {self.directory} (step {step}) does not have the structure "
                f"or shapes this run expects (written with another configuration, e.g. other "
                f"network or search sizes); resume with the run's own config.json"
            ) from e
        return out["state"], dict(out["meta"])

    def close(self) -> None:
        self.manager.close()
