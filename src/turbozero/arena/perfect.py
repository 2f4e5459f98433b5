"""Perfect players: `perfect_agent(env)` for the games whose file has one (`perfect_games()`).

Each game's file builds its own (`GameSpec.perfect`): tic-tac-toe plays from a minimax table
(`turbozero.games.tic_tac_toe`), Connect Four asks the `bitbully` solver
(`turbozero.games.connect_four`, the `solvers` extra).
"""

from __future__ import annotations

from turbozero.arena.agents import Agent
from turbozero.envs.core import Env
from turbozero.gamespec import all_games, game_spec


def perfect_games() -> tuple[str, ...]:
    """The games with a perfect player."""
    return tuple(name for name, spec in all_games().items() if spec.perfect is not None)


def perfect_agent(env: Env, *, name: str = "perfect") -> Agent:
    """A perfect player of `env` choosing uniformly among its best moves.

    Raises:
        ValueError: if `env` has no perfect player here (see `perfect_games`).
        MissingExtraError: if the game's solver is not installed.
    """
    spec = game_spec(env.name)
    if spec is None or spec.perfect is None:
        raise ValueError(
            f"no perfect player for {env.name!r}; games with one: {', '.join(perfect_games())}"
        )
    return spec.perfect(env, name=name)
