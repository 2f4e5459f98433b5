"""The typed AlphaZero configuration and its presets."""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar, TypeVar

from turbozero.arena.settings import EvalSettings
from turbozero.config import (
    Config,
    ConfigError,
    EpochSettings,
    check_choice,
    check_range,
    register_base,
    register_preset,
    suggest,
)
from turbozero.envs import GAMES
from turbozero.envs.jumanji import REWARDS
from turbozero.gamespec import BRING_A_GAME, all_games, game_spec
from turbozero.search.puct import FIRST_PLAY_VALUES, FPU_REDUCTION_MAX
from turbozero.search.search import MAX_NODES, max_simulations

SELECTORS = ("puct", "muzero_puct", "gumbel")
T = TypeVar("T")


def module_value_bins(module: Any) -> int:
    """The value bins of a network given instead of the config's: `PolicyValueMLP.value_bins`,
    `AZResnet.config.value_bins`, else 0 (a scalar value, as a network of one's own has)."""
    for holder in (module, getattr(module, "config", None)):
        bins = getattr(holder, "value_bins", None)
        if isinstance(bins, int):
            return bins
    return 0


def settled(value: T | None, name: str) -> T:
    """A setting of a resolved config (`AlphaZeroConfig.resolved`); an error names one left to
    the game in a config that was not resolved."""
    if value is None:
        raise ConfigError(
            f"{name} is left to the game (None) in a config not resolved: pass config.resolved()"
        )
    return value


@dataclasses.dataclass(frozen=True)
class NetworkConfig(Config):
    """The policy-value network."""

    kind: str = "resnet"  # resnet | mlp
    num_blocks: int = 2
    num_channels: int = 16
    hidden: tuple[int, ...] = (128, 128)
    # None: from the game (3, win/draw/loss, where it can be drawn; else 0); 0: a scalar value
    # (tanh for 2 players) learnt by MSE; >= 2: categorical bins learnt by cross-entropy
    value_bins: int | None = None
    line_features: bool = False  # resnet, k-in-a-row games: also read each cell's open lines

    def validate(self) -> None:
        check_choice("network.kind", self.kind, ["resnet", "mlp"])
        check_range("network.num_blocks", self.num_blocks, low=0)
        check_range("network.num_channels", self.num_channels, low=1)
        if self.line_features and self.kind != "resnet":
            raise ConfigError(
                "network.line_features=true is an option of the resnet's board; "
                f"network.kind={self.kind!r} has none: set network.kind=resnet or leave "
                "network.line_features out"
            )
        if self.value_bins is not None and (self.value_bins == 1 or self.value_bins < 0):
            raise ConfigError(
                f"network.value_bins must be 0 (a scalar value) or >= 2 (categorical bins), "
                f"got {self.value_bins}"
            )
        for h in self.hidden:
            check_range("network.hidden", h, low=1)


CHANCE_MODES = ("nodes", "sampled")


