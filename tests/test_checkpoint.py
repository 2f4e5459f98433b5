"""Checkpoints that cannot be restored say why, naming the directory, instead of orbax's dump."""

from __future__ import annotations

import shutil

import jax.numpy as jnp
import pytest

from turbozero.io import checkpoint
from turbozero.io.checkpoint import Checkpointer
from turbozero.io.errors import CheckpointError, UnreadableCheckpointError


def test_a_checkpoint_restores_what_was_saved(tmp_path):
    ckpt = Checkpointer(tmp_path / "c")
    ckpt.save(3, {"w": jnp.arange(4.0)}, {"note": "x"})
    ckpt.manager.wait_until_finished()
    state, meta = ckpt.restore({"w": jnp.zeros(4)})
    assert state["w"].tolist() == [0.0, 1.0, 2.0, 3.0]
    assert meta["note"] == "x" and meta["step"] == 3
    ckpt.close()


def test_a_checkpoint_of_another_format_version_is_refused_by_name(tmp_path, monkeypatch):
    monkeypatch.setattr(checkpoint, "FORMAT_VERSION", 1)
    old = Checkpointer(tmp_path / "c")
    old.save(1, {"w": jnp.zeros(2)}, {})
    old.manager.wait_until_finished()
    old.close()
    monkeypatch.setattr(checkpoint, "FORMAT_VERSION", 2)
    with pytest.raises(CheckpointError, match=r"format 1 .* not the supported version 2"):
        Checkpointer(tmp_path / "c").restore({"w": jnp.zeros(2)})


def test_a_checkpoint_of_another_structure_is_refused_by_name(tmp_path):
    ckpt = Checkpointer(tmp_path / "c")
    ckpt.save(1, {"w": jnp.zeros(2)}, {})
    ckpt.manager.wait_until_finished()
    with pytest.raises(CheckpointError, match="does not have the structure"):
        ckpt.restore({"w": jnp.zeros(2), "extra": jnp.zeros(3)})
    with pytest.raises(CheckpointError, match="structure or shapes"):
        ckpt.restore({"w": jnp.zeros(3)})
    ckpt.close()


def _damage(directory, how):
    if how == "side record cut short":
        (directory / "meta" / "metadata").write_text("{trunc")
    elif how == "array files overwritten":
        for f in (directory / "state").rglob("d/*"):
            f.write_bytes(b"\0" * 3)
    else:  # "state folder missing"
        shutil.rmtree(directory / "state")


DAMAGE = ["side record cut short", "array files overwritten", "state folder missing"]


@pytest.mark.parametrize("how", DAMAGE)
def test_a_damaged_checkpoint_is_named_by_step_and_resume_goes_back_to_an_intact_one(tmp_path, how):
    ckpt = Checkpointer(tmp_path / "c")
    for step in (1, 2):
        ckpt.save(step, {"w": jnp.arange(4.0) + step}, {"n": step})
    _damage(tmp_path / "c" / "2", how)
    with pytest.raises(UnreadableCheckpointError, match=r"step 2 .* cannot be read.*\[1\]"):
        ckpt.restore({"w": jnp.zeros(4)})
    state, meta, skipped = ckpt.restore_newest(lambda meta: {"w": jnp.zeros(4)})
    assert state["w"].tolist() == [1.0, 2.0, 3.0, 4.0] and meta["n"] == 1
    assert len(skipped) == 1 and "step 2" in skipped[0] and "c.unreadable" in skipped[0]
    assert ckpt.all_steps() == [1]  # the resumed run writes step 2 again
    assert (tmp_path / "c.unreadable" / "2").is_dir()  # kept, not deleted
    ckpt.save(2, {"w": jnp.arange(4.0) + 2}, {"n": 2})
    assert ckpt.all_steps() == [1, 2]
    ckpt.close()


def test_a_failing_disk_is_not_taken_for_a_damaged_checkpoint(tmp_path, monkeypatch):
    """An OSError of the machine (EIO, a network filesystem's hiccup) or a MemoryError is
    raised as it is: resuming must not pass over, and set aside, an intact checkpoint."""
    ckpt = Checkpointer(tmp_path / "c")
    for step in (1, 2):
        ckpt.save(step, {"w": jnp.zeros(2)}, {})

    def failing(*args, **kwargs):
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(ckpt.manager, "restore", failing)
    with pytest.raises(OSError, match="Input/output"):
        ckpt.restore_newest(lambda meta: {"w": jnp.zeros(2)})
    assert ckpt.all_steps() == [1, 2] and not (tmp_path / "c.unreadable").exists()
    ckpt.close()


def test_resume_with_no_readable_checkpoint_says_so_and_keeps_the_files(tmp_path):
    ckpt = Checkpointer(tmp_path / "c")
    ckpt.save(1, {"w": jnp.zeros(2)}, {})
    _damage(tmp_path / "c" / "1", "side record cut short")
    with pytest.raises(CheckpointError, match=r"no checkpoint .* can be read: .*step 1"):
        ckpt.restore_newest(lambda meta: {"w": jnp.zeros(2)})
    assert ckpt.all_steps() == [1]
    ckpt.close()


