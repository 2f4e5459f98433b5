"""Fixed opponents by name, parsed in one place (the config's `eval_opponents`, the evaluator,
`turbozero eval --vs`): `random`, `perfect` (the games with a perfect player), `mcts:N`
(rollout MCTS with N simulations), and the engines players know (`ENGINES`): `pubeval`
(Tesauro's linear evaluator) and `gnubg:PLY` (GNU Backgammon at 0 to 2 plies, the `engines`
extra) for backgammon, `gnugo:LEVEL` and `gtp:COMMAND` for Go. Which games an engine plays, and
how it is built, the game's file says (`GameSpec.engines`)."""

from __future__ import annotations

import dataclasses
from typing import Any

from turbozero.arena.agents import Agent, random_agent
from turbozero.arena.perfect import perfect_agent
from turbozero.envs.core import Env
from turbozero.games.core import all_games, game_spec
from turbozero.io.errors import TRUST_HOW, UntrustedRunError
from turbozero.validate import is_digits

#: the largest rollout-MCTS simulation count (its tree holds N + 1 nodes)
MAX_MCTS_SIMULATIONS = (1 << 24) - 1
#: the engines by kind (the games that have them say so in their files)
ENGINES = ("pubeval", "gnubg", "gnugo", "gtp")
MAX_GNUBG_PLY = 2
MAX_GNUGO_LEVEL = 10
HELP = (
    "random | perfect (the games with a perfect player) | mcts:N (rollout MCTS with N simulations, "
    f"N in [1, {MAX_MCTS_SIMULATIONS}]) | pubeval (backgammon) | gnubg:PLY (backgammon, PLY in "
    f"[0, {MAX_GNUBG_PLY}]) | gnugo:LEVEL (Go, LEVEL in [1, {MAX_GNUGO_LEVEL}]) | gtp:COMMAND (Go: "
    "any GTP engine)"
)


@dataclasses.dataclass(frozen=True)
class Opponent:
    """A parsed opponent name: `kind` is "random", "perfect", "mcts" (with `simulations`),
    "pubeval", "gnubg" (with `ply`), "gnugo" (with `level`) or "gtp" (with `command`)."""

    kind: str
    simulations: int = 0
    ply: int = 0
    level: int = 0
    command: str = ""

    @property
    def starts_command(self) -> bool:
        """Whether playing it starts a command its name gives (`gtp:COMMAND`): code that a run
        directory naming it names. `gnugo:LEVEL` starts GNU Go with our own arguments."""
        return self.kind == "gtp"

    def games(self) -> tuple[str, ...]:
        """The games an engine plays (their files list it), or () for any game."""
        if self.kind not in ENGINES:
            return ()
        return tuple(name for name, spec in all_games().items() if self.kind in spec.engines)

    def plays(self, env: str) -> bool:
        """Whether it plays the game `env` (a config's `env`, `pgx:` prefix allowed)."""
        if self.kind not in ENGINES:
            return True
        spec = game_spec(env)
        return spec is not None and self.kind in spec.engines


def parse_opponent(name: str, *, what: str = "opponent") -> Opponent:
    """The opponent `name` names.

    Raises:
        ValueError: `name` is none of `HELP`'s forms (the message starts with `what`).
    """
    if name in ("random", "perfect", "pubeval"):
        return Opponent(name)
    if isinstance(name, str) and name.startswith("gnubg:"):
        ply = name[6:]
        if is_digits(ply) and 0 <= int(ply) <= MAX_GNUBG_PLY:
            return Opponent("gnubg", ply=int(ply))
    if isinstance(name, str) and name.startswith("gnugo:"):
        level = name[6:]
        if is_digits(level) and 1 <= int(level) <= MAX_GNUGO_LEVEL:
            return Opponent("gnugo", level=int(level))
    if isinstance(name, str) and name.startswith("gtp:") and name[4:].strip():
        return Opponent("gtp", command=name[4:].strip())
    if isinstance(name, str) and name.startswith("mcts:"):
        n = name[5:]
        if is_digits(n) and 1 <= int(n) <= MAX_MCTS_SIMULATIONS:
            return Opponent("mcts", int(n))
    raise ValueError(f"{what} {name!r} is not one of: {HELP}")


def check_distinct(names: tuple[str, ...], what: str) -> None:
    """Refuse an opponent named twice in `names` (its games would be played twice over).

    Raises:
        ValueError: naming `what` and the repeated opponent.
    """
    seen = set()
    for name in names:
        if name in seen:
            raise ValueError(f"{what} names {name!r} twice: list each opponent once")
        seen.add(name)


def check_run_opponents(run: str, names: Any, *, trust: bool) -> None:
    """Refuse the opponents a run directory's `config.json` lists when one starts a command
    (`gtp:COMMAND`), unless `trust`: a run directory is data, and such a name is code it runs.

    Raises:
        UntrustedRunError: naming the opponent and how to allow it.
    """
    if trust or not isinstance(names, list | tuple):
        return
    for name in names:
        try:
            starts = parse_opponent(name).starts_command
        except ValueError:
            continue  # (the config's own check names it)
        if starts:
            raise UntrustedRunError(
                f"{run}'s config.json lists the opponent {name!r}, a command to start; a run "
                f"directory is opened as data, running none of it: {TRUST_HOW}"
            )


def make_opponent(env: Env, name: str) -> Agent:
    """The agent `name` names, for `env` (a ValueError if it has no such player)."""
    opponent = parse_opponent(name)
    if opponent.kind == "random":
        return random_agent(env)
    if opponent.kind == "perfect":
        return perfect_agent(env)
    if opponent.kind in ENGINES:
        spec = game_spec(env.name)
        if spec is None or opponent.kind not in spec.engines:
            games = " or ".join(opponent.games()) or "no game"
            raise ValueError(f"{name} plays {games} only, not {env.name!r}")
        return spec.engines[opponent.kind](env, name)
    from turbozero.arena.search_agents import rollout_mcts_agent

    return rollout_mcts_agent(env, num_simulations=opponent.simulations)
