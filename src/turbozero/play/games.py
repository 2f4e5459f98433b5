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

from turbozero.envs.boards import backgammon_label, backgammon_move, move_label

#: 2048's arrow keys (browser `KeyboardEvent.key`) and the pgx actions they play
KEYS_2048 = {"ArrowLeft": 0, "ArrowUp": 1, "ArrowRight": 2, "ArrowDown": 3}
COLOURS = ("black", "white")  # pgx backgammon's `_turn`: 0 black, 1 white (drawn so)

# pgx's drawings (`pgx/_src/dwg/`), in their SVG user units: 2048's 50-unit cells drawn from
# (25, 25); backgammon's 25-unit grid drawn from (12.5, 12.5), the top points' tips at 6 grid
# units and the bottom points' at 8 (the numbers go in the band between them)
_TILE, _TILE_ORIGIN = 50.0, 25.0
_GRID, _GRID_ORIGIN = 25.0, 12.5


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
        board_labels: `[[text, x, y], ...]` written over the drawing: backgammon's point
            numbers from the human's side (their 24-point to their 1-point).
        keys: keyboard keys (`KeyboardEvent.key`) to actions: 2048's arrows.
    """
    view: dict[str, Any] = {
        "tiles": None,
        "dice": None,
        "colour": None,
        "board_labels": [],
        "keys": None,
    }
    if env_name == "2048":
        exponents = np.asarray(state._board).reshape(4, 4)
        view["tiles"] = [[int(2**e) if e else 0 for e in row] for row in exponents]
        view["keys"] = dict(KEYS_2048)
    elif env_name == "backgammon":
        mover = int(state.current_player)
        mover_colour = int(state._turn)  # pgx keeps the board from the mover's side
        human_colour = mover_colour if mover == human_player else 1 - mover_colour
        left = sorted(
            (int(d) + 1 for d in np.asarray(state._playable_dice) if d >= 0), reverse=True
        )
        view["dice"] = {
            "rolled": [int(d) + 1 for d in np.asarray(state._dice)],
            "left": left,
            "player": "human" if mover == human_player else "agent",
        }
        view["colour"] = COLOURS[human_colour]
        view["board_labels"] = point_numbers(black=human_colour == 0)
    return view


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
        out.append([str(number), _GRID_ORIGIN + column * _GRID, _GRID_ORIGIN + row * _GRID])
    return out
