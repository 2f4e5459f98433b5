"""What `make test` runs: its pytest command fails fast, naming the test, when a worker dies."""

from __future__ import annotations

import shlex
import subprocess
import sys

from tests.subprocesses import ROOT

KILLER = "import os\n\n\ndef test_dies():\n    os.kill(os.getpid(), 9)\n"
PASSING = "def test_passes():\n    pass\n"


def unit_pytest_args() -> list[str]:
    """The arguments `make unit` (part of `make test`) gives pytest, read from the Makefile."""
    lines = (ROOT / "Makefile").read_text().splitlines()
    recipe = lines[lines.index("unit: $(STAMP)") + 1]
    words = shlex.split(recipe.strip())
    while "=" in words[0]:  # (the environment the recipe sets)
        words = words[1:]
    assert words[0] == "$(BIN)/pytest", recipe
    return words[1:]


def test_a_worker_killed_mid_test_fails_the_run_naming_its_test_instead_of_hanging(tmp_path):
    """A test that takes its xdist worker down (a native abort, the OOM killer) must end the
    run red with the test's name. Under `--dist loadfile`, xdist's replacement worker can wait
    forever for work (pytest-xdist 3.8, issue 784 there): with two killing files and one passing
    file this hangs unless the Makefile turns worker restarts off."""
    (tmp_path / "test_1_kill.py").write_text(KILLER)
    (tmp_path / "test_2_pass.py").write_text(PASSING)
    (tmp_path / "test_3_kill.py").write_text(KILLER)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", *unit_pytest_args(), "-p", "no:cacheprovider", "."],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    out = done.stdout + done.stderr
    assert done.returncode != 0, out
    assert "crashed while running 'test_1_kill.py::test_dies'" in out or (
        "crashed while running 'test_3_kill.py::test_dies'" in out
    ), out


def test_a_worker_skips_the_interpreters_exit_and_a_failed_test_still_fails_the_run(tmp_path):
    """The suite's conftest ends each xdist worker with `os._exit` once its results are sent
    (freeing a worker's compiled programs took 6 to 8 s a run): an exit handler a test
    registers never runs, and a failure still makes the run red."""
    import os

    from tests.subprocesses import pythonpath

    ran = tmp_path / "exit-handler-ran"
    (tmp_path / "test_exit.py").write_text(
        "import atexit\nimport pathlib\n\n\ndef test_passes():\n"
        f"    atexit.register(pathlib.Path({str(ran)!r}).touch)\n\n\n"
        "def test_fails():\n    assert 1 == 2\n"
    )
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-n", "1", "-p", "tests.conftest", "."],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": pythonpath(), "PYTHONDONTWRITEBYTECODE": "1"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    out = done.stdout + done.stderr
    assert done.returncode == 1, out
    assert "1 failed, 1 passed" in out, out
    assert not ran.exists(), "the worker ran the interpreter's exit"


def test_the_suite_collects_cycles_rarely_and_leaves_what_it_imported_out_of_the_passes():
    """The suite's conftest raises the cyclic collector's thresholds and freezes what was
    imported and collected before the first test (see `SUITE_GC_THRESHOLDS`)."""
    import gc

    from tests.conftest import SUITE_GC_THRESHOLDS

    assert gc.get_threshold() == SUITE_GC_THRESHOLDS
    assert SUITE_GC_THRESHOLDS[0] > 700  # above Python's default
    assert gc.get_freeze_count() > 10_000  # the modules JAX, flax and the tests imported