def test_resume_does_not_go_back_past_a_checkpoint_of_another_structure(tmp_path):
    """Another structure means another configuration: every older step is alike, and
    going back would only delete them."""
    ckpt = Checkpointer(tmp_path / "c")
    for step in (1, 2):
        ckpt.save(step, {"w": jnp.zeros(2)}, {})
    with pytest.raises(CheckpointError, match="does not have the structure"):
        ckpt.restore_newest(lambda meta: {"w": jnp.zeros(3)})
    assert ckpt.all_steps() == [1, 2]
    ckpt.close()


def test_a_step_that_does_not_exist_is_not_found_rather_than_damaged(tmp_path):
    ckpt = Checkpointer(tmp_path / "c")
    ckpt.save(1, {"w": jnp.zeros(2)}, {})
    with pytest.raises(FileNotFoundError, match=r"no checkpoint of step 5 .*\[1\]"):
        ckpt.restore({"w": jnp.zeros(2)}, step=5)
    ckpt.close()


def test_a_reader_of_a_run_without_checkpoints_creates_nothing(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    run.chmod(0o555)  # a copy that cannot be written (root still could: the listing checks)
    try:
        with pytest.raises(FileNotFoundError, match="no checkpoint in"):
            checkpoint.restore_checkpoint(run / "checkpoints", {"w": jnp.zeros(2)})
        assert list(run.iterdir()) == []
    finally:
        run.chmod(0o755)
    Checkpointer(run / "checkpoints", writer=True).close()  # a writer creates its folder
    assert (run / "checkpoints").is_dir()


def test_a_step_set_aside_twice_keeps_both_copies(tmp_path):
    ckpt = Checkpointer(tmp_path / "c")
    for _ in range(2):
        for step in (1, 2):
            ckpt.save(step, {"w": jnp.zeros(2) + step}, {})
        _damage(tmp_path / "c" / "2", "side record cut short")
        _, meta, skipped = ckpt.restore_newest(lambda meta: {"w": jnp.zeros(2)})
        assert meta["step"] == 1 and len(skipped) == 1
    assert sorted(p.name for p in (tmp_path / "c.unreadable").iterdir()) == ["2", "2.1"]
    ckpt.close()


def test_a_machine_error_while_reading_the_arrays_is_raised_as_it_is(tmp_path, monkeypatch):
    ckpt = Checkpointer(tmp_path / "c")
    ckpt.save(1, {"w": jnp.zeros(2)}, {})
    restore = ckpt.manager.restore

    def out_of_memory(step, args=None):
        if "state" in args:  # the side record reads, the arrays do not
            raise MemoryError("no room")
        return restore(step, args=args)

    monkeypatch.setattr(ckpt.manager, "restore", out_of_memory)
    with pytest.raises(MemoryError):
        ckpt.restore_newest(lambda meta: {"w": jnp.zeros(2)})
    assert ckpt.all_steps() == [1]
    ckpt.close()


def test_flipped_bytes_in_an_array_file_make_the_checkpoint_unreadable(tmp_path):
    ckpt = Checkpointer(tmp_path / "c")
    w = jnp.arange(1 << 14, dtype=jnp.float32)
    for step in (1, 2):
        ckpt.save(step, {"w": w + step}, {"n": step})
    files = sorted((tmp_path / "c" / "2" / "state").rglob("d/*"), key=lambda f: f.stat().st_size)
    data = bytearray(files[-1].read_bytes())
    middle = len(data) // 2
    data[middle : middle + 64] = bytes(b ^ 0xFF for b in data[middle : middle + 64])
    files[-1].write_bytes(bytes(data))
    with pytest.raises(UnreadableCheckpointError, match="step 2"):
        ckpt.restore({"w": jnp.zeros_like(w)})
    state, meta, skipped = ckpt.restore_newest(lambda meta: {"w": jnp.zeros_like(w)})
    assert meta["n"] == 1 and len(skipped) == 1
    ckpt.close()


def test_an_array_that_differs_from_its_saved_checksum_is_named(tmp_path):
    import json

    ckpt = Checkpointer(tmp_path / "c")
    ckpt.save(1, {"t": {"w": jnp.arange(4.0), "b": jnp.ones(2)}}, {})
    meta_file = tmp_path / "c" / "1" / "meta" / "metadata"
    meta = json.loads(meta_file.read_text())
    assert set(meta["checksums"]) == {"t/w", "t/b"}
    meta["checksums"]["t/w"] ^= 1
    meta_file.write_text(json.dumps(meta))
    with pytest.raises(UnreadableCheckpointError, match="array 't/w' does not match its saved"):
        ckpt.restore({"t": {"w": jnp.zeros(4), "b": jnp.zeros(2)}})
    ckpt.close()
    # a partial restore (a reader's, e.g. loading an agent) checks what it reads: an intact array
    reader = Checkpointer(tmp_path / "c")
    state, _ = reader.restore({"t": {"b": jnp.zeros(2)}}, partial=True)
    assert state["t"]["b"].tolist() == [1.0, 1.0]
    reader.close()


def test_a_save_whose_arrays_were_not_merged_is_reported_not_taken_for_saved(tmp_path):
    ckpt = Checkpointer(tmp_path / "c")
    ckpt.save(1, {"w": jnp.arange(4.0)}, {})
    ckpt.verify_saved(1)  # a whole save passes
    (tmp_path / "c" / "1" / "state" / "manifest.ocdbt").unlink()  # as when orbax skipped it
    with pytest.raises(UnreadableCheckpointError, match=r"there is no .*manifest\.ocdbt"):
        ckpt.verify_saved(1)
    ckpt.close()


@pytest.mark.parametrize(
    ("text", "code"),
    [
        ("RESUME: Failed to write 56489 bytes: No space left on device [os_error_code='28']", 28),
        ("RESOURCE_EXHAUSTED: Error writing: Read-only file system [os_error_code='30']", 30),
    ],
)
def test_a_disk_that_refuses_a_save_is_an_os_error_without_orbaxs_log(
    tmp_path, monkeypatch, caplog, text, code
):
    import errno
    import logging

    ckpt = Checkpointer(tmp_path / "c")

    def failing_save(*args, **kwargs):
        logging.getLogger("absl").error("_SignalingThread.run() raised an exception: %s", text)
        raise ValueError(text)

    monkeypatch.setattr(ckpt.manager, "save", failing_save)
    with caplog.at_level(logging.INFO), pytest.raises(OSError) as err:
        ckpt.save(1, {"w": jnp.zeros(2)}, {})
    assert err.value.errno == code and err.value.errno in (errno.ENOSPC, errno.EROFS)
    assert "saving checkpoint step 1" in str(err.value)
    assert not [r for r in caplog.records if r.name == "absl"]  # held back
    ckpt.close()


def test_a_write_threads_disk_failure_logged_after_the_save_returned_is_dropped(tmp_path, caplog):
    """Orbax's write threads log their failure with a traceback, some after the failed save has
    returned (past any hold on the log during the call): those reports are dropped for the
    process's life, while its other errors still reach the log."""
    import logging
    import threading

    ckpt = Checkpointer(tmp_path / "c")
    ckpt.save(1, {"w": jnp.zeros(2)}, {})  # (installs the filters)
    absl = logging.getLogger("absl")
    late = "_SignalingThread.run() raised an exception: Failed writing: No space left on device"

    def log_late() -> None:
        try:
            raise ValueError("RESOURCE_EXHAUSTED")
        except ValueError:
            absl.exception("[process=0] %s", late)

    with caplog.at_level(logging.INFO):
        thread = threading.Thread(target=log_late)
        thread.start()
        thread.join()
        absl.error("_SignalingThread.run() raised an exception: permission denied")
    assert [r.getMessage() for r in caplog.records if r.name == "absl"] == [
        "_SignalingThread.run() raised an exception: permission denied"
    ]
    ckpt.close()


_FILL_THE_DISK = """
import sys
import numpy as np
import jax.numpy as jnp
from turbozero.io.checkpoint import Checkpointer

ck = Checkpointer(sys.argv[1])
rng = np.random.default_rng(0)
tree = {f"a{i}": jnp.asarray(rng.standard_normal(20000, dtype=np.float32)) for i in range(40)}
try:
    ck.save(1, tree, {})
except OSError as err:
    print(f"error: {err.strerror}", file=sys.stderr)
"""


def test_a_full_disk_is_reported_in_one_line_without_the_late_writes_tracebacks(tmp_path):
    """A save that fills the disk fails one array write of many; the writes still in flight then
    fail on orbax's closed event loop, each with a traceback (35 of them around the one line,
    before): a 1 MiB tmpfs and a 3 MB save."""
    import os
    import subprocess
    import sys

    from tests.subprocesses import pythonpath

    disk = tmp_path / "disk"
    disk.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=1M", "tmpfs", str(disk)], capture_output=True
    )
    if mounted.returncode != 0:
        pytest.skip(f"a tmpfs cannot be mounted here: {mounted.stderr.decode().strip()}")
    try:
        proc = subprocess.run(
            [sys.executable, "-c", _FILL_THE_DISK, str(disk / "c")],
            env={**os.environ, "PYTHONPATH": pythonpath(), "JAX_PLATFORMS": "cpu"},
            capture_output=True,
            text=True,
            timeout=300,
        )
    finally:
        subprocess.run(["umount", str(disk)], check=False)
    lines = proc.stderr.strip().splitlines()
    assert lines == ["error: No space left on device (saving checkpoint step 1)"], lines[:8]
