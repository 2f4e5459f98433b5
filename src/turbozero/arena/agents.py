"""Agents: a policy function plus its parameters, queried on a batch of game states.

An `Agent` is a pytree whose only leaves are its `params`; its `policy_fn` and `name` are static.
A compiled match therefore depends on the policy function but not on the parameter values:
`agent.replace(params=new_params)` reuses the compiled program.

    policy_fn(params, states, key) -> AgentOutput(action [B], weights [B, A], value [B])

`states` are environment states batched on the leading axis (what `jax.vmap(env.init)` returns,
e.g. a batched pgx `State`); policies read observations and legal-action masks through the `Env`
they close over. `key` is consumed. Policies must accept terminal states in the batch (whose
action masks are unspecified) and return some action for them; the match ignores it. A policy
whose work is per state (a search over the candidates in doubt, a host engine) may set
`takes_acting = True`: a match then calls it with `acting=` `[B]` bool, the games where its
move is used, and it may skip the others' work (`propose`).

Kinds built here: `random_agent` and `network_agent`; perfect players are in
`turbozero.arena.perfect`, and search agents (AlphaZero, rollout MCTS) are built on
`turbozero.search` with the same interface.

Policy functions are small frozen dataclasses whose equality is that of their configuration, so
calling `network_agent(env, eval_fn, new_params)` again gives an equal `policy_fn` and reuses the
compiled match as well.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from turbozero import struct
from turbozero.envs.core import Env, check_batched
from turbozero.search import compiler_options
from turbozero.search.selector import masked_softmax
from turbozero.types import Array, EvalFn, Params, PRNGKey, PyTree
from turbozero.validate import check_number


class AgentOutput(NamedTuple):
    """What a policy returns for a batch of `B` states.

    Attributes:
        action: `[B]` int32, the chosen action.
        weights: `[B, A]` float, the policy the action was drawn from (zero on illegal actions).
        value: `[B]` float, the agent's estimate for the player to move (zero if it has none).
    """

    action: Array
    weights: Array
    value: Array


PolicyFn = Callable[[Params, PyTree, PRNGKey], AgentOutput]


@struct.dataclass
class Agent(struct.Struct):
    """A player for `play_match`.

    Attributes:
        params: pytree of arrays the policy reads (network variables, a table); may be None.
        policy_fn: static `policy_fn(params, states, key) -> AgentOutput`; must be hashable.
        name: static display name.
    """

    params: Params
    policy_fn: PolicyFn = struct.field(static=True)
    name: str = struct.field(static=True, default="agent")

    def policy(self, states: PyTree, key: PRNGKey) -> AgentOutput:
        """The agent's output on `states` (batched on the leading axis); `key` is consumed."""
        return self.policy_fn(self.params, states, key)

    def act(self, states: PyTree, key: PRNGKey) -> Array:
        """The chosen actions `[B]` int32 on `states`; `key` is consumed. Compiled once per
        policy and batch shape (op by op, a search compiles hundreds of small programs on its
        first call and dispatches each op on every call)."""
        return action_program(self.policy_fn)(self.params, states, key)


def propose(
    policy_fn: PolicyFn, params: Params, states: PyTree, key: PRNGKey, acting: Array
) -> AgentOutput:
    """`policy_fn`'s output on `states`, told which games' moves are used (`acting` `[B]`
    bool) where it takes them (`takes_acting`); its output elsewhere is not used."""
    if getattr(policy_fn, "takes_acting", False):
        return policy_fn(params, states, key, acting=acting)  # type: ignore[call-arg]
    return policy_fn(params, states, key)


def make_agent(policy_fn: PolicyFn, params: Params = None, *, name: str) -> Agent:
    """An agent from a policy function and its parameters.

    Args:
        policy_fn: `policy_fn(params, states, key) -> AgentOutput`, hashable (a module-level
            function or a frozen dataclass); matches are compiled once per `policy_fn`.
        params: pytree of arrays passed to `policy_fn` (data, so changing it does not recompile).
        name: display name.

    Raises:
        ValueError: if `policy_fn` is not callable or not hashable, or `name` is empty.
    """
    if not callable(policy_fn):
        raise ValueError(f"policy_fn must be callable, got {type(policy_fn).__name__}")
    try:
        hash(policy_fn)
    except TypeError as e:
        raise ValueError(f"policy_fn must be hashable (it is static under jit): {e}") from e
    if not isinstance(name, str) or not name:
        raise ValueError(f"name must be a non-empty string, got {name!r}")
    return Agent(params=params, policy_fn=policy_fn, name=name)


