"""`make(id)`: every environment by its id; `GAMES`: what we advertise."""

from __future__ import annotations

import difflib

from turbozero.envs.core import Env
from turbozero.envs.pgx import PGX_GAMES, REFUSED, make_pgx

GAMES: dict[str, str] = dict(PGX_GAMES)
PREFIXES = ("gymnax", "jumanji", "pgx")


def make(env_id: str) -> Env:
    """Build an environment by id.

    pgx games by their ids (``"connect_four"``); other libraries by prefix
    (``"gymnax:CartPole-v1"``, ``"jumanji:Minesweeper-v0"``, ``"pgx:othello"``).

    Raises:
        ValueError: for an unknown id (listing close matches) or an unsupported game.
    """
    if not isinstance(env_id, str) or not env_id:
        raise ValueError(f"env id must be a non-empty string, got {env_id!r}")
    if ":" in env_id:
        prefix, rest = env_id.split(":", 1)
        if prefix == "pgx":
            return make(rest)
        if prefix == "gymnax":
            from turbozero.envs.gymnax import make_gymnax

            return make_gymnax(rest)
        if prefix == "jumanji":
            from turbozero.envs.jumanji import make_jumanji

            return make_jumanji(rest)
        raise ValueError(
            f"unknown environment library prefix {prefix!r} in {env_id!r}; known: {list(PREFIXES)}"
        )
    if env_id in REFUSED:
        return make_pgx(env_id)  # raises with the reason
    if env_id not in GAMES:
        close = difflib.get_close_matches(env_id, list(GAMES), n=3, cutoff=0.4)
        hint = f" Did you mean {' or '.join(map(repr, close))}?" if close else ""
        raise ValueError(
            f"unknown environment id {env_id!r}.{hint} Known games: {sorted(GAMES)}; other "
            f"libraries by prefix, e.g. 'gymnax:CartPole-v1'."
        )
    return make_pgx(env_id)
