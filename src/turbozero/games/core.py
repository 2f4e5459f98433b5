"""What a game is to turbozero beyond its rules (`GameSpec`), and the registry that finds one by
name.

Each built-in game has one file in `turbozero.games` holding all of it: its environment (pgx's,
or `make_env`), its one-line description, how it is drawn and its moves named (`Board`), its
chance split, its symmetries and winning lines, its perfect player and labelled positions, the
engines that play it, what the play page shows of it (`Page`) and its presets. Generic code (the
arena, the play page, the CLI, the trainer, the config) looks a game up here and never tests its
name. A game of your own is one file too: build a `GameSpec` and `register_game` it.

Coordinates are pgx's SVG user units (`Env.render_svg` at scale 1).
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from turbozero.arena.agents import Agent
    from turbozero.envs.core import Env
    from turbozero.envs.pgx import ChanceRules
    from turbozero.td.rules import TDRules
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
    """

    move_text: Callable[[Any, int], str] | None = None
    move_choices: Callable[[Any, list[int]], list[dict[str, Any]]] | None = None
    chance_cell: Callable[[int], list[float] | None] | None = None
    view: Callable[[Any, int], dict[str, Any]] | None = None
    turn_marks: Callable[[list[tuple[Any, int]]], list[list[float]]] | None = None
    colour_and_points: Callable[[Any, int], tuple[str | None, list[list[Any]]]] | None = None


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
    """

    by: str
    positions: Callable[[Env, int, int], Any]
    measure: Callable[[Env, Agent, Any, PRNGKey], dict[str, float]]
    max_positions: int = 100_000
    sized: bool = True


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
        engines: opponent kinds (`turbozero.arena.opponents`) that play this game, each with
            `(env, spec) -> Agent` building it from its full name ("gnubg:1").
        page: the play page's and the records' hooks (`Page`).
        draws: a game of two players whose results are win, draw or loss with draws possible:
            its value head learns the three outcomes by default (`network.value_bins`).
        afterstates: `() -> TDRules`: the game's turns for TD learning (`turbozero.td`); None.
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
    engines: Mapping[str, Callable[[Env, str], Agent]] = dataclasses.field(default_factory=dict)
    page: Page = Page()
    draws: bool = False
    afterstates: Callable[[], TDRules] | None = None


_GAMES: dict[str, GameSpec] = {}
_loaded = False


def register_game(spec: GameSpec) -> GameSpec:
    """Adds `spec` to the registry (`turbozero envs`, `envs.make`, the play page, the arena).

    Raises:
        ValueError: a game of that name is registered already, or the name is not a plain id.
    """
    if not isinstance(spec, GameSpec):
        raise TypeError(f"register_game takes a GameSpec, got {type(spec).__name__}")
    if not spec.name or ":" in spec.name or spec.name != spec.name.strip():
        raise ValueError(f"a game's name is a plain id without ':' or spaces, got {spec.name!r}")
    _load_builtin()
    if spec.name in _GAMES:
        raise ValueError(f"game {spec.name!r} is registered already")
    _GAMES[spec.name] = spec
    return spec


def unregister_game(name: str) -> None:
    """Removes a game registered with `register_game` (tests, notebooks re-running a cell)."""
    _GAMES.pop(name, None)


def _load_builtin() -> None:
    global _loaded
    if _loaded:
        return
    _loaded = True
    for module in BUILTIN:
        importlib.import_module(f"turbozero.games.{module}")


def solver_measure(env: Env, agent: Agent, positions: Any, key: PRNGKey) -> dict[str, float]:
    """`Judge.measure` of the games a solver labels (`turbozero.arena.accuracy.solver_metrics`,
    imported when first measured)."""
    from turbozero.arena.accuracy import solver_metrics

    return solver_metrics(env, agent, positions, key)


def all_games() -> dict[str, GameSpec]:
    """Every registered game by name, in the order they were registered."""
    _load_builtin()
    return dict(_GAMES)


def game_spec(env_name: str) -> GameSpec | None:
    """The game `env_name` names (an `Env.name` or a config's `env`, `pgx:` prefix allowed), or
    None for environments with no entry (gymnax's, jumanji's)."""
    _load_builtin()
    return _GAMES.get(env_name.removeprefix("pgx:"))


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
