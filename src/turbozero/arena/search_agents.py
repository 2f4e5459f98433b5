"""Agents built on the search: AlphaZero (network + search) and pure rollout MCTS."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from turbozero.arena.agents import Agent, AgentOutput, make_agent
from turbozero.envs.core import Env
from turbozero.search import Search, Selector, make_search, puct
from turbozero.search.search import max_simulations
from turbozero.struct import pytree_bytes
from turbozero.types import Array, EvalFn, Params, PRNGKey, PyTree
from turbozero.validate import check_count, check_number


class SearchPolicy:
    """`policy_fn` running a fresh search on every call (hashed by identity: build it once).

    `runs_search` tells the arena and the play server to compile it with
    `turbozero.search.compiler_options()`."""

    runs_search = True

    def __init__(self, search: Search, temperature: float):
        self.search = search
        self.temperature = temperature

    def memory_bytes(self, states: PyTree) -> int:
        """Bytes of the trees one call searches for `states` `[B]` (shapes suffice)."""
        B = jax.tree_util.tree_leaves(states)[0].shape[0]
        return pytree_bytes(jax.eval_shape(lambda: self.search.init(B)))

    def __call__(self, params: Params, states: PyTree, key: PRNGKey) -> AgentOutput:
        B = jax.tree_util.tree_leaves(states)[0].shape[0]
        _, out = self.search.search(
            self.search.init(B), params, states, key, jnp.float32(self.temperature)
        )
        return AgentOutput(action=out.action, weights=out.action_weights, value=out.root_value)


def nodes_for(env: Env, num_simulations: int) -> int:
    """The nodes a search of `num_simulations` can fill: one per simulation and the root, two
    per simulation where the game has chance nodes (a chance node and its outcome's state)."""
    return num_simulations * (2 if env.chance is not None else 1) + 1


def check_simulations(env: Env, num_simulations: int) -> int:
    """`num_simulations` checked against what a tree of `MAX_NODES` nodes holds for `env`
    (`nodes_for`: half as many in games with chance), named in the error."""
    high = max_simulations(env.chance is not None)
    return check_count("num_simulations", num_simulations, low=1, high=high)


def alphazero_agent(
    env: Env,
    eval_fn: EvalFn,
    params: Params,
    *,
    num_simulations: int,
    max_nodes: int | None = None,
    selector: Selector | None = None,
    temperature: float = 0.0,
    root_noise: bool = False,
    chance_widening: float = 1.0,
    discount: float = 1.0,
    name: str = "alphazero",
) -> Agent:
    """Network + search; temperature 0 plays the search's best move; no root noise unless asked.

    `max_nodes` None holds a node per simulation and the root, two per simulation in games with
    chance (`env.chance`), where an expansion may add a chance node and its outcome's state.
    `chance_widening`: how fast chance nodes open their outcomes (see `make_search`).
    `discount`: the per-step discount of the search's backups, in (0, 1]; an agent whose network
    learnt discounted values should search with the discount it learnt them under."""
    temperature = check_number("temperature", temperature, low=0.0)
    num_simulations = check_simulations(env, num_simulations)
    if max_nodes is not None:
        max_nodes = check_count("max_nodes", max_nodes, low=2)
    selector = selector or puct()
    if not root_noise:
        selector = selector.without_noise()
    search = make_search(
        env,
        eval_fn,
        selector=selector,
        num_simulations=num_simulations,
        max_nodes=nodes_for(env, num_simulations) if max_nodes is None else max_nodes,
        reuse=False,
        chance_widening=chance_widening,
        discount=discount,
    )
    return make_agent(SearchPolicy(search, temperature), params, name=name)


#: spread of the rollout agent's prior logits: enough to order tied moves, far too little to
#: move a choice between moves whose values differ
TIE_BREAK_LOGITS = 1e-3


def rollout_value_fn(env: Env, *, max_rollout_steps: int = 512):
    """`state_eval_fn` valuing each state by one uniformly random playout, with a uniform prior
    whose ties are broken at random.

    The prior logits are uniform noise of spread `TIE_BREAK_LOGITS`, drawn afresh for each node.
    With an exactly uniform prior every unvisited move scores the same, and the search's
    first-index tie rule would try the moves in the game's numbering: on hex, `mcts:100` then
    played four moves in five on the top row (issue 85). mctx adds 1e-7 noise to its selection
    scores and OpenSpiel's rollout MCTS shuffles the moves for the same reason.

    Returns:
        `evaluate(params, states [B], key) -> (prior_logits [B, A], value [B])`; a value is
        the playout's total reward for the player to move in its state.
    """

    def evaluate(params: Params, states: PyTree, key: PRNGKey) -> tuple[Array, Array]:
        B = jax.tree_util.tree_leaves(states)[0].shape[0]
        key, k_prior = jax.random.split(key)
        prior = TIE_BREAK_LOGITS * jax.random.uniform(k_prior, (B, env.num_actions))
        md = jax.vmap(env.metadata)(states)
        mover = md.cur_player_id

        def cond(c):
            _, md, _, _, t = c
            return jnp.any(~(md.terminated | md.truncated)) & (t < max_rollout_steps)

        def body(c):
            s, md, total, key, t = c
            key, k_a, k_s = jax.random.split(key, 3)
            logits = jnp.where(md.action_mask, 0.0, -jnp.inf)
            a = jax.random.categorical(k_a, logits).astype(jnp.int32)
            over = md.terminated | md.truncated
            s2, md2 = jax.vmap(env.step)(s, a, jax.random.split(k_s, B))
            s = jax.tree_util.tree_map(
                lambda n, o: jnp.where(over.reshape((-1,) + (1,) * (n.ndim - 1)), o, n), s2, s
            )
            md = jax.tree_util.tree_map(
                lambda n, o: jnp.where(over.reshape((-1,) + (1,) * (n.ndim - 1)), o, n), md2, md
            )
            total = total + jnp.where(over[:, None], 0.0, md2.rewards)
            return s, md, total, key, t + 1

        total0 = jnp.zeros((B, env.num_players), jnp.float32)
        _, _, total, _, _ = jax.lax.while_loop(cond, body, (states, md, total0, key, 0))
        value = total[jnp.arange(B), mover]
        return prior, value

    return evaluate


def rollout_mcts_agent(
    env: Env,
    *,
    num_simulations: int,
    c_puct: float = 1.4,
    name: str | None = None,
) -> Agent:
    """Pure MCTS with random rollouts: a strength ladder that needs no network."""
    num_simulations = check_simulations(env, num_simulations)
    search = make_search(
        env,
        state_eval_fn=rollout_value_fn(env),
        selector=puct(c_puct=c_puct, dirichlet_fraction=0.0),
        num_simulations=num_simulations,
        max_nodes=nodes_for(env, num_simulations),
        reuse=False,
    )
    return make_agent(SearchPolicy(search, 0.0), None, name=name or f"mcts:{num_simulations}")
