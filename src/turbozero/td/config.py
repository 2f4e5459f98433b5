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
from turbozero.td.ntuple import make_ntuple
from turbozero.td.rules import SoloRules

#: `value_net`'s kinds
VALUE_NETS = ("mlp", "ntuple")
#: `eval_depth`'s largest: 2048 at depth 3 rates about 33 million afterstates a move
MAX_DEPTH = 2
#: ... for a two-player dice game (1 ply over the opponent's rolls, `turbozero.td.lookahead`)
MAX_DEPTH_TWO_PLAYERS = 1


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
        "eval_depth",
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
        "learning": ("value_net", "hidden", "ntuples", "learning_rate"),
        "eval": (
            "eval_every",
            "eval_games",
            "eval_opponents",
            "eval_accuracy",
            "eval_accuracy_positions",
            "eval_record_games",
            "eval_depth",
        ),
    }

    env: str = "backgammon"  # a game whose file gives afterstate rules (`GameSpec.afterstates`)
    # Self-play: every game plays one turn per step; one learning step per step.
    num_games: int = 128  # games of self-play at once (B): a step plays one turn of each
    steps_per_epoch: int = 500  # steps (turns of every game, one learning step each) an epoch
    # The value function of afterstates: "mlp" (for a two-player game one output per result)
    # or "ntuple" (lookup tables over groups of cells; one-player games with cells: 2048).
    value_net: str = "mlp"
    hidden: tuple[int, ...] = (80, 80)  # the value MLP's ReLU layers
    # the n-tuple network's groups of cells (row-major indices); empty: the game's own
    ntuples: tuple[tuple[int, ...], ...] = ()
    # Adam's step for the MLP; for the n-tuple network the share of a board's TD error one
    # update removes (in (0, 1])
    learning_rate: float = 1e-3
    # Evaluation: games against each opponent; the first one's points a game rank the best.
    eval_every: int = 5  # epochs between evaluations (and after the last)
    eval_games: int = 100  # per opponent, even: colours alternate
    eval_opponents: tuple[str, ...] = ("pubeval",)  # opponent names (`turbozero eval --vs`)
    eval_accuracy_positions: int = 200  # positions judged (a fixed, cached set)
    # chance layers an evaluation's moves look ahead, an expectimax over chance's outcomes
    # (one-player games: 0 is 1 ply, 1 each new tile and the best reply; each layer costs
    # about 128 times the one above it; two-player dice games: 0 or 1, the opponent's best
    # reply to each of its rolls, gnubg's 1 ply)
    eval_depth: int = 0

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
        if self.value_net not in VALUE_NETS:
            raise ConfigError(
                f"value_net must be one of {list(VALUE_NETS)}, got {self.value_net!r}"
            )
        if not self.hidden or any(int(h) < 1 for h in self.hidden):
            raise ConfigError(f"hidden must hold layer sizes >= 1, got {tuple(self.hidden)}")
        high = 1.0 if self.value_net == "ntuple" else None
        check_range("learning_rate", self.learning_rate, low=0.0, low_inclusive=False, high=high)
        check_range("eval_depth", self.eval_depth, low=0, high=MAX_DEPTH)
        rules = spec.afterstates()
        if isinstance(rules, SoloRules):
            if self.eval_opponents:
                raise ConfigError(
                    f"eval_opponents must be empty for {self.env!r}, a one-player game (its "
                    "evaluation is its score), got " + repr(tuple(self.eval_opponents))
                )
            if self.eval_accuracy:
                raise ConfigError(f"eval_accuracy: {self.env!r} has no judge of its moves")
        else:
            if not self.eval_opponents:
                raise ConfigError(
                    "eval_opponents must name at least one opponent (the first ranks)"
                )
            if self.value_net != "mlp":
                raise ConfigError(
                    f"{self.env!r} is a two-player game: its TD learner has value_net='mlp' "
                    "(the n-tuple network is built for one-player games with cells, such as "
                    "2048)"
                )
            check_range("eval_depth", self.eval_depth, low=0, high=MAX_DEPTH_TWO_PLAYERS)
        if self.ntuples:
            if self.value_net != "ntuple":
                raise ConfigError("ntuples is for value_net='ntuple'")
            assert isinstance(rules, SoloRules)  # (an n-tuple network is for those, above)
            try:
                make_ntuple(self.ntuples, rules.symmetries, rules.cell_values)
            except ValueError as e:
                raise ConfigError(f"ntuples: {e}") from None
