"""Chess and Gardner's 5x5 minichess: pgx's games, nothing more known of them yet."""

from __future__ import annotations

from turbozero.gamespec import GameSpec, register_game

CHESS = register_game(GameSpec(name="chess", description="Chess (2 players)", draws=True))
GARDNER = register_game(
    GameSpec(name="gardner_chess", description="Gardner minichess, 5x5 (2 players)", draws=True)
)
