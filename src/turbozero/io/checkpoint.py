"""Checkpoints with orbax: atomic saves (written to a temporary directory, then renamed), rotation
of the last K, and a JSON side record (format version, config, counters, a CRC-32 per array)
per checkpoint. A restored array whose checksum differs from the saved one makes the checkpoint
unreadable (a damaged one, passed over by `restore_newest`)."""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import re
import shutil
import sys
import traceback
import warnings
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from types import TracebackType
from typing import Any

import jax
import numpy as np
import orbax.checkpoint as ocp

from turbozero.io.errors import CheckpointError, UnreadableCheckpointError

# 2: packed search-tree layout; 3: int32 state words, edge rows PROBS, CHILD, PRIOR
FORMAT_VERSION = 3


#: what orbax's errors say when the disk refuses a write, and the errno each means
DISK_FULL_OR_READ_ONLY = {
    "No space left on device": errno.ENOSPC,
    "os_error_code='28'": errno.ENOSPC,
    "Read-only file system": errno.EROFS,
    "os_error_code='30'": errno.EROFS,
    "Disk quota exceeded": errno.EDQUOT,
}


def _disk_error(error: BaseException) -> int | None:
    """The errno of a disk that refused a write, read off `error` (orbax wraps the OS error in
    a `ValueError` of tensorstore's text), or None."""
    if isinstance(error, OSError) and error.errno in DISK_FULL_OR_READ_ONLY.values():
        return error.errno
    text = str(error)
    return next((code for words, code in DISK_FULL_OR_READ_ONLY.items() if words in text), None)


@contextlib.contextmanager
def _quiet_orbax() -> Iterator[None]:
    """Orbax logs a failed write from each of its threads, traceback included, before the error
    reaches the caller, who reports it once: its log is held back to CRITICAL meanwhile."""
    logger = logging.getLogger("absl")
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        logger.setLevel(level)


#: orbax's coroutine that reads one array of a checkpoint
_ORBAX_READ = "_read_array_index_and_device_put"
#: orbax's coroutine that writes one fragment of an array
_ORBAX_WRITE = "async_serialize_from_host.<locals>.write_fragment"


def _is_closed_loop_error(error: BaseException | None, tb: TracebackType | None) -> bool:
    """A callback scheduled on an event loop that had been closed under it."""
    if not (isinstance(error, RuntimeError) and str(error) == "Event loop is closed"):
        return False
    return any(f.f_code.co_name == "call_soon_threadsafe" for f, _ in traceback.walk_tb(tb))


def _is_late_read_noise(unraisable: Any) -> bool:
    """An error of a read that orbax left in flight when a damaged checkpoint failed."""
    return _is_closed_loop_error(unraisable.exc_value, unraisable.exc_traceback) or (
        getattr(unraisable.object, "__name__", None) == _ORBAX_READ
    )


#: orbax's log line for a write thread that failed (`_SignalingThread.run`)
_ORBAX_THREAD_FAILED = "_SignalingThread.run() raised an exception"


