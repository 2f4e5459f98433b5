"""What the play page shows of the games with chance beyond pgx's drawing.

2048: the tiles as numbers, the tile that fell marked on the drawing, the arrow keys. Backgammon:
the dice and whose they are, the points numbered from the human's side over pgx's drawing (which
numbers none), and the moves as a list written the way players write them, since its 156 action
ids (`6 * source + die`) are no way for a person to move. Host-side reads of pgx states (numpy
or device arrays), keyed by the game's name; other games get None and empty lists.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from turbozero.envs.boards import (
    BAR,
    GRID,
    GRID_ORIGIN,
    OFF,
    backgammon_label,
    backgammon_move,
    colour_and_points,
    coordinate_labels,
    move_label,
    player_marks,
    point_numbers,
)

#: 2048's arrow keys (browser `KeyboardEvent.key`) and the pgx actions they play
KEYS_2048 = {"ArrowLeft": 0, "ArrowUp": 1, "ArrowRight": 2, "ArrowDown": 3}

# pgx's drawing of 2048 (`pgx/_src/dwg/`), in its SVG user units: 50-unit cells from (25, 25)
_TILE, _TILE_ORIGIN = 50.0, 25.0


def move_text(env_name: str, state: Any, action: int) -> str:
    """`action`'s name in the position `state` (backgammon marks a hit with "*")."""
    if env_name == "backgammon":
        return backgammon_label(action, np.asarray(state._board).tolist())
    return move_label(env_name, action)


def move_choices(env_name: str, state: Any, legal: list[int]) -> list[dict[str, Any]]:
    """The moves the human chooses from: `[{"action", "label"}, ...]`, one per legal action.

    Backgammon's are sorted from the back of the board (the bar first, then the highest point,
    the larger die first) as a player reads them; pgx marks its six no-op ids legal together,
    when no checker can move, and they are one choice: "no move (pass)" (action 0).
    """
    if env_name != "backgammon":
        return [{"action": a, "label": move_label(env_name, a)} for a in legal]
    moves = sorted((a for a in legal if backgammon_move(a) is not None), key=_back_first)
    choices = [{"action": a, "label": move_text(env_name, state, a)} for a in moves]
    if len(moves) < len(legal):  # the no-op
        choices.append({"action": min(legal), "label": backgammon_label(min(legal))})
    return choices


def _back_first(action: int) -> tuple[int, int]:
    """Sort key of backgammon moves: from the bar and the highest point first, larger die first."""
    start, _, die = backgammon_move(action) or (0, 0, 0)
    return -start, -die


