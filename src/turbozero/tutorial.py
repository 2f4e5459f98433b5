"""The API of the "How to turbozero" tutorial, as thin facades over the functional core.

Each class here only holds configuration and hands it to the factories (`envs.from_functions`,
`make_search`'s selectors, `make_alphazero`, `train`); nothing is compiled or implemented twice.
`docs/coming-from-turbozero.md` maps every tutorial name to where it lives.

Corrections of the reference kept on purpose: the network's output is treated as logits exactly
once; illegal actions are masked at every search node; self-play always uses the latest
parameters; a checkpoint directory is never wiped (an existing one is an error unless resumed);
testers that run every `eval_every` epochs work.
"""

from __future__ import annotations

import contextlib
import dataclasses
import numbers
import re
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import jax
import numpy as np
import optax

from turbozero import envs
from turbozero.alphazero.augment import check_augment_fns
from turbozero.alphazero.config import AlphaZeroConfig, SearchConfig
from turbozero.alphazero.learner import make_selector
from turbozero.alphazero.losses import az_loss
from turbozero.alphazero.train import train_alphazero
from turbozero.nets import AZResnet, AZResnetConfig
from turbozero.search.selector import Selector
from turbozero.types import StepMetadata

__all__ = [
    "MCTS",
    "AZResnet",
    "AZResnetConfig",
    "AlphaZero",
    "ApproxEloTester",
    "BaselineTester",
    "EpisodeReplayBuffer",
    "GumbelSelector",
    "MuZeroPUCTSelector",
    "PUCTSelector",
    "StepMetadata",
    "Trainer",
    "TwoPlayerTester",
    "az_default_loss_fn",
    "make_nn_eval_fn",
]


# -- errors in the tutorial's names -------------------------------------------------------------
#: The settings' names in the typed configs, and the tutorial arguments they come from.
EVALUATOR_NAMES = {
    "search.num_simulations": "num_iterations",
    "search.max_nodes": "max_nodes",
    "search.dirichlet_alpha": "dirichlet_alpha",
    "search.dirichlet_fraction": "dirichlet_epsilon",
    "search.discount": "discount",
    "num_simulations": "num_iterations",
    "max_num_considered_actions": "GumbelSelector(max_num_considered_actions)",
    "search.max_num_considered_actions": "GumbelSelector(max_num_considered_actions)",
    "search.c_puct": "PUCTSelector(c)",
    "c_puct": "PUCTSelector(c)",
    "pb_c_init": "MuZeroPUCTSelector(c1)",
    "pb_c_base": "MuZeroPUCTSelector(c2)",
    "search.pb_c_init": "MuZeroPUCTSelector(c1)",
    "search.pb_c_base": "MuZeroPUCTSelector(c2)",
    "gumbel_scale": "GumbelSelector(gumbel_scale)",
    "search.gumbel_scale": "GumbelSelector(gumbel_scale)",
    "dirichlet_fraction": "dirichlet_epsilon",
}
TRAINER_NAMES = {
    "num_games": "batch_size",
    "memory_capacity": "memory_buffer.capacity",
}


@contextlib.contextmanager
def _tutorial_names(names: dict[str, str]) -> Iterator[None]:
    """Re-raise a `ValueError` from the typed configs or factories with the tutorial's argument
    names in its message (`search.num_simulations` -> `num_iterations`)."""
    try:
        yield
    except ValueError as err:
        message = str(err)
        for ours, theirs in names.items():
            message = re.sub(rf"(?<![\w.]){re.escape(ours)}(?!\w)", theirs, message)
        if message == str(err):
            raise
        raise type(err)(message) from None


# -- selectors ---------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class PUCTSelector:
    """AlphaZero's PUCT rule (`turbozero.search.puct`)."""

    c: float = 1.0


@dataclasses.dataclass(frozen=True)
class MuZeroPUCTSelector:
    """MuZero's PUCT rule with min-max normalised Q (`turbozero.search.muzero_puct`)."""

    c1: float = 1.25
    c2: float = 19652.0


@dataclasses.dataclass(frozen=True)
class GumbelSelector:
    """Gumbel MuZero's root rule (`turbozero.search.gumbel`)."""

    max_num_considered_actions: int = 16
    gumbel_scale: float = 1.0


# -- network -----------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class NNEvalFn:
    """What `make_nn_eval_fn` returns: the module and the state -> input function.

    Calling it is the foundation's `eval_fn(params, observations, key)` (observations are the
    outputs of `state_to_nn_input`); the network output is treated as logits exactly once.
    """

    nn: Any
    state_to_nn_input: Callable[[Any], Any]

    def __call__(self, params, observations, key):
        out: Any = self.nn.apply(params, observations, train=False)
        return out


