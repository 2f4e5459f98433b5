"""Every game turbozero knows beyond its rules, one file each (see `turbozero.gamespec`).

`game_spec(name)` finds one; `register_game(GameSpec(...))` adds yours (its environment, drawing,
move names, perfect player, engines, page hooks), after which `turbozero envs`, `envs.make`, the
arena, the play page and the records know it, and its presets (`turbozero.config.register_preset`)
train from the CLI.
"""

from turbozero.gamespec import (
    Board,
    GameSpec,
    Judge,
    Page,
    all_games,
    game_spec,
    register_game,
    unregister_game,
)

__all__ = [
    "Board",
    "GameSpec",
    "Judge",
    "Page",
    "all_games",
    "game_spec",
    "register_game",
    "unregister_game",
]
