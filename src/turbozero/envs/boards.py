"""What turbozero knows of each built-in game beyond its rules, one entry per game (`BOARDS`):
how it is drawn and its moves and chance outcomes named, its winning lines, its symmetries, and
whether it has a perfect player and solver-labelled positions.

Plain data and functions (no JAX, nothing else of turbozero), read by the play page (clicks to
moves), the game records and the CLI (move names), the trainer (augmentations) and the arena
(perfect players, move accuracy). Coordinates are pgx's SVG user units (`Env.render_svg` at
scale 1).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

#: one clickable cell: (action, x, y, radius)
Cell = tuple[int, float, float, float]

_LETTERS = "abcdefghijklmnopqrstuvwxyz"
_GO_LETTERS = "ABCDEFGHJKLMNOPQRST"  # Go skips I; rows count up from the bottom


def _grid(
    rows: int, cols: int, *, origin: float, cell: float, column_actions: bool = False
) -> list[Cell]:
    """Cell centres of a `rows` x `cols` grid of `cell`-sized squares drawn from `origin`."""
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


def _go_cells(n: int) -> list[Cell]:
    """Stones on intersections, 25 apart, the first at (25, 25); action N*N is pass."""
    return [(r * n + c, 25.0 + 25.0 * c, 25.0 + 25.0 * r, 12.5) for r in range(n) for c in range(n)]


def _hex_cells(n: int = 11, side: float = 15.0) -> list[Cell]:
    """Hexagons of side 15 in a rhombus from (60, 45); action 121 is swap."""
    return [
        (
            r * n + c,
            60.0 + (c + r / 2) * side * math.sqrt(3),
            45.0 + r * side * 1.5,
            side * math.sqrt(3) / 2,
        )
        for r in range(n)
        for c in range(n)
    ]


def _square_label(cols: int, special: dict[int, str] | None = None) -> Callable[[int], str]:
    def label(action: int) -> str:
        if special and action in special:
            return special[action]
        return f"{_LETTERS[action % cols]}{action // cols + 1}"

    return label


def _go_label(n: int) -> Callable[[int], str]:
    def label(action: int) -> str:
        return "pass" if action == n * n else f"{_GO_LETTERS[action % n]}{n - action // n}"

    return label


#: pgx 2048's actions 0..3 (the board turned so that the move slides left, then turned back)
DIRECTIONS = ("left", "up", "right", "down")
BAR, OFF = 25, 0  # backgammon's bar and off as point numbers, as players number them
COLOURS = ("black", "white")  # pgx backgammon's `_turn`: 0 black, 1 white (drawn so)
# pgx's drawing of backgammon (`pgx/_src/dwg/`), in its SVG user units: a 25-unit grid drawn from
# (12.5, 12.5), the top points' tips at 6 grid units and the bottom points' at 8 (the point
# numbers go in the band between them)
GRID, GRID_ORIGIN = 25.0, 12.5


def _go_board(n: int) -> Board:
    """pgx's Go on an `n` x `n` board: stones on intersections, A..T without I, black first."""
    return Board(
        cells=lambda: _go_cells(n),
        label=_go_label(n),
        symmetry=("square", n),
        marks=("black", "white"),
        coordinates=True,
    )


def _direction_label(action: int) -> str:
    return DIRECTIONS[action] if 0 <= action < len(DIRECTIONS) else f"action {action}"


def _tile_label(outcome: int) -> str:
    """2048's chance outcome `16 * is_four + cell` named as the tile and its cell ("a 2 at c1")."""
    cell = outcome % 16
    return f"a {4 if outcome // 16 else 2} at {_LETTERS[cell % 4]}{cell // 4 + 1}"


def _dice_label(outcome: int) -> str:
    """Backgammon's chance outcome `6 * die0 + die1` (0..5 for 1..6) named as the roll."""
    return f"rolled {outcome // 6 + 1}-{outcome % 6 + 1}"


