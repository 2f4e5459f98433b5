"""Fixtures shared across the suite. Compiled programs are cached on disk between runs."""

from __future__ import annotations

import contextlib
import functools
import gc
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import ClassVar

#: the cyclic collector's thresholds in the suite (Python's are 700, 10, 10; see below)
SUITE_GC_THRESHOLDS = (100_000, 50, 1000)
# Tracing and lowering allocate millions of short-lived objects, and at Python's thresholds the
# collector ran thousands of times a file, each full pass walking every jaxpr and executable the
# worker holds: 4.7 of test_search.py's 52 s. At these thresholds, with the imported modules
# frozen out of its passes once collected (`pytest_collection_finish`), 1.6 s, for 1.37 GB at
# its peak rather than 1.26 (docs/benchmarks.md, the lever table).
gc.set_threshold(*SUITE_GC_THRESHOLDS)
os.environ.setdefault("JAX_PLATFORMS", "cpu")
# (what XLA_FLAGS was before `turbozero.configure()` added to it; see tests/test_xla_flags.py)
os.environ.setdefault("TURBOZERO_SUITE_XLA_FLAGS", os.environ.get("XLA_FLAGS", ""))

import turbozero

turbozero.configure()  # as the CLI does, before any JAX computation (and pgx's import)

import jax
import pytest
from hypothesis import settings

from turbozero.io import enable_compilation_cache

enable_compilation_cache()
# every program goes to the disk cache, however quickly it compiled: the suite compiles thousands
# of small ones (eager operations, tiny searches) at about 20 ms each, which a warm run reads back
# in a few; with the library's 0.2 s floor a warm run took 10 min 55 s, with none 7 min 18 s
# (`bench/suite.py --warm`, 930 tests, docs/benchmarks.md)
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
settings.register_profile("turbozero", max_examples=15, deadline=None, derandomize=True)
settings.load_profile("turbozero")

#: LLVM's optimization level for the fast suite's programs (see `pytest_configure`)
SUITE_OPTIMIZATION_LEVEL = "--xla_backend_optimization_level=0"
#: XLA:CPU's older loop emitters for the fast suite's fusions (see `pytest_configure`)
SUITE_EMITTERS = "--xla_cpu_use_fusion_emitters=false"
#: the level `optimized` tests run at when the suite's is 0 (see `_optimized`)
LEVEL_1 = "--xla_backend_optimization_level=1"


def pytest_configure(config: pytest.Config) -> None:
    """The fast suite compiles thousands of small programs and runs each briefly, so it chooses
    XLA settings that compile faster: LLVM's level 0 (a cold suite in about 60% of the time of
    level 1, which took two thirds of XLA's default, 2) and XLA:CPU's older loop emitters for
    fusions rather than its new MLIR ones. Level 0 keeps every rule the suite checks except where
    two programs' floats are compared bit for bit or a golden output to 1e-6: those tests are
    marked `optimized` and run at level 1 in a subprocess (`_optimized`). The slow checks
    (`-m slow`: learning targets, whole trainings) keep XLA's defaults, as users' runs and the
    benchmarks do; a level or emitter chosen in XLA_FLAGS, or a flags file, is kept. Set before
    JAX starts its backend (the first computation), which reads XLA_FLAGS once; subprocesses
    inherit it."""
    flags = os.environ.get("XLA_FLAGS", "")
    if (config.option.markexpr or "").strip() == "slow":
        return
    if flags.strip() and flags.strip()[0] != "-":
        return
    if "xla_backend_optimization_level" not in flags:
        flags = f"{flags} {SUITE_OPTIMIZATION_LEVEL}"
    if "xla_cpu_use_fusion_emitters" not in flags:
        flags = f"{flags} {SUITE_EMITTERS}"
    os.environ["XLA_FLAGS"] = flags.strip()


def pytest_collection_finish(session: pytest.Session) -> None:
    """Everything imported and collected so far lives for the whole run: move it out of the
    cyclic collector's passes (`gc.freeze`), which otherwise walk it again at every full pass."""
    gc.collect()
    gc.freeze()


#: set in the environment of `_run_at_level_1`'s pytest (its results go to a JUnit report)
_LEVEL_1_RUN = "TURBOZERO_SUITE_LEVEL_1_RUN"
_EXIT_STATUS = [0]  # the session's, for `pytest_unconfigure`


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    _EXIT_STATUS[0] = int(exitstatus)


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config: pytest.Config) -> None:
    """An xdist worker leaves as soon as its results are sent (`workerfinished`, sent from its
    `pytest_sessionfinish`), skipping the interpreter's exit: there JAX frees every program the
    worker compiled or read from the cache, 6 to 8 s for a worker's 2,500 at the end of each
    run, and the controller waits for it. The run's outcome travels in the results (and the
    exit status is the session's). So does the level-1 subprocess (`_run_at_level_1`), once
    its report is written."""
    if hasattr(config, "workerinput") or os.environ.get(_LEVEL_1_RUN):
        import sys

        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(_EXIT_STATUS[0])


