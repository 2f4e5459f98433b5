"""The AlphaZero training loop: warm-up self-play, then epochs of collection, training steps on
samples drawn from memory inside the compiled step, evaluation, logging and checkpoints.

Two levels: `make_alphazero(config)` returns the compiled pieces for users who compose them, and
`train(config, run_dir)` runs the whole loop with a progress bar, `metrics.jsonl`, plots,
`summary.json` and resumable checkpoints.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optax

from turbozero import envs, struct
from turbozero.alphazero.augment import check_augment_fns, horizontal_flip, square_symmetries
from turbozero.alphazero.config import AlphaZeroConfig, SearchConfig, settled
from turbozero.alphazero.losses import az_loss
from turbozero.alphazero.reanalyse import Reanalyse, make_reanalyse
from turbozero.alphazero.selfplay import SelfPlay, SelfPlayState, make_selfplay
from turbozero.alphazero.sharding import AXIS
from turbozero.config import ConfigError
from turbozero.envs.chance import without_chance
from turbozero.envs.core import Env
from turbozero.gamespec import all_games, game_spec
from turbozero.memory import EpisodeBuffer, make_episode_buffer
from turbozero.nets import AZResnet, AZResnetConfig, PolicyValueMLP, init_params
from turbozero.search import Search, Selector, gumbel, make_search, muzero_puct, puct, shard_search
from turbozero.types import Array, Params, PRNGKey
from turbozero.validate import check_count


@struct.dataclass
class TrainState(struct.Struct):
    """The whole resumable state of a run."""

    params: Params
    opt_state: Any
    selfplay: SelfPlayState
    key: PRNGKey
    epoch: Array  # [] int32, epochs finished
    env_steps: Array  # [] int32, self-play positions played
    train_steps: Array  # [] int32, gradient steps taken
    ema: Params | None = None  # the weights' moving average (`ema_decay`), else None


def acting_params(state: TrainState) -> Params:
    """The weights that play (evaluation, the saved agent, and self-play and reanalysis unless
    `ema_selfplay=false`): the moving average of the trained weights with `ema_decay`, else the
    trained weights themselves."""
    return state.params if state.ema is None else state.ema


def ema_update(ema: Params, params: Params, decay: float, step: Array) -> Params:
    """One step of the weights' exponential moving average, `d * ema + (1 - d) * params`.

    `d = min(decay, (1 + step) / (10 + step))` after `step` gradient steps, so the average of
    an early run is not held near the random initial weights (the warm-up of TensorFlow's
    `ExponentialMovingAverage`); batch-norm statistics are averaged like the weights."""
    d = jnp.minimum(decay, (1.0 + step) / (10.0 + step))
    return optax.incremental_update(params, ema, step_size=1.0 - d)


class AlphaZeroSystem(NamedTuple):
    """The configured pieces (pure functions; `train` compiles them once per run)."""

    config: AlphaZeroConfig
    env: Env
    module: Any
    eval_fn: Callable[[Params, Array, PRNGKey], tuple[Array, Array]]
    selfplay: SelfPlay
    optimizer: optax.GradientTransformation
    init: Callable[[PRNGKey], TrainState]
    collect: Callable[[TrainState, int], tuple[TrainState, dict[str, Array]]]
    train_steps: Callable[[TrainState, int], tuple[TrainState, dict[str, Array]]]
    reanalyse: Reanalyse | None = None


def make_selector(s: SearchConfig):
    """The selection rule a `SearchConfig` names, with its settings."""
    s = s.resolved()
    # the root's exploration, the same settings in both PUCT rules
    root = {
        "dirichlet_alpha": s.dirichlet_alpha,
        "dirichlet_fraction": s.dirichlet_fraction,
        "forced_playouts": s.forced_playouts,
    }
    if s.selector == "puct":
        fpu = settled(s.fpu, "search.fpu")
        return puct(
            c_puct=s.c_puct, normalize_q=False, fpu=fpu, fpu_reduction=s.fpu_reduction, **root
        )
    if s.selector == "muzero_puct":
        return muzero_puct(pb_c_init=s.pb_c_init, pb_c_base=s.pb_c_base, **root)
    return gumbel(
        max_num_considered_actions=s.max_num_considered_actions, gumbel_scale=s.gumbel_scale
    )


def make_network(cfg: AlphaZeroConfig, env: Env):
    n = cfg.resolved().network
    if n.kind == "resnet":
        return AZResnet(
            AZResnetConfig(
                policy_head_out_size=env.num_actions,
                num_blocks=n.num_blocks,
                num_channels=n.num_channels,
                value_bins=settled(n.value_bins, "network.value_bins"),
                bounded_value=env.num_players == 2,
                line_length=_line_length(env) if n.line_features else 0,
            )
        )
    return PolicyValueMLP(
        num_actions=env.num_actions,
        hidden=n.hidden,
        value_bins=settled(n.value_bins, "network.value_bins"),
        bounded_value=env.num_players == 2,
    )


def _line_length(env: Env) -> int:
    spec = game_spec(env.name)
    board = None if spec is None else spec.board
    if board is None or board.line is None:
        raise ValueError(f"network.line_features: {env.name!r} is not won by k marks in a row")
    return board.line[2]


def augmentations(env: Env):
    """The board symmetries `env`'s game file says it has (`Board.symmetry`), as augmentation
    functions; none for other games."""
    spec = game_spec(env.name)
    board = None if spec is None else spec.board
    if board is None or board.symmetry is None:
        return []
    kind, size = board.symmetry
    return square_symmetries(size) if kind == "square" else [horizontal_flip(size)]


def learning_rate_schedule(cfg: AlphaZeroConfig) -> float | optax.Schedule:
    """The learning rate per gradient step: a linear warmup from 0 over `lr_warmup_steps`
    (if any), then `learning_rate`."""
    if cfg.lr_warmup_steps:
        return optax.linear_schedule(0.0, cfg.learning_rate, cfg.lr_warmup_steps)
    return cfg.learning_rate


def value_target(outcome: Array, root_value: Array, root_value_weight: float) -> Array:
    """The value target `[S]`: the game's outcome mixed with the search's root value (both for
    the player to move); weight 0 is AlphaZero's outcome alone. The root value is what a search
    of that position expected, so mixing it in lowers the target's variance (an outcome is one
    draw of a noisy self-play game) at the price of the network's own bias."""
    if not root_value_weight:
        return outcome
    return (1.0 - root_value_weight) * outcome + root_value_weight * root_value


