"""TD learning over afterstates, TD-Gammon's way: `make_td(config)`.

A value network rates afterstates (the position a turn leaves, the opponent to roll) from the side
of the player who just moved, as a distribution over the game's results (`TDRules.results`:
backgammon's lost or won 1, 2 or 3 points). Every one of `B` games plays one turn per step: the
mover lists its plays for its dice and keeps the one of highest expected points (greedy: the dice
explore). The mover's chosen afterstate then teaches the opponent's previous one, TD(0): its
target is the new afterstate's distribution with the results reversed (what the mover wins the
opponent loses), or the exact result where the turn won the game. One Adam step on the `B`
targets follows each turn, and games that ended start again.

Shape letters: `B` games, `F` features, `R` results, `N` plays of a turn.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Sequence
from typing import Any, ClassVar, NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax

from turbozero.arena.agents import Agent, AgentOutput, make_agent
from turbozero.envs.core import Env
from turbozero.gamespec import game_spec
from turbozero.nets.mlp import dense_layers
from turbozero.struct import pytree_bytes
from turbozero.td.config import TDConfig
from turbozero.td.lookahead import RATE_CHUNK, TDSearchPolicy, best_replies, rated
from turbozero.td.rules import SoloRules, TDRules
from turbozero.td.solo import SoloTD, make_solo, solo_agent
from turbozero.types import Array, Params, PRNGKey, PyTree

#: a double's second half is played in this share of the batch's slots (a sixth of rolls are
#: doubles; where more come at once, the rest play one half of theirs that step)
DOUBLE_SLOTS = 4


class ValueNet(nn.Module):
    """An MLP from afterstate features `[N, F]` to result logits `[N, R]` (ReLU layers,
    `turbozero.nets.mlp.dense_layers`; the logits' layer starts at zero)."""

    hidden: Sequence[int]
    num_results: int

    @nn.compact
    def __call__(self, x: Array) -> Array:
        x = dense_layers(x, self.hidden)
        return nn.Dense(self.num_results, kernel_init=nn.initializers.zeros)(x)


class TDState(NamedTuple):
    """A TD learner's whole state (a checkpoint holds it; resuming from it is exact).

    Attributes:
        params: the value network's variables.
        opt_state: Adam's state.
        boards: `[B, *]` each game's position, the mover to play.
        dice: `[B, 2]` the mover's roll.
        previous: `[B, F]` the features of each game's last afterstate (the opponent's).
        has_previous: `[B]` bool, false at a game's first turn.
        key: consumed by the next rolls.
    """

    params: Params
    opt_state: Any
    boards: Array
    dice: Array
    previous: Array
    has_previous: Array
    key: PRNGKey


@dataclasses.dataclass(frozen=True, eq=False)
class TD:
    """A TD learner bound to its config (`make_td`).

    Attributes:
        config: its `TDConfig`.
        rules: the game's `TDRules`.
        net: the value network.
        optimizer: Adam.
        init: `init(key) -> TDState`.
        train: `train(state, steps) -> (state, metrics)`, `steps` turns of every game, compiled
            (`steps` static): `loss` `[steps]`, `games` `[steps]` finished games.
        distribution: `distribution(params, boards [N, *]) -> [N, R]` result probabilities of
            afterstates (one-hot where the game is won).
        equity: `equity(params, boards [N, *]) -> [N]` their expected points.
    """

    config: TDConfig
    rules: TDRules
    net: ValueNet
    optimizer: optax.GradientTransformation
    init: Any
    train: Any
    distribution: Any
    equity: Any


def _logits(net: ValueNet, params: Params, x: Array) -> Array:
    """`[N, R]` result logits of features `x` `[N, F]`."""
    logits: Array = net.apply(params, x)  # type: ignore[assignment]
    return logits


def distribution(rules: TDRules, net: ValueNet, params: Params, boards: Array) -> Array:
    """`[N, R]` result probabilities of the afterstates `boards` `[N, *]`."""
    x = jax.vmap(rules.features)(boards)
    probs = jax.nn.softmax(_logits(net, params, x), axis=-1)
    over, index = jax.vmap(rules.result)(boards)
    exact = jax.nn.one_hot(index, len(rules.results), dtype=probs.dtype)
    return jnp.where(over[:, None], exact, probs)


def equity(rules: TDRules, net: ValueNet, params: Params, boards: Array) -> Array:
    """`[N]` expected points of the afterstates `boards` for the player who just moved."""
    return distribution(rules, net, params, boards) @ jnp.asarray(rules.results, jnp.float32)


def play_turns(rules: TDRules, net: ValueNet, params: Params, boards: Array, dice: Array) -> Array:
    """`[B, *]` afterstates of one turn in each game, each its best play at 0 ply with only the
    valid plays rated (`turbozero.td.lookahead.best_replies`); a roll played twice
    (`rules.again`) plays its second half in `B // DOUBLE_SLOTS` slots (at least 8, at most
    `B`)."""
    rate = functools.partial(equity, rules, net, params)

    def choose(b: Array, d: Array) -> Array:
        return best_replies(rules, rate, b, d)[0]

    after = choose(boards, dice)
    over = jax.vmap(rules.result)(after)[0]
    again = jax.vmap(rules.again)(dice) & ~over
    B = boards.shape[0]
    slots = jnp.argsort(~again, stable=True)[: min(B, max(B // DOUBLE_SLOTS, 8))]
    second = choose(after[slots], dice[slots])
    second = jnp.where(again[slots].reshape((-1,) + (1,) * (after.ndim - 1)), second, after[slots])
    return after.at[slots].set(second)


def init_state(
    rules: TDRules, net: ValueNet, optimizer: optax.GradientTransformation, B: int, key: PRNGKey
) -> TDState:
    """A new learner: fresh network, every game at the start."""
    k_net, k_dice, key = jax.random.split(key, 3)
    params = net.init(k_net, jnp.zeros((1, rules.num_features), jnp.float32))
    return TDState(
        params=params,
        opt_state=optimizer.init(params),
        boards=jnp.broadcast_to(rules.start, (B, *rules.start.shape)),
        dice=jax.vmap(rules.roll)(jax.random.split(k_dice, B)),
        previous=jnp.zeros((B, rules.num_features), jnp.float32),
        has_previous=jnp.zeros((B,), bool),
        key=key,
    )


def td_loss(net: ValueNet, params: Params, x: Array, target: Array, weight: Array) -> Array:
    """Cross-entropy of the predicted results of `x` `[B, F]` against `target` `[B, R]`, over
    the rows of `weight` `[B]` 1."""
    logp = jax.nn.log_softmax(_logits(net, params, x), axis=-1)
    return -(weight * (target * logp).sum(-1)).sum() / jnp.maximum(weight.sum(), 1.0)


def td_step(
    rules: TDRules, net: ValueNet, optimizer: optax.GradientTransformation, state: TDState
) -> tuple[TDState, dict[str, Array]]:
    """One turn of every game, and one gradient step on the opponents' previous afterstates."""
    key, k_dice = jax.random.split(state.key)
    after = play_turns(rules, net, state.params, state.boards, state.dice)
    target = jax.lax.stop_gradient(distribution(rules, net, state.params, after)[:, ::-1])
    weight = state.has_previous.astype(jnp.float32)
    loss, grads = jax.value_and_grad(functools.partial(td_loss, net))(
        state.params, state.previous, target, weight
    )
    updates, opt_state = optimizer.update(grads, state.opt_state, state.params)
    params = optax.apply_updates(state.params, updates)
    over = jax.vmap(rules.result)(after)[0]
    B = after.shape[0]
    boards = jnp.where(
        over.reshape((-1,) + (1,) * (after.ndim - 1)), rules.start, jax.vmap(rules.flip)(after)
    )
    new = TDState(
        params=params,
        opt_state=opt_state,
        boards=boards.astype(state.boards.dtype),
        dice=jax.vmap(rules.roll)(jax.random.split(k_dice, B)),
        previous=jax.vmap(rules.features)(after),
        has_previous=~over,
        key=key,
    )
    return new, {"loss": loss, "games": over.sum()}


def train_steps(
    rules: TDRules,
    net: ValueNet,
    optimizer: optax.GradientTransformation,
    state: TDState,
    steps: int,
) -> tuple[TDState, dict[str, Array]]:
    """`steps` of `td_step` in one `lax.scan`."""

    def body(s: TDState, _: Any) -> tuple[TDState, dict[str, Array]]:
        return td_step(rules, net, optimizer, s)

    return jax.lax.scan(body, state, None, length=steps)


def make_td(config: TDConfig) -> TD | SoloTD:
    """The TD learner of `config`: its game's `TDRules`, network and optimiser, or, for a game
    whose file gives `SoloRules` (2048), the one-player learner (`turbozero.td.solo`)."""
    spec = game_spec(config.env)
    assert spec is not None and spec.afterstates is not None  # (TDConfig.validate says so)
    rules = spec.afterstates()
    if isinstance(rules, SoloRules):
        return make_solo(config, rules)
    net = ValueNet(hidden=tuple(config.hidden), num_results=len(rules.results))
    optimizer = optax.adam(config.learning_rate)
    return TD(
        config=config,
        rules=rules,
        net=net,
        optimizer=optimizer,
        init=functools.partial(init_state, rules, net, optimizer, config.num_games),
        train=jax.jit(functools.partial(train_steps, rules, net, optimizer), static_argnums=1),
        distribution=functools.partial(distribution, rules, net),
        equity=functools.partial(equity, rules, net),
    )


class CheckpointState(NamedTuple):
    """What a TD run's checkpoint holds.

    Attributes:
        learner: the `TDState`.
        best_params: the network with the most points a game against the first opponent.
        best_points: `[]` those points (-inf before the first evaluation).
        eval_key: consumed by the next evaluation.
    """

    learner: TDState
    best_params: Params
    best_points: Array
    eval_key: PRNGKey


def initial_checkpoint(td: TD | SoloTD) -> CheckpointState:
    """The state a run starts from (`jit` it)."""
    eval_key, key = jax.random.split(jax.random.PRNGKey(td.config.seed))
    learner = td.init(key)
    return CheckpointState(learner, learner.params, jnp.float32(-jnp.inf), eval_key)


def abstract_checkpoint(td: TD | SoloTD) -> Any:
    """Shapes and dtypes of a run's `CheckpointState` (nothing computed); to restore into."""
    return jax.eval_shape(functools.partial(initial_checkpoint, td))


def keep_best(ckpt: CheckpointState, points: float) -> CheckpointState:
    """`ckpt` with its learner's network kept as the best if its evaluation's `points` a game
    (against the first opponent) beat the best's."""
    better = points > float(ckpt.best_points)
    return ckpt._replace(
        best_params=ckpt.learner.params if better else ckpt.best_params,
        best_points=jnp.float32(points) if better else ckpt.best_points,
    )


def epoch_metrics(metrics: dict[str, Any]) -> dict[str, float]:
    """An epoch's row of `train`'s metrics (`[steps]` leaves): the mean `loss` and the `games`
    finished; a one-player game's `episode_return`, the mean score of those games (NaN where
    none finished)."""
    games = float(np.sum(np.asarray(metrics["games"])))
    row = {"loss": float(np.mean(np.asarray(metrics["loss"]))), "games": games}
    if "returns" in metrics:
        total = float(np.sum(np.asarray(metrics["returns"])))
        row["episode_return"] = total / games if games else float("nan")
    return row


@dataclasses.dataclass(frozen=True, eq=False)
class TDPolicy:
    """`policy_fn(params, states [B], key) -> AgentOutput` of a TD value network: in each state
    of the game's `Env` the first action of its play of highest equity (`TDRules.state_plays`),
    the `Env`'s no-move action where none is valid; `value` that equity. Hashed by identity."""

    #: what `AgentOutput.value` measures, for the play page: the points the mover expects
    value_unit: ClassVar[str] = "points"

    td: TD
    num_actions: int

    def memory_bytes(self, states: PyTree) -> int:
        """Bytes one call works in for `states` `[B]` (shapes suffice): every state's plays
        listed, and the valid ones packed and rated in chunks (`rated`)."""
        plays = jax.eval_shape(jax.vmap(self.td.rules.state_plays), states)
        size = plays[1].size
        return pytree_bytes(plays) + 3 * 4 * size + rating_bytes(self.td, min(size, RATE_CHUNK))

    def __call__(self, params: Params, states: PyTree, key: PRNGKey) -> AgentOutput:
        del key
        rules = self.td.rules
        boards, actions, valid = jax.vmap(rules.state_plays)(states)  # [B, N, *], [B, N]
        B, N = valid.shape
        rate = functools.partial(equity, rules, self.td.net, params)
        scores = rated(rate, boards.reshape(B * N, *boards.shape[2:]), valid.reshape(-1))
        scores = scores.reshape(B, N)
        index = jnp.argmax(scores, axis=1)
        playable = valid.any(axis=1)
        rows = jnp.arange(B)
        action = jnp.where(playable, actions[rows, index], rules.no_move).astype(jnp.int32)
        value = jnp.where(playable, scores[rows, index], 0.0)
        weights = jax.nn.one_hot(action, self.num_actions, dtype=jnp.float32)
        return AgentOutput(action, weights, value)


def rating_bytes(td: TD, afterstates: int) -> int:
    """Bytes the value network works in to rate `afterstates` afterstates at once: their
    features, every layer's activations and the result logits (float32)."""
    width = td.rules.num_features + sum(int(h) for h in td.config.hidden) + len(td.rules.results)
    return 4 * afterstates * width


def training_bytes(td: TD | SoloTD) -> int:
    """Bytes one training step works in beside the state (shapes only): every game's turn
    listed and its valid plays rated in chunks, twice over for a roll played twice, and the
    gradient's activations (a one-player game: every move's afterstate and its weights read,
    twice over)."""
    if isinstance(td, SoloTD):
        after = jax.eval_shape(
            td.rules.moves, jax.eval_shape(td.rules.start, jax.random.PRNGKey(0))
        )
        return 2 * td.config.num_games * (pytree_bytes(after) + 4 * after[0].shape[0] * 64)
    rules = td.rules
    dice = jax.eval_shape(rules.roll, jax.random.PRNGKey(0))
    plays = jax.eval_shape(rules.plays, rules.start, jnp.zeros(dice.shape, dice.dtype))
    B = td.config.num_games
    listed = B * plays[1].shape[0]  # (packed: order, scores and masks of every listed play)
    turn = B * pytree_bytes(plays) + 3 * 4 * listed + rating_bytes(td, min(listed, RATE_CHUNK))
    return 2 * turn + 3 * rating_bytes(td, B)


def td_agent(
    td: TD | SoloTD, env: Env, params: Params, *, name: str = "td", depth: int | None = None
) -> Agent:
    """An agent playing `env` (the game `td` learns) with the value network `params`, looking
    `depth` chance layers ahead (default: the config's `eval_depth`): a one-player game's
    expectimax (`turbozero.td.solo`), a two-player game's 1-ply search over the opponent's
    rolls at depth 1 (`turbozero.td.lookahead`)."""
    depth = td.config.eval_depth if depth is None else depth
    if isinstance(td, SoloTD):
        return solo_agent(td, env, params, depth=depth, name=name)
    policy = TDSearchPolicy(td, env.num_actions) if depth else TDPolicy(td, env.num_actions)
    return make_agent(policy, params, name=name)