def backgammon_move(action: int) -> tuple[int, int, int] | None:
    """`(from, to, die)` of pgx backgammon's `action = 6 * source + die_index`, in points
    numbered from the mover's side (24 down to 1 into the home board; `BAR` 25, `OFF` 0), or
    None for the no-op (sources 0), legal only when no checker can move.

    pgx keeps the board from the mover's side: index 0 is the 24-point and 23 the 1-point;
    source 1 is the bar, sources 2..25 the indices 0..23.
    """
    source, die = action // 6, action % 6 + 1
    if source == 0:
        return None
    start = BAR if source == 1 else 24 - (source - 2)
    return start, max(start - die, OFF), die


def backgammon_label(action: int, board: Sequence[int] | None = None) -> str:
    """A backgammon move as players write it, with its die: "13/8 (die 5)", "bar/22 (die 3)",
    "6/off (die 6)", "no move (pass)"; "13/8*" when `board` (pgx's `_board`, from the mover's
    side) shows the move hits a lone opposing checker."""
    move = backgammon_move(action)
    if move is None:
        return "no move (pass)"
    start, end, die = move
    hit = board is not None and end != OFF and int(board[24 - end]) == -1
    where = f"{'bar' if start == BAR else start}/{'off' if end == OFF else end}"
    return f"{where}{'*' if hit else ''} (die {die})"


@dataclasses.dataclass(frozen=True)
class Board:
    """What turbozero knows of one built-in game beyond its rules.

    Attributes:
        cells: where each action lies on pgx's drawing (None: moves are not squares).
        label: a short human name of an action.
        outcome_label: a short human name of a chance outcome (`Env.chance`), for games with
            chance (None: none).
        line: `(rows, columns, k)` for games won by k marks in a row (the winning line drawn).
        symmetry: `("square", side)` (the 8 symmetries of a square board) or
            `("horizontal", width)` (a mirror image), for augmentation; None: none used.
        perfect: whether the arena has a perfect player (`turbozero.arena.perfect_agent`).
        solver_extra: the pip extra that player needs (None: none).
        solved: whether solver-labelled positions exist (`turbozero.arena.accuracy`).
        marks: what the first and the second player's marks look like on pgx's drawing
            (`_x.color` 0 and 1), so the play page can say which are the human's; None: not said.
        coordinates: whether the page writes the columns' and rows' names around the board (as
            its moves are named: a1..c3, A9..J1, columns 1..7).
    """

    cells: Callable[[], list[Cell]] | None
    label: Callable[[int], str]
    outcome_label: Callable[[int], str] | None = None
    line: tuple[int, int, int] | None = None
    symmetry: tuple[str, int] | None = None
    perfect: bool = False
    solver_extra: str | None = None
    solved: bool = False
    marks: tuple[str, str] | None = None
    coordinates: bool = False


#: one entry per built-in game that has more than its rules here; adding a game is one entry
BOARDS: dict[str, Board] = {
    "tic_tac_toe": Board(  # GRID_SIZE 60, drawn from (30, 30)
        cells=lambda: _grid(3, 3, origin=30.0, cell=60.0),
        label=_square_label(3),
        line=(3, 3, 3),
        symmetry=("square", 3),
        perfect=True,
        solved=True,
        marks=("X", "O"),
        coordinates=True,
    ),
    "connect_four": Board(  # GRID_SIZE 35, 6 rows x 7 columns from (17.5, 17.5)
        cells=lambda: _grid(6, 7, origin=17.5, cell=35.0, column_actions=True),
        label=lambda action: f"column {action + 1}",
        line=(6, 7, 4),
        symmetry=("horizontal", 7),
        perfect=True,
        solver_extra="solvers",
        solved=True,
        marks=("black", "white"),
        coordinates=True,
    ),
    "othello": Board(  # GRID_SIZE 30, 8x8 from (15, 15); action 64 is pass
        cells=lambda: _grid(8, 8, origin=15.0, cell=30.0),
        label=_square_label(8, {64: "pass"}),
        symmetry=("square", 8),
        coordinates=True,
    ),
    "go_9x9": _go_board(9),
    "go_19x19": _go_board(19),
    "hex": Board(cells=_hex_cells, label=_square_label(11, {121: "swap"}), coordinates=True),
    "2048": Board(cells=None, label=_direction_label, outcome_label=_tile_label),
    "backgammon": Board(cells=None, label=backgammon_label, outcome_label=_dice_label),
}