def make_nn_eval_fn(nn: Any, state_to_nn_input_fn: Callable[[Any], Any]) -> NNEvalFn:
    return NNEvalFn(nn, state_to_nn_input_fn)


# -- evaluator ---------------------------------------------------------------------------------
class MCTS:
    """The search backend marker for `AlphaZero(MCTS)` (our batched MCTS is the only one)."""


@dataclasses.dataclass(frozen=True)
class _AlphaZeroEvaluator:
    eval_fn: NNEvalFn
    num_iterations: int
    max_nodes: int
    branching_factor: int
    action_selector: Any = dataclasses.field(default_factory=PUCTSelector)
    temperature: float = 1.0
    dirichlet_alpha: float = 0.3
    dirichlet_epsilon: float = 0.25
    persist_tree: bool = True
    discount: float = 1.0

    def __post_init__(self) -> None:
        if not isinstance(self.eval_fn, NNEvalFn):
            raise TypeError("eval_fn must come from make_nn_eval_fn(nn, state_to_nn_input_fn)")
        b = self.branching_factor
        if isinstance(b, bool) or not isinstance(b, numbers.Integral) or b < 1:
            raise ValueError(f"branching_factor must be an int >= 1, got {b!r}")
        if not self.temperature >= 0:
            raise ValueError(f"temperature must be >= 0, got {self.temperature}")
        with _tutorial_names(EVALUATOR_NAMES):
            self.selector()  # validates the search and selector settings

    def search_config(self) -> SearchConfig:
        """These settings as the trainer's `SearchConfig` (the selector's included, so that a
        run directory records the rule it was trained with)."""
        s = self.action_selector
        rule: dict[str, Any]
        if isinstance(s, PUCTSelector):
            rule = {"selector": "puct", "c_puct": s.c, "fpu": "zero"}  # (the tutorial's rule)
        elif isinstance(s, MuZeroPUCTSelector):
            rule = {"selector": "muzero_puct", "pb_c_init": s.c1, "pb_c_base": s.c2}
        elif isinstance(s, GumbelSelector):
            rule = {
                "selector": "gumbel",
                "max_num_considered_actions": s.max_num_considered_actions,
                "gumbel_scale": s.gumbel_scale,
            }
        else:
            raise TypeError(
                "action_selector must be PUCTSelector(), MuZeroPUCTSelector() or GumbelSelector()"
            )
        return SearchConfig(
            num_simulations=self.num_iterations,
            max_nodes=self.max_nodes,
            discount=self.discount,
            dirichlet_alpha=self.dirichlet_alpha,
            dirichlet_fraction=self.dirichlet_epsilon,
            reuse=None if self.persist_tree else False,
            **rule,
        )

    def selector(self) -> Selector:
        """The rule these settings name (what the trainer builds from the recorded config)."""
        return make_selector(self.search_config())


def AlphaZero(backend: type = MCTS) -> type:  # noqa: N802 - the tutorial's spelling
    """`AlphaZero(MCTS)(eval_fn=..., num_iterations=..., max_nodes=..., ...)`."""
    if backend is not MCTS:
        raise ValueError("AlphaZero(backend): only MCTS is available")
    return _AlphaZeroEvaluator


# -- memory ------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class EpisodeReplayBuffer:
    """Positions kept per parallel game (total = batch_size x capacity)."""

    capacity: int = 1000

    def __post_init__(self) -> None:
        if self.capacity < 1:
            raise ValueError(f"capacity must be >= 1, got {self.capacity}")


# -- loss --------------------------------------------------------------------------------------
def az_default_loss_fn(params, batch, *, apply_fn, l2_reg_lambda: float = 1e-4, **kwargs):
    """The tutorial's loss name: `az_loss` with `l2_reg_lambda` as the L2 weight."""
    return az_loss(params, batch, apply_fn=apply_fn, l2=l2_reg_lambda, **kwargs)


# -- testers -----------------------------------------------------------------------------------
def _check_episodes(tester: Any) -> None:
    n = tester.num_episodes
    if isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < 1:
        raise ValueError(f"{type(tester).__name__}(num_episodes) must be an int >= 1, got {n!r}")