@dataclasses.dataclass(frozen=True)
class AlphaZeroSpec:
    """What AlphaZero's step functions are bound to (built by `make_alphazero`)."""

    config: AlphaZeroConfig
    env: Env
    module: Any
    optimizer: optax.GradientTransformation
    loss_fn: Callable[..., Any]
    memory: EpisodeBuffer
    selfplay: SelfPlay
    reanalyse: Reanalyse | None


def make_alphazero(
    config: AlphaZeroConfig,
    *,
    env: Env | None = None,
    module: Any = None,
    selector: Any = None,
    optimizer: optax.GradientTransformation | None = None,
    loss_fn: Callable[..., Any] | None = None,
    augment_fns: Any = None,
    mesh: jax.sharding.Mesh | None = None,
    systems: Systems | None = None,
) -> AlphaZeroSystem:
    """Build the environment, network, search, memory, self-play and the compiled-step bodies.

    The keyword arguments replace the parts the config would build (users' own games, flax
    modules, selectors, optax optimizers, losses with `az_loss`'s signature, augmentations);
    everything else comes from `config`. With a `mesh` of several devices (`Sharder.mesh`),
    each device searches its own games (`turbozero.search.shard_search`).

    Built from the config alone (no parts given) with `systems`, the functions come from that
    cache when it built them for a config equal outside `RUN_SETTINGS` (see `Systems`).
    """
    if systems is not None and all(
        part is None for part in (env, module, selector, optimizer, loss_fn, augment_fns)
    ):
        return systems.system(config, mesh)
    return _build_alphazero(config, env, module, selector, optimizer, loss_fn, augment_fns, mesh)


#: settings no compiled program reads: the run's own (but its game), its evaluations, and its
#: schedule of moves and steps (`Trainer` and `Evaluator` read them from the system's `config`;
#: the memory's size is resolved before); configs differing only here share a system's functions
#: in a `Systems` (checked in tests/test_own_game.py)
RUN_SETTINGS = (
    frozenset(AlphaZeroConfig.GROUPS["run"]) - {"env", "reward_fn"}
    | frozenset(AlphaZeroConfig.GROUPS["eval"])
    | {"warmup_steps", "collection_steps_per_epoch", "train_steps_per_epoch", "overlap"}
)


