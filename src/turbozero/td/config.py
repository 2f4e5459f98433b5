"""`TDConfig`: the typed configuration of a TD run (`turbozero.td`).

An epoch is `steps_per_epoch` turns played in each of the `num_games` games at once, with one
gradient step after each turn; a run is `num_epochs` epochs or `max_wall_seconds` of training,
whichever ends first.
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar

from turbozero.arena.settings import EvalSettings
from turbozero.config import ConfigError, EpochSettings, check_range
from turbozero.gamespec import all_games, game_spec


@dataclasses.dataclass(frozen=True)
class TDConfig(EvalSettings, EpochSettings):
    """Hyperparameters of TD learning over afterstates (ranges checked in `validate`); the run
    and evaluation settings are the shared groups' (`EpochSettings`, `EvalSettings`)."""

    #: what a resumed TD run may change beside the shared groups' (`Config.resume_may_change`):
    #: its checkpoints and its evaluations' size and schedule (not the opponents, whose first
    #: one's points rank the best network)
    RESUME_MAY_CHANGE: ClassVar[tuple[str, ...]] = (
        "checkpoint_every",
        "keep_checkpoints",
        "eval_every",
        "eval_games",
        "eval_accuracy",
        "eval_accuracy_positions",
    )

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
            "eval_record_games",
        ),
    }

    env: str = "backgammon"  # a game whose file gives `TDRules` (`GameSpec.afterstates`)
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
    eval_accuracy_positions: int = 200  # positions judged (a fixed, cached set)

    def validate(self) -> None:
        spec = game_spec(self.env)
        if spec is None or spec.afterstates is None:
            have = [n for n, g in all_games().items() if g.afterstates is not None]
            raise ConfigError(
                f"env {self.env!r} has no afterstate rules for TD learning; games with them: "
                f"{', '.join(have)}"
            )
        super().validate()  # (the run and evaluation groups)
        for name in ("num_games", "steps_per_epoch"):
            check_range(name, getattr(self, name), low=1)
        if not self.hidden or any(int(h) < 1 for h in self.hidden):
            raise ConfigError(f"hidden must hold layer sizes >= 1, got {tuple(self.hidden)}")
        check_range("learning_rate", self.learning_rate, low=0.0, low_inclusive=False)
        if not self.eval_opponents:
            raise ConfigError("eval_opponents must name at least one opponent (the first ranks)")
