"""TD learning over afterstates for a one-player game with chance after the move (2048):
`make_solo(config, rules)`, through `turbozero.td.make_td`.

A value function rates afterstates (a move's result before chance acts: 2048's slide and merge
before the new tile) by the rewards still to come. Each of `B` games plays one move per step:
the move of highest reward plus afterstate value (greedy: chance explores), then chance acts.
The chosen afterstate teaches the game's previous one, TD(0): its target is the new move's
reward plus its afterstate's value, or 0 where the game has ended (Szubert and Jaskowski's
TD-afterstate). The value function is the n-tuple network (`turbozero.td.ntuple`, its own
delta rule) or an MLP over the cells one-hot (Adam on the squared TD error).

At play, `action_values` looks `depth` chance layers ahead: an expectimax over every outcome
of chance (2048: each empty cell, a 2 or a 4) below each move, the best move's value at each
board chance leaves, the afterstate values at the leaves (depth 0: the moves' rewards plus their
afterstates' values, 1 ply).

Shape letters: `B` games, `A` actions, `C` cells, `K` chance outcomes, `N` boards.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import Any, ClassVar, NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp
import optax

from turbozero.arena.agents import Agent, AgentOutput, make_agent
from turbozero.envs.core import Env
from turbozero.nets.mlp import dense_layers
from turbozero.td.config import TDConfig
from turbozero.td.ntuple import NTupleNet, make_ntuple, ntuple_init, ntuple_update, ntuple_value
from turbozero.td.rules import SoloRules
from turbozero.types import Array, Params, PRNGKey, PyTree

#: boards one chunk of an expectimax rates at once at play (the batch is cut into chunks of
#: states so that a deep search's leaves fit in memory)
LEAVES_PER_CHUNK = 1 << 17


class SoloState(NamedTuple):
    """A one-player TD learner's whole state (a checkpoint holds it; resuming is exact).

    Attributes:
        params: the value function's weights.
        opt_state: the MLP's Adam state (empty for the n-tuple network).
        boards: `[B, C]` each game's board, the player to move.
        previous: `[B, C]` each game's last afterstate.
        has_previous: `[B]` bool, false at a game's first move.
        score: `[B]` the rewards each game has earned so far.
        key: consumed by the next step's chance.
    """

    params: Params
    opt_state: Any
    boards: Array
    previous: Array
    has_previous: Array
    score: Array
    key: PRNGKey


@dataclasses.dataclass(frozen=True, eq=False)
class Valuer:
    """A value function of boards and how TD teaches it.

    Attributes:
        kind: "ntuple" or "mlp".
        init: `init(key) -> (params, opt_state)`.
        value: `value(params, boards [N, C]) -> [N]` afterstate values, in rewards.
        learn: `learn(params, opt_state, boards [B, C], targets [B], weight [B]) -> (params,
            opt_state, loss)`: one TD update towards `targets` on the rows of `weight` 1; `loss`
            the mean squared error in units of `SoloRules.value_scale`.
    """

    kind: str
    init: Callable[[PRNGKey], tuple[Params, Any]]
    value: Callable[[Params, Array], Array]
    learn: Callable[[Params, Any, Array, Array, Array], tuple[Params, Any, Array]]


def _mean_square(errors: Array, weight: Array, scale: float) -> Array:
    return (weight * (errors / scale) ** 2).sum() / jnp.maximum(weight.sum(), 1.0)


def ntuple_valuer(net: NTupleNet, step: float, scale: float) -> Valuer:
    """The n-tuple network learned by its delta rule with step `step` (the share of a board's
    error one update removes)."""

    def learn(params: Params, opt_state: Any, boards: Array, targets: Array, weight: Array):
        errors = weight * (targets - ntuple_value(net, params, boards))
        params = ntuple_update(net, params, boards, errors, step)
        return params, opt_state, _mean_square(errors, weight, scale)

    return Valuer(
        "ntuple", lambda key: (ntuple_init(net), ()), functools.partial(ntuple_value, net), learn
    )


class CellMLP(nn.Module):
    """An MLP from boards `[N, C]` (each cell one-hot over `V` values) to values `[N]` in units
    of `scale` (ReLU layers; the output layer starts at zero)."""

    hidden: tuple[int, ...]
    cell_values: int
    scale: float

    @nn.compact
    def __call__(self, boards: Array) -> Array:
        cells = jnp.minimum(boards.astype(jnp.int32), self.cell_values - 1)
        x = jax.nn.one_hot(cells, self.cell_values).reshape(boards.shape[0], -1)
        x = dense_layers(x, self.hidden)
        return self.scale * nn.Dense(1, kernel_init=nn.initializers.zeros)(x)[:, 0]


def mlp_valuer(rules: SoloRules, hidden: tuple[int, ...], learning_rate: float) -> Valuer:
    """An MLP over the one-hot cells learned by Adam on the squared TD error."""
    cells = rules.symmetries.shape[1]
    net = CellMLP(tuple(hidden), rules.cell_values, rules.value_scale)
    optimizer = optax.adam(learning_rate)

    def value(params: Params, boards: Array) -> Array:
        out: Array = net.apply(params, boards)  # type: ignore[assignment]
        return out

    def init(key: PRNGKey) -> tuple[Params, Any]:
        params = net.init(key, jnp.zeros((1, cells), jnp.int32))
        return params, optimizer.init(params)

    def learn(params: Params, opt_state: Any, boards: Array, targets: Array, weight: Array):
        def loss_fn(p: Params) -> Array:
            return _mean_square(targets - value(p, boards), weight, rules.value_scale)

        loss, grads = jax.value_and_grad(loss_fn)(params)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss

    return Valuer("mlp", init, value, learn)


@dataclasses.dataclass(frozen=True, eq=False)
class SoloTD:
    """A one-player TD learner bound to its config (`make_solo`).

    Attributes:
        config: its `TDConfig`.
        rules: the game's `SoloRules`.
        valuer: the value function.
        init: `init(key) -> SoloState`.
        train: `train(state, steps) -> (state, metrics)`, `steps` moves of every game, compiled
            (`steps` static): `loss`, `games` (finished) and `returns` (their scores' sum),
            each `[steps]`.
        value: `value(params, boards [N, C]) -> [N]` afterstate values.
    """

    config: TDConfig
    rules: SoloRules
    valuer: Valuer
    init: Any
    train: Any
    value: Any


def init_state(rules: SoloRules, valuer: Valuer, B: int, key: PRNGKey) -> SoloState:
    """A new learner: fresh weights, every game at its start."""
    k_net, k_start, key = jax.random.split(key, 3)
    params, opt_state = valuer.init(k_net)
    boards = jax.vmap(rules.start)(jax.random.split(k_start, B))
    return SoloState(
        params=params,
        opt_state=opt_state,
        boards=boards,
        previous=jnp.zeros_like(boards),
        has_previous=jnp.zeros((B,), bool),
        score=jnp.zeros((B,), jnp.float32),
        key=key,
    )


def solo_step(
    rules: SoloRules, valuer: Valuer, state: SoloState
) -> tuple[SoloState, dict[str, Array]]:
    """One move of every game (or a new game where none is valid), and one TD update of each
    game's previous afterstate."""
    key, k_chance, k_start = jax.random.split(state.key, 3)
    B, C = state.boards.shape
    after, rewards, valid = jax.vmap(rules.moves)(state.boards)  # [B, A, C], [B, A], [B, A]
    values = valuer.value(state.params, after.reshape(-1, C)).reshape(rewards.shape)
    q = jnp.where(valid, rewards + values, -jnp.inf)
    move = jnp.argmax(q, axis=-1)
    over = ~valid.any(-1)
    rows = jnp.arange(B)
    chosen, reward = after[rows, move], rewards[rows, move]
    target = jnp.where(over, 0.0, q[rows, move])
    weight = state.has_previous.astype(jnp.float32)
    params, opt_state, loss = valuer.learn(
        state.params, state.opt_state, state.previous, target, weight
    )
    score = state.score + jnp.where(over, 0.0, reward)
    fresh = jax.vmap(rules.start)(jax.random.split(k_start, B))
    placed = jax.vmap(rules.chance)(chosen, jax.random.split(k_chance, B))
    new = SoloState(
        params=params,
        opt_state=opt_state,
        boards=jnp.where(over[:, None], fresh, placed).astype(state.boards.dtype),
        previous=jnp.where(over[:, None], state.previous, chosen).astype(state.boards.dtype),
        has_previous=~over,
        score=jnp.where(over, 0.0, score),
        key=key,
    )
    return new, {"loss": loss, "games": over.sum(), "returns": jnp.where(over, score, 0.0).sum()}


def train_steps(
    rules: SoloRules, valuer: Valuer, state: SoloState, steps: int
) -> tuple[SoloState, dict[str, Array]]:
    """`steps` of `solo_step` in one `lax.scan`."""

    def body(s: SoloState, _: Any) -> tuple[SoloState, dict[str, Array]]:
        return solo_step(rules, valuer, s)

    return jax.lax.scan(body, state, None, length=steps)


def make_solo(config: TDConfig, rules: SoloRules) -> SoloTD:
    """The one-player TD learner of `config` over `rules`: the n-tuple network of
    `config.ntuples` (the game's own where empty) with step `learning_rate`, or an MLP of
    `config.hidden` learned by Adam at `learning_rate`."""
    if config.value_net == "ntuple":
        net = make_ntuple(config.ntuples or rules.tuples, rules.symmetries, rules.cell_values)
        valuer = ntuple_valuer(net, config.learning_rate, rules.value_scale)
    else:
        valuer = mlp_valuer(rules, tuple(config.hidden), config.learning_rate)
    return SoloTD(
        config=config,
        rules=rules,
        valuer=valuer,
        init=functools.partial(init_state, rules, valuer, config.num_games),
        train=jax.jit(functools.partial(train_steps, rules, valuer), static_argnums=1),
        value=valuer.value,
    )


# -- play: the moves' values, 1 ply or an expectimax over chance ---------------------------------


def action_values(
    rules: SoloRules, value: Callable[[Array], Array], boards: Array, depth: int
) -> tuple[Array, Array]:
    """`([N, A] values, [N, A] valid)` of each move from `boards` `[N, C]`: its reward plus
    its afterstate's value `depth` chance layers down (`afterstate_values`)."""
    N, C = boards.shape
    after, rewards, valid = jax.vmap(rules.moves)(boards)
    later = afterstate_values(rules, value, after.reshape(-1, C), depth).reshape(rewards.shape)
    return jnp.where(valid, rewards + later, -jnp.inf), valid


def afterstate_values(
    rules: SoloRules, value: Callable[[Array], Array], afters: Array, depth: int
) -> Array:
    """`[N]` the worth of afterstates `afters` `[N, C]`: the value function's at depth 0;
    deeper, the mean over chance's outcomes of the best move's worth at `depth - 1` (0 where no
    move is valid)."""
    if depth == 0:
        return value(afters)
    N, C = afters.shape
    boards, probs = jax.vmap(rules.outcomes)(afters)  # [N, K, C], [N, K]
    q, valid = action_values(rules, value, boards.reshape(-1, C), depth - 1)
    best = jnp.where(valid.any(-1), q.max(-1), 0.0).reshape(probs.shape)
    return (probs * best).sum(-1)


def leaves_per_board(rules: SoloRules, depth: int, outcomes: int) -> int:
    """Afterstates one board's expectimax rates at `depth` (`outcomes` = `K`)."""
    A = rules.num_actions
    return A * (outcomes * A) ** depth


@dataclasses.dataclass(frozen=True, eq=False)
class SoloPolicy:
    """`policy_fn(params, states [B], key) -> AgentOutput` of a one-player TD value function:
    in each state of the game's `Env`, the move of highest `action_values` at `depth`; `value`
    that move's worth (the rewards still to come). Hashed by identity."""

    #: what `AgentOutput.value` measures, for the play page: the points still to come
    value_unit: ClassVar[str] = "points"

    td: SoloTD
    num_actions: int
    depth: int

    def _outcomes(self) -> int:
        rules = self.td.rules
        start = jax.eval_shape(rules.start, jax.random.PRNGKey(0))
        return jax.eval_shape(rules.outcomes, start)[1].shape[0]

    def chunk(self) -> int:
        """States rated at once (a chunk's leaves at most `LEAVES_PER_CHUNK`)."""
        leaves = leaves_per_board(self.td.rules, self.depth, self._outcomes())
        return max(1, LEAVES_PER_CHUNK // leaves)

    def memory_bytes(self, states: PyTree) -> int:
        """Bytes one call works in (shapes suffice): a chunk's leaves, their boards and reads."""
        B = jax.tree.leaves(states)[0].shape[0]
        leaves = min(B, self.chunk()) * leaves_per_board(
            self.td.rules, self.depth, self._outcomes()
        )
        C = self.td.rules.symmetries.shape[1]
        return 4 * leaves * (2 * C + 64)

    def __call__(self, params: Params, states: PyTree, key: PRNGKey) -> AgentOutput:
        del key
        rules = self.td.rules
        boards = jax.vmap(rules.state_board)(states)

        def rate(chunk: Array) -> tuple[Array, Array]:
            return action_values(rules, lambda b: self.td.value(params, b), chunk, self.depth)

        if self.depth == 0:
            q, valid = rate(boards)
        else:  # (chunks of states in turn: a deep search's leaves would not fit at once)
            q, valid = jax.lax.map(lambda b: rate(b[None]), boards, batch_size=self.chunk())
            q, valid = q[:, 0], valid[:, 0]
        action = jnp.argmax(q, axis=-1).astype(jnp.int32)
        value = jnp.where(valid.any(-1), q.max(-1), 0.0)
        weights = jax.nn.one_hot(action, self.num_actions, dtype=jnp.float32)
        return AgentOutput(action, weights, value)


def solo_agent(td: SoloTD, env: Env, params: Params, *, depth: int, name: str = "td") -> Agent:
    """An agent playing `env` with the value function `params`, `depth` chance layers ahead."""
    return make_agent(SoloPolicy(td, env.num_actions, depth), params, name=name)