def colour_and_points(env_name: str, state: Any, player: int) -> tuple[str | None, list[list[Any]]]:
    """`player`'s colour in games that name colours by player (backgammon: pgx's `_turn` is the
    mover's), and the point numbers written over the drawing from that player's side; `(None,
    [])` for other games. Shared by the play page and the game records."""
    if env_name != "backgammon":
        return None, []
    mover_colour = int(np.asarray(state._turn))  # pgx keeps the board from the mover's side
    colour = mover_colour if int(state.current_player) == player else 1 - mover_colour
    return COLOURS[colour], point_numbers(black=colour == 0)


def point_numbers(*, black: bool) -> list[list[Any]]:
    """`[[number, x, y], ...]`: each backgammon point's number for the black or white player,
    where pgx draws that point's checkers (black's 24-point is white's 1-point)."""
    out: list[list[Any]] = []
    for index in range(24):  # pgx's drawn board: black's side, black moving 0 -> 23
        if index < 6:
            column, row = 12.5 - index, 7.6
        elif index < 12:
            column, row = 11.5 - index, 7.6
        elif index < 18:
            column, row = index - 11.5, 6.4
        else:
            column, row = index - 10.5, 6.4
        number = 24 - index if black else index + 1
        out.append([str(number), GRID_ORIGIN + column * GRID, GRID_ORIGIN + row * GRID])
    return out


def board_cells(env_name: str) -> list[Cell] | None:
    """Where each board action lies on pgx's drawing: ``[(action, x, y, radius), ...]``.

    A click within `radius` of a centre plays that action (Connect Four: any cell of a column
    plays the column). None for games whose moves do not map to squares; actions not listed
    (pass, swap) are offered as buttons.
    """
    board = BOARDS.get(env_name)
    return None if board is None or board.cells is None else board.cells()


def coordinate_labels(env_name: str) -> list[list[Any]]:
    """`[[text, x, y], ...]`: the names of the board's columns above its top row and of its rows
    left of each row's first cell, as its moves name them (tic-tac-toe's a..c and 1..3, Go's
    A..J and 9..1, Connect Four's columns 1..7), in the margin pgx leaves; [] for other games."""
    board = BOARDS.get(env_name)
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
        out.append([board.label(action).lstrip(_LETTERS + _GO_LETTERS), x - r - gap_x, y])
    return out


def player_marks(env_name: str) -> tuple[str, str] | None:
    """How the first and the second player's marks are drawn ("X", "O"), or None."""
    board = BOARDS.get(env_name)
    return None if board is None else board.marks


def move_label(env_name: str, action: int) -> str:
    """A short human name for `action` in `env_name` (columns a, b, ...; row 1 at the top)."""
    board = BOARDS.get(env_name)
    return f"action {action}" if board is None else board.label(action)


def outcome_label(env_name: str, outcome: int) -> str:
    """A short human name for a chance outcome of `env_name` ("a 2 at c1", "rolled 3-5")."""
    board = BOARDS.get(env_name)
    if board is None or board.outcome_label is None:
        return f"outcome {outcome}"
    return board.outcome_label(outcome)


def winning_line(env_name: str, board: list[int]) -> list[int]:
    """The cells (row-major indices, as in `board_cells`) of a line that won, or [] if none."""
    info = BOARDS.get(env_name)
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