@dataclasses.dataclass(frozen=True)
class SearchConfig(Config):
    """Tree search used by self-play (evaluation uses the same rule without root noise)."""

    selector: str = "puct"
    num_simulations: int = 32
    max_nodes: int = 64
    c_puct: float = 1.25
    pb_c_init: float = 1.25
    pb_c_base: float = 19652.0
    dirichlet_alpha: float = 0.3
    dirichlet_fraction: float = 0.25
    max_num_considered_actions: int = 16
    gumbel_scale: float = 1.0
    discount: float = 1.0
    reuse: bool | None = None  # None: on for puct/muzero_puct on deterministic games
    chance: str = "nodes"  # games with chance: "nodes" (expectimax) or "sampled" (one per edge)
    chance_widening: float = 1.0  # a chance node opens ceil(n ** w) outcomes at n visits; 1: all
    fast_simulations: int = 0  # 0: off; else the cheap search of playout cap randomisation
    full_fraction: float = 0.25  # with fast_simulations: share of self-play moves searched in full
    forced_playouts: float = 0.0  # puct rules: KataGo's k (2 there); 0: off; targets pruned
    # puct: an unvisited move's Q: zero (a draw) | node | network (its value); None: network
    # with puct, zero with the other selectors (they value unvisited moves by their own rule)
    fpu: str | None = None
    fpu_reduction: float = 0.0  # puct: subtracted from the Q search.fpu gives, in [0, 2]

    def validate(self) -> None:
        check_choice("search.selector", self.selector, SELECTORS)
        check_choice("search.chance", self.chance, CHANCE_MODES)
        # (the searches hold num_simulations + 1 nodes where no max_nodes is given)
        check_range("search.num_simulations", self.num_simulations, low=1, high=MAX_NODES - 1)
        check_range("search.max_nodes", self.max_nodes, low=2, high=MAX_NODES)
        check_range("search.c_puct", self.c_puct, low=0, low_inclusive=False)
        check_range("search.dirichlet_alpha", self.dirichlet_alpha, low=0, low_inclusive=False)
        check_range("search.dirichlet_fraction", self.dirichlet_fraction, low=0, high=1)
        check_range("search.max_num_considered_actions", self.max_num_considered_actions, low=1)
        check_range("search.discount", self.discount, low=0, high=1, low_inclusive=False)
        check_range("search.pb_c_init", self.pb_c_init, low=0, low_inclusive=False)
        check_range("search.pb_c_base", self.pb_c_base, low=0, low_inclusive=False)
        check_range("search.gumbel_scale", self.gumbel_scale, low=0)
        check_range("search.chance_widening", self.chance_widening, low=0, high=1)
        check_range(
            "search.fast_simulations", self.fast_simulations, low=0, high=self.num_simulations - 1
        )
        check_range("search.full_fraction", self.full_fraction, low=0, high=1, low_inclusive=False)
        check_range("search.forced_playouts", self.forced_playouts, low=0)
        if self.fpu is not None:
            check_choice("search.fpu", self.fpu, list(FIRST_PLAY_VALUES))
        check_range("search.fpu_reduction", self.fpu_reduction, low=0, high=FPU_REDUCTION_MAX)
        if (self.fpu not in (None, "zero") or self.fpu_reduction) and self.selector != "puct":
            raise ConfigError(
                f"search.fpu={self.fpu} and search.fpu_reduction={self.fpu_reduction} apply to "
                f"the puct selector ({self.selector} values unvisited moves by its own rule): set "
                "them to zero and 0 or choose search.selector=puct"
            )
        if self.forced_playouts and self.selector == "gumbel":
            raise ConfigError(
                "search.forced_playouts applies to the puct and muzero_puct selectors (gumbel "
                "plans its own root visits): set it to 0 or choose another search.selector"
            )

    def resolved(self) -> SearchConfig:
        """`fpu` filled in where left open: the network's value under `puct`, zero (unused) for
        the other selectors, which value unvisited moves by their own rule."""
        if self.fpu is not None:
            return self
        return dataclasses.replace(self, fpu="network" if self.selector == "puct" else "zero")

    def capacity_warning(self, chance_nodes: bool = False) -> str | None:
        """One line when a search cannot expand a node for every simulation (the tree fills and
        the rest of the simulations re-walk known nodes: `full_events` in the metrics).
        `chance_nodes`: the game is searched with chance nodes, two nodes per expansion."""
        needed = self.num_simulations * (2 if chance_nodes else 1) + 1
        if self.max_nodes >= needed:
            return None
        per = "2 * search.num_simulations + 1" if chance_nodes else "search.num_simulations + 1"
        return (
            f"warning: search.max_nodes={self.max_nodes} holds fewer nodes than "
            f"{per} = {needed}"
            + (" (a chance node and its outcome per expansion)" if chance_nodes else "")
            + f": each search fills its tree; set search.max_nodes={needed} or more"
        )