@dataclasses.dataclass(frozen=True)
class TwoPlayerTester:
    """The current network against the best so far, `num_episodes` games (rounded up to even:
    each side plays first in half). The Trainer plays one number of games against every
    opponent: the largest `num_episodes` of its testers."""

    num_episodes: int = 32

    def __post_init__(self) -> None:
        _check_episodes(self)


@dataclasses.dataclass(frozen=True)
class BaselineTester:
    """The current network against a fixed opponent: "random", "perfect" or "mcts:N"
    (`num_episodes` as in `TwoPlayerTester`: the Trainer uses its testers' largest)."""

    opponent: str = "random"
    num_episodes: int = 32

    def __post_init__(self) -> None:
        _check_episodes(self)


class ApproxEloTester:
    """Approximate Elo against a pool of past networks (ratings by maximum likelihood)."""

    def __init__(
        self,
        total_epochs: int | None = None,
        episodes_per_opponent: int = 16,
        num_opponents: int | None = None,
        rating_optim_steps: int | None = None,
        rating_optim_lr: float | None = None,
        *,
        num_opponenets: int | None = None,
    ):
        # (errors name the argument given: the misspelling, when only it was)
        given = "num_opponenets" if num_opponenets is not None and num_opponents is None else ""
        if num_opponenets is not None:
            warnings.warn(
                "ApproxEloTester(num_opponenets=...) is misspelt; use num_opponents",
                DeprecationWarning,
                stacklevel=2,
            )
            num_opponents = num_opponenets if num_opponents is None else num_opponents
        for name, value in (
            ("episodes_per_opponent", episodes_per_opponent),
            (given or "num_opponents", 5 if num_opponents is None else num_opponents),
        ):
            if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
                raise ValueError(
                    f"ApproxEloTester({name}) must be an int >= 1, got {value!r} (to play no "
                    "Elo games, leave the tester out)"
                )
        # `total_epochs` is accepted and not needed: the pool keeps the latest `num_opponents`
        # networks however long the run is.
        self.total_epochs = total_epochs
        # rounded up to even: each network plays first in half of the games
        self.episodes_per_opponent = int(episodes_per_opponent) + int(episodes_per_opponent) % 2
        self.num_opponents = 5 if num_opponents is None else int(num_opponents)
        # The ratings are fitted by Newton's method to convergence: the optimiser settings of the
        # reference are accepted and not needed.
        self.rating_optim_steps = rating_optim_steps
        self.rating_optim_lr = rating_optim_lr