class Systems:
    """AlphaZero systems (and their evaluations' agents) kept for reuse by a caller that trains
    several runs in one process: a sweep, a run and its resume, a test suite. The caller owns
    it (the library keeps none): pass it to `train_alphazero` or `make_alphazero`, and a config
    equal to an earlier one outside `RUN_SETTINGS` (with the same mesh and the same registration
    of its game) finds JAX's traced and lowered programs in memory instead of building them
    again (a tiny tic-tac-toe run's second training: 1.2 s instead of 3.6 s).

    Args:
        keep: systems kept, the most recently used (the oldest goes first); an evaluation's
            agents are kept for twice as many.
    """

    def __init__(self, *, keep: int = 4) -> None:
        self.keep = check_count("keep", keep, low=1)
        #: `{(program settings, mesh): (the game's registration, system)}`, newest last
        self._systems: collections.OrderedDict[tuple[Any, Any], tuple[Any, AlphaZeroSystem]] = (
            collections.OrderedDict()
        )
        #: `{(id(a system's self-play), simulations): (that self-play, agent)}`
        self._agents: collections.OrderedDict[tuple[int, int], tuple[Any, Any]] = (
            collections.OrderedDict()
        )

    def system(self, config: AlphaZeroConfig, mesh: jax.sharding.Mesh | None) -> AlphaZeroSystem:
        """`make_alphazero(config, mesh=mesh)`, reusing the functions built for a config equal
        outside `RUN_SETTINGS`; the system's `config` is always `config` (resolved)."""
        cfg = config.resolved()
        game = all_games().get(cfg.env)
        program = tuple(
            (f.name, getattr(cfg, f.name))
            for f in dataclasses.fields(cfg)
            if f.name not in RUN_SETTINGS
        )
        try:
            key = (program, mesh)
            hash(key)
        except TypeError:  # (a setting holding a list: built every time)
            return _build_alphazero(cfg, None, None, None, None, None, None, mesh)
        kept = self._systems.get(key)
        if kept is not None and kept[0] is game:  # (a game registered again is built again)
            self._systems.move_to_end(key)
            return kept[1]._replace(config=cfg)
        system = _build_alphazero(cfg, None, None, None, None, None, None, mesh)
        self._systems[key] = (game, system)
        while len(self._systems) > self.keep:
            self._systems.popitem(last=False)
        return system

    def agent(self, az: AlphaZeroSystem, simulations: int, build: Callable[[], Any]) -> Any:
        """The evaluations' agent of `az` at `simulations` (`build()` the first time): a system
        this cache gave before plays with the same agent, so its compiled matches are found in
        memory."""
        key = (id(az.selfplay), simulations)
        kept = self._agents.get(key)
        if kept is not None and kept[0] is az.selfplay:
            self._agents.move_to_end(key)
            return kept[1]
        agent = build()
        self._agents[key] = (az.selfplay, agent)
        while len(self._agents) > 2 * self.keep:
            self._agents.popitem(last=False)
        return agent


def _build_alphazero(
    config: AlphaZeroConfig,
    env: Env | None,
    module: Any,
    selector: Any,
    optimizer: optax.GradientTransformation | None,
    loss_fn: Callable[..., Any] | None,
    augment_fns: Any,
    mesh: jax.sharding.Mesh | None,
) -> AlphaZeroSystem:
    """`make_alphazero`'s build, every time."""
    cfg = config.resolved(module)  # (the settings left to the game filled in)
    env = env if env is not None else envs.make(cfg.env, reward_fn=cfg.reward_fn)
    module = module if module is not None else make_network(cfg, env)
    support = value_support(cfg)
    eval_fn = functools.partial(network_eval, module, support, cfg.value_scale)
    augment = validate_alphazero(cfg, env, augment_fns, mesh)
    search, fast_search = build_searches(cfg, env, eval_fn, selector, mesh)
    memory = make_episode_buffer(
        num_games=cfg.num_games,
        capacity=settled(cfg.memory_capacity, "memory_capacity") * (1 + len(augment)),
        sample_size=cfg.train_batch_size,
        num_players=env.num_players,
        discount=cfg.search.discount,
        truncation=cfg.truncation,
    )
    selfplay = make_selfplay(
        search,
        memory,
        batch_size=cfg.num_games,
        max_episode_steps=cfg.max_episode_steps,
        temperature=cfg.temperature,
        temperature_moves=settled(cfg.temperature_moves, "temperature_moves"),
        augment_fns=augment,
        fast_search=fast_search,
        full_fraction=cfg.search.full_fraction,
        opening_moves=cfg.opening_moves,
        store_states=cfg.reanalyse_positions > 0,
    )
    reanalyse = None
    if cfg.reanalyse_positions:
        reanalyse = make_reanalyse(
            search, num_positions=cfg.reanalyse_positions, augment_fns=augment
        )
    if optimizer is None:
        optimizer = optax.chain(
            optax.clip_by_global_norm(cfg.max_grad_norm), optax.adam(learning_rate_schedule(cfg))
        )
    if loss_fn is None:
        loss_fn = functools.partial(
            az_loss,
            value_weight=cfg.value_weight,
            l2=cfg.l2,
            value_support=support,
            value_scale=cfg.value_scale,
        )
    spec = AlphaZeroSpec(cfg, env, module, optimizer, loss_fn, memory, selfplay, reanalyse)
    return AlphaZeroSystem(
        config=cfg,
        env=env,
        module=module,
        eval_fn=eval_fn,
        selfplay=selfplay,
        optimizer=optimizer,
        init=functools.partial(init_train_state, spec),
        collect=functools.partial(collect_positions, spec),
        train_steps=functools.partial(train_steps, spec),
        reanalyse=reanalyse,
    )


