"""Shogi: pgx's game, nothing more known of it yet."""

from __future__ import annotations

from turbozero.gamespec import GameSpec, register_game

GAME = register_game(GameSpec(name="shogi", description="Shogi (2 players)", draws=True))