@functools.lru_cache(maxsize=16)
def action_program(policy_fn: PolicyFn) -> Callable[[Params, PyTree, PRNGKey], Array]:
    """`policy_fn`'s action `[B]` as one compiled program (with the search's compiler options
    where it runs a search), built once per policy."""

    def act(params: Params, states: PyTree, key: PRNGKey) -> Array:
        return policy_fn(params, states, key).action

    options = compiler_options() if runs_search(policy_fn) else None
    return jax.jit(act, compiler_options=options)


def runs_search(policy_fn: PolicyFn | None) -> bool:
    """Whether `policy_fn` runs a tree search (its class sets `runs_search = True`, as
    `SearchPolicy` does): the arena and the play server then compile the programs that call it
    with `turbozero.search.compiler_options()`."""
    return bool(getattr(policy_fn, "runs_search", False))


def legal_mask(env: Env, states: PyTree) -> Array:
    """`[B, A]` legal actions of `states`; rows with none (terminal states) are all True."""
    mask = jax.vmap(env.metadata)(states).action_mask
    return jnp.where(mask.any(axis=-1, keepdims=True), mask, True)


def uniform_over_best(scores: Array, mask: Array, key: PRNGKey) -> tuple[Array, Array, Array]:
    """A perfect player's move: uniform among the legal moves of the highest score.

    Args:
        scores: `[B, A]` a solver's score of each move.
        mask: `[B, A]` legal moves.
        key: consumed by the tie-break.

    Returns:
        `(action [B] int32, weights [B, A], top [B])`: the move, the uniform policy over the best
        moves, and the best score.
    """
    scores = jnp.where(mask, scores, -jnp.inf)
    top = jnp.max(scores, axis=-1)
    best = mask & (scores == top[:, None])
    weights = best / jnp.sum(best, axis=-1, keepdims=True)
    action = jax.random.categorical(key, jnp.where(best, 0.0, -jnp.inf)).astype(jnp.int32)
    return action, weights, top


@dataclasses.dataclass(frozen=True)
class RandomPolicy:
    """Uniform over legal actions."""

    env: Env

    def __call__(self, params: Params, states: PyTree, key: PRNGKey) -> AgentOutput:
        del params
        mask = legal_mask(self.env, states)
        weights = mask / jnp.sum(mask, axis=-1, keepdims=True)
        action = jax.random.categorical(key, jnp.where(mask, 0.0, -jnp.inf)).astype(jnp.int32)
        return AgentOutput(action, weights, jnp.zeros(mask.shape[0], jnp.float32))


def random_agent(env: Env, *, name: str = "random") -> Agent:
    """An agent playing uniformly at random among legal actions (value 0)."""
    return make_agent(RandomPolicy(env), None, name=name)


@dataclasses.dataclass(frozen=True)
class NetworkPolicy:
    """The network's policy head restricted to legal actions; argmax or sampled."""

    env: Env
    eval_fn: EvalFn
    sample: bool
    temperature: float

    def __call__(self, params: Params, states: PyTree, key: PRNGKey) -> AgentOutput:
        key_net, key_sample = jax.random.split(key)
        observations = jax.vmap(self.env.observe)(states)
        logits, value = self.eval_fn(params, observations, key_net)
        mask = legal_mask(self.env, states)
        logits = jnp.asarray(logits, jnp.float32)
        weights = masked_softmax(logits / self.temperature, mask)
        if self.sample:
            masked = jnp.where(mask, logits / self.temperature, -jnp.inf)
            action = jax.random.categorical(key_sample, masked)
        else:
            action = jnp.argmax(jnp.where(mask, logits, -jnp.inf), axis=-1)
        return AgentOutput(action.astype(jnp.int32), weights, jnp.asarray(value, jnp.float32))


