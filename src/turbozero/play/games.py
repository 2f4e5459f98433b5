"""What the play page shows of a game beyond its drawing, from the game's file (`Page`).

Host-side reads of states (numpy or device arrays), keyed by the game's name: each function asks
the game's `turbozero.games.Page` hook and falls back to what every game has (its move names,
its coordinates, its players' marks); games without an entry get None and empty lists.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from turbozero.gamespec import coordinate_labels, game_spec, move_label, player_marks


def move_text(env_name: str, state: Any, action: int) -> str:
    """`action`'s name in the position `state` (backgammon marks a hit with "*")."""
    spec = game_spec(env_name)
    if spec is not None and spec.page.move_text is not None:
        return spec.page.move_text(state, action)
    return move_label(env_name, action)


def move_choices(env_name: str, state: Any, legal: list[int]) -> list[dict[str, Any]]:
    """The moves the human chooses from: `[{"action", "label"}, ...]`, one per legal action (in
    the order the game's file reads them: backgammon's from the back of the board)."""
    spec = game_spec(env_name)
    if spec is not None and spec.page.move_choices is not None:
        return spec.page.move_choices(state, legal)
    return [{"action": a, "label": move_label(env_name, a)} for a in legal]


def chance_cell(env_name: str, outcome: int) -> list[float] | None:
    """`[x, y, r]` on the drawing of the cell a chance outcome filled (2048's new tile), or
    None."""
    spec = game_spec(env_name)
    if spec is None or spec.page.chance_cell is None:
        return None
    return spec.page.chance_cell(outcome)


def game_view(env_name: str, state: Any, *, human_player: int) -> dict[str, Any]:
    """The game's own fields of the page's snapshot (each None or empty where the game has none;
    its file's `Page.view` sets them).

    Returns:
        tiles: 2048's board as tile values, row by row (0: empty).
        dice: backgammon's `{"rolled": [a, b], "left": [...], "player": "human" | "agent"}`:
            the dice of the player to move (1 to 6) and those still to play.
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
    spec = game_spec(env_name)
    if spec is not None and spec.page.view is not None:
        own = spec.page.view(state, human_player)
        unknown = set(own) - set(view)
        if unknown:
            raise ValueError(f"{env_name!r}'s Page.view sets unknown fields {sorted(unknown)}")
        view.update(own)
    return view


def agent_turn_marks(env_name: str, moves: list[tuple[Any, int]]) -> list[list[float]]:
    """Arrows `[[x1, y1, x2, y2], ...]` for the agent's last turn, whose moves `moves` are
    `(state before, action)` in order, where the game's file draws them (backgammon's turn is up
    to four checker moves); [] for other games, whose last move is a cell."""
    spec = game_spec(env_name)
    if spec is None or spec.page.turn_marks is None:
        return []
    return spec.page.turn_marks(moves)
