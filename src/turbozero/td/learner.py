"""TD learning over afterstates, TD-Gammon's way: `make_td(config)`.

A value network rates afterstates (the position a turn leaves, the opponent to roll) from the side
of the player who just moved, as a distribution over the game's results (`TDRules.results`:
backgammon's lost or won 1, 2 or 3 points). Every one of `B` games plays one turn per step: the
mover lists its plays for its dice and keeps the one of highest expected points (greedy: the dice
explore). The mover's chosen afterstate then teaches the opponent's previous one, TD(0): its
target is the new afterstate's distribution with the results reversed (what the mover wins the
opponent loses), or the exact result where the turn won the game. One Adam step on the `B`
targets follows each turn, and games that ended start again.

With `td_horizon` `K` above 1 each game keeps its last `K` afterstates, and the oldest learns
the λ-return of the `K` after it (`lambda_returns`: the n-turn returns, results reversed at
every other turn, weighted by `td_lambda`); where a game ends, every afterstate it still holds
learns its return cut at the end, so each afterstate is learned once.

Shape letters: `B` games, `F` features, `R` results, `N` plays of a turn, `K` the horizon.
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
        previous: `[B, K, F]` the features of each game's last `K` afterstates, oldest first
            (the newest the opponent's); `[B, F]` where `K` is 1, as runs before `td_horizon`
            stored it.
        has_previous: `[B, K]` bool (`[B]` where `K` is 1): that afterstate is of the game
            being played and not yet learned (false before a game's first turns).
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
    rules: TDRules,
    net: ValueNet,
    optimizer: optax.GradientTransformation,
    B: int,
    key: PRNGKey,
    horizon: int = 1,
) -> TDState:
    """A new learner: fresh network, every game at the start, `horizon` afterstates kept."""
    k_net, k_dice, key = jax.random.split(key, 3)
    params = net.init(k_net, jnp.zeros((1, rules.num_features), jnp.float32))
    window = () if horizon == 1 else (horizon,)
    return TDState(
        params=params,
        opt_state=optimizer.init(params),
        boards=jnp.broadcast_to(rules.start, (B, *rules.start.shape)),
        dice=jax.vmap(rules.roll)(jax.random.split(k_dice, B)),
        previous=jnp.zeros((B, *window, rules.num_features), jnp.float32),
        has_previous=jnp.zeros((B, *window), bool),
        key=key,
    )


def return_weights(horizon: int, lam: float) -> tuple[np.ndarray, np.ndarray]:
    """The λ-return's weights over a game's kept afterstates and the new one.

    Returns:
        `(weights [K, K + 1], reversed [K, K + 1])`: row `i` (the `i`-th kept afterstate,
        oldest first) weighs the value of afterstate `j` (`K`: the new one) by
        `(1 - lam) * lam^(n - 1)` for its `n = j - i`-turn return, and the last, `n = K - i`,
        by `lam^(K - i - 1)` (all weight the returns past it would have; each row sums to 1);
        `reversed` where `n` is odd (the other player's afterstate: its results reversed).
    """
    weights = np.zeros((horizon, horizon + 1))
    for i in range(horizon):
        last = horizon - i
        for n in range(1, last + 1):
            weights[i, i + n] = lam ** (n - 1) * (1.0 if n == last else 1.0 - lam)
    steps = np.arange(horizon + 1)[None, :] - np.arange(horizon)[:, None]
    return weights.astype(np.float32), (steps % 2 == 1)


def lambda_returns(kept: Array, new: Array, lam: float) -> Array:
    """`[B, K, R]` each kept afterstate's λ-return (`return_weights`), cut at the new one.

    Args:
        kept: `[B, K, R]` result distributions of each game's kept afterstates, oldest first
            (the oldest's own is not read).
        new: `[B, R]` the distribution of the afterstate this turn left (exact where it ended
            the game: every return past it is its result).
        lam: λ in [0, 1].
    """
    K = kept.shape[1]
    weights, reverse = return_weights(K, lam)
    values = jnp.concatenate([kept, new[:, None]], axis=1)  # [B, K + 1, R]
    same = jnp.asarray(np.where(reverse, 0.0, weights), values.dtype)
    other = jnp.asarray(np.where(reverse, weights, 0.0), values.dtype)
    return jnp.einsum("ij,bjr->bir", same, values) + jnp.einsum(
        "ij,bjr->bir", other, values[..., ::-1]
    )


def td_loss(net: ValueNet, params: Params, x: Array, target: Array, weight: Array) -> Array:
    """Cross-entropy of the predicted results of `x` `[B, F]` against `target` `[B, R]`, over
    the rows of `weight` `[B]` 1."""
    logp = jax.nn.log_softmax(_logits(net, params, x), axis=-1)
    return -(weight * (target * logp).sum(-1)).sum() / jnp.maximum(weight.sum(), 1.0)


def slide(has: Array, over: Array) -> tuple[Array, Array]:
    """Which kept afterstates a turn's targets complete, and which are kept after it.

    Args:
        has: `[B, K]` bool, each game's kept afterstates (oldest first) not yet learned.
        over: `[B]` bool, this turn ended the game.

    Returns:
        `(learned [B, K], kept [B, K])`: the oldest kept afterstate is learned (its `K`-turn
        return is complete), and all of a game that ended (their returns are cut at its end);
        then the window slides by one, this turn's afterstate kept unless it ended the game
        (where the new game keeps none).
    """
    K = has.shape[1]
    learned = has & ((jnp.arange(K) == 0)[None, :] | over[:, None])
    kept = jnp.concatenate([has[:, 1:], ~over[:, None]], axis=1) & ~over[:, None]
    return learned, kept


def td_step(
    rules: TDRules,
    net: ValueNet,
    optimizer: optax.GradientTransformation,
    state: TDState,
    lam: float = 0.0,
) -> tuple[TDState, dict[str, Array]]:
    """One turn of every game, and one gradient step on the afterstates whose targets it
    completes: each game's oldest kept one and, where the turn ended the game, all it kept."""
    key, k_dice = jax.random.split(state.key)
    B = state.boards.shape[0]
    previous = state.previous.reshape(B, -1, rules.num_features)  # [B, K, F]
    has = state.has_previous.reshape(B, -1)  # [B, K]
    K = has.shape[1]
    after = play_turns(rules, net, state.params, state.boards, state.dice)
    over = jax.vmap(rules.result)(after)[0]
    last = distribution(rules, net, state.params, after)  # [B, R]
    kept = jnp.zeros((B, 1, last.shape[-1]), last.dtype)  # (the oldest's own: never read)
    if K > 1:
        logits = _logits(net, state.params, previous[:, 1:].reshape(-1, rules.num_features))
        kept = jnp.concatenate([kept, jax.nn.softmax(logits).reshape(B, K - 1, -1)], axis=1)
    target = jax.lax.stop_gradient(lambda_returns(kept, last, lam))  # [B, K, R]
    learned, has = slide(has, over)
    loss, grads = jax.value_and_grad(functools.partial(td_loss, net))(
        state.params,
        previous.reshape(B * K, -1),
        target.reshape(B * K, -1),
        learned.reshape(-1).astype(jnp.float32),
    )
    updates, opt_state = optimizer.update(grads, state.opt_state, state.params)
    params = optax.apply_updates(state.params, updates)
    boards = jnp.where(
        over.reshape((-1,) + (1,) * (after.ndim - 1)), rules.start, jax.vmap(rules.flip)(after)
    )
    features = jax.vmap(rules.features)(after)[:, None]
    new = TDState(
        params=params,
        opt_state=opt_state,
        boards=boards.astype(state.boards.dtype),
        dice=jax.vmap(rules.roll)(jax.random.split(k_dice, B)),
        previous=jnp.concatenate([previous[:, 1:], features], 1).reshape(state.previous.shape),
        has_previous=has.reshape(state.has_previous.shape),
        key=key,
    )
    return new, {"loss": loss, "games": over.sum()}


def train_steps(
    rules: TDRules,
    net: ValueNet,
    optimizer: optax.GradientTransformation,
    state: TDState,
    steps: int,
    lam: float = 0.0,
) -> tuple[TDState, dict[str, Array]]:
    """`steps` of `td_step` (λ `lam`) in one `lax.scan`."""

    def body(s: TDState, _: Any) -> tuple[TDState, dict[str, Array]]:
        return td_step(rules, net, optimizer, s, lam)

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
        init=functools.partial(
            init_state, rules, net, optimizer, config.num_games, horizon=config.td_horizon
        ),
        train=jax.jit(
            functools.partial(train_steps, rules, net, optimizer, lam=config.td_lambda),
            static_argnums=1,
        ),
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
    gradient's activations over every kept afterstate (a one-player game: every move's
    afterstate and its weights read, twice over)."""
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
    return 2 * turn + 3 * rating_bytes(td, B * td.config.td_horizon)


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
