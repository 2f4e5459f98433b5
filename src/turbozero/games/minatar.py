"""MinAtar's five one-player games, as pgx has them: their steps draw from the key (new enemies,
cars, fish), so the search does not reuse subtrees."""

from __future__ import annotations

from turbozero.gamespec import GameSpec, register_game

GAMES = tuple(
    register_game(
        GameSpec(name=f"minatar-{name}", description=f"MinAtar {title} (1 player)", stochastic=True)
    )
    for name, title in (
        ("asterix", "Asterix"),
        ("breakout", "Breakout"),
        ("freeway", "Freeway"),
        ("seaquest", "Seaquest"),
        ("space_invaders", "Space Invaders"),
    )
)