def validate_alphazero(
    cfg: AlphaZeroConfig, env: Env, augment_fns: Any, mesh: jax.sharding.Mesh | None
) -> list[Any]:
    """The checks that need the game and the devices (the config checked itself); returns the
    augmentations: those given, else the game's symmetries where `cfg.augment`."""
    if cfg.reanalyse_positions and mesh is not None and cfg.reanalyse_positions % mesh.size:
        raise ConfigError(
            f"reanalyse_positions must be a multiple of the {mesh.size} devices (each searches "
            f"its share), got {cfg.reanalyse_positions}"
        )
    if augment_fns is not None:
        augment = list(augment_fns)
        check_augment_fns(env, augment)
    else:
        augment = augmentations(env) if cfg.augment else []
    copies = 1 + len(augment)
    capacity = settled(cfg.memory_capacity, "memory_capacity")
    slots = cfg.num_games * capacity * copies
    if cfg.train_batch_size > slots:
        raise ConfigError(
            f"train_batch_size must be at most num_games * memory_capacity * (1 + "
            f"augmentations) = {cfg.num_games} * {capacity} * {copies} = {slots} (what memory "
            f"holds), got {cfg.train_batch_size}"
        )
    if cfg.reanalyse_positions > slots:
        raise ConfigError(
            f"reanalyse_positions must be at most num_games * memory_capacity * (1 + "
            f"augmentations) = {slots} (what memory holds), got {cfg.reanalyse_positions}"
        )
    return augment


def value_support(cfg: AlphaZeroConfig) -> Array | None:
    """The value head's bins' centres `[value_bins]` on [-1, 1], or None for a scalar head."""
    bins = settled(cfg.network.value_bins, "network.value_bins")
    return jnp.linspace(-1.0, 1.0, bins) if bins else None


def network_eval(
    module: Any, support: Array | None, value_scale: float, params: Params, obs: Array, key: Any
) -> tuple[Array, Array]:
    """The search's evaluation: policy logits `[B, A]` and value `[B]` in the game's units."""
    logits, value = module.apply(params, obs, train=False)
    if support is not None:
        value = jnp.sum(jax.nn.softmax(value, -1) * support, -1)
    return logits, value * value_scale


def build_searches(
    cfg: AlphaZeroConfig,
    env: Env,
    eval_fn: Callable[..., Any],
    selector: Any,
    mesh: jax.sharding.Mesh | None,
) -> tuple[Search, Search | None]:
    """Self-play's search, and playout cap randomisation's cheaper one (no root noise) or
    None; each device searches its own games on a mesh of several."""
    searched_env = env if cfg.search.chance == "nodes" else without_chance(env)
    rule = selector if selector is not None else make_selector(cfg.search)

    def build(num_simulations: int, chooser: Selector) -> Search:
        built = make_search(
            searched_env,
            eval_fn,
            selector=chooser,
            num_simulations=num_simulations,
            max_nodes=cfg.search.max_nodes,
            discount=cfg.search.discount,
            reuse=cfg.search.reuse,
            chance_widening=cfg.search.chance_widening,
        )
        if mesh is not None and mesh.size > 1:
            built = shard_search(built, mesh, AXIS)
        return built

    fast = None
    if cfg.search.fast_simulations:
        fast = build(cfg.search.fast_simulations, rule.without_noise())
    return build(cfg.search.num_simulations, rule), fast


