"""A run directory has one writer at a time; compiled programs are cached in one place."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from turbozero.io.errors import RunInUseError, RunPathError
from turbozero.io.rundir import RunDir


def test_a_held_run_directory_refuses_a_second_writer_until_released(tmp_path):
    run = RunDir(tmp_path / "run").create()
    second = RunDir(run.path)
    with (
        run.lock(),
        pytest.raises(RunInUseError, match=f"in use by process {os.getpid()}"),
        second.lock(),
    ):
        pass
    with RunDir(run.path).lock():  # released when the first block ended
        pass


def test_a_lock_is_released_when_the_block_raises(tmp_path):
    run = RunDir(tmp_path / "run").create()
    with pytest.raises(ZeroDivisionError), run.lock():
        raise ZeroDivisionError
    with run.lock():
        pass


def test_run_files_reach_the_disk_before_they_replace_the_old_ones(tmp_path, monkeypatch):
    """A power loss must leave the old or the new config.json, summary.json or metrics.jsonl,
    never an empty one: the new text is synced, then renamed over, then the folder synced."""
    run = RunDir(tmp_path / "run").create()
    events = []
    fsync, replace = os.fsync, os.replace
    monkeypatch.setattr(os, "fsync", lambda fd: events.append("sync") or fsync(fd))
    monkeypatch.setattr(os, "replace", lambda a, b: events.append("rename") or replace(a, b))
    run.write_json("summary.json", {"epochs": 1})
    assert events == ["sync", "rename", "sync"]
    events.clear()
    run.append_metrics({"epoch": 1, "env_steps": 8, "wall_seconds": 0.1})
    run.append_metrics({"epoch": 2, "env_steps": 16, "wall_seconds": 0.2})
    assert events == ["sync", "sync"]  # each row on disk when the epoch's checkpoint is saved
    events.clear()
    run.truncate_metrics(1)
    assert events == ["sync", "rename", "sync"]
    assert run.read_json("summary.json") == {"epochs": 1}
    assert [r["epoch"] for r in run.read_metrics()] == [1]
    assert sorted(p.name for p in run.path.iterdir() if p.name.endswith(".tmp")) == []


def test_a_file_given_as_the_run_directory_is_refused_by_name(tmp_path):
    afile = tmp_path / "notes.txt"
    afile.write_text("mine")
    with pytest.raises(FileExistsError, match="is a file, not a run directory"):
        RunDir(afile).create()
    assert afile.read_text() == "mine"


def test_metric_lines_that_are_not_rows_are_skipped(tmp_path):
    run = RunDir(tmp_path / "run").create()
    run.append_metrics({"epoch": 1, "env_steps": 8, "wall_seconds": 0.1})
    with run.metrics_path.open("a") as f:
        f.write('3\n["x"]\n{"epoch": 2, "env_st')  # foreign lines and a row cut by a crash
    assert [r["epoch"] for r in run.read_metrics()] == [1]


def test_a_filesystem_without_locks_warns_and_trains_unguarded(tmp_path, monkeypatch):
    import errno

    from turbozero.io import rundir

    def unsupported(fd, op):
        raise OSError(errno.ENOLCK, os.strerror(errno.ENOLCK))

    monkeypatch.setattr(rundir.fcntl, "flock", unsupported)
    run = RunDir(tmp_path / "run").create()
    with pytest.warns(RuntimeWarning, match="cannot be locked"), run.lock():
        pass


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("{bad", "is not valid JSON"),
        ("[1, 2]", "holds a JSON list"),
        ('{"config": {}}', "names no algorithm"),
        ('{"algorithm": "dqn", "config": {}}', "names no algorithm"),
        ('{"algorithm": "alphazero"}', "has no 'config' object"),
        ('{"algorithm": "ppo", "config": [1]}', "has no 'config' object"),
        ('{"algorithm": "alphazero", "config": {}, "parts": 3}', "'parts' entry that is no object"),
    ],
)
def test_a_damaged_config_json_is_refused_by_name_by_every_command(tmp_path, capsys, text, says):
    from turbozero.cli import main
    from turbozero.io.errors import DamagedRunError

    run = RunDir(tmp_path / "run").create()
    run.config_path.write_text(text)
    with pytest.raises(DamagedRunError, match=says):
        run.read_config()
    for argv in (
        ["eval", str(run.path)],
        ["play", str(run.path)],
        ["train", "--out", str(run.path), "--resume"],
    ):
        capsys.readouterr()
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.startswith("error: ") and "config.json" in err and says in err, (argv, err)
        assert "Traceback" not in err


def test_read_config_names_the_algorithm_asked_for(tmp_path):
    run = RunDir(tmp_path / "run").create()
    run.config_path.write_text('{"algorithm": "ppo", "config": {}, "preset": null}')
    assert run.read_config()["algorithm"] == "ppo"
    assert run.read_config("ppo")["config"] == {}
    with pytest.raises(ValueError, match="is a 'ppo' run, not 'alphazero'"):
        run.read_config("alphazero")
    with pytest.raises(FileNotFoundError, match=r"no config\.json"):
        RunDir(tmp_path / "none").read_config()


@pytest.mark.parametrize("name", ["run[1]", "run\\x", "ru*n", "run?"])
def test_a_path_the_checkpoints_cannot_live_under_is_refused_before_anything_is_written(
    tmp_path, name, capsys
):
    from turbozero.cli import main

    out = tmp_path / name
    assert main(["train", "tic_tac_toe", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "checkpoint library reads as a pattern" in err[0]
    assert f"'{out}'" in err[0]  # the path as the user typed it (a backslash not doubled)
    assert not out.exists() and list(tmp_path.iterdir()) == []
    with pytest.raises(RunPathError):
        RunDir(out).create()  # the library refuses it too (train, train_ppo)


def test_an_empty_out_is_refused_not_read_as_the_default(tmp_path, monkeypatch, capsys):
    from turbozero.cli import main

    monkeypatch.chdir(tmp_path)
    assert main(["train", "tic_tac_toe", "--out", ""]) == 2
    assert "empty path" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("code", "text"), [(errno.EROFS, "Read-only file system"), (errno.ENOSPC, "No space left")]
)
def test_a_disk_that_refuses_writes_is_one_line_of_error(tmp_path, monkeypatch, capsys, code, text):
    from turbozero.cli import main

    def refuse(self, *, resume=False):
        raise OSError(code, os.strerror(code), str(self.path))

    monkeypatch.setattr(RunDir, "create", refuse)
    assert main(["train", "tic_tac_toe", "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and text in err[0]


def test_the_compilation_cache_directory_set_first_in_a_process_is_kept(tmp_path, monkeypatch):
    """The suite's conftest turned the cache on; a later call with another `TURBOZERO_CACHE`
    (as the CLI makes, in-process) keeps it: a moved directory changed every later program's
    cache key, and a worker of the suite compiled everything afresh after one such test."""
    import jax

    from turbozero.io import enable_compilation_cache

    first = jax.config.jax_compilation_cache_dir
    assert first
    monkeypatch.setenv("TURBOZERO_CACHE", str(tmp_path / "elsewhere"))
    assert enable_compilation_cache() == Path(first)
    assert enable_compilation_cache(tmp_path / "other") == Path(first)
    assert jax.config.jax_compilation_cache_dir == first
    assert not (tmp_path / "elsewhere").exists() and not (tmp_path / "other").exists()
