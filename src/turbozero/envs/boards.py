"""How each built-in board game is drawn and how its moves are named: one place per game.

Plain data and functions (no JAX, nothing else of turbozero): the play page maps clicks to moves
with `board_cells`, and the game records, the play page and the CLI name moves with `move_label`.
Coordinates are pgx's SVG user units (`Env.render_svg` at scale 1).
"""

from __future__ import annotations

import math
import re

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


def _go_size(env_name: str) -> int | None:
    m = re.fullmatch(r"go_(\d+)x\1", env_name)
    return int(m.group(1)) if m else None


def board_cells(env_name: str) -> list[Cell] | None:
    """Where each board action lies on pgx's drawing: ``[(action, x, y, radius), ...]``.

    A click within `radius` of a centre plays that action (Connect Four: any cell of a column
    plays the column). None for games whose moves do not map to squares; actions not listed
    (pass, swap) are offered as buttons.
    """
    if env_name == "tic_tac_toe":  # GRID_SIZE 60, drawn from (30, 30)
        return _grid(3, 3, origin=30.0, cell=60.0)
    if env_name == "connect_four":  # GRID_SIZE 35, 6 rows x 7 columns from (17.5, 17.5)
        return _grid(6, 7, origin=17.5, cell=35.0, column_actions=True)
    if env_name == "othello":  # GRID_SIZE 30, 8x8 from (15, 15); action 64 is pass
        return _grid(8, 8, origin=15.0, cell=30.0)
    n = _go_size(env_name)
    if n is not None:  # stones on intersections, 25 apart, the first at (25, 25); N*N is pass
        return [
            (r * n + c, 25.0 + 25.0 * c, 25.0 + 25.0 * r, 12.5) for r in range(n) for c in range(n)
        ]
    if env_name == "hex":  # 11x11 hexagons of side 15 in a rhombus from (60, 45); 121 is swap
        n, side = 11, 15.0
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
    return None


def move_label(env_name: str, action: int) -> str:
    """A short human name for `action` in `env_name` (columns a, b, ...; row 1 at the top)."""
    if env_name == "tic_tac_toe":
        return f"{_LETTERS[action % 3]}{action // 3 + 1}"
    if env_name == "connect_four":
        return f"column {action + 1}"
    if env_name == "othello":
        return "pass" if action == 64 else f"{_LETTERS[action % 8]}{action // 8 + 1}"
    n = _go_size(env_name)
    if n is not None:
        return "pass" if action == n * n else f"{_GO_LETTERS[action % n]}{n - action // n}"
    if env_name == "hex":
        return "swap" if action == 121 else f"{_LETTERS[action % 11]}{action // 11 + 1}"
    return f"action {action}"


#: games won by a row of marks: (rows, columns, marks in a row); boards are row-major, -1 empty
_LINE_GAMES = {"tic_tac_toe": (3, 3, 3), "connect_four": (6, 7, 4)}


def winning_line(env_name: str, board: list[int]) -> list[int]:
    """The cells (row-major indices, as in `board_cells`) of a line that won, or [] if none."""
    if env_name not in _LINE_GAMES:
        return []
    rows, cols, k = _LINE_GAMES[env_name]
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