def init_train_state(spec: AlphaZeroSpec, key: PRNGKey) -> TrainState:
    """A fresh run's state: initial weights, optimizer, self-play games and empty memory."""
    env = spec.env
    k_net, k_play, key = jax.random.split(key, 3)
    example = env.observe(env.init(jax.random.PRNGKey(0))[0])
    params = init_params(spec.module, example, k_net)
    return TrainState(
        params=params,
        opt_state=spec.optimizer.init(params["params"]),
        selfplay=spec.selfplay.init(k_play),
        key=key,
        epoch=jnp.int32(0),
        env_steps=jnp.int32(0),
        train_steps=jnp.int32(0),
        ema=params if spec.config.ema_decay else None,
    )


def collect_positions(spec: AlphaZeroSpec, state: TrainState, num_steps: int):
    """`num_steps` self-play moves in every game (then reanalysis, if set); summed metrics."""
    cfg = spec.config
    key, sub = jax.random.split(state.key)
    playing = acting_params(state) if cfg.ema_selfplay else state.params
    sp, metrics = spec.selfplay.collect(state.selfplay, playing, sub, num_steps=num_steps)
    if spec.reanalyse is not None:  # fresh targets for stored positions, after the new ones
        key, sub = jax.random.split(key)
        memory_state, more = spec.reanalyse.run(sp.memory, playing, sub)
        sp, metrics = sp.replace(memory=memory_state), {**metrics, **more}
    return state.replace(
        selfplay=sp,
        key=key,
        env_steps=state.env_steps + num_steps * cfg.num_games,
    ), metrics


def gradient_step(spec: AlphaZeroSpec, params, opt_state, memory_state, key):
    """One gradient step on a sample from memory: `(params, opt_state, metrics)`."""
    cfg, module, optimizer = spec.config, spec.module, spec.optimizer
    sample = spec.memory.sample(memory_state, key)
    batch = dict(
        observation=sample.experience["observation"],
        policy=sample.experience["policy"],
        mask=sample.experience["mask"],
        outcome=value_target(
            sample.outcome, sample.experience["root_value"], cfg.root_value_weight
        ),
        valid=sample.valid,
    )

    def objective(trainable):
        return spec.loss_fn({**params, "params": trainable}, batch, apply_fn=module.apply)

    (_, (metrics, new_stats)), grads = jax.value_and_grad(objective, has_aux=True)(params["params"])
    updates, new_opt_state = optimizer.update(grads, opt_state, params["params"])
    new_params = {**params, "params": optax.apply_updates(params["params"], updates)}
    if new_stats is not None:
        new_params["batch_stats"] = new_stats
    # a sample with no finished position (memory not yet filled) leaves everything as it
    # was: its loss is 0, but the L2 term, Adam's moments and batch-norm statistics (over
    # the zero rows) would still move
    has_data = jnp.any(sample.valid)
    keep = functools.partial(jnp.where, has_data)
    new_params = jax.tree_util.tree_map(keep, new_params, params)
    new_opt_state = jax.tree_util.tree_map(keep, new_opt_state, opt_state)
    return new_params, new_opt_state, metrics


def train_step(spec: AlphaZeroSpec, state: TrainState):
    """One gradient step and the weights' moving average: `(state, metrics)`."""
    key, sub = jax.random.split(state.key)
    params, opt_state, metrics = gradient_step(
        spec, state.params, state.opt_state, state.selfplay.memory, sub
    )
    ema = state.ema
    if ema is not None:
        ema = ema_update(ema, params, spec.config.ema_decay, state.train_steps)
    new = state.replace(
        params=params,
        opt_state=opt_state,
        key=key,
        train_steps=state.train_steps + 1,
        ema=ema,
    )
    return new, metrics


def train_steps(spec: AlphaZeroSpec, state: TrainState, num_steps: int):
    """`num_steps` gradient steps; metrics averaged over them.

    A Python loop (unrolled under jit): XLA:CPU runs convolution gradients ~20x slower inside
    a while loop than outside one, so no lax.scan here. `train` jits `train_steps(state, 1)`
    once and calls it from the host instead."""
    metrics = []
    for _ in range(num_steps):
        state, m = train_step(spec, state)
        metrics.append(m)
    return state, jax.tree_util.tree_map(lambda *xs: jnp.mean(jnp.stack(xs)), *metrics)