def _check_network(env: Env, eval_fn: EvalFn, params: Params) -> None:
    """A `ValueError` unless `eval_fn` maps a batch of `env`'s observations to logits `[B, A]`
    and values `[B]` (shapes only, traced once)."""
    state, _ = jax.eval_shape(env.init, jax.random.PRNGKey(0))
    obs = jax.eval_shape(env.observe, state)
    batch = jax.ShapeDtypeStruct((2, *obs.shape), obs.dtype)
    logits, value = jax.eval_shape(eval_fn, params, batch, jax.random.PRNGKey(0))
    if len(logits.shape) != 2 or logits.shape[1] != env.num_actions or len(value.shape) != 1:
        raise ValueError(
            f"eval_fn's outputs have shapes {tuple(logits.shape)} and {tuple(value.shape)} for a "
            f"batch of 2 observations, expected (2, {env.num_actions}) logits and (2,) values "
            f"for {env.name!r}"
        )


def network_agent(
    env: Env,
    eval_fn: EvalFn,
    params: Params,
    *,
    sample: bool = False,
    temperature: float = 1.0,
    name: str = "network",
) -> Agent:
    """An agent playing from a network's policy head, without search.

    Args:
        env: the game; observations come from `env.observe`, legal moves from `env.metadata`.
        eval_fn: `eval_fn(params, observations [B, ...], key) -> (logits [B, A], value [B])`.
        params: the network's variables.
        sample: draw the action from `softmax(logits / temperature)` over legal actions instead
            of taking the most likely legal action.
        temperature: > 0, divides the logits; used for `weights` and, with `sample`, the draw.
        name: display name.

    Raises:
        ValueError: if `temperature` is not > 0, `eval_fn` is not callable, or its outputs do
            not have the shapes above for this game.
    """
    if not callable(eval_fn):
        raise ValueError(f"eval_fn must be callable, got {type(eval_fn).__name__}")
    temperature = check_number("temperature", temperature, low=0.0, strict=True)
    _check_network(env, eval_fn, params)
    policy = NetworkPolicy(env, eval_fn, sample=bool(sample), temperature=temperature)
    return make_agent(policy, params, name=name)


@dataclasses.dataclass(frozen=True)
class LoadedAgent:
    """An agent restored from a run directory, with the game it plays and the run's config:
    what `turbozero.load_agent` returns for every algorithm.

    `act(states, key)` and `policy(states, key)` take states batched on the leading axis.

    Attributes:
        agent: the `Agent`, for `play_match` and the play page.
        env: the environment it plays (built from the run's config, or the one given).
        config: the run's config.
        path: the run directory.
        step: the checkpoint's step (the epoch) its parameters come from.
        algorithm: the algorithm's name (`turbozero.algorithms`).
        seed: of a run training several seeds at once (PPO), the index of the one loaded.
        system: what the algorithm built from the config to play (AlphaZero: its
            `AlphaZeroSystem`, with the network's `eval_fn`), or None.
    """

    agent: Agent
    env: Env
    config: Any
    path: Path
    step: int
    algorithm: str
    seed: int | None = None
    system: Any = None

    def act(self, states: PyTree, key: PRNGKey) -> Array:
        """The agent's actions `[B]` in `states` `[B, ...]`; consumes `key`."""
        check_batched(self.env, states, "act")
        return self.agent.act(states, key)

    def policy(self, states: PyTree, key: PRNGKey) -> AgentOutput:
        """The agent's `AgentOutput` for `states` `[B, ...]`; consumes `key`."""
        check_batched(self.env, states, "policy")
        return self.agent.policy(states, key)

    @property
    def name(self) -> str:
        return self.agent.name

    @property
    def params(self) -> Params:
        return self.agent.params

    @property
    def epoch(self) -> int:
        """`step` (AlphaZero's runs count checkpoints in epochs)."""
        return self.step

    @property
    def az(self) -> Any:
        """`system` (an AlphaZero run's `AlphaZeroSystem`)."""
        return self.system
