"""The batched search loop: select, expand (one environment step and one network call for the
whole batch of games), back up; `num_simulations` times inside one compiled program.

Letters: B games, N node capacity, A actions, P players.

Every simulation reads and writes only the nodes on its path: selection and backup are
`while_loop`s over a small `[B]` carry (current node per game) that gather from and scatter into
the tree by index, so their cost is proportional to the depth walked, not to `max_nodes`. (A
`vmap` over a `while_loop` that carries the tree would `select` the whole tree at every step.)

When the tree is full (`next_free == max_nodes`), a simulation that reaches an unexpanded edge
does not expand: selection is restricted to expanded children where a node has any, and a
simulation that still ends at a node without expanding backs up that node's own evaluation.
`SearchOutput.full_events` counts those simulations.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp

from turbozero import struct
from turbozero.envs.core import Env
from turbozero.search.selector import NodeView, Selector, masked_argmax
from turbozero.search.tree import NEG_LOGIT, NO_CHILD, Tree, advance_trees, init_tree, reset_trees
from turbozero.types import Array, EvalFn, Params, PRNGKey, PyTree

StateEvalFn = Callable[[Params, PyTree, PRNGKey], tuple[Array, Array]]


@struct.dataclass
class SearchOutput(struct.Struct):
    """What one search returns per game."""

    action: Array  # [B] int32, the move chosen at the given temperature
    action_weights: Array  # [B, A] the policy target (sums to 1 over legal actions)
    root_value: Array  # [B] mean value of the root for the player to move
    q_values: Array  # [B, A] Q of the root's children (0 where unvisited)
    visit_counts: Array  # [B, A] int32 root child visits
    max_depth: Array  # [B] int32 deepest node reached this search
    tree_fullness: Array  # [B] fraction of `max_nodes` in use
    full_events: Array  # [B] int32 simulations that could not expand for lack of nodes
    root_player: Array  # [B] int32 player to move at the root


class Search(NamedTuple):
    """Pure functions of a configured search (compile them with `jax.jit` at the top).

    Attributes:
        init: `init(batch_size) -> Tree`, empty trees.
        search: `search(tree, params, env_states, key, temperature=0.0) -> (tree, SearchOutput)`;
            `env_states` batched `[B]`, `temperature` a scalar or `[B]` (0 = best move).
        advance: `advance(tree, action [B]) -> tree`: keep the played child's subtree when reuse
            is on, otherwise empty the trees.
        reset: `reset(tree, done [B]) -> tree`: empty the rows of finished games.
        env, selector, num_simulations, max_nodes, reuse: the configuration.
    """

    init: Callable[[int], Tree]
    search: Callable[..., tuple[Tree, SearchOutput]]
    advance: Callable[[Tree, Array], Tree]
    reset: Callable[[Tree, Array], Tree]
    env: Env
    selector: Selector
    num_simulations: int
    max_nodes: int
    reuse: bool


def value_vector(value: Array, player: Array, num_players: int) -> Array:
    """`[B, P]` per-player values from the value `[B]` of the player to move (zero-sum for 2)."""
    if num_players == 1:
        return value[:, None]
    players = jnp.arange(num_players)[None, :]
    return jnp.where(players == player[:, None], value[:, None], -value[:, None])


def _node_view(tree: Tree, node: Array, discount: float) -> NodeView:
    B = node.shape[0]
    b = jnp.arange(B)
    player = tree.player[b, node]
    children = tree.children[b, node]  # [B, A]
    expanded = children >= 0
    safe = jnp.maximum(children, 0)
    bb = b[:, None]
    pp = player[:, None]
    child_visits = jnp.where(expanded, tree.visits[bb, safe], 0)
    child_sum = tree.value_sum[bb, safe, pp]
    child_reward = tree.reward[bb, safe, pp]
    child_q = jnp.where(
        child_visits > 0,
        child_reward + discount * child_sum / jnp.maximum(child_visits, 1),
        0.0,
    )
    node_visits = tree.visits[b, node]
    return NodeView(
        prior_logits=tree.prior_logits[b, node],
        mask=tree.mask[b, node],
        child_visits=child_visits,
        child_q=child_q,
        node_visits=node_visits,
        node_value=tree.value_sum[b, node, player] / jnp.maximum(node_visits, 1),
        raw_value=tree.raw_value[b, node, player],
    )


def make_search(
    env: Env,
    eval_fn: EvalFn | None = None,
    *,
    selector: Selector,
    num_simulations: int,
    max_nodes: int,
    discount: float = 1.0,
    reuse: bool | None = None,
    state_eval_fn: StateEvalFn | None = None,
) -> Search:
    """Configure a batched MCTS over `env`'s real dynamics.

    Args:
        env: the environment adapter (its `step` is the model).
        eval_fn: `eval_fn(params, observations [B, ...], key) -> (logits [B, A], value [B])`.
        selector: `puct(...)`, `muzero_puct(...)` or `gumbel(...)`.
        num_simulations: simulations per search, >= 1.
        max_nodes: node capacity per tree, >= 2; may be below `num_simulations + 1`.
        discount: per-step discount of rewards in (0, 1] (two-player games: 1).
        reuse: keep the played move's subtree between moves; defaults to the selector's
            `reusable` and requires a deterministic environment.
        state_eval_fn: instead of `eval_fn`, evaluate environment states directly
            (`(params, states [B], key) -> (logits, value)`), e.g. random rollouts.

    Returns:
        A `Search` of pure functions.

    Raises:
        ValueError: for out-of-range arguments, naming the argument.
    """
    if (eval_fn is None) == (state_eval_fn is None):
        raise ValueError("pass exactly one of eval_fn or state_eval_fn")
    if not isinstance(num_simulations, int) or num_simulations < 1:
        raise ValueError(f"num_simulations must be an int >= 1, got {num_simulations!r}")
    if not isinstance(max_nodes, int) or max_nodes < 2:
        raise ValueError(f"max_nodes must be an int >= 2, got {max_nodes!r}")
    if not 0.0 < discount <= 1.0:
        raise ValueError(f"discount must be in (0, 1], got {discount}")
    if not isinstance(selector, Selector):
        raise TypeError("selector must be built by puct(), muzero_puct() or gumbel()")
    if selector.name == "gumbel" and selector.options.get("num_simulations") != num_simulations:
        from turbozero.search.gumbel import gumbel
        from turbozero.search.selector import with_options

        selector = gumbel(**with_options(selector.options, num_simulations=num_simulations))
    if reuse is None:
        reuse = selector.reusable and env.deterministic
    if reuse and not selector.reusable:
        raise ValueError(f"reuse=True is not supported with the {selector.name!r} selector")
    if reuse and not env.deterministic:
        raise ValueError(f"reuse=True needs a deterministic environment; {env.name!r} is not")
    P, A = env.num_players, env.num_actions

    if state_eval_fn is None:
        assert eval_fn is not None

        def evaluate(params, states, key):
            obs = jax.vmap(env.observe)(states)
            return eval_fn(params, obs, key)
    else:
        evaluate = state_eval_fn

    def check_net(params, states, key) -> None:
        logits, value = jax.eval_shape(evaluate, params, states, key)
        B = jax.tree_util.tree_leaves(states)[0].shape[0]
        if logits.shape != (B, A):
            raise ValueError(
                f"the network's policy has shape {logits.shape}, expected (batch, num_actions) = "
                f"({B}, {A}) for {env.name!r}"
            )
        if value.shape != (B,):
            raise ValueError(f"the network's value has shape {value.shape}, expected ({B},)")

    def store_logits(logits, mask):
        logits = logits.astype(jnp.float32)
        top = jnp.max(jnp.where(mask, logits, -jnp.inf), axis=-1, keepdims=True)
        top = jnp.where(jnp.isfinite(top), top, 0.0)
        return jnp.where(mask, logits - top, NEG_LOGIT)

    def init(batch_size: int) -> Tree:
        return init_tree(env, batch_size=batch_size, max_nodes=max_nodes)

    def init_roots(tree: Tree, params, env_states, key) -> Tree:
        """Write the given states at the roots; evaluate roots of empty trees."""
        B = tree.batch_size
        md = jax.vmap(env.metadata)(env_states)
        empty = tree.next_free == 0
        logits, value = jax.lax.cond(
            jnp.any(empty),
            lambda: evaluate(params, env_states, key),
            lambda: (jnp.zeros((B, A), jnp.float32), jnp.zeros((B,), jnp.float32)),
        )
        terminal = md.terminated | md.truncated
        vec = value_vector(value.astype(jnp.float32), md.cur_player_id, P)
        vec = jnp.where(md.terminated[:, None], 0.0, vec)

        def set0(x, new):
            return x.at[:, 0].set(
                jnp.where(empty.reshape((B,) + (1,) * (new.ndim - 1)), new, x[:, 0])
            )

        tree = tree.replace(
            states=jax.tree_util.tree_map(lambda x, s: x.at[:, 0].set(s), tree.states, env_states),
            mask=tree.mask.at[:, 0].set(md.action_mask),
            player=tree.player.at[:, 0].set(md.cur_player_id),
            terminal=tree.terminal.at[:, 0].set(terminal),
        )
        tree = tree.replace(
            prior_logits=set0(tree.prior_logits, store_logits(logits, md.action_mask)),
            raw_value=set0(tree.raw_value, vec),
            value_sum=set0(tree.value_sum, vec),
            visits=set0(tree.visits, jnp.ones((B,), jnp.int32)),
            reward=set0(tree.reward, jnp.zeros((B, P), jnp.float32)),
            children=set0(tree.children, jnp.full((B, A), NO_CHILD, jnp.int32)),
            parent=set0(tree.parent, jnp.full((B,), NO_CHILD, jnp.int32)),
            next_free=jnp.where(empty, 1, tree.next_free),
        )
        return tree

    def simulate(tree: Tree, params, ctx, key) -> tuple[Tree, Array, Array]:
        B, N = tree.batch_size, tree.max_nodes
        b = jnp.arange(B)
        full = tree.next_free >= N

        # 1. select: walk down until an unexpanded edge or a terminal node.
        def sel_cond(c):
            return jnp.any(~c[2])

        def sel_step(c, is_root: bool):
            node, edge, done, depth = c
            view = _node_view(tree, node, discount)
            scores = selector.select(view, ctx, is_root)
            children = tree.children[b, node]
            allowed = view.mask & (
                ~full[:, None]
                | (children >= 0)
                | ~jnp.any(view.mask & (children >= 0), axis=-1, keepdims=True)
            )
            finite = allowed & jnp.isfinite(scores)
            a = jnp.where(
                jnp.any(finite, axis=-1),
                masked_argmax(scores, finite),
                masked_argmax(view.prior_logits, allowed),
            )
            child = children[b, a]
            descend = ~done & (child >= 0)
            stop = ~done & (child < 0)
            node = jnp.where(descend, child, node)
            done = done | stop | (descend & tree.terminal[b, jnp.maximum(child, 0)])
            edge = jnp.where(stop, a, edge)
            return node, edge, done, depth + descend.astype(jnp.int32)

        start = jnp.zeros((B,), jnp.int32)
        carry = (start, jnp.full((B,), -1, jnp.int32), tree.terminal[:, 0], start)
        carry = sel_step(carry, True)  # the root's rule (noise, Gumbel halving) once
        node, edge, _, depth = jax.lax.while_loop(sel_cond, lambda c: sel_step(c, False), carry)
        wants = edge >= 0
        expand = wants & ~full
        full_event = wants & full

        # 2. expand: one environment step and one network call for the whole batch.
        k_env, k_net = jax.random.split(key)
        parent_states = jax.tree_util.tree_map(lambda x: x[b, node], tree.states)
        action = jnp.maximum(edge, 0)
        new_states, md = jax.vmap(env.step)(parent_states, action, jax.random.split(k_env, B))
        logits, value = evaluate(params, new_states, k_net)
        terminal = md.terminated | md.truncated
        vec = value_vector(value.astype(jnp.float32), md.cur_player_id, P)
        vec = jnp.where(md.terminated[:, None], 0.0, vec)
        new = jnp.where(expand, tree.next_free, N)  # N: out of range, the scatter drops it

        def put(x, v):
            return x.at[b, new].set(v, mode="drop")

        tree = tree.replace(
            states=jax.tree_util.tree_map(put, tree.states, new_states),
            visits=put(tree.visits, jnp.zeros((B,), jnp.int32)),
            value_sum=put(tree.value_sum, jnp.zeros((B, P), jnp.float32)),
            raw_value=put(tree.raw_value, vec),
            reward=put(tree.reward, md.rewards.astype(jnp.float32)),
            prior_logits=put(tree.prior_logits, store_logits(logits, md.action_mask)),
            mask=put(tree.mask, md.action_mask),
            children=put(tree.children, jnp.full((B, A), NO_CHILD, jnp.int32)),
            parent=put(tree.parent, node),
            action=put(tree.action, action),
            player=put(tree.player, md.cur_player_id),
            terminal=put(tree.terminal, terminal),
            next_free=tree.next_free + expand.astype(jnp.int32),
        )
        tree = tree.replace(
            children=tree.children.at[b, jnp.where(expand, node, N), action].set(new, mode="drop")
        )
        leaf = jnp.where(expand, new, node)
        depth = depth + expand.astype(jnp.int32)

        # 3. back up along the parent chain.
        g0 = tree.raw_value[b, leaf]  # new node's evaluation, or the stopping node's own

        def up_cond(c):
            return jnp.any(c[0] >= 0)

        def up_body(c):
            n, g, visits, value_sum = c
            live = n >= 0
            at = jnp.where(live, n, N)
            visits = visits.at[b, at].add(1, mode="drop")
            value_sum = value_sum.at[b, at].add(g, mode="drop")
            safe = jnp.maximum(n, 0)
            g = jnp.where(live[:, None], tree.reward[b, safe] + discount * g, g)
            n = jnp.where(live, tree.parent[b, safe], NO_CHILD)
            return n, g, visits, value_sum

        _, _, visits, value_sum = jax.lax.while_loop(
            up_cond, up_body, (leaf, g0, tree.visits, tree.value_sum)
        )
        return tree.replace(visits=visits, value_sum=value_sum), depth, full_event

    def search(tree: Tree, params, env_states, key, temperature=0.0):
        B = tree.batch_size
        k_root, k_prep, k_sims, k_act = jax.random.split(key, 4)
        tree = init_roots(tree, params, env_states, k_root)
        root = jnp.zeros((B,), jnp.int32)
        ctx = selector.prepare(_node_view(tree, root, discount), k_prep)

        def body(i, c):
            tree, max_depth, fulls = c
            tree, depth, full_event = simulate(tree, params, ctx, jax.random.fold_in(k_sims, i))
            return tree, jnp.maximum(max_depth, depth), fulls + full_event.astype(jnp.int32)

        zeros = jnp.zeros((B,), jnp.int32)
        tree, max_depth, fulls = jax.lax.fori_loop(0, num_simulations, body, (tree, zeros, zeros))
        view = _node_view(tree, root, discount)
        weights, greedy = selector.policy(view, ctx)
        temp = jnp.broadcast_to(jnp.asarray(temperature, jnp.float32), (B,))
        logits = jnp.log(jnp.maximum(weights, 1e-30)) / jnp.maximum(temp, 1e-6)[:, None]
        sampled = jax.random.categorical(k_act, jnp.where(view.mask, logits, -jnp.inf))
        action = jnp.where(temp > 0, sampled, greedy).astype(jnp.int32)
        out = SearchOutput(
            action=action,
            action_weights=weights,
            root_value=view.node_value,
            q_values=view.child_q,
            visit_counts=view.child_visits,
            max_depth=max_depth,
            tree_fullness=tree.next_free.astype(jnp.float32) / tree.max_nodes,
            full_events=fulls,
            root_player=tree.player[:, 0],
        )
        return tree, out

    def checked_search(tree: Tree, params, env_states, key, temperature=0.0):
        if not isinstance(temperature, jax.core.Tracer):
            t = jnp.asarray(temperature)
            if not isinstance(t, jax.core.Tracer) and bool(jnp.any(t < 0)):
                raise ValueError(f"temperature must be >= 0, got {temperature}")
        check_net(params, env_states, key)
        return search(tree, params, env_states, key, temperature)

    def advance(tree: Tree, action: Array) -> Tree:
        if reuse:
            return advance_trees(tree, action)
        return reset_trees(tree, jnp.ones_like(tree.next_free, jnp.bool_))

    return Search(
        init=init,
        search=checked_search,
        advance=advance,
        reset=reset_trees,
        env=env,
        selector=selector,
        num_simulations=num_simulations,
        max_nodes=max_nodes,
        reuse=bool(reuse),
    )
