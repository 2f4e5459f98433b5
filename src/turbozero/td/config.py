"""`TDConfig`: the typed configuration of a TD run (`turbozero.td`).

An epoch is `steps_per_epoch` turns played in each of the `num_games` games at once, with one
gradient step after each turn; a run is `num_epochs` epochs or `max_wall_seconds` of training,
whichever ends first.
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar

from turbozero.arena.opponents import check_distinct, parse_opponent
from turbozero.config import SEED_MAX, SEED_MIN, Config, ConfigError, check_range
from turbozero.gamespec import all_games, game_spec


@dataclasses.dataclass(frozen=True)
class TDConfig(Config):
    """Hyperparameters of TD learning over afterstates (ranges checked in `validate`)."""

    GROUPS: ClassVar[dict[str, tuple[str, ...]]] = {
        "run": (
            "env",
            "seed",
            "num_epochs",
            "max_wall_seconds",
            "checkpoint_every",
            "keep_checkpoints",
            "tensorboard",
            "wandb_project",
        ),
        "selfplay": ("num_games", "steps_per_epoch"),
        "learning": ("hidden", "learning_rate"),
        "eval": (
            "eval_every",
            "eval_games",
            "eval_opponents",
            "eval_accuracy",
            "eval_accuracy_positions",
        ),
    }

    env: str = "backgammon"  # a game whose file gives `TDRules` (`GameSpec.afterstates`)
    seed: int = 0  # the network's initialisation, the dice and the evaluations
    num_epochs: int = 100  # compiled calls of steps_per_epoch turns each
    max_wall_seconds: float = 0.0  # stop after this much training in all (0: no limit)
    checkpoint_every: int = 1  # save after every this many epochs (and at the end)
    keep_checkpoints: int | None = 3  # newest checkpoints kept; None keeps all
    tensorboard: bool = False  # also RUN/tensorboard events (the [tensorboard] extra)
    wandb_project: str | None = None  # also log to W&B (the [wandb] extra)
    # Self-play: every game plays one turn per step; one gradient step per step.
    num_games: int = 128  # games of self-play at once (B): a step plays one turn of each
    steps_per_epoch: int = 500  # steps (turns of every game, one gradient step each) an epoch
    # The value network: an MLP over the game's afterstate features, one output per result.
    hidden: tuple[int, ...] = (80, 80)  # the value MLP's ReLU layers
    learning_rate: float = 1e-3  # Adam
    # Evaluation: games against each opponent; the first one's points a game rank the best.
    eval_every: int = 5  # epochs between evaluations (and after the last)
    eval_games: int = 100  # per opponent, even: colours alternate
    eval_opponents: tuple[str, ...] = ("pubeval",)  # opponent names (`turbozero eval --vs`)
    eval_accuracy: bool = False  # the game's move-quality measure (backgammon: gnubg's)
    eval_accuracy_positions: int = 200  # positions judged (a fixed, cached set)

    def validate(self) -> None:
        spec = game_spec(self.env)
        if spec is None or spec.afterstates is None:
            have = [n for n, g in all_games().items() if g.afterstates is not None]
            raise ConfigError(
                f"env {self.env!r} has no afterstate rules for TD learning; games with them: "
                f"{', '.join(have)}"
            )
        check_range("seed", self.seed, low=SEED_MIN, high=SEED_MAX)
        for name in ("num_epochs", "num_games", "steps_per_epoch", "eval_every", "eval_games"):
            check_range(name, getattr(self, name), low=1)
        if self.eval_games % 2:
            raise ConfigError(f"eval_games must be even (sides swap), got {self.eval_games}")
        check_range("max_wall_seconds", self.max_wall_seconds, low=0.0)
        check_range("checkpoint_every", self.checkpoint_every, low=1)
        if self.keep_checkpoints is not None:
            check_range("keep_checkpoints", self.keep_checkpoints, low=1)
        if not self.hidden or any(int(h) < 1 for h in self.hidden):
            raise ConfigError(f"hidden must hold layer sizes >= 1, got {tuple(self.hidden)}")
        check_range("learning_rate", self.learning_rate, low=0.0, low_inclusive=False)
        if not self.eval_opponents:
            raise ConfigError("eval_opponents must name at least one opponent (the first ranks)")

        try:
            check_distinct(self.eval_opponents, "eval_opponents")
        except ValueError as err:
            raise ConfigError(str(err)) from None
        for opp in self.eval_opponents:
            try:
                parsed = parse_opponent(opp, what="eval_opponents entry")
            except ValueError as err:
                raise ConfigError(str(err)) from None
            if not parsed.plays(self.env):
                raise ConfigError(
                    f"eval_opponents {opp!r} plays {' or '.join(parsed.games())} only, not env "
                    f"{self.env!r}"
                )
        high = spec.judge.max_positions if spec.judge is not None else 100_000
        check_range("eval_accuracy_positions", self.eval_accuracy_positions, low=1, high=high)
        if self.eval_accuracy and spec.judge is None:
            raise ConfigError(f"eval_accuracy=true: env {self.env!r} has no move-quality judge")
        if self.wandb_project is not None and not self.wandb_project:
            raise ConfigError("wandb_project must be a non-empty name or None")