@dataclasses.dataclass(frozen=True)
class AlphaZeroConfig(EvalSettings, EpochSettings):
    """Everything a training run needs; the seed is part of it. The run and evaluation
    settings every algorithm shares are `EpochSettings`' and `EvalSettings`'; the rest are
    AlphaZero's own."""

    #: what a resumed run may change beside the shared groups' (`Config.resume_may_change`):
    #: how much of the clock its evaluations may take
    RESUME_MAY_CHANGE: ClassVar[tuple[str, ...]] = ("eval_share",)
    #: the opponents a run plays from itself: its best network so far, its network unsearched
    OWN_OPPONENTS: ClassVar[tuple[str, ...]] = ("best", "network")

    GROUPS: ClassVar[dict[str, tuple[str, ...]]] = {
        "run": (
            "env",
            "reward_fn",
            "seed",
            "num_epochs",
            "max_wall_seconds",
            "devices",
            "checkpoint_every",
            "keep_checkpoints",
            "save_memory",
            "tensorboard",
            "wandb_project",
        ),
        "selfplay": (
            "num_games",
            "temperature",
            "temperature_moves",
            "opening_moves",
            "max_episode_steps",
            "truncation",
            "warmup_steps",
            "collection_steps_per_epoch",
            "overlap",
            "reanalyse_positions",
        ),
        "train": (
            "memory_capacity",
            "augment",
            "train_batch_size",
            "train_steps_per_epoch",
            "learning_rate",
            "lr_warmup_steps",
            "l2",
            "max_grad_norm",
            "ema_decay",
            "ema_selfplay",
            "value_weight",
            "value_scale",
            "root_value_weight",
        ),
        "eval": (
            "eval_every",
            "eval_share",
            "eval_games",
            "eval_simulations",
            "eval_opponents",
            "eval_accuracy",
            "eval_accuracy_positions",
            "eval_record_games",
            "eval_opening_moves",
            "eval_network_opening_moves",
            "elo_pool_size",
            "elo_games_per_opponent",
            "gating_threshold",
        ),
    }

    env: str = "tic_tac_toe"
    reward_fn: str | None = None  # jumanji games: "uncovered_share" or "pkg.module:function"
    num_games: int = 64  # self-play games in parallel (the batch B)
    network: NetworkConfig = dataclasses.field(default_factory=NetworkConfig)
    search: SearchConfig = dataclasses.field(default_factory=SearchConfig)
    temperature: float = 1.0
    temperature_moves: int | None = None  # moves sampled from the visits; None: every move
    opening_moves: int = 0  # self-play games start after 0..this many random moves; 0: off
    max_episode_steps: int = 512
    # positions per game, times (1 + symmetries) with augment; None: 64 epochs of self-play
    # (64 * collection_steps_per_epoch)
    memory_capacity: int | None = None
    truncation: str = "drop"  # drop | bootstrap
    augment: bool = False  # store board symmetries as extra positions
    learning_rate: float = 2e-3
    lr_warmup_steps: int = 0
    l2: float = 1e-4
    ema_decay: float = 0.9995  # 0: off; else the weights' moving average (per step) plays
    ema_selfplay: bool = False  # with ema_decay: true, the average plays self-play too
    max_grad_norm: float = 1.0
    value_weight: float = 1.0
    value_scale: float = 1.0
    root_value_weight: float = 0.75  # value target: (1 - w) * outcome + w * search root value
    reanalyse_positions: int = 0  # stored positions searched again per epoch; 0: off
    train_batch_size: int = 256
    warmup_steps: int = 8  # self-play steps before the first epoch
    collection_steps_per_epoch: int = 16
    train_steps_per_epoch: int = 32
    overlap: bool | None = None  # self-play on a 2nd thread beside the steps; None: on 1 device
    num_epochs: int = 20
    # (a scheduled evaluation is skipped while those so far took more; the last always runs)
    eval_share: float = 0.0  # at most this share of the wall clock evaluating; 0: no limit
    # simulations at play (evaluations, eval, play); 0: self-play's; None: 4x self-play's
    eval_simulations: int | None = None
    eval_opening_moves: int = 0  # random opening moves in evaluation games (diversity)
    eval_network_opening_moves: int = 4  # at least this many in network vs network games
    elo_pool_size: int = 0  # 0: off; else past evaluated networks kept as Elo opponents
    elo_games_per_opponent: int = 16
    gating_threshold: float = 0.0  # 0: off; else "best" is replaced at this score vs "best"
    devices: int = 0  # 0: every visible device (all hosts' with jax.distributed)
    save_memory: bool = True  # False: smaller checkpoints; resume refills memory (not exact)

    def validate(self) -> None:
        if ":" not in self.env and self.env not in GAMES:
            raise ConfigError(
                f"env must be one of {sorted(GAMES)}, got {self.env!r}."
                f"{suggest(self.env, GAMES)} {BRING_A_GAME}."
            )
        if self.reward_fn is not None:
            check_reward_fn(self.env, self.reward_fn)
        super().validate()  # (the run and evaluation groups)

        spec = game_spec(self.env)
        if self.network.line_features and (
            spec is None or spec.board is None or not spec.board.line
        ):
            lines = [n for n, g in all_games().items() if g.board is not None and g.board.line]
            raise ConfigError(
                f"network.line_features=true needs a game won by k marks in a row "
                f"({' or '.join(lines)}), not env {self.env!r}; leave it out"
            )
        check_range("num_games", self.num_games, low=1)
        check_range("temperature", self.temperature, low=0)
        if self.temperature_moves is not None:
            check_range("temperature_moves", self.temperature_moves, low=0)
        check_range("opening_moves", self.opening_moves, low=0)
        check_range("max_episode_steps", self.max_episode_steps, low=1)
        if self.memory_capacity is not None:
            check_range("memory_capacity", self.memory_capacity, low=1)
        check_choice("truncation", self.truncation, ["drop", "bootstrap"])
        check_range("learning_rate", self.learning_rate, low=0, low_inclusive=False)
        check_range("lr_warmup_steps", self.lr_warmup_steps, low=0)
        check_range("l2", self.l2, low=0)
        check_range("ema_decay", self.ema_decay, low=0, high=1, high_inclusive=False)
        check_range("max_grad_norm", self.max_grad_norm, low=0, low_inclusive=False)
        check_range("value_scale", self.value_scale, low=0, low_inclusive=False)
        check_range("value_weight", self.value_weight, low=0)
        check_range("root_value_weight", self.root_value_weight, low=0, high=1)
        check_range("reanalyse_positions", self.reanalyse_positions, low=0)
        check_range("train_batch_size", self.train_batch_size, low=1)
        check_range("warmup_steps", self.warmup_steps, low=0)
        check_range("collection_steps_per_epoch", self.collection_steps_per_epoch, low=1)
        check_range("train_steps_per_epoch", self.train_steps_per_epoch, low=0)
        if self.eval_simulations is not None:
            check_range("eval_simulations", self.eval_simulations, low=0, high=MAX_NODES - 1)
        check_range("eval_opening_moves", self.eval_opening_moves, low=0)
        check_range("eval_network_opening_moves", self.eval_network_opening_moves, low=0)
        check_range("elo_pool_size", self.elo_pool_size, low=0)
        check_range("elo_games_per_opponent", self.elo_games_per_opponent, low=2)
        if self.elo_games_per_opponent % 2:
            raise ValueError(
                f"elo_games_per_opponent must be even (sides are swapped), got "
                f"{self.elo_games_per_opponent}"
            )
        check_range("gating_threshold", self.gating_threshold, low=0, high=1)
        check_range("eval_share", self.eval_share, low=0, high=1, high_inclusive=False)
        if self.eval_share and self.gating_threshold:
            raise ValueError(
                "eval_share skips evaluations by the clock and gating_threshold makes self-play "
                "follow them, so training would depend on timing: set one of them to 0"
            )
        check_range("devices", self.devices, low=0)

    def resolved(self, module: Any = None) -> AlphaZeroConfig:
        """This config with the settings left to the game (None) filled in, as a run records
        them in `config.json` (`make_alphazero` and `train` resolve their config first).
        `module`: a network given instead of the config's; its value head decides
        `network.value_bins` (its own `value_bins`, else 0: a scalar value).

        The defaults are the recipe measured on Connect Four (docs/configuration.md, "Where the
        defaults come from"): every move of self-play sampled (`temperature_moves`: the episode's
        length), 64 epochs of self-play kept (`memory_capacity`), play with 4x self-play's
        simulations (`eval_simulations`), a win/draw/loss value head for games that can be drawn
        (`GameSpec.draws`; a scalar value for the others and for one-player scores), and an
        unvisited move valued at the network's value under `puct` (`search.fpu`).
        """

        network, search = self.network, self.search.resolved()
        if network.value_bins is None:
            spec = game_spec(self.env)
            bins = 3 if spec is not None and spec.draws else 0
            network = dataclasses.replace(
                network, value_bins=bins if module is None else module_value_bins(module)
            )
        return dataclasses.replace(
            self,
            network=network,
            search=search,
            temperature_moves=(
                self.max_episode_steps if self.temperature_moves is None else self.temperature_moves
            ),
            memory_capacity=(
                64 * self.collection_steps_per_epoch
                if self.memory_capacity is None
                else self.memory_capacity
            ),
            eval_simulations=(
                min(4 * search.num_simulations, MAX_NODES - 1)
                if self.eval_simulations is None
                else self.eval_simulations
            ),
        )

    def check_new_run(self, num_players: int | None = None, *, chance: bool = False) -> None:
        """Checks for a run about to start, not for one read back: runs written before a
        check existed must still load (`load_agent`, `--resume`). `num_players`: the game's,
        once it is built (a one-player game's evaluation is the network alone); `chance`:
        whether it has chance nodes (a search's tree then holds half the simulations)."""
        if chance:
            given = self.eval_simulations
            sims = self.resolved().eval_simulations if given is None else given
            # (0: the evaluation searches as self-play does)
            name = "eval_simulations" if sims else "search.num_simulations"
            sims = sims or self.search.num_simulations
            high = max_simulations(chance=True)
            if sims > high:
                raise ConfigError(
                    f"{name}={sims} is more than an evaluation's search tree holds in a game "
                    f"with chance (a chance node and its outcome a simulation): set {name} in "
                    f"[1, {high}]"
                    + (" (left out, it is 4x search.num_simulations)" if given is None else "")
                )
        if num_players == 1:
            versus = [o for o in self.eval_opponents if o != "random"]  # ("random" the default)
            for name, used in (
                ("eval_opponents", ",".join(versus)),
                ("elo_pool_size", self.elo_pool_size),
                ("gating_threshold", self.gating_threshold),
            ):
                if used:
                    raise ConfigError(
                        f"{name}={used} plays other agents, and {self.env!r} is a one-player "
                        f"game: its evaluation plays the network alone (mean return); leave "
                        f"{name} out"
                    )
        if self.ema_selfplay and not self.ema_decay:
            # (runs recorded before the average was on by default hold exactly this: read back,
            # they load; a new run is told)
            raise ConfigError(
                "ema_selfplay=true gives self-play the weights' moving average, and there is "
                "none (ema_decay=0): set ema_decay in (0, 1) or leave ema_selfplay out"
            )
        if self.gating_threshold and "best" not in self.eval_opponents:
            raise ConfigError(
                f"gating_threshold={self.gating_threshold:g} gates on the score against the "
                f"best network, which is played only with 'best' in eval_opponents (now "
                f"{','.join(self.eval_opponents) or 'none'}); add it or set gating_threshold=0"
            )