def _llvm_level(flags: str) -> int | None:
    """The LLVM level `flags` choose (None: XLA's default)."""
    found = re.search(r"--xla_backend_optimization_level=(\d+)", flags)
    return int(found.group(1)) if found else None


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Where this process compiles at LLVM's level 0, `optimized` tests run in a subprocess."""
    if _llvm_level(os.environ.get("XLA_FLAGS", "")) != 0:
        return
    marked = [item for item in items if item.get_closest_marker("optimized") is not None]
    for item in marked:
        item.runtest = functools.partial(_optimized, item, marked)  # type: ignore[method-assign]


_OPTIMIZED_RESULTS: dict[str, str | None] = {}


def _optimized(item: pytest.Item, marked: list[pytest.Item]) -> None:
    """Run `item` at LLVM's level 1 in a subprocess, with the other `optimized` tests of its
    file selected in this session (one subprocess per file), and fail with its failure.

    LLVM's level 0 contracts and orders floating-point operations differently from program to
    program, so two programs that agree bit for bit when optimised (a search with and without
    walk compaction, with Gumbel's noise) differ in the last place, and PPO's goldens by 1e-5.
    """
    if item.nodeid not in _OPTIMIZED_RESULTS:
        nodeids = [other.nodeid for other in marked if other.path == item.path]
        _OPTIMIZED_RESULTS.update(_run_at_level_1(nodeids))
    failure = _OPTIMIZED_RESULTS[item.nodeid]
    if failure is not None:
        pytest.fail(f"at LLVM level 1 in a subprocess:\n{failure}", pytrace=False)


def _run_at_level_1(nodeids: list[str]) -> dict[str, str | None]:
    """`{nodeid: None if it passed, else its failure}`, run by pytest at LLVM level 1."""
    import subprocess
    import sys
    import tempfile
    import xml.etree.ElementTree as ET

    from tests.subprocesses import ROOT, pythonpath

    flags = re.sub(r"--xla_backend_optimization_level=\d+", "", os.environ["XLA_FLAGS"])
    env = dict(os.environ, PYTHONPATH=pythonpath(), XLA_FLAGS=f"{flags} {LEVEL_1}".strip())
    env.pop("TURBOZERO_SUITE_REPORT", None)
    env[_LEVEL_1_RUN] = "1"
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "junit.xml"
        command = [sys.executable, "-m", "pytest", "-q", "-p", "no:xdist", "-p", "no:cacheprovider"]
        done = subprocess.run(
            [*command, f"--junitxml={report}", *nodeids],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
        )
        if not report.exists():
            output = f"{done.stdout}\n{done.stderr}"
            raise RuntimeError(f"pytest at LLVM level 1 wrote no report:\n{output}")
        cases = ET.parse(report).getroot().iter("testcase")
    results: dict[str, str | None] = dict.fromkeys(nodeids, f"not run:\n{done.stdout[-3000:]}")
    for case in cases:
        path = case.get("classname", "").replace(".", "/") + ".py"
        faults = [f for f in case if f.tag in ("failure", "error", "skipped")]
        fault = "\n".join(f"{f.get('message', '')}\n{f.text or ''}" for f in faults) or None
        results[f"{path}::{case.get('name')}"] = fault
    return results


def _memory_map_limit() -> int | None:
    """The kernel's cap on one process's memory mappings (`vm.max_map_count`), if readable."""
    try:
        return int(Path("/proc/sys/vm/max_map_count").read_text())
    except (OSError, ValueError):
        return None


def _memory_maps() -> int:
    """How many memory mappings this process holds now (0 where /proc is absent)."""
    try:
        with open("/proc/self/maps", "rb") as maps:
            return sum(1 for _ in maps)
    except OSError:
        return 0


_MAP_LIMIT = _memory_map_limit()
_after_last_clear = [0]  # the mapping count the last clear left (a clear frees nothing else)


@pytest.fixture(autouse=True, scope="module")
def _release_compiled_programs():
    """Drop JAX's compiled programs after a test file once they hold half the mapping cap.

    Every XLA:CPU executable a worker compiles or loads from the disk cache keeps tens of memory
    mappings, and JAX keeps the executables for the process's life. One xdist worker running
    dozens of test files reaches `vm.max_map_count` (65,530 by default), and LLVM then aborts
    the worker ("Unable to allocate section memory") in whichever test compiles next. A clear
    comes again only after the count has grown by an eighth of the cap since the last one left
    it, so programs held elsewhere (session fixtures) do not make every later file recompile.
    """
    yield
    maps = _memory_maps()
    if _MAP_LIMIT and maps > _MAP_LIMIT // 2 and maps > _after_last_clear[0] + _MAP_LIMIT // 8:
        jax.clear_caches()
        gc.collect()
        _after_last_clear[0] = _memory_maps()


