"""A web page to play against a trained agent (`turbozero play RUN_DIR`).

Sits on top of the library, like the CLI: nothing in the library imports it.
"""

from turbozero.play.server import (
    Game,
    IllegalMoveError,
    board_cells,
    make_server,
    move_label,
    serve,
)

__all__ = ["Game", "IllegalMoveError", "board_cells", "make_server", "move_label", "serve"]