def check_reward_fn(env: str, reward_fn: str) -> None:
    """A `ConfigError` unless `reward_fn` can name a reward for `env`: a jumanji game, and a
    name in `turbozero.envs.jumanji.REWARDS` or a ``"package.module:function"`` (imported when
    the game is built, which says what is wrong with it)."""

    if not env.startswith("jumanji:"):
        raise ConfigError(
            f"reward_fn={reward_fn!r} replaces a jumanji game's reward; env {env!r} is not one "
            f"(leave reward_fn out)"
        )
    if reward_fn not in REWARDS and ":" not in reward_fn:
        raise ConfigError(
            f"reward_fn={reward_fn!r} is neither a registered reward ({', '.join(REWARDS)}) "
            f"nor 'package.module:function'.{suggest(reward_fn, REWARDS)}"
        )


#: the board recipe: ResNet 4x32, 32 simulations, 30 minutes on a 2-core CPU, evaluated against
#: random, 100-simulation rollout MCTS and its own earlier networks (Elo); the board games'
#: presets start from it and add their game
register_base(
    "board",
    algorithm="alphazero",
    settings={
        "num_games": 64,
        "network": {"kind": "resnet", "num_blocks": 4, "num_channels": 32},
        "search": {"num_simulations": 32, "max_nodes": 64},
        "train_batch_size": 512,
        "warmup_steps": 16,
        "num_epochs": 100_000,
        "max_wall_seconds": 1800.0,  # the budget the presets are measured at (bench/transfer.py)
        "eval_every": 10,
        "eval_games": 32,
        "eval_opponents": ("random", "mcts:100"),
        "elo_pool_size": 4,
    },
)

