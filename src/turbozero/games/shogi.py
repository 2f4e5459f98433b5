"""Shogi: pgx's game, nothing more known of it yet."""

from __future__ import annotations

from turbozero.games.core import GameSpec, _register_builtin

GAME = _register_builtin(GameSpec(name="shogi", description="Shogi (2 players)"))
