"""The evaluation settings AlphaZero and TD share (their `eval` group), validated here once: how
often a run evaluates, against whom, over how many games, and whether a solver or engine judges
its moves. An algorithm's config derives from `EvalSettings` beside `EpochSettings` and keeps
only the evaluation settings that are its own (AlphaZero's search size at play, Elo pool,
gating)."""

from __future__ import annotations

import dataclasses
from typing import ClassVar

from turbozero.arena.accuracy import judged_games
from turbozero.arena.opponents import check_distinct, parse_opponent
from turbozero.arena.perfect import perfect_games
from turbozero.config import Config, ConfigError, check_range
from turbozero.gamespec import game_spec


@dataclasses.dataclass(frozen=True)
class EvalSettings(Config):
    """A run's evaluations against fixed opponents and its judge (the `eval` group). The config
    deriving from it holds `env`; `OWN_OPPONENTS` names the opponents the algorithm plays from
    its own run (AlphaZero's `best` and `network`), which no opponent grammar knows."""

    #: opponent names the algorithm itself plays (not parsed as opponents)
    OWN_OPPONENTS: ClassVar[tuple[str, ...]] = ()
    #: a resumed run may draw more or fewer games (`Config.resume_may_change`)
    RESUME_MAY_CHANGE: ClassVar[tuple[str, ...]] = ("eval_record_games",)

    eval_every: int = 1  # epochs between evaluations (and after the last)
    eval_games: int = 64  # per opponent, even: colours alternate
    eval_opponents: tuple[str, ...] = ("random",)  # opponent names (`turbozero eval --vs`)
    eval_accuracy: bool = False  # the moves judged by the game's solver or engine (its `Judge`)
    eval_accuracy_positions: int = 1000  # positions judged (a fixed, cached set)
    eval_record_games: int = 2  # games per opponent drawn in RUN/games/latest.html (0: none)

    def validate(self) -> None:
        super().validate()
        env = str(getattr(self, "env", ""))
        check_range("eval_every", self.eval_every, low=1)
        check_range("eval_games", self.eval_games, low=2)
        check_range("eval_record_games", self.eval_record_games, low=0, high=64)
        if self.eval_games % 2:
            raise ConfigError(f"eval_games must be even (sides are swapped), got {self.eval_games}")
        try:
            check_distinct(self.eval_opponents, "eval_opponents")
        except ValueError as err:
            raise ConfigError(str(err)) from None
        for opp in self.eval_opponents:
            if opp in self.OWN_OPPONENTS:
                continue
            try:
                parsed = parse_opponent(opp, what="eval_opponents entry")
            except ValueError as err:
                raise ConfigError(str(err)) from None
            if not parsed.plays(env):
                raise ConfigError(
                    f"eval_opponents {opp!r} plays {' or '.join(parsed.games())} only, not "
                    f"env {env!r}"
                )
        spec = game_spec(env)
        if "perfect" in self.eval_opponents and (spec is None or spec.perfect is None):
            raise ConfigError(
                f"eval_opponents 'perfect' exists only for env {' or '.join(perfect_games())}, "
                f"not {env!r}"
            )
        judge = None if spec is None else spec.judge
        high = judge.max_positions if judge is not None and self.eval_accuracy else 100_000
        check_range("eval_accuracy_positions", self.eval_accuracy_positions, low=1, high=high)
        if self.eval_accuracy and judge is None:
            raise ConfigError(
                f"eval_accuracy=true needs a solver or an engine to judge moves, which exist for "
                f"env {' or '.join(judged_games())}, not {env!r}; leave eval_accuracy out"
            )
