"""Every code block of the README and docs/ runs (in `make check`: Python blocks in this process,
shell blocks as commands); and docs/configuration.md is what the typed configs generate.

Shell blocks run with trainings shortened to 2 epochs; `make test` lines are skipped (CI runs
that command itself) and so are full benchmark grids (their `--quick` lines run). Blocks tagged
`text` (outputs, layouts, long benchmark commands) do not run.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCK = re.compile(r"```(python|bash)\n(.*?)```", re.S)


def _blocks(kind: str):
    for path in DOCS:
        for i, (lang, code) in enumerate(BLOCK.findall(path.read_text())):
            if lang == kind:
                yield pytest.param(code, id=f"{path.name}-{i}")


def test_every_code_block_says_whether_it_runs():
    """An untagged block would be skipped silently: blocks are `python` or `bash` (run) or
    `text` (output, layouts, commands too long for the check)."""
    for path in DOCS:
        inside = False
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if line.startswith("```"):
                if not inside:
                    assert line[3:].strip() in ("python", "bash", "text"), f"{path.name}:{n}"
                inside = not inside


@pytest.mark.slow  # (the docs' examples end to end; each API they call has its own tests)
@pytest.mark.parametrize("code", list(_blocks("python")))
def test_python_blocks_in_the_docs_run(code):
    exec(compile(code, "<docs>", "exec"), {"__name__": "__docs__"})


@pytest.mark.slow
@pytest.mark.parametrize("code", list(_blocks("bash")))
def test_shell_blocks_in_the_docs_run(code, tmp_path):
    # Runs from a scratch copy of the paths the blocks write to; trainings are shortened.
    script = code.replace("\\\n", " ").replace("runs/", f"{tmp_path}/runs/")
    # a third of each epoch count the block names (in order: a resume still goes on), and two
    # epochs where it names none
    script = re.sub(
        r"num_epochs=(\d+)", lambda m: f"num_epochs={max(1, int(m.group(1)) // 3)}", script
    )
    script = re.sub(r"(turbozero train \S+)", r"\1 --set num_epochs=2 --set eval_every=2", script)
    script = script.replace("make train", "make train PRESET=tic_tac_toe")
    lines = []
    for line in script.splitlines():
        if line.startswith("make test") or (
            line.startswith(".venv/bin/python bench/") and "--quick" not in line
        ):
            continue
        lines.append(line)
    script = "\n".join(lines)
    env = dict(os.environ)
    proc = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script + "\nwait"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]


def test_configuration_reference_is_up_to_date():
    from turbozero.reference import config_reference

    assert (ROOT / "docs" / "configuration.md").read_text() == config_reference()


def _tour() -> str:
    readme = (ROOT / "README.md").read_text()
    tour = readme[readme.index("## Five-minute tour") :]
    return BLOCK.findall(tour)[0][1]


def test_the_readme_tour_trains_the_preset_to_its_end_and_says_what_to_expect():
    """A tour that stops training early leaves an agent the perfect player beats."""
    from turbozero.config import get_preset

    preset = get_preset("tic_tac_toe").make()
    epochs = [
        int(m.group(1))
        for line in _tour().splitlines()
        if "turbozero train tic_tac_toe" in line
        for m in [re.search(r"num_epochs=(\d+)", line)]
        if m
    ]
    assert epochs and max(epochs) >= preset.num_epochs, epochs
    readme = (ROOT / "README.md").read_text()
    after = readme[readme.index("## Five-minute tour") :]
    assert '"losses": 0' in after and "4,520" in after


def test_the_search_guide_says_which_selector_for_which_game():
    from turbozero.alphazero.config import SELECTORS

    guide = (ROOT / "docs" / "search.md").read_text()
    section = guide[guide.index("## Which selector for which game and budget") :]
    section = section[: section.index("\n## ", 5)]
    assert all(f"`{name}`" in section for name in SELECTORS)


def test_the_readme_is_a_front_door():
    """The README leads with the two commands and the tour; run-directory rules live in
    docs/runs.md."""
    readme = (ROOT / "README.md").read_text()
    head = "\n".join(readme.splitlines()[:40])
    assert "make train" in head and "## Five-minute tour" in head
    assert "--resume" in (ROOT / "docs" / "runs.md").read_text()
