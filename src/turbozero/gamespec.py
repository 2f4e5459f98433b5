"""What a game is to turbozero beyond its rules (`GameSpec`), and the registry that finds one by
name.

Each built-in game has one file in `turbozero.games` holding all of it: its environment (pgx's,
or `make_env`), its one-line description, how it is drawn and its moves named (`Board`), its
chance split, its symmetries and winning lines, its perfect player and labelled positions, the
engines that play it, what the play page shows of it (`Page`) and its presets. Generic code (the
arena, the play page, the CLI, the trainer, the config) looks a game up here and never tests its
name. A game of your own is one file too: its `register()` function builds its `GameSpec` and
`register_game`s it (and its presets); `load_game_module` imports the file or module and calls
it (`turbozero train --game`, recorded in the run as `config.json`'s `"game_module"`), and an
installed package names its game modules in the `turbozero.games` entry point group, found by
name (docs/own-game.md).

Coordinates are pgx's SVG user units (`Env.render_svg` at scale 1).
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib
import importlib.metadata
import importlib.util
import os
import re
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from turbozero.arena.agents import Agent
    from turbozero.envs.core import Env
    from turbozero.envs.pgx import ChanceRules
    from turbozero.td.rules import SoloRules, TDRules
    from turbozero.types import Array, PRNGKey

#: one clickable cell: (action, x, y, radius)
Cell = tuple[int, float, float, float]

#: a labelled position set's score of an illegal move (below every real score: Connect Four's
#: lie in [-21, 21])
ILLEGAL_SCORE = -1000.0

LETTERS = "abcdefghijklmnopqrstuvwxyz"
GO_LETTERS = "ABCDEFGHJKLMNOPQRST"  # Go skips I; rows count up from the bottom

#: the built-in games' modules under `turbozero.games`, imported on first lookup
BUILTIN = (
    "tic_tac_toe",
    "connect_four",
    "othello",
    "hex",
    "go",
    "animal_shogi",
    "chess",
    "shogi",
    "backgammon",
    "play2048",
    "minatar",
)


@dataclasses.dataclass(frozen=True)
class Board:
    """How a game is drawn and its moves named.

    Attributes:
        label: a short human name of an action.
        cells: where each action lies on the drawing (None: moves are not squares).
        outcome_label: a short human name of a chance outcome (`Env.chance`), for games with
            chance (None: none).
        line: `(rows, columns, k)` for games won by k marks in a row (the winning line drawn;
            `network.line_features` reads the open lines).
        symmetry: `("square", side)` (the 8 symmetries of a square board) or
            `("horizontal", width)` (a mirror image), for augmentation; None: none used.
        marks: what the first and the second player's marks look like on the drawing
            (pgx's `_x.color` 0 and 1), so the play page can say which are the human's; None:
            not said.
        coordinates: whether the page writes the columns' and rows' names around the board (as
            its moves are named: a1..c3, A9..J1, columns 1..7).
    """

    label: Callable[[int], str]
    cells: Callable[[], list[Cell]] | None = None
    outcome_label: Callable[[int], str] | None = None
    line: tuple[int, int, int] | None = None
    symmetry: tuple[str, int] | None = None
    marks: tuple[str, str] | None = None
    coordinates: bool = False


@dataclasses.dataclass(frozen=True)
class Page:
    """What the play page and the game records show of a game beyond its drawing; every hook
    reads a state on the host (numpy or device arrays) and may be None (the generic behaviour).

    Attributes:
        move_text: `(state, action) -> str`: the action's name in that position (backgammon
            marks a hit with "*"); None: `Board.label`.
        move_choices: `(state, legal) -> [{"action", "label"}, ...]`: the moves offered as a
            list, in the order a player reads them; None: one per legal action.
        chance_cell: `(outcome) -> [x, y, r]`: the cell a chance outcome filled, marked on the
            drawing (2048's new tile); None: none marked.
        view: `(state, human_player) -> dict`: fields of the page's snapshot this game sets
            (`turbozero.play.games.game_view` lists them).
        turn_marks: `(moves) -> [[x1, y1, x2, y2], ...]`: arrows for the agent's last turn,
            whose moves are `(state before, action)`; None: the last move is a cell.
        colour_and_points: `(state, player) -> (colour, [[number, x, y], ...])`: the player's
            colour in games that name colours by player, and numbers written over the drawing
            from their side; shared by the page and the game records. None: `(None, [])`.
        redraw: `(svg) -> svg`: the game's corrections to its environment's drawing of a
            state (`Env.render_svg`), on the page and in the records (backgammon: the borne-off
            counts sized to their boxes); None: drawn as is.
        draw_eagerly: draw a state (pgx's drawing) with JAX's compilation off. pgx's
            backgammon and othello drawings call `lax.cond` on the state, which compiles a new
            program for every drawing (`bench/micro.py`: backgammon 63 ms a drawing, 7.5 ms
            eagerly); drawings without such calls only pay for it (hex: 67 ms, 244 ms eagerly).
    """

    move_text: Callable[[Any, int], str] | None = None
    move_choices: Callable[[Any, list[int]], list[dict[str, Any]]] | None = None
    chance_cell: Callable[[int], list[float] | None] | None = None
    view: Callable[[Any, int], dict[str, Any]] | None = None
    turn_marks: Callable[[list[tuple[Any, int]]], list[list[float]]] | None = None
    colour_and_points: Callable[[Any, int], tuple[str | None, list[list[Any]]]] | None = None
    redraw: Callable[[str], str] | None = None
    draw_eagerly: bool = False


@dataclasses.dataclass(frozen=True)
class Judge:
    """How the quality of an agent's moves is measured in a game (`eval --accuracy`,
    `eval_accuracy`): against a solver's labels or an engine's equities.

    Attributes:
        by: who judges, for messages ("a solver", "gnubg").
        positions: `(env, num_positions, seed) -> set`: the fixed, cached positions judged.
        measure: `(env, agent, positions, key) -> {metric: value}`: the agent's figures on
            them, named as the training log names them (`eval/accuracy/...`, `eval/gnubg/...`).
        max_positions: the largest `num_positions` (judging is host work per position).
        sized: whether `num_positions` and `seed` choose the set (tic-tac-toe's is all of its
            positions, whatever they say).
        report: `(env, agent, positions, key) -> {field: value}`: what `eval --accuracy` prints
            beyond the run and the agent; None: a solver's move accuracy
            (`turbozero.arena.accuracy.solver_report`).
        log_text: `(row) -> str`: the training log's words for its metrics in a row (None when
            the row has none); None: a solver's accuracy as the log writes it.
        panels: `{panel title: {line label: metric key}}` of `plots/strength.png` for its
            metrics; empty: a solver's accuracy panel.
    """

    by: str
    positions: Callable[[Env, int, int], Any]
    measure: Callable[[Env, Agent, Any, PRNGKey], dict[str, float]]
    max_positions: int = 100_000
    sized: bool = True
    report: Callable[[Env, Agent, Any, PRNGKey], dict[str, Any]] | None = None
    log_text: Callable[[Mapping[str, float]], str | None] | None = None
    panels: Mapping[str, Mapping[str, str]] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class Engine:
    """An outside player that a game's file offers as an opponent (`eval --vs`,
    `eval_opponents`, `play --vs`), named `KIND` or `KIND:ARGUMENT` ("gnubg:1").

    The engine's module defines it once (its grammar, its help, how it is built); every game it
    plays lists it in `GameSpec.engines`, and `turbozero.arena.opponents` parses names from them.

    Attributes:
        kind: the name before the colon ("gnubg").
        form: how it is written, for the opponents' help ("gnubg:PLY").
        about: what it is and which values its argument takes, for the help ("GNU Backgammon
            at PLY 0 to 2 plies").
        build: `(env, name) -> Agent` for its full name.
        argument: `(text) -> bool`: whether the text after "KIND:" is one it takes; None: it
            takes none (written `KIND` alone).
        starts_command: its name gives a command to start (`gtp:COMMAND`): code that a run
            directory naming it would run, opened only with `--trust-run`.
    """

    kind: str
    form: str
    about: str
    build: Callable[[Env, str], Agent]
    argument: Callable[[str], bool] | None = None
    starts_command: bool = False

    def __call__(self, env: Env, name: str) -> Agent:
        return self.build(env, name)

    def accepts(self, name: str) -> bool:
        """Whether `name` is its (`KIND`, or `KIND:ARGUMENT` with an argument it takes)."""
        kind, colon, argument = name.partition(":")
        if kind != self.kind:
            return False
        if self.argument is None:
            return not colon
        return bool(colon) and self.argument(argument)


@dataclasses.dataclass(frozen=True)
class GameSpec:
    """Everything turbozero knows of one game, from its file.

    Attributes:
        name: the id (`turbozero train NAME`, `envs.make(NAME)`); pgx's id for pgx's games.
        description: one line for `turbozero envs`.
        make_env: `() -> Env`: builds the game; None: pgx's game of the same id.
        board: drawing and move names (`Board`); None: actions named by number.
        stochastic: whether a pgx game's steps draw from their key (a game of your own says so
            in its `Env`).
        chance: `() -> ChanceRules`: a pgx game's step cut at its draw (`Env.chance`); None.
        episode_stats: `() -> stats(state) -> {name: [] array}`: a game's figures beyond its
            return (`Env.episode_stats`); None.
        perfect: `(env, name) -> Agent`: a perfect player (opponent "perfect"); None.
        judge: how move quality is measured (`Judge`); None: not measured.
        engines: the outside players (`Engine`) that play this game, by kind; the opponents'
            grammar (`turbozero.arena.opponents`) reads them here.
        page: the play page's and the records' hooks (`Page`).
        draws: a game of two players whose results are win, draw or loss with draws possible:
            its value head learns the three outcomes by default (`network.value_bins`).
        afterstates: `() -> TDRules` (a two-player dice game's turns) or `() -> SoloRules` (a
            one-player game's moves and chance): the game for TD learning (`turbozero.td`);
            None.
    """

    name: str
    description: str
    make_env: Callable[[], Env] | None = None
    board: Board | None = None
    stochastic: bool = False
    chance: Callable[[], ChanceRules] | None = None
    episode_stats: Callable[[], Callable[[Any], dict[str, Array]]] | None = None
    perfect: Callable[..., Agent] | None = None
    judge: Judge | None = None
    engines: Mapping[str, Engine] = dataclasses.field(default_factory=dict)
    page: Page = Page()
    draws: bool = False
    afterstates: Callable[[], TDRules | SoloRules] | None = None


_GAMES: dict[str, GameSpec] = {}
_loaded = False
#: the game module (`load_game_module`'s reference) each game of one was registered from
_ORIGINS: dict[str, str] = {}
#: the entry points being imported now (a module's `register()` may ask for its own game)
_IMPORTING: set[str] = set()

#: the entry point group in which installed packages name their games' modules (name: the
#: game's name; value: the module, whose `register()` registers it)
ENTRY_POINTS = "turbozero.games"
#: how a game turbozero does not know is brought, said by every refusal of an unknown game
BRING_A_GAME = (
    "A game of your own comes from its file or module: turbozero train PRESET --game "
    "path/to/game.py (or --game pkg.module), recorded in the run for eval, play and --resume; "
    f"or from an installed package's {ENTRY_POINTS!r} entry point (docs/own-game.md)"
)


def register_game(spec: GameSpec) -> GameSpec:
    """Adds `spec` to the registry (`turbozero envs`, `envs.make`, the play page, the arena).

    Raises:
        ValueError: a game of that name is registered already, or the name is not a plain id.
    """
    if not isinstance(spec, GameSpec):
        raise TypeError(f"register_game takes a GameSpec, got {type(spec).__name__}")
    if not spec.name or ":" in spec.name or spec.name != spec.name.strip():
        raise ValueError(f"a game's name is a plain id without ':' or spaces, got {spec.name!r}")
    for kind, engine in spec.engines.items():
        if not isinstance(engine, Engine) or engine.kind != kind:
            raise TypeError(
                f"{spec.name}'s engines map each kind to its Engine (turbozero.gamespec.Engine), "
                f"got {kind!r}: {engine!r}"
            )
    _load_builtin()
    if spec.name in _GAMES:
        raise ValueError(f"game {spec.name!r} is registered already")
    _GAMES[spec.name] = spec
    return spec


def unregister_game(name: str) -> None:
    """Removes a game registered with `register_game` (tests, notebooks re-running a cell)."""
    _GAMES.pop(name, None)
    _ORIGINS.pop(name, None)


def _load_builtin() -> None:
    global _loaded
    if _loaded:
        return
    _loaded = True
    for module in BUILTIN:
        importlib.import_module(f"turbozero.games.{module}")


def all_games() -> dict[str, GameSpec]:
    """Every registered game by name, in the order they were registered."""
    _load_builtin()
    return dict(_GAMES)


def all_engines() -> dict[str, tuple[Engine, tuple[str, ...]]]:
    """Every engine some registered game offers, by kind: `(engine, the games it plays)`."""
    out: dict[str, tuple[Engine, tuple[str, ...]]] = {}
    for name, spec in all_games().items():
        for kind, engine in spec.engines.items():
            games = out[kind][1] if kind in out else ()
            out[kind] = (engine, (*games, name))
    return out


def game_spec(env_name: str) -> GameSpec | None:
    """The game `env_name` names (an `Env.name` or a config's `env`, `pgx:` prefix allowed), or
    None for environments with no entry (gymnax's, jumanji's).

    A name not registered yet is looked up among the installed packages' `turbozero.games`
    entry points (`ENTRY_POINTS`): the module of the one so named is imported and its
    `register()` called, as installed code is (no `--trust-run`).

    Raises:
        ValueError: such an entry point's module has no `register()`, or it registered no game
            of that name.
    """
    _load_builtin()
    name = env_name.removeprefix("pgx:")
    if name not in _GAMES and ":" not in name and name not in _IMPORTING:
        _import_entry_point(name)
    return _GAMES.get(name)


# -- games of your own: a file, a module, an installed package's entry point ------------------

_DOTTED = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")


def is_builtin_game_module(module: str) -> bool:
    """`module` is `turbozero.games` or one of its modules, spelled as dotted names only (no
    path): importing it runs only turbozero's own code."""
    return (
        isinstance(module, str)
        and _DOTTED.fullmatch(module) is not None
        and (module == "turbozero.games" or module.startswith("turbozero.games."))
    )


def game_module_reference(module: str) -> str:
    """The reference a run records for `module`: a file's absolute path, or the dotted name.

    Raises:
        ValueError: `module` is neither a path ending in `.py` nor dotted Python names.
        FileNotFoundError: the file does not exist.
    """
    if not isinstance(module, str) or not module.strip():
        raise ValueError(f"a game module is a path/to/file.py or a pkg.module, got {module!r}")
    if module.endswith(".py") or "/" in module or os.sep in module:
        path = Path(module).expanduser()
        if path.suffix != ".py":
            raise ValueError(f"a game's file ends in .py, got {module!r}")
        if not path.is_file():
            raise FileNotFoundError(f"the game file {module!r} does not exist")
        return str(path.resolve())
    if _DOTTED.fullmatch(module) is None:
        raise ValueError(
            f"a game module is a path/to/file.py or a dotted module name (pkg.module), got "
            f"{module!r}"
        )
    return module


def load_game_module(module: str) -> tuple[str, ...]:
    """Import a game's file or module and call its `register()`, which registers its
    `GameSpec`s (and presets); the games' names, in the order registered.

    Runs that train one of these games record the module (`game_module_of`), so that
    `turbozero eval`, `play`, `train --resume` and `load_agent` import it again (with
    `--trust-run`: it is code the run names). A module loaded already whose games are still
    registered is not imported or called again.

    Args:
        module: `"path/to/game.py"`, or a dotted module importable here (`"my_pkg.nim"`; the
            current directory counts, as for `python -m`, searched after `sys.path`).

    Raises:
        ValueError: `module` is not such a name, cannot be found, has no `register()`, or its
            `register()` registered no game.
        FileNotFoundError: the file does not exist.
    """
    reference = game_module_reference(module)
    _load_builtin()  # (their registrations are not the module's)
    known = tuple(name for name, origin in _ORIGINS.items() if origin == reference)
    if known:
        return known
    names = _register_from(_import_game_module(reference), reference)
    for name in names:
        _ORIGINS[name] = reference
    return names


def game_module_of(name: str) -> str | None:
    """The game module (as `load_game_module` records it: a file's absolute path, or a
    dotted name) that the game `name` was registered from; None for the built-in games, those
    of installed packages' entry points and those registered directly."""
    return _ORIGINS.get(name)


def installed_games() -> dict[str, str]:
    """The games installed packages offer (`ENTRY_POINTS`), `{name: module}`, none of them
    imported."""
    return {ep.name: ep.value for ep in importlib.metadata.entry_points(group=ENTRY_POINTS)}


def _import_game_module(reference: str) -> Any:
    """The module `reference` names (`game_module_reference`), imported once per process."""
    if not reference.endswith(".py"):
        top = reference.split(".")[0]
        if importlib.util.find_spec(top) is None and os.getcwd() not in sys.path:
            sys.path.append(os.getcwd())  # (kept: the module may import its neighbours later)
        try:
            return importlib.import_module(reference)
        except ModuleNotFoundError as err:
            if err.name is None or not (reference + ".").startswith(err.name + "."):
                raise  # (a module the game imports is missing: its own error)
            raise ValueError(
                f"the game module {reference!r} is not found on sys.path or in the current "
                f"directory: name an importable module (pkg.module) or a file (path/to/game.py)"
            ) from None
    digest = hashlib.sha256(reference.encode()).hexdigest()[:12]
    name = f"turbozero_game_{Path(reference).stem}_{digest}"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, reference)
    if spec is None or spec.loader is None:
        raise ValueError(f"the game file {reference!r} cannot be imported as Python")
    loaded = importlib.util.module_from_spec(spec)
    sys.modules[name] = loaded
    try:
        spec.loader.exec_module(loaded)
    except BaseException:
        del sys.modules[name]
        raise
    return loaded


def _register_from(module: Any, where: str) -> tuple[str, ...]:
    """Call `module.register()`; the names of the games it registered."""
    register = getattr(module, "register", None)
    if not callable(register):
        raise ValueError(
            f"the game module {where!r} has no register() function: a game's module defines "
            f"register(), which calls turbozero.gamespec.register_game (docs/own-game.md)"
        )
    before = set(_GAMES)
    register()
    names = tuple(name for name in _GAMES if name not in before)
    if not names:
        raise ValueError(
            f"the game module {where!r}'s register() registered no game (a game registered "
            f"already in this process is not registered again: unregister_game it first)"
        )
    return names


def _import_entry_point(name: str) -> None:
    """Import the game `name` from the installed package whose entry point names it."""
    for point in importlib.metadata.entry_points(group=ENTRY_POINTS, name=name):
        _IMPORTING.add(name)
        try:
            _register_from(point.load(), f"{point.value} ({ENTRY_POINTS} entry point {name!r})")
        finally:
            _IMPORTING.discard(name)
        if name not in _GAMES:
            raise ValueError(
                f"the {ENTRY_POINTS!r} entry point {name!r} names {point.value!r}, whose "
                f"register() did not register a game named {name!r}"
            )
        return


# -- drawing helpers for the game files -------------------------------------------------------


def grid_cells(
    rows: int, cols: int, *, origin: float, cell: float, column_actions: bool = False
) -> list[Cell]:
    """Cell centres of a `rows` x `cols` grid of `cell`-sized squares drawn from `origin`
    (`column_actions`: every cell of a column plays the column, as in Connect Four)."""
    return [
        (
            col if column_actions else row * cols + col,
            origin + (col + 0.5) * cell,
            origin + (row + 0.5) * cell,
            cell / 2,
        )
        for row in range(rows)
        for col in range(cols)
    ]


def square_label(cols: int, special: dict[int, str] | None = None) -> Callable[[int], str]:
    """Names of a row-major board's actions: columns a, b, ...; row 1 at the top; `special`
    names the others ("pass")."""

    def label(action: int) -> str:
        if special and action in special:
            return special[action]
        return f"{LETTERS[action % cols]}{action // cols + 1}"

    return label


def go_label(n: int) -> Callable[[int], str]:
    """Move names on an `n` x `n` board: "A9" top left on 9x9, "pass" for action N*N (the GTP
    vertex of the move)."""

    def label(action: int) -> str:
        return "pass" if action == n * n else f"{GO_LETTERS[action % n]}{n - action // n}"

    return label


# -- generic lookups -------------------------------------------------------------------------


def _board(env_name: str) -> Board | None:
    spec = game_spec(env_name)
    return None if spec is None else spec.board


def board_cells(env_name: str) -> list[Cell] | None:
    """Where each board action lies on the drawing: ``[(action, x, y, radius), ...]``.

    A click within `radius` of a centre plays that action (Connect Four: any cell of a column
    plays the column). None for games whose moves do not map to squares; actions not listed
    (pass, swap) are offered as buttons.
    """
    board = _board(env_name)
    return None if board is None or board.cells is None else board.cells()


def coordinate_labels(env_name: str) -> list[list[Any]]:
    """`[[text, x, y], ...]`: the names of the board's columns above its top row and of its rows
    left of each row's first cell, as its moves name them (tic-tac-toe's a..c and 1..3, Go's
    A..J and 9..1, Connect Four's columns 1..7), in the margin the drawing leaves; [] for other
    games."""
    board = _board(env_name)
    if board is None or board.cells is None or not board.coordinates:
        return []
    cells = board.cells()
    top = min(y for _, _, y, _ in cells)
    gap_x = min(x - r for _, x, _, r in cells) / 2  # half the margin pgx leaves
    gap_y = min(y - r for _, _, y, r in cells) / 2
    out: list[list[Any]] = []
    seen_columns: set[str] = set()
    for action, x, y, r in cells:
        name = board.label(action)
        column = name.removeprefix("column ").rstrip("0123456789") or name.removeprefix("column ")
        if y == top and column not in seen_columns:
            seen_columns.add(column)
            out.append([column, x, y - r - gap_y])
    if all(name.startswith("column ") for name in (board.label(c[0]) for c in cells)):
        return out  # Connect Four: a move is a column, rows have no names
    rows: dict[float, tuple[float, float, int]] = {}
    for action, x, y, r in cells:
        if y not in rows or x < rows[y][0]:
            rows[y] = (x, r, action)
    for y, (x, r, action) in sorted(rows.items()):
        out.append([board.label(action).lstrip(LETTERS + GO_LETTERS), x - r - gap_x, y])
    return out


def player_marks(env_name: str) -> tuple[str, str] | None:
    """How the first and the second player's marks are drawn ("X", "O"), or None."""
    board = _board(env_name)
    return None if board is None else board.marks


def move_label(env_name: str, action: int) -> str:
    """A short human name for `action` in `env_name` (columns a, b, ...; row 1 at the top)."""
    board = _board(env_name)
    return f"action {action}" if board is None else board.label(action)


def outcome_label(env_name: str, outcome: int) -> str:
    """A short human name for a chance outcome of `env_name` ("a 2 at c1", "rolled 3-5")."""
    board = _board(env_name)
    if board is None or board.outcome_label is None:
        return f"outcome {outcome}"
    return board.outcome_label(outcome)


def colour_and_points(env_name: str, state: Any, player: int) -> tuple[str | None, list[list[Any]]]:
    """`player`'s colour in games that name colours by player, and the numbers written over the
    drawing from that player's side (`Page.colour_and_points`); `(None, [])` for other games."""
    spec = game_spec(env_name)
    if spec is None or spec.page.colour_and_points is None:
        return None, []
    return spec.page.colour_and_points(state, player)


def winning_line(env_name: str, board: list[int]) -> list[int]:
    """The cells (row-major indices, as in `board_cells`) of a line that won, or [] if none."""
    info = _board(env_name)
    if info is None or info.line is None:
        return []
    rows, cols, k = info.line
    for r in range(rows):
        for c in range(cols):
            mark = board[r * cols + c]
            if mark == -1:
                continue
            for dr, dc in ((0, 1), (1, 0), (1, 1), (1, -1)):
                cells = [(r + i * dr, c + i * dc) for i in range(k)]
                if all(
                    0 <= rr < rows and 0 <= cc < cols and board[rr * cols + cc] == mark
                    for rr, cc in cells
                ):
                    return [rr * cols + cc for rr, cc in cells]
    return []