# -- trainer -----------------------------------------------------------------------------------
class Trainer:
    """The tutorial's trainer: collects self-play, trains, tests; `train_loop` runs it."""

    def __init__(
        self,
        *,
        batch_size: int,
        train_batch_size: int,
        env_step_fn: Callable[..., Any],
        env_init_fn: Callable[..., Any],
        state_to_nn_input_fn: Callable[[Any], Any],
        nn: Any,
        loss_fn: Callable[..., Any] = az_default_loss_fn,
        optimizer: optax.GradientTransformation,
        evaluator: _AlphaZeroEvaluator,
        memory_buffer: EpisodeReplayBuffer,
        max_episode_steps: int = 1000,
        warmup_steps: int = 0,
        collection_steps_per_epoch: int = 1,
        train_steps_per_epoch: int = 1,
        testers: Sequence[Any] = (),
        evaluator_test: _AlphaZeroEvaluator | None = None,
        data_transform_fns: Sequence[Callable[..., Any]] = (),
        ckpt_dir: str | None = None,
        wandb_project_name: str = "",
        env_name: str = "game",
        seed: int = 0,
        rebuild: Mapping[str, str] | None = None,
    ):
        self.env = envs.from_functions(
            init_fn=env_init_fn,
            step_fn=env_step_fn,
            observe_fn=state_to_nn_input_fn,
            name=f"custom:{env_name}",
        )
        if evaluator.branching_factor != self.env.num_actions:
            raise ValueError(
                f"branching_factor={evaluator.branching_factor} differs from the game's "
                f"{self.env.num_actions} actions"
            )
        self.nn = nn
        self.evaluator = evaluator
        self.evaluator_test = evaluator_test or evaluator
        self.loss_fn = loss_fn
        self.optimizer = optimizer
        self.data_transform_fns = list(data_transform_fns)
        self.ckpt_dir = ckpt_dir
        # how `turbozero eval`, `play` and `train --resume` rebuild parts made in a script (see
        # turbozero.alphazero.rebuild): {"env": ..., "optimizer": ...} -> "file.py:function"
        self.rebuild = dict(rebuild or {})
        opponents: list[str] = []
        eval_games = 2
        elo_pool, elo_games = 0, 16
        for t in testers:
            if isinstance(t, TwoPlayerTester):
                opponents.append("best")
                eval_games = max(eval_games, t.num_episodes + t.num_episodes % 2)
            elif isinstance(t, BaselineTester):
                if t.opponent == "perfect":
                    raise ValueError(
                        "BaselineTester('perfect') needs a built-in game with a perfect player "
                        "(`turbozero train tic_tac_toe` or `connect_four`, or train(config) with "
                        "that env), whose positions it solves; a Trainer's game is given as "
                        "functions. Use 'random' or 'mcts:N' here."
                    )
                opponents.append(t.opponent)
                eval_games = max(eval_games, t.num_episodes + t.num_episodes % 2)
            elif isinstance(t, ApproxEloTester):
                elo_pool, elo_games = t.num_opponents, t.episodes_per_opponent
            else:
                raise TypeError(f"unknown tester {t!r}")
        with _tutorial_names(TRAINER_NAMES):
            self.config = self._config(
                batch_size=batch_size,
                train_batch_size=train_batch_size,
                max_episode_steps=max_episode_steps,
                memory_capacity=memory_buffer.capacity,
                warmup_steps=warmup_steps,
                collection_steps_per_epoch=collection_steps_per_epoch,
                train_steps_per_epoch=train_steps_per_epoch,
                eval_games=eval_games,
                opponents=opponents,
                elo_pool=elo_pool,
                elo_games=elo_games,
                wandb_project_name=wandb_project_name,
                seed=seed,
            )
        if self.data_transform_fns:
            with _tutorial_names({"augmentation": "data_transform_fns entry"}):
                check_augment_fns(self.env, self.data_transform_fns)

    def _config(
        self,
        *,
        batch_size: int,
        train_batch_size: int,
        max_episode_steps: int,
        memory_capacity: int,
        warmup_steps: int,
        collection_steps_per_epoch: int,
        train_steps_per_epoch: int,
        eval_games: int,
        opponents: list[str],
        elo_pool: int,
        elo_games: int,
        wandb_project_name: str,
        seed: int,
    ) -> AlphaZeroConfig:
        evaluator = self.evaluator
        return AlphaZeroConfig(
            env=self.env.name,
            seed=seed,
            num_games=batch_size,
            search=evaluator.search_config(),
            temperature=evaluator.temperature,
            temperature_moves=max_episode_steps if evaluator.temperature > 0 else 0,
            max_episode_steps=max_episode_steps,
            memory_capacity=memory_capacity,
            train_batch_size=train_batch_size,
            warmup_steps=warmup_steps,
            collection_steps_per_epoch=collection_steps_per_epoch,
            train_steps_per_epoch=train_steps_per_epoch,
            eval_games=eval_games,
            eval_simulations=self.evaluator_test.num_iterations,
            eval_opponents=tuple(opponents),
            elo_pool_size=elo_pool,
            elo_games_per_opponent=elo_games,
            wandb_project=wandb_project_name or None,
            # the tutorial's trainer as it was: outcome targets, no weight average, in turn
            root_value_weight=0.0,
            ema_decay=0.0,
            overlap=False,
        )

    def parts(self) -> dict[str, Any]:
        return {
            "env": self.env,
            "module": self.nn,
            "optimizer": self.optimizer,
            "loss_fn": self.loss_fn,
            "augment_fns": self.data_transform_fns,
        }

    def train_loop(
        self,
        key: Any = None,
        num_epochs: int = 1,
        eval_every: int = 1,
        *,
        seed: int | None = None,
        resume: bool = False,
    ) -> dict[str, Any]:
        """Run `num_epochs` epochs; prints an `Epoch N/M: ...` line each; returns the run summary.

        `key` (a PRNG key) or `seed` fixes the run (neither: the Trainer's `seed`); a key is
        reduced to an integer seed (its last 32-bit word) so the run directory records it.
        """
        if seed is None and key is None:
            seed = self.config.seed  # the Trainer's own `seed`
        elif seed is None:
            seed = int(np.asarray(jax.random.key_data(key)).ravel()[-1])
        cfg = dataclasses.replace(
            self.config, seed=seed, num_epochs=num_epochs, eval_every=eval_every
        )
        return train_alphazero(
            cfg,
            self.ckpt_dir,
            resume=resume,
            progress=False,
            parts=self.parts(),
            rebuild=self.rebuild or None,
        )