@pytest.fixture(autouse=True, scope="session")
def _training_runs_draw_no_plots() -> Iterator[None]:
    """Training runs in the suite skip the PNGs drawn at their end (matplotlib takes about 1.5 s
    a run, a third of a tiny run's time); runs whose plots a test reads draw them inside
    `drawing_plots()`. `turbozero plot` and `turbozero.io.plots` are not affected."""
    from turbozero.io import experiment

    drawn = experiment.plot_run
    experiment.plot_run = lambda rows, out_dir, **_: []
    yield
    experiment.plot_run = drawn


@contextmanager
def drawing_plots() -> Iterator[None]:
    """Training runs inside this block draw their plots, as they do outside the suite."""
    from turbozero.io import experiment
    from turbozero.io.plots import plot_run

    skipped, experiment.plot_run = experiment.plot_run, plot_run
    try:
        yield
    finally:
        experiment.plot_run = skipped


@pytest.fixture(scope="session")
def systems():
    """The worker's cache of compiled AlphaZero systems (`turbozero.alphazero.Systems`): tests
    that train pass it (`train(..., systems=systems)`), so a tiny config trained again in the
    worker, in this file or another, finds its programs in memory (the library keeps none)."""
    from turbozero.alphazero import Systems

    return Systems()


@pytest.fixture(scope="session")
def tic_tac_toe():
    from turbozero import envs

    return envs.make("tic_tac_toe")


@pytest.fixture(scope="session")
def connect_four():
    from turbozero import envs

    return envs.make("connect_four")


@pytest.fixture
def key():
    return jax.random.PRNGKey(0)


class _SuiteProfile:
    """Per test file: wall seconds, and what JAX spent on its programs (tracing, lowering,
    XLA's compiles and how many), from `jax.monitoring`'s events. Written as one JSON line per
    file to `$TURBOZERO_SUITE_REPORT/<worker>.jsonl` when that variable names a directory;
    `bench/suite.py` runs the suite so and prints the table."""

    EVENTS: ClassVar[dict[str, str]] = {
        "/jax/core/compile/jaxpr_trace_duration": "trace_s",
        "/jax/core/compile/jaxpr_to_mlir_module_duration": "lower_s",
        "/jax/core/compile/backend_compile_duration": "compile_s",
    }

    def __init__(self, directory: Path):
        self.path = directory / f"{os.environ.get('PYTEST_XDIST_WORKER', 'main')}.jsonl"
        self.totals = dict.fromkeys(
            [*self.EVENTS.values(), "compiles", "cache_hits", "cache_writes"], 0.0
        )
        jax.monitoring.register_event_duration_secs_listener(self._duration)
        jax.monitoring.register_event_listener(self._event)

    def _duration(self, event: str, duration: float, **_: object) -> None:
        name = self.EVENTS.get(event)
        if name:
            self.totals[name] += duration
            if name == "compile_s":
                self.totals["compiles"] += 1

    def _event(self, event: str, **_: object) -> None:
        if event == "/jax/compilation_cache/cache_hits":
            self.totals["cache_hits"] += 1
        elif event == "/jax/compilation_cache/cache_misses":  # (written: compiled anew)
            self.totals["cache_writes"] += 1

    @contextmanager
    def part(self, kind: str, name: str) -> Iterator[None]:
        """Time the block as one row: `kind` "file" (a test file, its module fixtures included)
        or "test" (one test's call and function fixtures)."""
        import json
        import time

        before, started = dict(self.totals), time.perf_counter()
        yield
        row: dict[str, object] = {kind: name, "seconds": time.perf_counter() - started}
        row.update({k: round(v - before[k], 3) for k, v in self.totals.items()})
        with open(self.path, "a") as out:
            out.write(json.dumps(row) + "\n")


_PROFILE = (
    _SuiteProfile(Path(os.environ["TURBOZERO_SUITE_REPORT"]))
    if os.environ.get("TURBOZERO_SUITE_REPORT")
    else None
)


def _profiled(kind: str, request: pytest.FixtureRequest) -> contextlib.AbstractContextManager:
    """The block as one row of the suite's profile, when `TURBOZERO_SUITE_REPORT` asks for it."""
    return _PROFILE.part(kind, request.node.nodeid) if _PROFILE else contextlib.nullcontext()


@pytest.fixture(autouse=True, scope="module")
def _profile_test_file(request: pytest.FixtureRequest) -> Iterator[None]:
    """Each test file's row of the suite's profile (`TURBOZERO_SUITE_REPORT`; see above)."""
    with _profiled("file", request):
        yield


@pytest.fixture(autouse=True)
def _profile_test(request: pytest.FixtureRequest) -> Iterator[None]:
    """Each test's row of the suite's profile (`TURBOZERO_SUITE_REPORT`)."""
    with _profiled("test", request):
        yield
