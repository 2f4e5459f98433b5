"""The fast suite's time per test file, and what each file costs in compiled programs.

Runs the suite as `make unit` does (pytest on 2 xdist workers, one file per worker at a time,
`-m "not slow"`), by default with an empty compilation cache in a temporary directory (`--warm`:
the cache `make test` uses, `$TURBOZERO_CACHE`), and the suite's conftest writes one row per
test file and per test (`TURBOZERO_SUITE_REPORT`): wall seconds, JAX's seconds tracing, lowering
and compiling in XLA, the number of XLA compiles, and of those, the programs compiled anew and
written to the cache. Prints the files by seconds (`--tests N`: and the N slowest tests), then
one JSON row of totals
(`{"cache", "tests_wall_s", "files", "worker_s", "trace_s", "lower_s", "compile_s",
"compiles", "cache_hits", "cache_writes"}`, with the machine).

    python bench/suite.py [--warm] [--top 25] [--tests 0] [--json FILE] [-- PYTEST_ARGS...]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
from common import emit, machine

FIELDS = ("seconds", "trace_s", "lower_s", "compile_s", "compiles", "cache_hits", "cache_writes")
UNIT = ["-q", "-m", "not slow", "-n", "2", "--dist", "loadfile", "--max-worker-restart", "0"]


def read_rows(directory: Path) -> list[dict]:
    """Every worker's rows: one per test file (key "file") and one per test ("test")."""
    rows = []
    for path in sorted(directory.glob("*.jsonl")):
        rows += [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return rows


def table(rows: list[dict], kind: str, top: int) -> str:
    """The `top` slowest rows of `kind` ("file" or "test"), one line each."""
    head = f"{'seconds':>8} {'trace':>6} {'lower':>6} {'compile':>8} {'XLA':>5} {'new':>5}  {kind}"
    lines = [head]
    for r in sorted((r for r in rows if kind in r), key=lambda r: -r["seconds"])[:top]:
        lines.append(
            f"{r['seconds']:8.1f} {r['trace_s']:6.1f} {r['lower_s']:6.1f} {r['compile_s']:8.1f} "
            f"{int(r['compiles']):5d} {int(r['cache_writes']):5d}  {r[kind]}"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--warm", action="store_true", help="use $TURBOZERO_CACHE as it is")
    parser.add_argument("--top", type=int, default=25, help="files listed (slowest first)")
    parser.add_argument("--tests", type=int, default=0, help="also list the slowest tests")
    parser.add_argument("--json", type=Path, help="also write every file's row here")
    parser.add_argument("pytest_args", nargs="*", help="after --: extra pytest arguments")
    args = parser.parse_args()
    env = dict(os.environ, JAX_PLATFORMS="cpu", PYTHONDONTWRITEBYTECODE="")  # as `make unit`
    with tempfile.TemporaryDirectory() as report, tempfile.TemporaryDirectory() as cache:
        env["TURBOZERO_SUITE_REPORT"] = report
        if not args.warm:
            env["TURBOZERO_CACHE"] = cache
        started = time.perf_counter()
        pytest = [sys.executable, "-m", "pytest", *UNIT, *args.pytest_args]
        done = subprocess.run(pytest, cwd=ROOT, env=env)
        wall = time.perf_counter() - started
        rows = read_rows(Path(report))
    print(table(rows, "file", args.top))
    if args.tests:
        print(table(rows, "test", args.tests))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    files = [r for r in rows if "file" in r]
    totals = {k: round(sum(r[k] for r in files), 1) for k in FIELDS}
    totals["worker_s"] = totals.pop("seconds")
    emit(
        {
            "cache": "warm" if args.warm else "empty",
            "tests_wall_s": round(wall, 1),
            "files": len(files),
            **totals,
            "pytest_exit": done.returncode,
            **machine(),
        }
    )
    sys.exit(done.returncode)


if __name__ == "__main__":
    main()
