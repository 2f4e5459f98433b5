"""The game registry's old place, kept for one release: it moved to `turbozero.gamespec`, the
bottom layer every other one may import (`turbozero.games` keeps its names too)."""

from turbozero.gamespec import (  # noqa: F401
    Board,
    Cell,
    Engine,
    GameSpec,
    Judge,
    Page,
    all_games,
    board_cells,
    game_spec,
    grid_cells,
    move_label,
    outcome_label,
    register_game,
    square_label,
    unregister_game,
    winning_line,
)
