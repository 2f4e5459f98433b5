"""The layers of `src/turbozero` as docs/architecture.md lists them: every module imports only
from the modules and folders listed before its own (at module level and inside functions;
`TYPE_CHECKING` blocks aside, they run no code), so the package has no import cycles and the
document stays true."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "turbozero"
DOC = ROOT / "docs" / "architecture.md"


def documented_order() -> list[str]:
    """The rooms (a folder `envs/` or a module `config.py`) in the order the doc lists them."""
    block = DOC.read_text().split("```text\nsrc/turbozero/\n", 1)[1].split("```", 1)[0]
    order = []
    for line in block.splitlines():
        if re.match(r"  \S", line):  # a room's line; descriptions are indented further
            names = re.split(r"\s{2,}", line.strip(), maxsplit=1)[0].split()
            order += [n for n in names if n.endswith(("/", ".py"))]
    return order


def room_of(module: str, package: Path = PACKAGE) -> str:
    """`turbozero.arena.match` -> `arena/`; `turbozero.config` -> `config.py`."""
    parts = module.split(".")[1:]
    if not parts:
        return "__init__.py"
    return f"{parts[0]}/" if (package / parts[0]).is_dir() else f"{parts[0]}.py"


def imports(path: Path, package_dir: Path = PACKAGE) -> list[tuple[int, str]]:
    """`(line, module)` of every turbozero import in `path`, outside `TYPE_CHECKING` blocks."""
    module = ".".join(path.relative_to(package_dir.parent).with_suffix("").parts)
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    package = package.removesuffix(".__init__")
    found: list[tuple[int, str]] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            found.extend((node.lineno, a.name) for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(up + ([node.module] if node.module else []))
            for alias in node.names:  # `from turbozero import envs` imports the folder envs/
                sub = f"{base}.{alias.name}"
                is_room = base == "turbozero" and (
                    (package_dir / alias.name).is_dir()
                    or (package_dir / f"{alias.name}.py").is_file()
                )
                found.append((node.lineno, sub if is_room else base))
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text()))
    return [(line, m) for line, m in found if m == "turbozero" or m.startswith("turbozero.")]


def test_every_room_is_listed_once_in_the_layer_order():
    order = documented_order()
    rooms = {
        room_of(".".join(p.relative_to(PACKAGE.parent).with_suffix("").parts))
        for p in PACKAGE.rglob("*.py")
    }
    assert len(order) == len(set(order)), f"listed twice: {order}"
    assert set(order) == rooms, (
        f"docs/architecture.md lists {sorted(set(order) - rooms)} that do not exist and misses "
        f"{sorted(rooms - set(order))}"
    )


def test_no_import_goes_upward():
    order = documented_order()
    rank = {room: i for i, room in enumerate(order)}
    upward = []
    for path in sorted(PACKAGE.rglob("*.py")):
        module = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        mine = room_of(module.removesuffix(".__init__"))
        for line, target in imports(path):
            theirs = room_of(target)
            if theirs != mine and rank[theirs] > rank[mine]:
                upward.append(f"{path.relative_to(ROOT)}:{line} ({mine}) imports {target}")
    assert not upward, "imports that go up the layers of docs/architecture.md:\n" + "\n".join(
        upward
    )


def test_the_check_sees_an_upward_import(tmp_path):
    """The checker itself: an import inside a function that goes up is found, one under
    `TYPE_CHECKING` is not (a check that could not fail would prove nothing)."""
    fake = tmp_path / "turbozero"
    (fake / "envs").mkdir(parents=True)
    (fake / "envs" / "core.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from turbozero.cli import main\n"
        "def f():\n    from turbozero import cli\n"
    )
    (fake / "cli.py").write_text("")
    assert imports(fake / "envs" / "core.py", fake) == [(5, "turbozero.cli")]
    assert room_of("turbozero.cli", fake) == "cli.py"
    assert room_of("turbozero.envs.core", fake) == "envs/"