class _LateIONoise(logging.Filter):
    """Drops asyncio's report of a read's future, or a write's that the disk refused, whose
    failure nobody awaited, and orbax's report of a write thread that the disk refused (logged
    with its traceback, some after the failed save has returned)."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        refused = any(w in message for w in DISK_FULL_OR_READ_ONLY)
        if _ORBAX_THREAD_FAILED in message:
            return not refused
        if "exception was never retrieved" not in message:
            return True
        return not ("reading" in message or refused)


def _drop_late_io_noise() -> None:
    """Keep the reads and writes orbax leaves in flight after a failed one from printing
    tracebacks.

    A damaged checkpoint fails one array read, and a full disk one array write; orbax then
    closes its event loop while the others still run, and each of those, finishing, reports an
    error nobody can catch: "Event loop is closed" from a TensorStore thread, its own read
    error from a coroutine never awaited (both through `sys.unraisablehook`), an unretrieved
    task (asyncio's log), or a write thread's failure (orbax's log, through absl). That is a
    hundred tracebacks around the one-line report. Installed before each save and restore, for
    the process's life (the late reads and writes end at no set time, some after the failed
    call has returned); it drops only those reports.
    """
    logs = [logging.getLogger(name) for name in ("asyncio", "absl")]
    if not any(isinstance(f, _LateIONoise) for f in logs[0].filters):
        for log in logs:
            log.addFilter(_LateIONoise())
        for name in (_ORBAX_READ, _ORBAX_WRITE):
            warnings.filterwarnings("ignore", f"coroutine '{re.escape(name)}' was never awaited")
    # (checked each time: a test runner may have put its own hook in since)
    if getattr(sys.unraisablehook, "_turbozero_late_reads", False):
        return
    previous = sys.unraisablehook

    def hook(unraisable: Any) -> None:
        if not _is_late_read_noise(unraisable):
            previous(unraisable)

    hook._turbozero_late_reads = True  # type: ignore[attr-defined]
    sys.unraisablehook = hook


def _path_name(path: tuple[Any, ...]) -> str:
    """`train/params/Dense_0/kernel`: a leaf's path with dict keys, attribute names and indices
    alike, so that a partial restore (nested dicts) names a leaf as the full state does."""
    parts = []
    for entry in path:
        for attr in ("key", "name", "idx"):
            if hasattr(entry, attr):
                parts.append(str(getattr(entry, attr)))
                break
        else:
            parts.append(str(entry))
    return "/".join(parts)


def array_checksums(tree: Any) -> dict[str, int]:
    """CRC-32 of every array leaf's bytes, by leaf path (`_path_name`). Arrays this process
    does not hold whole (sharded over several processes) are left out."""
    out = {}
    for path, leaf in jax.tree_util.tree_flatten_with_path(tree)[0]:
        if isinstance(leaf, jax.Array) and not leaf.is_fully_addressable:
            continue
        data = np.ascontiguousarray(np.asarray(leaf))
        out[_path_name(path)] = zlib.crc32(data.view(np.uint8).reshape(-1).data)
    return out


class Checkpointer:
    """Save and restore whole training states (any pytree of arrays) under one directory."""

    def __init__(
        self, directory: str | os.PathLike[str], *, keep: int | None = 3, writer: bool = False
    ):
        """Open `directory` (a writer creates it; a reader leaves a missing one missing).

        Args:
            directory: the checkpoints' folder.
            keep: how many of the newest checkpoints saving keeps; None keeps all.
            writer: this is the training that writes here (holding the run's lock): the
                temporary folders of saves a crash cut short are removed on opening. Readers
                (loading an agent while the run trains) leave them, as one may be a save in
                progress, and create nothing: a run without checkpoints, or a copy that cannot
                be written, stays as it is.
        """
        if keep is not None and keep < 1:
            raise ValueError(f"keep must be >= 1 or None (keep all), got {keep}")
        self.directory = Path(directory).absolute()
        self.manager = ocp.CheckpointManager(
            self.directory,
            options=ocp.CheckpointManagerOptions(
                max_to_keep=keep,
                create=writer,
                enable_async_checkpointing=False,
                cleanup_tmp_directories=writer,
            ),
            item_names=("state", "meta"),
        )

    def save(self, step: int, state: Any, meta: dict[str, Any]) -> None:
        """Save `state` and `meta` as `step`, replacing a checkpoint of that step if any."""
        meta = {
            **meta,
            "format_version": FORMAT_VERSION,
            "step": int(step),
            "checksums": array_checksums(state),
        }
        if step in self.manager.all_steps():
            self.manager.delete(step)
        _drop_late_io_noise()  # (a full disk fails one write of many; the rest report late)
        try:
            with _quiet_orbax():
                self.manager.save(
                    step,
                    args=ocp.args.Composite(
                        state=ocp.args.StandardSave(state), meta=ocp.args.JsonSave(meta)
                    ),
                    force=True,
                )
                self.manager.wait_until_finished()
        except Exception as e:
            code = _disk_error(e)
            if code is None:
                raise
            raise OSError(
                code, f"{os.strerror(code)} (saving checkpoint step {step})", str(self.directory)
            ) from None
        if jax.process_index() == 0:
            self.verify_saved(step)

    def verify_saved(self, step: int) -> None:
        """Raise `UnreadableCheckpointError` if `step`'s arrays lack an index that a restore
        reads: orbax writes per-process files, then merges them, and a merge it skipped (as under
        a path it took for a pattern) left a save that "succeeded" and could never be read back.
        Checked after each save, and before each restore: orbax's reads of a checkpoint without
        its indexes fail with reads still in flight, which then print tracebacks."""
        state = self.directory / str(step) / "state"
        parts = list(state.glob("ocdbt.process_*"))
        for manifest in [state / "manifest.ocdbt"] + [p / "manifest.ocdbt" for p in parts]:
            if parts and not manifest.exists():
                raise self._unreadable(step, FileNotFoundError(f"there is no {manifest}"))

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
        """The side record of `step` (default: the latest).

        Raises:
            FileNotFoundError: when there is no checkpoint.
            CheckpointError: when the record cannot be read (a damaged checkpoint).
        """
        step = self.latest_step() if step is None else step
        if step is None:
            raise FileNotFoundError(f"no checkpoint in {self.directory}")
        if step not in self.all_steps():
            raise FileNotFoundError(
                f"no checkpoint of step {step} in {self.directory} (it holds steps "
                f"{self.all_steps()})"
            )
        try:
            out = self.manager.restore(step, args=ocp.args.Composite(meta=ocp.args.JsonRestore()))
            meta = out["meta"]
            if not isinstance(meta, dict):
                raise TypeError(f"the side record is a {type(meta).__name__}, not an object")
        except Exception as e:  # whatever a damaged file raises: JSON, tensorstore, missing file
            if self._passing(e):
                raise
            raise self._unreadable(step, e) from e
        return dict(meta)

    @staticmethod
    def _passing(error: BaseException) -> bool:
        """An error of the machine, not of the files (memory, a disk or network filesystem
        failing): raised as it is, so that no intact checkpoint is taken for a damaged one."""
        return isinstance(error, MemoryError) or (
            isinstance(error, OSError) and not isinstance(error, FileNotFoundError)
        )

    def _unreadable(self, step: int, error: BaseException) -> UnreadableCheckpointError:
        reason = str(error).strip().splitlines()[0][:300] if str(error).strip() else ""
        reason = reason.split(" See full TensorStore details")[0]  # (a spec dump follows)
        return UnreadableCheckpointError(
            f"checkpoint step {step} in {self.directory} cannot be read "
            f"({type(error).__name__}: {reason}); it is damaged or was cut short. Older steps: "
            f"{[s for s in self.all_steps() if s < step] or 'none'}"
        )

    def restore(
        self, like: Any, step: int | None = None, *, partial: bool = False
    ) -> tuple[Any, dict[str, Any]]:
        """Restore the state with the structure, shapes and dtypes of `like`.

        With `partial`, `like` names only part of the saved state (nested dicts keyed by the
        saved structure's field names, e.g. `{"train": {"params": ...}}`), and only that part is
        read: a reader that needs the network does not depend on the optimizer or the memory
        the run was trained with.

        Raises:
            FileNotFoundError: when there is no checkpoint.
            CheckpointError: when the checkpoint was written in another format version, its
                state does not have `like`'s structure (another configuration), or it cannot
                be read (damaged).
        """
        step = self.latest_step() if step is None else step
        if step is None:
            raise FileNotFoundError(f"no checkpoint in {self.directory}")
        _drop_late_io_noise()
        version = self.restore_meta(step).get("format_version")
        self.verify_saved(step)
        if version != FORMAT_VERSION:
            raise CheckpointError(
                f"checkpoint format {version} in {self.directory} is not the supported version "
                f"{FORMAT_VERSION}: it was written by another turbozero version; train a new run "
                f"(another --out), or resume, evaluate or play this one with the version that "
                f"wrote it"
            )
        abstract = jax.tree_util.tree_map(ocp.utils.to_shape_dtype_struct, like)
        try:
            out = self.manager.restore(
                step,
                args=ocp.args.Composite(
                    state=(
                        ocp.args.PyTreeRestore(
                            item=abstract,
                            restore_args=ocp.checkpoint_utils.construct_restore_args(abstract),
                            partial_restore=True,
                        )
                        if partial
                        else ocp.args.StandardRestore(abstract)
                    ),
                    meta=ocp.args.JsonRestore(),
                ),
            )
        except Exception as e:
            if isinstance(e, ValueError) and (
                "do not match" in str(e) or "not compatible with the stored shape" in str(e)
            ):
                raise CheckpointError(
                    f"the checkpoint in {self.directory} (step {step}) does not have the "
                    f"structure or shapes this run expects (written with another configuration, "
                    f"e.g. other network or search sizes); resume with the run's own config.json"
                ) from e
            if self._passing(e):
                raise
            raise self._unreadable(step, e) from e
        meta = dict(out["meta"])
        saved = meta.get("checksums")  # (checkpoints written before checksums have none)
        if isinstance(saved, dict):
            for name, crc in array_checksums(out["state"]).items():
                if name in saved and saved[name] != crc:
                    raise self._unreadable(
                        step, ValueError(f"array {name!r} does not match its saved checksum")
                    )
        return out["state"], meta

    def restore_newest(
        self, like: Callable[[dict[str, Any]], Any]
    ) -> tuple[Any, dict[str, Any], list[str]]:
        """Restore the newest checkpoint that reads back whole, going back past damaged ones.

        What a resumed run uses: a crash or a full disk can leave the newest step unreadable
        while an older one is intact, and training exactly from the older one redoes the lost
        epochs. Unreadable steps newer than the one restored are moved aside, to
        `DIRECTORY.unreadable/STEP` (the run writes them again; nothing is deleted). An error of
        the machine rather than of the files (`OSError`, `MemoryError`) is raised as it is.

        With several processes it restores the newest step only: orbax's restore is a
        collective with barriers inside, so processes that went back separately (one failing
        to read a step the others read) would wait for each other forever. A damaged newest
        checkpoint is then reported, to be moved aside by hand.

        Args:
            like: `meta -> target`, the structure to restore into given the step's side record.

        Returns:
            `(state, meta, skipped)`: `skipped` describes each unreadable step passed over.

        Raises:
            FileNotFoundError: when there is no checkpoint.
            CheckpointError: when no step can be read, or one that can is of another format
                or structure (then every step is: the run's configuration differs).
        """
        steps = sorted(self.all_steps(), reverse=True)
        if not steps:
            raise FileNotFoundError(f"no checkpoint in {self.directory}")
        if jax.process_count() > 1:
            state, meta = self.restore(like(self.restore_meta(steps[0])), steps[0])
            return state, meta, []
        skipped: list[str] = []
        for step in steps:
            try:
                state, meta = self.restore(like(self.restore_meta(step)), step)
            except UnreadableCheckpointError as e:
                skipped.append(str(e))
                continue
            aside = self._set_aside([s for s in steps if s > step])
            return state, meta, [f"{m} (moved to {aside})" for m in skipped]
        raise CheckpointError(
            f"no checkpoint in {self.directory} can be read: " + "; ".join(skipped)
        )

    def _set_aside(self, steps: list[int]) -> Path | None:
        """Move `steps` to `DIRECTORY.unreadable/`, beside the folder they are in (inside the
        run directory: `RunDir.check_writes_stay_inside` refuses a link leaving it)."""
        if not steps:
            return None
        real = self.directory.resolve()
        aside = real.with_name(real.name + ".unreadable")
        aside.mkdir(exist_ok=True)
        for step in steps:
            target = aside / str(step)
            n = 1
            while target.exists():  # set aside before, by an earlier resume
                target = aside / f"{step}.{n}"
                n += 1
            shutil.move(real / str(step), target)  # a rename, or a copy across devices
        self.manager.reload()
        return aside

    def close(self) -> None:
        self.manager.close()


#: which network of a run `load_agent` plays: the best one so far, or the latest trained
WHICH = ("best", "latest")


def check_which(which: str) -> str:
    """`which`, one of `WHICH`; a `ValueError` naming it otherwise."""
    if which not in WHICH:
        raise ValueError(f"which must be one of {WHICH}, got {which!r}")
    return which


def restore_checkpoint(
    directory: str | os.PathLike[str], like: Any, *, step: int | None = None
) -> tuple[Any, dict[str, Any], int]:
    """`(tree, meta, step)`: the checkpoint `step` of `directory` (None: the newest) restored
    into `like`'s structure, shapes and dtypes, with its side record; for loading an agent (a
    reader: it cleans nothing up and keeps every step).

    Raises:
        FileNotFoundError: there is no checkpoint.
        CheckpointError: as `Checkpointer.restore`.
    """
    reader = Checkpointer(directory, keep=None)
    try:
        step = reader.latest_step() if step is None else step
        if step is None:
            raise FileNotFoundError(f"no checkpoint in {directory}")
        tree, meta = reader.restore(like, step=step)
    finally:
        reader.close()
    return tree, meta, int(step)
