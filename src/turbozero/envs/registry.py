"""`make(id)`: every environment by its id; `GAMES`: the registered games (`turbozero.games`)
with their descriptions."""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from turbozero.envs.core import Env
from turbozero.envs.pgx import REFUSED, make_pgx
from turbozero.gamespec import BRING_A_GAME, all_games, game_spec


class _Descriptions(Mapping[str, str]):
    """Every registered game's one-line description by name, read from the registry when asked
    (a game registered later is in it; one an installed package names is found by its name)."""

    def __getitem__(self, name: str) -> str:
        spec = game_spec(name) if isinstance(name, str) and ":" not in name else None
        if spec is None:
            raise KeyError(name)
        return spec.description

    def __iter__(self) -> Iterator[str]:
        return iter(all_games())

    def __len__(self) -> int:
        return len(all_games())


GAMES: Mapping[str, str] = _Descriptions()
PREFIXES = ("gymnax", "jumanji", "pgx")


#: gymnax and jumanji environments that fetch data over the network when made, and what they
#: fetch: listing them (`turbozero envs -v`) marks them instead of making them, as a machine
#: offline would wait on the retries
NEEDS_DOWNLOAD = {
    "gymnax:MNISTBandit-bsuite": "the MNIST images (gymnax.utils.load_mnist, on first use)",
    "jumanji:Sokoban-v0": "its levels from the Hugging Face Hub (InstaDeepAI/boxoban-levels)",
}


def make(
    env_id: str, *, reward_fn: Callable[..., Any] | str | None = None, one_hot: bool = False
) -> Env:
    """Build an environment by id.

    Registered games by their ids (``"connect_four"``, pgx's or your own); other libraries by
    prefix
    (``"gymnax:CartPole-v1"``, ``"jumanji:Minesweeper-v0"``, ``"pgx:othello"``).

    Args:
        env_id: the id.
        reward_fn: jumanji games only: replaces the environment's reward
            (`turbozero.envs.jumanji.make_jumanji`); None keeps it.
        one_hot: jumanji games only: small-range integer observation fields as one-hot flags
            (`make_jumanji`); pgx's observations are flag planes already.

    Raises:
        ValueError: for an unknown id (listing close matches), an unsupported game, or a
            `reward_fn` or `one_hot` for a game that is not jumanji's.
    """
    if not isinstance(env_id, str) or not env_id:
        raise ValueError(f"env id must be a non-empty string, got {env_id!r}")
    if reward_fn is not None and not env_id.startswith("jumanji:"):
        raise ValueError(
            f"reward_fn is an option of jumanji's games ('jumanji:...'), not of {env_id!r}; "
            f"a game of your own computes its reward in its step_fn (envs.from_functions)"
        )
    if one_hot and not env_id.startswith("jumanji:"):
        raise ValueError(
            f"one_hot is an option of jumanji's games ('jumanji:...'), not of {env_id!r}"
        )
    if ":" in env_id:
        prefix, rest = env_id.split(":", 1)
        if prefix == "pgx":
            return make(rest)
        if prefix == "gymnax":
            from turbozero.envs.gymnax import make_gymnax

            return make_gymnax(rest)
        if prefix == "jumanji":
            from turbozero.envs.jumanji import make_jumanji

            return make_jumanji(rest, reward_fn=reward_fn, one_hot=one_hot)
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
            f"libraries by prefix, e.g. 'gymnax:CartPole-v1'. {BRING_A_GAME}."
        )
    spec = all_games()[env_id]
    return make_pgx(env_id) if spec.make_env is None else spec.make_env()
