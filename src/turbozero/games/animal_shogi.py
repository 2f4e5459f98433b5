"""Animal shogi: pgx's 3x4 game and its preset."""

from __future__ import annotations

from turbozero.config import register_preset
from turbozero.gamespec import GameSpec, register_game

GAME = register_game(
    GameSpec(name="animal_shogi", description="Animal shogi, 3x4 (2 players)", draws=True)
)


register_preset(
    "animal_shogi",
    "Animal shogi 3x4 on the default recipe: ResNet 4x32, 32 simulations, 30 minutes on a 2-core "
    "CPU; evaluated against random, 100-simulation rollout MCTS and its own earlier networks (Elo)",
    algorithm="alphazero",
    base="board",
    settings={"env": "animal_shogi", "max_episode_steps": 256, "truncation": "bootstrap"},
)
