"""A web page to play against a trained agent (`turbozero play RUN_DIR`) or an engine
(`turbozero play --engine gnubg:0 --game backgammon`).

`session` keeps the game (position, moves, the agent's replies); `server` serves it to the
browser. Sits on top of the library, like the CLI: nothing in the library imports it.
"""

from turbozero.gamespec import board_cells, move_label
from turbozero.play.server import make_app, make_server, serve, url_of
from turbozero.play.session import EngineSide, Game, IllegalMoveError, engine_side

__all__ = [
    "EngineSide",
    "Game",
    "IllegalMoveError",
    "board_cells",
    "engine_side",
    "make_app",
    "make_server",
    "move_label",
    "serve",
    "url_of",
]