#: jumanji's one-player puzzles: MLP, muzero_puct, 5 minutes on CPU
register_base(
    "puzzle",
    algorithm="alphazero",
    settings={
        "num_games": 64,
        "network": {"kind": "mlp", "hidden": (256, 256)},
        "search": {"selector": "muzero_puct", "num_simulations": 32, "max_nodes": 64},
        "memory_capacity": 128,
        "train_batch_size": 256,
        "warmup_steps": 16,
        "collection_steps_per_epoch": 16,
        "train_steps_per_epoch": 32,
        "num_epochs": 1000,
        "max_wall_seconds": 300.0,
        "eval_games": 64,
        "eval_opponents": (),
        "root_value_weight": 0.0,
        # (measured before the defaults became the Connect Four recipe; kept as measured)
        "learning_rate": 1e-3,
        "ema_decay": 0.0,
        "overlap": False,
    },
)

register_preset(
    "minesweeper",
    "jumanji Minesweeper 10x10 with 10 mines (one player), MLP, muzero_puct, rewarded with the "
    "share of the board uncovered (the user's notebook), 5 minutes on CPU. The search steps the "
    "true state and so sees the hidden mines: its return is not a player's; the network's alone "
    "(eval/network/return) plays from what the player sees",
    algorithm="alphazero",
    base="puzzle",
    settings={
        "env": "jumanji:Minesweeper-v0",
        "reward_fn": "uncovered_share",
        "temperature_moves": 90,
        "max_episode_steps": 90,
        "value_scale": 10.0,
        "eval_every": 5,
        "eval_simulations": 0,
    },
)

register_preset(
    "maze",
    "jumanji Maze 10x10 (one player: reward 1 for reaching the target within 100 steps), MLP, "
    "muzero_puct, 5 minutes on CPU; the whole maze is the player's to see, so its search is a "
    "fair player",
    algorithm="alphazero",
    base="puzzle",
    settings={
        "env": "jumanji:Maze-v0",
        "search": {"discount": 0.97},
        "temperature_moves": 100,
        "max_episode_steps": 100,  # (the maze's own time limit)
        "truncation": "bootstrap",
        "eval_every": 50,
        "eval_simulations": 128,
    },
)
