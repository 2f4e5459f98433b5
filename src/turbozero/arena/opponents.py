"""Fixed opponents by name, parsed in one place (the config's `eval_opponents`, the evaluator,
`turbozero eval --vs`): `random`, `perfect` (the games with a perfect player), `mcts:N`
(rollout MCTS with N simulations), and the engines the game files offer (`GameSpec.engines`,
each a `turbozero.gamespec.Engine` that its engine module defines with its grammar: `pubeval`
and `gnubg:PLY` for backgammon, `gnugo:LEVEL` and `gtp:COMMAND` for Go)."""

from __future__ import annotations

import dataclasses
from typing import Any

from turbozero.arena.agents import Agent, random_agent
from turbozero.arena.perfect import perfect_agent
from turbozero.envs.core import Env
from turbozero.gamespec import all_engines, game_spec
from turbozero.io.errors import TRUST_HOW, UntrustedRunError
from turbozero.validate import is_digits

#: the largest rollout-MCTS simulation count (its tree holds N + 1 nodes)
MAX_MCTS_SIMULATIONS = (1 << 24) - 1
#: the opponents every game has (the engines' forms follow, from the game files)
GENERIC_HELP = (
    "random | perfect (the games with a perfect player) | mcts:N (rollout MCTS with N "
    f"simulations, N in [1, {MAX_MCTS_SIMULATIONS}])"
)


def opponents_help() -> str:
    """Every form an opponent's name takes: the generic ones, then each engine's with the games
    it plays ("gnubg:PLY (backgammon: GNU Backgammon ...)")."""
    engines = [
        f"{engine.form} ({', '.join(games)}: {engine.about})"
        for engine, games in all_engines().values()
    ]
    return " | ".join([GENERIC_HELP, *engines])


@dataclasses.dataclass(frozen=True)
class Opponent:
    """A parsed opponent name: `kind` is "random", "perfect", "mcts" (with `simulations`) or an
    engine's kind (`name` its full name, `engine` True)."""

    kind: str
    simulations: int = 0
    name: str = dataclasses.field(default="", compare=False)  # as written ("gnubg:1")
    engine: bool = False
    starts_command: bool = False  # its name gives a command to start (`Engine.starts_command`)

    def games(self) -> tuple[str, ...]:
        """The games an engine plays (their files list it), or () for any game."""
        if not self.engine:
            return ()
        return all_engines()[self.kind][1]

    def plays(self, env: str) -> bool:
        """Whether it plays the game `env` (a config's `env`, `pgx:` prefix allowed)."""
        if not self.engine:
            return True
        spec = game_spec(env)
        return spec is not None and self.kind in spec.engines


def parse_opponent(name: str, *, what: str = "opponent") -> Opponent:
    """The opponent `name` names.

    Raises:
        ValueError: `name` is none of `opponents_help()`'s forms (the message starts with
            `what`).
    """
    if name in ("random", "perfect"):
        return Opponent(name, name=name)
    if isinstance(name, str) and name.startswith("mcts:"):
        n = name[5:]
        if is_digits(n) and 1 <= int(n) <= MAX_MCTS_SIMULATIONS:
            return Opponent("mcts", int(n), name=name)
    if isinstance(name, str):
        known = all_engines().get(name.partition(":")[0])
        if known is not None and known[0].accepts(name):
            engine = known[0]
            return Opponent(
                engine.kind, name=name, engine=True, starts_command=engine.starts_command
            )
    raise ValueError(f"{what} {name!r} is not one of: {opponents_help()}")


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
    if opponent.engine:
        spec = game_spec(env.name)
        if spec is None or opponent.kind not in spec.engines:
            games = " or ".join(opponent.games()) or "no game"
            raise ValueError(f"{name} plays {games} only, not {env.name!r}")
        return spec.engines[opponent.kind](env, name)
    from turbozero.arena.search_agents import rollout_mcts_agent

    return rollout_mcts_agent(env, num_simulations=opponent.simulations)