def chance_cell(env_name: str, outcome: int) -> list[float] | None:
    """`[x, y, r]` on pgx's drawing of the cell a chance outcome filled (2048's new tile)."""
    if env_name != "2048":
        return None
    cell = outcome % 16
    x = _TILE_ORIGIN + (cell % 4 + 0.5) * _TILE
    y = _TILE_ORIGIN + (cell // 4 + 0.5) * _TILE
    return [x, y, _TILE / 2]


def game_view(env_name: str, state: Any, *, human_player: int) -> dict[str, Any]:
    """The game's own fields of the page's snapshot (each None or empty for other games).

    Returns:
        tiles: 2048's board as tile values, row by row (0: empty).
        dice: backgammon's `{"rolled": [a, b], "left": [...], "player": "human" | "agent"}`:
            the dice of the player to move (1 to 6) and those still to play.
        colour: the human's backgammon colour ("black" or "white"), as pgx draws it.
        colour: the human's colour or mark where the game says how they are drawn ("X" or "O"
            in tic-tac-toe, "black" or "white" in Go, Connect Four and backgammon).
        board_labels: `[[text, x, y], ...]` written over the drawing: the columns' and rows'
            names as the moves name them; backgammon's point numbers from the human's side
            (their 24-point to their 1-point) and whose borne-off checkers each box counts.
        keys: keyboard keys (`KeyboardEvent.key`) to actions: 2048's arrows.
        key_moves: `[{"key", "action", "label"}, ...]`: a button for each key, always shown
            (the page disables those the position makes illegal, so the row does not shift).
        history_note: a line under the list of moves (backgammon: each side's numbering).
    """
    view: dict[str, Any] = {
        "tiles": None,
        "dice": None,
        "colour": None,
        "board_labels": coordinate_labels(env_name),
        "keys": None,
        "key_moves": None,
        "history_note": None,
    }
    marks = player_marks(env_name)
    mover_mark = getattr(getattr(state, "_x", None), "color", None)
    if marks is not None and mover_mark is not None:
        mover_mark = int(np.asarray(mover_mark))  # the mark of the player to move
        mine = mover_mark if int(state.current_player) == human_player else 1 - mover_mark
        view["colour"] = marks[mine]
    if env_name == "2048":
        exponents = np.asarray(state._board).reshape(4, 4)
        view["tiles"] = [[int(2**e) if e else 0 for e in row] for row in exponents]
        view["keys"] = dict(KEYS_2048)
        view["key_moves"] = [
            {"key": key, "action": action, "label": move_label(env_name, action)}
            for key, action in KEYS_2048.items()
        ]
    elif env_name == "backgammon":
        mover = int(state.current_player)
        colour, numbers = colour_and_points(env_name, state, human_player)
        left = sorted(
            (int(d) + 1 for d in np.asarray(state._playable_dice) if d >= 0), reverse=True
        )
        view["dice"] = {
            "rolled": [int(d) + 1 for d in np.asarray(state._dice)],
            "left": left,
            "player": "human" if mover == human_player else "agent",
        }
        view["colour"] = colour
        view["board_labels"] = numbers + off_labels(human_black=colour == "black")
        view["history_note"] = (
            "Each side's moves are numbered from its own side, as players write them: "
            "the agent's 24-point is your 1-point."
        )
    return view


def off_labels(*, human_black: bool) -> list[list[Any]]:
    """`[[text, x, y], ...]`: whose borne-off checkers each of pgx's two "off" boxes counts
    (black's at the top right, white's at the bottom right), written beside the box."""
    x = GRID_ORIGIN + 15 * GRID
    black = "your checkers off" if human_black else "the agent's off"
    white = "the agent's off" if human_black else "your checkers off"
    return [[black, x, GRID_ORIGIN + 2.5 * GRID], [white, x, GRID_ORIGIN + 11.5 * GRID]]


def agent_turn_marks(env_name: str, moves: list[tuple[Any, int]]) -> list[list[float]]:
    """Arrows `[[x1, y1, x2, y2], ...]` for the agent's last turn, whose moves `moves` are
    `(state before, action)` in order; backgammon's (a turn is up to four checker moves that the
    board cannot show as a cell), [] for other games, whose last move is a cell."""
    if env_name != "backgammon":
        return []
    arrows = []
    for before, action in moves:
        marks = backgammon_marks(action, mover_black=int(np.asarray(before._turn)) == 0)
        if marks is not None:
            arrows.append(marks)
    return arrows


def backgammon_marks(action: int, *, mover_black: bool) -> list[float] | None:
    """`[x1, y1, x2, y2]` on pgx's drawing from where to where a backgammon move took a checker
    (the point numbers' places, the mover's bar, its "off" box), or None for a pass."""
    move = backgammon_move(action)
    if move is None:
        return None
    numbers = {int(n): (x, y) for n, x, y in point_numbers(black=mover_black)}
    bar = (GRID_ORIGIN + 6.5 * GRID, GRID_ORIGIN + (7.5 if mover_black else 6.5) * GRID)
    off = (GRID_ORIGIN + 15 * GRID, GRID_ORIGIN + (1 if mover_black else 13) * GRID)
    start, end, _ = move
    x1, y1 = bar if start == BAR else numbers[start]
    x2, y2 = off if end == OFF else numbers[end]
    return [x1, y1, x2, y2]
