"""The batched search: a loop of simulations (select, expand, back up) over every game at once,
inside one compiled program. Read `simulate` first; the rest is its steps.

Letters: B games, N node capacity, A actions, P players.

Every step reads and writes only the nodes on its path: selection and backup are `while_loop`s
over a small `[B]` carry that gather from and scatter into the tree by index, so a simulation
costs the depth walked, not `max_nodes`. An expansion is one environment step and one network
call for the whole batch.

When the tree is full (`next_free == max_nodes`), a simulation that reaches an unexpanded edge
does not expand: selection is restricted to expanded children where a node has any, and a
simulation that still ends at a node without expanding backs up that node's own evaluation.
`SearchOutput.full_events` counts those simulations.

Games with chance (`env.chance` set) get chance nodes between a move and the state it leads to
(see "Chance nodes" in `docs/search.md`): `select_level` picks a chance node's outcome by the
lag of its visits behind its probability (among the outcomes progressive widening has opened,
`outcome_scores`), `expand_with_chance` steps through `decide` and
`resolve`, and `backward` recomputes a chance node's value as the expectation over its visited
outcomes. Every chance path is compiled only for games with chance: the others compile today's
program.

The speed paths (walk compaction, root evaluation on few lanes, levels per loop iteration,
buffers for the step's outputs) are in `speed.py`, selectable through `SpeedPaths`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from turbozero import struct
from turbozero.envs.chance import has_chance_event
from turbozero.envs.core import Env
from turbozero.search.selector import (
    NodeView,
    Selector,
    first_argmax,
    is_one_key,
    masked_softmax,
    row_keys,
)
from turbozero.search.speed import (
    SpeedPaths,
    compiler_options,
    computed_once,
    default_levels_per_iteration,
    default_speed_paths,
    evaluate_where,
    repeated,
    walk_compacted,
    walk_in_lock_step,
)
from turbozero.search.tree import (
    CHANCE_NODE,
    CHILD,
    E_VALUE,
    E_VISITS,
    ILLEGAL,
    LEGAL_ABOVE,
    N_RAW,
    N_TERMINAL,
    NEG_LOGIT,
    NO_CHILD,
    PRIOR,
    PROBS,
    S_VALUE,
    S_VISITS,
    Links,
    StateCodec,
    Tree,
    advance_trees,
    edge_rows,
    gather_rows,
    info_row,
    init_tree,
    links_row,
    one_visit,
    read_info,
    read_links,
    reset_trees,
    same_states,
    tree_codecs,
)
from turbozero.types import Array, EvalFn, Params, PRNGKey, PyTree, StepMetadata
from turbozero.validate import check_count

__all__ = [
    "MAX_NODES",
    "Search",
    "SearchOutput",
    "SearchSpec",
    "SpeedPaths",
    "backward",
    "compiler_options",
    "default_levels_per_iteration",
    "expand",
    "expand_with_chance",
    "init_roots",
    "make_search",
    "max_simulations",
    "run_search",
    "select",
    "shard_search",
    "simulate",
    "value_vector",
]

MAX_NODES = 2**24  # node indices are exact in the tree's float32 rows up to here


def max_simulations(chance: bool) -> int:
    """The most simulations a search whose tree holds one node a simulation and the root can
    run within `MAX_NODES`; half as many in a game with chance nodes (a chance node and its
    outcome's state a simulation)."""
    return (MAX_NODES - 1) // (2 if chance else 1)


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
    """Pure functions of a configured search (compile them with `jax.jit` at the top, passing
    `compiler_options=compiler_options()`, which matters on NVIDIA GPUs).

    Attributes:
        init: `init(batch_size) -> Tree`, empty trees.
        search: `search(tree, params, env_states, key, temperature=0.0) -> (tree, SearchOutput)`;
            `env_states` batched `[B]`, `temperature` a scalar or `[B]` (0 = best move), `key`
            one PRNG key or one per game (`[B]` typed, `[B, 2]` raw): each game draws its noise,
            environment keys and sampled move from its own (one key is split into `B` first).
        advance: `advance(tree, action [B], outcome [B] = None) -> tree`: keep the played
            child's subtree when reuse is on, otherwise empty the trees. In games with chance,
            `outcome` is the chance outcome drawn after `action` (`env.chance.sample_outcome`);
            without it, rows whose move led to a chance event are emptied.
        reset: `reset(tree, done [B]) -> tree`: empty the rows of finished games.
        env, selector, num_simulations, max_nodes, reuse, discount: the configuration.
        spec: what the steps (`simulate`, `select`, ...) read, for calling them directly.
    """

    init: Callable[[int], Tree]
    search: Callable[..., tuple[Tree, SearchOutput]]
    advance: Callable[..., Tree]
    reset: Callable[[Tree, Array], Tree]
    env: Env
    selector: Selector
    num_simulations: int
    max_nodes: int
    reuse: bool
    discount: float = 1.0
    spec: SearchSpec | None = None


class SearchSpec(NamedTuple):
    """The static configuration every step reads.

    Attributes:
        env: the environment adapter; its `step` is the model.
        evaluate: `evaluate(params, states [B], key) -> (logits [B, A], value [B])`.
        selector: the action-selection rule.
        codec: how states are packed into the tree's rows.
        discount: per-step discount of rewards.
        speed: the speed paths compiled in.
        after_codec: how afterstates are packed into the same rows (games with chance; None
            for the others, whose programs have no chance node path).
        chance_widening: how fast a chance node opens its outcomes (`outcome_scores`); 1: all
            of them from its second visit on.
    """

    env: Env
    evaluate: StateEvalFn
    selector: Selector
    codec: StateCodec
    discount: float
    speed: SpeedPaths
    after_codec: StateCodec | None = None
    chance_widening: float = 1.0


class Path(NamedTuple):
    """The selection walk's carry, one entry per game."""

    node: Array  # [B] int32 the node the walk is at
    edge: Array  # [B] int32 the unexpanded edge it stopped at, -1 for none
    done: Array  # [B] bool the walk is over
    depth: Array  # [B] int32 levels descended


class Backup(NamedTuple):
    """The backup's carry."""

    node: Array  # [B] int32 the node to update next, NO_CHILD once past the root
    returns: Array  # [B, P] the return reaching `node`, per player
    node_stats: Array  # [B, N, 2] the tree's node statistics, being updated
    edge_stats: Array  # [B, N, A, 2] the tree's edge statistics, being updated


class Loop(NamedTuple):
    """The simulation loop's carry."""

    tree: Tree
    max_depth: Array  # [B] int32 deepest node reached so far
    full_events: Array  # [B] int32 simulations that found the tree full


def value_vector(value: Array, player: Array, num_players: int) -> Array:
    """`[B, P]` per-player values from the value `[B]` of the player to move (zero-sum for 2)."""
    if num_players == 1:
        return value[:, None]
    players = jnp.arange(num_players)[None, :]
    return jnp.where(players == player[:, None], value[:, None], -value[:, None])


def evaluate_observations(
    env: Env, eval_fn: EvalFn, params: Params, states: PyTree, key: PRNGKey
) -> tuple[Array, Array]:
    """The network's `(logits [B, A], value [B])` of `states [B]`, from their observations."""
    return eval_fn(params, jax.vmap(env.observe)(states), key)


def node_view(
    tree: Tree,
    node: Array | None,
    games: Array | None = None,
    logits: bool = True,
    actions: int | None = None,
) -> tuple[NodeView, Array, Array]:
    """The `NodeView` of `node [L]` of games `games [L]` (default: every game, `L = B`; `node`
    None: the roots), its children `[L, A]` int32 and whether the game is over there `[L]`.

    One gather of each packed row (a slice for the roots). Without `logits` the `PRIOR` row is
    not read and the view's `prior_logits` are the logarithms of the stored probabilities. With
    `actions`, the roots' edges are cut to the first `actions` (games with chance, whose edge
    rows are `max(A, C)` wide: a root is a decision node).
    """
    if node is None:
        row, edge_stats = tree.edges[:, 0], tree.edge_stats[:, 0]
        if actions is not None and actions < tree.num_actions:
            row, edge_stats = row[..., :actions], edge_stats[:, :actions]
        node_stats, info = tree.node_stats[:, 0], tree.node[:, 0]
        flat = None
    else:
        games = jnp.arange(node.shape[0]) if games is None else games
        flat = games * tree.max_nodes + node
        edges = tree.edges if logits else tree.edges[:, :, :PRIOR]
        row = gather_rows(edges, flat)  # [L, 3 or 2, A]
        edge_stats = gather_rows(tree.edge_stats, flat)  # [L, A, 2]
        node_stats = gather_rows(tree.node_stats, flat)  # [L, 2]
    children = row[:, CHILD]
    mask = children > ILLEGAL
    if row.shape[1] > PRIOR:
        prior = row[:, PRIOR]
    else:
        prior = jnp.where(mask, jnp.log(jnp.maximum(row[:, PROBS], 1e-30)), NEG_LOGIT)
    # an edge's statistics are only meaningful once it has a child (see `tree.py`)
    edge_visits = jnp.where(children >= 0, edge_stats[..., E_VISITS], 0.0)
    node_visits = node_stats[:, S_VISITS]
    if flat is None:
        raw_value, terminal = info[:, N_RAW], info[:, N_TERMINAL] > 0
    else:
        raw_value, terminal, _ = read_info(tree, flat)
    view = NodeView(
        prior_logits=prior,
        prior_probs=row[:, PROBS],
        mask=mask,
        child_visits=edge_visits.astype(jnp.int32),
        child_q=jnp.where(
            edge_visits > 0, edge_stats[..., E_VALUE] / jnp.maximum(edge_visits, 1.0), 0.0
        ),
        node_visits=node_visits.astype(jnp.int32),
        node_value=node_stats[:, S_VALUE] / jnp.maximum(node_visits, 1.0),
        raw_value=raw_value,
    )
    return view, children.astype(jnp.int32), terminal


def store_prior(logits: Array, mask: Array) -> tuple[Array, Array]:
    """The `PRIOR` and `PROBS` rows `[B, A]`: logits shifted to a maximum of 0 over legal actions
    (illegal ones at `NEG_LOGIT`) and their softmax over legal actions."""
    logits = logits.astype(jnp.float32)
    top = jnp.max(jnp.where(mask, logits, -jnp.inf), axis=-1, keepdims=True)
    top = jnp.where(jnp.isfinite(top), top, 0.0)
    logits = jnp.where(mask, jnp.maximum(logits - top, LEGAL_ABOVE / 2), NEG_LOGIT)
    return logits, masked_softmax(logits, mask)


def fresh_rows(
    logits: Array, md: Any, value: Array, width: int | None = None
) -> tuple[Array, Array, Array]:
    """A newly evaluated node's `edges [B, 3, A]` and `node [B, 2 + P]` rows, and its value
    for the player to move `[B]` (0 where the game terminated). With `width > A` (games with
    chance) the edge rows are widened with illegal columns."""
    own = jnp.where(md.terminated, 0.0, value.astype(jnp.float32))
    mask = md.action_mask
    if width is not None and width > mask.shape[-1]:
        extra = [(0, 0), (0, width - mask.shape[-1])]
        logits, mask = jnp.pad(logits, extra), jnp.pad(mask, extra)
    prior, probs = store_prior(logits, mask)
    children = jnp.where(mask, NO_CHILD, ILLEGAL)
    edges = edge_rows(probs, children, prior)
    return edges, info_row(own, md.terminated | md.truncated, md.rewards), own


# --- the search loop -------------------------------------------------------------------------


def run_search(
    spec: SearchSpec,
    tree: Tree,
    params: Params,
    env_states: PyTree,
    key: PRNGKey,
    temperature: Array | float = 0.0,
    *,
    num_simulations: int,
    reuse: bool,
) -> tuple[Tree, SearchOutput]:
    """Search from `env_states [B]`: root set-up, `num_simulations` simulations, the move.

    Every game draws from its own key, so a game's search is the same in any batch and on any
    number of devices; the network call (one per batch) gets the first game's.
    """
    B = tree.batch_size
    parts = jax.vmap(lambda k: jax.random.split(k, 5))(row_keys(key, B))
    k_root, k_prep, k_sims, k_act, k_net = (parts[:, i] for i in range(5))
    if not reuse:  # every search starts afresh (as in mctx), advanced or not
        tree = reset_trees(tree, jnp.ones((B,), jnp.bool_))
    tree = init_roots(spec, tree, params, env_states, k_root[0])
    A = spec.env.num_actions
    ctx = spec.selector.prepare(node_view(tree, None, actions=A)[0], k_prep)

    def body(i: Array, loop: Loop) -> Loop:
        k_env = jax.vmap(jax.random.fold_in, (0, None))(k_sims, i)
        k_eval = jax.random.fold_in(k_net[0], i)
        tree, depth, full_event = simulate(spec, loop.tree, params, ctx, k_env, k_eval)
        return Loop(
            tree,
            jnp.maximum(loop.max_depth, depth),
            loop.full_events + full_event.astype(jnp.int32),
        )

    zeros = jnp.zeros((B,), jnp.int32)
    tree, max_depth, fulls = jax.lax.fori_loop(0, num_simulations, body, Loop(tree, zeros, zeros))
    view = node_view(tree, None, actions=A)[0]
    weights, greedy = spec.selector.policy(view, ctx)
    action = choose_action(view.mask, weights, greedy, temperature, k_act)
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


def simulate(
    spec: SearchSpec, tree: Tree, params: Params, ctx: Any, k_env: Array, k_net: PRNGKey
) -> tuple[Tree, Array, Array]:
    """One simulation in every game: walk down to an unexpanded edge, expand it, back up.

    Args:
        spec: the configuration.
        tree: the trees, roots initialised.
        params: the network's parameters.
        ctx: what the selector prepared at the root (noise, Gumbels).
        k_env: `[B]` keys, the environment step's per game.
        k_net: the network call's key (one call for the batch).

    Returns:
        The trees, the depth of each game's leaf `[B]` int32 (chance nodes count as levels),
        and `[B]` whether the simulation found its tree full (with chance: fewer than two free
        nodes) and backed up without expanding.
    """
    if spec.after_codec is None:
        full = tree.next_free >= tree.max_nodes
    else:  # an expansion may add a chance node and its first outcome
        full = tree.next_free >= tree.max_nodes - 1
    path = select(spec, tree, ctx, full)
    wants = path.edge >= 0
    expanding = wants & ~full
    if spec.after_codec is None:
        tree, leaf, returns = expand(spec, tree, params, path, expanding, k_env, k_net)
        added = expanding.astype(jnp.int32)
    else:
        before = tree.next_free
        tree, leaf, returns = expand_with_chance(spec, tree, params, path, expanding, k_env, k_net)
        added = tree.next_free - before  # 2 where a chance node came with its outcome
    tree = backward(spec, tree, leaf, returns)
    return tree, path.depth + added, wants & full


# --- the steps -------------------------------------------------------------------------------


def init_roots(
    spec: SearchSpec, tree: Tree, params: Params, env_states: PyTree, key: PRNGKey
) -> Tree:
    """Write `env_states [B]` at the roots and evaluate the roots of empty trees.

    A kept tree whose root holds another state than the given one (a reset forgotten after an
    episode ended, an opponent's move the tree was not advanced by) is not that state's tree and
    starts afresh. The stored root state is compared bit for bit, and its legal moves as well.
    """
    env, B = spec.env, tree.batch_size
    md = jax.vmap(env.metadata)(env_states)
    packed = spec.codec.pack(env_states)
    kept_moves = tree.edges[:, 0, CHILD, : env.num_actions] > ILLEGAL
    stale = jnp.any(kept_moves != md.action_mask, axis=-1) | ~same_states(
        jax.tree_util.tree_map(lambda x: x[:, 0], tree.states), packed
    )
    empty = (tree.next_free == 0) | stale

    def run(states: PyTree) -> tuple[Array, Array]:
        logits, value = spec.evaluate(params, states, key)
        return logits.astype(jnp.float32), value.astype(jnp.float32)

    logits, value = evaluate_where(
        run,
        env_states,
        empty,
        num_actions=env.num_actions,
        compact=spec.speed.compact_root_evaluations,
    )
    fresh_edges, fresh_info, own = fresh_rows(logits, md, value, tree.num_actions)
    # (a root's incoming reward is never read: the backup stops at the root)
    root_info = jnp.where(empty[:, None], fresh_info, tree.node[:, 0])
    root_info = root_info.at[:, N_TERMINAL].set(fresh_info[:, N_TERMINAL])
    no = jnp.zeros((B,), jnp.int32)
    player = md.cur_player_id.astype(jnp.int32)
    root_links = Links(parent=no + NO_CHILD, action=no, player=player, parent_player=no)

    def set_root(x: Array, fresh: Array) -> Array:
        e = empty.reshape((B,) + (1,) * (fresh.ndim - 1))
        return x.at[:, 0].set(jnp.where(e, fresh, x[:, 0]))

    return tree.replace(
        states=jax.tree_util.tree_map(lambda x, s: x.at[:, 0].set(s), tree.states, packed),
        edges=set_root(tree.edges, fresh_edges),
        node_stats=set_root(tree.node_stats, one_visit(own)),
        node=tree.node.at[:, 0].set(root_info),
        links=tree.links.at[:, 0].set(links_row(root_links)),
        next_free=jnp.where(empty, 1, tree.next_free),
    )


def select(spec: SearchSpec, tree: Tree, ctx: Any, full: Array) -> Path:
    """Walk every game down from its root until an unexpanded edge or a finished game.

    The root is scored once by the selector's root rule (noise, Gumbel's halving), the levels
    below by its interior rule until every game's walk is done.

    Args:
        spec: the configuration.
        tree: the trees.
        ctx: the selector's root context.
        full: `[B]` whether a tree has no free node (selection then keeps to expanded children).

    Returns:
        The `Path` of each game: where it stopped, the edge to expand (-1: none), its depth.
    """
    B = tree.batch_size
    start = jnp.zeros((B,), jnp.int32)
    path = Path(start, jnp.full((B,), -1, jnp.int32), jnp.zeros((B,), jnp.bool_), start)
    path = select_level(spec, tree, ctx, path, None, full, is_root=True)
    walk = walk_compacted if spec.speed.compact_walks else walk_in_lock_step

    def level(p: Path, games: Array | None, is_full: Array) -> Path:
        return select_level(spec, tree, None, p, games, is_full, is_root=False)

    return walk(level, path, full, spec.speed.levels_per_iteration)


def select_level(
    spec: SearchSpec,
    tree: Tree,
    ctx: Any,
    path: Path,
    games: Array | None,
    full: Array,
    *,
    is_root: bool,
) -> Path:
    """One level of the walk for the games `games [L]` (None: all), `full [L]`: score the
    children of each game's node, take the best allowed, descend or stop."""
    selector = spec.selector
    widening = spec.after_codec is not None and spec.chance_widening < 1.0
    view, children, terminal = node_view(
        tree,
        None if is_root else path.node,
        games,
        logits=selector.interior_logits or widening,  # (a chance node's order is in PRIOR)
        actions=spec.env.num_actions if is_root else None,
    )
    done = path.done | terminal  # reached (or started at) a finished game: stop there
    scores = selector.select(view, ctx if is_root else None, is_root)
    if spec.after_codec is not None and not is_root:  # (a root is a decision node)
        games = jnp.arange(path.node.shape[0]) if games is None else games
        kind = gather_rows(tree.node, games * tree.max_nodes + path.node)[:, N_TERMINAL]
        outcomes = outcome_scores(view, spec.chance_widening)
        scores = jnp.where((kind == CHANCE_NODE)[:, None], outcomes, scores)
    expanded = children >= 0
    # in a full tree, only expanded children where the node has any
    allowed = view.mask & (
        ~full[:, None] | expanded | ~jnp.any(view.mask & expanded, axis=-1, keepdims=True)
    )
    if is_root:
        # The root's scores may exclude moves with -inf (Gumbel's sequential halving): the best
        # finite score, and where none is finite the best prior among allowed moves.
        finite = allowed & jnp.isfinite(scores)
        scores = jnp.where(
            jnp.any(finite, axis=-1, keepdims=True),
            jnp.where(finite, scores, -jnp.inf),
            jnp.where(allowed, view.prior_logits, -jnp.inf),
        )
    else:
        # Interior scores are finite for every legal move under each rule (NaN, from a network
        # gone wrong, counts as not allowed).
        scores = jnp.where(allowed & ~jnp.isnan(scores), scores, -jnp.inf)
    a = first_argmax(scores)
    child = jnp.take_along_axis(children, a[:, None], axis=1)[:, 0]
    descend = ~done & (child >= 0)
    stop = ~done & (child == NO_CHILD)
    # Nothing allowed (no legal move in an unfinished game, or every score NaN): stop without
    # expanding, as in a full tree, rather than step an illegal move.
    stuck = ~done & (child == ILLEGAL)
    return Path(
        node=jnp.where(descend, child, path.node),
        edge=jnp.where(stop, a, path.edge),
        done=done | stop | stuck,
        depth=path.depth + descend.astype(jnp.int32),
    )


def outcome_scores(view: NodeView, widening: float) -> Array:
    """`[L, C]`: a chance node's scores of its outcomes (the argmax is taken over the possible
    outcomes, `mask`).

    With `widening` 1, every outcome is open: the score is `p_o * (n + 1) - n_o` (`n` the
    node's visits through outcomes), the outcome whose visits lag their share of the
    probability most, so that each outcome's visits keep within about one of `p_o n`.

    With `widening` w < 1 (progressive widening), only the first `ceil(n ** w)` outcomes of
    the node's order are open: the order is a draw without replacement in proportion to the
    probabilities, made when the node was expanded (`prior_logits` holds `log p_o` plus a
    Gumbel). Among the open outcomes the same lag rule runs on their renormalised
    probabilities; the others score below every open one. A node with few visits thus
    follows a few drawn outcomes deeper instead of one level of every outcome, and every
    outcome opens as the visits grow.
    """
    visits = view.child_visits.astype(jnp.float32)
    total = jnp.sum(visits, axis=-1, keepdims=True)
    if widening >= 1.0:
        return view.prior_probs * (total + 1.0) - visits
    order = jnp.where(view.mask, view.prior_logits, -jnp.inf)
    k = jnp.ceil(jnp.maximum(total, 1.0) ** widening).astype(jnp.int32)  # [L, 1]
    ranked = -jnp.sort(-order, axis=-1)
    kth = jnp.take_along_axis(ranked, jnp.minimum(k, order.shape[-1]) - 1, axis=-1)
    open_ = view.mask & (order >= kth)
    probs = jnp.where(open_, view.prior_probs, 0.0)
    probs = probs / jnp.maximum(jnp.sum(probs, axis=-1, keepdims=True), 1e-30)
    lag = probs * (total + 1.0) - visits
    return jnp.where(open_, lag, -1e6 + jnp.where(view.mask, order, 0.0) * 1e-3)


def expand(
    spec: SearchSpec,
    tree: Tree,
    params: Params,
    path: Path,
    expanding: Array,
    k_env: Array,
    k_net: PRNGKey,
) -> tuple[Tree, Array, Array]:
    """Step the environment along each path's edge and evaluate the new states: one step and
    one network call for the batch. Games where `expanding [B]` is False write nothing.

    Returns:
        The trees, the leaf to back up from `[B]` (the new node, or the node where the walk
        stopped), and the returns to back up from it `[B, P]` (the new node's evaluation, or
        the stopping node's own).
    """
    env, B, N = spec.env, tree.batch_size, tree.max_nodes
    b = jnp.arange(B)
    node = path.node
    flat = b * N + node
    parent_states = spec.codec.unpack(
        jax.tree_util.tree_map(lambda x: gather_rows(x, flat), tree.states)
    )
    parent_links = read_links(tree, flat)
    parent_info = gather_rows(tree.node, flat)
    action = jnp.maximum(path.edge, 0)
    new_states, md = jax.vmap(env.step)(parent_states, action, k_env)
    if spec.speed.step_buffers:
        # (next_free is never negative; XLA cannot know that, so the conditional stays)
        new_states, md = computed_once((new_states, md), tree.next_free[0] >= 0)
    logits, value = spec.evaluate(params, new_states, k_net)
    player = md.cur_player_id.astype(jnp.int32)
    new_edges, new_info, own = fresh_rows(logits, md, value)
    new = jnp.where(expanding, tree.next_free, N)  # N: out of range, the scatter drops it
    new_links = Links(node, action, player, parent_links.player)

    def put(x: Array, v: Array) -> Array:
        return x.at[b, new].set(v, mode="drop")

    # The rows of games that do not expand are dropped by `put`; filling them with the parent's
    # row makes the write read `parent_info`, so XLA orders it after that gather and updates
    # `tree.node` in place instead of copying it.
    node_rows = jnp.where(expanding[:, None], new_info, parent_info)
    at_parent = jnp.where(expanding, node, N)
    edges = put(tree.edges, new_edges)
    edges = edges.at[b, at_parent, CHILD, action].set(new.astype(jnp.float32), mode="drop")
    # The new node's own edges have no children yet, so their stale statistics are never read;
    # the edge into it gets its first, clean statistics here.
    edge_stats = tree.edge_stats.at[b, at_parent, action].set(0.0, mode="drop")
    tree = tree.replace(
        states=jax.tree_util.tree_map(put, tree.states, spec.codec.pack(new_states)),
        edges=edges,
        edge_stats=edge_stats,
        node_stats=put(tree.node_stats, jnp.zeros((B, 2), jnp.float32)),
        node=put(tree.node, node_rows),
        links=put(tree.links, links_row(new_links)),
        next_free=tree.next_free + expanding.astype(jnp.int32),
    )
    leaf = jnp.where(expanding, new, node)
    returns = value_vector(
        jnp.where(expanding, own, parent_info[:, N_RAW]),
        jnp.where(expanding, player, parent_links.player),
        env.num_players,
    )
    return tree, leaf, returns


def _outcome_order(probs: Array, k_env: Array, *, widening: bool) -> Array:
    """`[B, C]` the order in which a new chance node opens its outcomes: `log p`, plus a Gumbel
    per outcome under progressive widening (a draw without replacement in proportion to the
    probabilities); impossible outcomes last."""
    log_probs = jnp.where(probs > 0, jnp.log(jnp.maximum(probs, 1e-30)), NEG_LOGIT)
    if not widening:
        return log_probs
    order = log_probs + jax.vmap(lambda k: jax.random.gumbel(k, probs.shape[-1:]))(k_env)
    return jnp.where(probs > 0, order, NEG_LOGIT)


def _chance_edges(
    probs: Array, order: Array, first_outcome: Array, new: Array, num_edges: int
) -> Array:
    """The edge rows `[B, ...]` of new chance nodes: each outcome's probability and order, the
    first outcome's child the new decision node `new [B]`, the other possible ones unopened."""
    pad = [(0, 0), (0, num_edges - probs.shape[-1])]
    possible = jnp.pad(probs, pad) > 0
    probs_row = jnp.where(possible, jnp.pad(probs, pad), 0.0)
    outcomes = jnp.arange(num_edges)[None, :]
    chance_children = jnp.where(
        outcomes == first_outcome[:, None], new[:, None], jnp.where(possible, NO_CHILD, ILLEGAL)
    )
    return edge_rows(probs_row, chance_children, jnp.pad(order, pad, constant_values=NEG_LOGIT))


class _Stepped(NamedTuple):
    """What the edges being expanded lead to (`_step_edges`), per batch lane `[B, ...]`."""

    decided: Any  # the afterstate of the edge's move (a decision node's reading)
    probs: Array  # [B, K] its chance outcomes' probabilities
    order: Array  # [B, K] the order its outcomes open in
    first_outcome: Array  # [B] the outcome opened with a new chance node
    event: Array  # [B] the move is followed by a chance event (a chance node is added)
    states: Any  # the state reached: after the outcome, or after the move without an event
    md: StepMetadata  # its metadata


def _step_edges(
    spec: SearchSpec, tree: Tree, flat: Array, at_chance: Array, edge: Array, k_env: Array
) -> _Stepped:
    """Both readings of every parent row (`flat [B]`): a decision node's, whose `edge` is a
    move to `decide`, and a chance node's (`at_chance [B]`), whose stored afterstate `resolve`s
    with the edge's outcome; each lane keeps the one its node holds."""
    assert spec.after_codec is not None and spec.env.chance is not None
    env, chance = spec.env, spec.env.chance
    B = tree.batch_size
    rows = jax.tree_util.tree_map(lambda x: gather_rows(x, flat), tree.states)
    # both readings of every row; each lane keeps the one its node holds
    decided = jax.vmap(chance.decide)(
        spec.codec.unpack(rows), jnp.minimum(edge, env.num_actions - 1)
    )
    probs = jax.vmap(chance.probabilities)(decided).astype(jnp.float32)
    stored = spec.after_codec.unpack(rows)
    after = jax.tree_util.tree_map(
        lambda s, d: jnp.where(at_chance.reshape((B,) + (1,) * (d.ndim - 1)), s, d),
        stored,
        decided,
    )
    event = ~at_chance & has_chance_event(probs)
    order = _outcome_order(probs, k_env, widening=spec.chance_widening < 1.0)
    first_outcome = first_argmax(order)
    outcome = jnp.where(at_chance, edge, jnp.where(event, first_outcome, 0))
    new_states, md = jax.vmap(chance.resolve)(after, outcome)
    if spec.speed.step_buffers:
        new_states, md = computed_once((new_states, md), tree.next_free[0] >= 0)
    return _Stepped(decided, probs, order, first_outcome, event, new_states, md)


def expand_with_chance(
    spec: SearchSpec,
    tree: Tree,
    params: Params,
    path: Path,
    expanding: Array,
    k_env: Array,
    k_net: PRNGKey,
) -> tuple[Tree, Array, Array]:
    """`expand` for games with chance: one `decide`, `resolve` and network call for the batch.

    At a decision node, `decide` the edge's move; with a chance event, add the chance node (its
    afterstate and outcome probabilities) and, under it, the state of its first outcome;
    without one, the state `resolve(afterstate, 0)` directly. At a chance node, `resolve` its
    stored afterstate with the edge's outcome. The new state is evaluated as in `expand`; a new
    chance node's raw value is that evaluation, for its own player (who made the move).

    The first outcome is the most probable one when every outcome opens at once
    (`spec.chance_widening` 1). Under progressive widening, `k_env [B]` draws the chance node's
    order of outcomes (its `PRIOR` row: `log p_o` plus a Gumbel, a draw without replacement in
    proportion to the probabilities) and the first outcome is the first of that order.
    """
    assert spec.after_codec is not None and spec.env.chance is not None
    env = spec.env
    B, N, W = tree.batch_size, tree.max_nodes, tree.num_actions
    b = jnp.arange(B)
    node = path.node
    flat = b * N + node
    parent_links = read_links(tree, flat)
    parent_info = gather_rows(tree.node, flat)
    at_chance = parent_info[:, N_TERMINAL] == CHANCE_NODE
    edge = jnp.maximum(path.edge, 0)
    decided, probs, order, first_outcome, event, new_states, md = _step_edges(
        spec, tree, flat, at_chance, edge, k_env
    )
    logits, value = spec.evaluate(params, new_states, k_net)
    player = md.cur_player_id.astype(jnp.int32)
    new_edges, new_info, own = fresh_rows(logits, md, value, W)

    two = expanding & event  # a chance node at next_free, its outcome's state after it
    first = jnp.where(expanding, tree.next_free, N)  # N: out of range, the scatter drops it
    second = jnp.where(two, tree.next_free + 1, N)
    new = jnp.where(two, tree.next_free + 1, tree.next_free)  # the new decision node
    new_links = Links(
        jnp.where(two, tree.next_free, node),
        jnp.where(two, first_outcome, edge),
        player,
        parent_links.player,
    )
    # the chance node: the mover's afterstate, its outcomes, the evaluation for the mover
    chance_edges = _chance_edges(probs, order, first_outcome, new, W)
    mover_value = for_player(value_vector(own, player, env.num_players), parent_links.player)
    chance_info = info_row(mover_value, jnp.zeros((B,), jnp.bool_), jnp.zeros_like(md.rewards))
    chance_info = chance_info.at[:, N_TERMINAL].set(CHANCE_NODE)
    chance_links = Links(node, edge, parent_links.player, parent_links.player)

    def put(x: Array, at: Array, v: Array) -> Array:
        return x.at[b, at].set(v, mode="drop")

    def pick(if_two: Array, otherwise: Array) -> Array:
        return jnp.where(two.reshape((B,) + (1,) * (if_two.ndim - 1)), if_two, otherwise)

    at_parent = jnp.where(expanding, node, N)
    edges = put(tree.edges, first, pick(chance_edges, new_edges))
    edges = put(edges, second, new_edges)
    edges = edges.at[b, at_parent, CHILD, edge].set(tree.next_free.astype(jnp.float32), mode="drop")
    edge_stats = tree.edge_stats.at[b, at_parent, edge].set(0.0, mode="drop")
    edge_stats = edge_stats.at[b, jnp.where(two, tree.next_free, N), first_outcome].set(
        0.0, mode="drop"
    )
    packed_new = spec.codec.pack(new_states)
    packed_after = spec.after_codec.pack(decided)
    zeros = jnp.zeros((B, 2), jnp.float32)
    tree = tree.replace(
        states=put(put(tree.states, first, pick(packed_after, packed_new)), second, packed_new),
        edges=edges,
        edge_stats=edge_stats,
        node_stats=put(put(tree.node_stats, first, zeros), second, zeros),
        node=put(put(tree.node, first, pick(chance_info, new_info)), second, new_info),
        links=put(
            put(tree.links, first, pick(links_row(chance_links), links_row(new_links))),
            second,
            links_row(new_links),
        ),
        next_free=tree.next_free + expanding.astype(jnp.int32) + two.astype(jnp.int32),
    )
    leaf = jnp.where(expanding, new, node)
    returns = value_vector(
        jnp.where(expanding, own, parent_info[:, N_RAW]),
        jnp.where(expanding, player, parent_links.player),
        env.num_players,
    )
    return tree, leaf, returns


def for_player(values: Array, player: Array) -> Array:
    """`[B]`: the entries of per-player `values [B, P]` of `player [B]`."""
    players = jnp.arange(values.shape[-1])[None, :]
    return jnp.sum(jnp.where(players == player[:, None], values, 0.0), axis=-1)


def chance_value(tree: Tree, flat: Array, edge_stats: Array, fallback: Array) -> Array:
    """`[L]`: the expectimax value of the chance nodes at `flat [L]` for their player, the
    probability-weighted mean of their visited outcomes' values `sum_o p_o Q_o / sum_o p_o`
    (from `edge_stats`, the backup's current ones); `fallback [L]` where none is visited."""
    row = gather_rows(tree.edges, flat)  # [L, 3, C]
    stats = gather_rows(edge_stats, flat)  # [L, C, 2]
    visits = jnp.where(row[:, CHILD] >= 0, stats[..., E_VISITS], 0.0)
    weight = jnp.where(visits > 0, row[:, PROBS], 0.0)
    q = stats[..., E_VALUE] / jnp.maximum(visits, 1.0)
    mass = jnp.sum(weight, axis=-1)
    mean = jnp.sum(weight * q, axis=-1) / jnp.maximum(mass, 1e-30)
    return jnp.where(mass > 0, mean, fallback)


def backward(spec: SearchSpec, tree: Tree, leaf: Array, returns: Array) -> Tree:
    """Add `returns [B, P]` from `leaf [B]` up its parent chain to the root: each node's
    statistics for its own player, each edge's for the player at its parent, the edge's reward
    and the discount applied on the way up.

    A chance node (games with chance) is not averaged over its visits: its value becomes the
    expectation over its visited outcomes (`chance_value`), its statistics and those of the
    edge into it (equal sums) are set to one more visit of that mean, and that value is what
    goes on up, undiscounted (the step's reward and discount are on the edge below it)."""
    b = jnp.arange(tree.batch_size)
    N, P = tree.max_nodes, spec.env.num_players

    def level(c: Backup) -> Backup:
        live = c.node >= 0
        flat = b * N + jnp.maximum(c.node, 0)
        links = read_links(tree, flat)
        reward = read_info(tree, flat).reward
        at_node = jnp.where(live, c.node, N)
        at_parent = jnp.where(live & (links.parent >= 0), links.parent, N)
        if spec.after_codec is None:
            node_add = one_visit(for_player(c.returns, links.player))
            through_edge = reward + spec.discount * c.returns  # the return through the edge
            edge_add = one_visit(for_player(through_edge, links.parent_player))
        else:
            is_chance = gather_rows(tree.node, flat)[:, N_TERMINAL] == CHANCE_NODE
            own = for_player(c.returns, links.player)
            mean = chance_value(tree, flat, c.edge_stats, own)
            stats = gather_rows(c.node_stats, flat)
            # the mean with one more visit: (n + 1) * mean in the sum
            expected = jnp.stack(
                [jnp.ones_like(mean), (stats[:, S_VISITS] + 1.0) * mean - stats[:, S_VALUE]],
                axis=-1,
            )
            returns = jnp.where(is_chance[:, None], value_vector(mean, links.player, P), c.returns)
            discount = jnp.where(is_chance, 1.0, spec.discount)[:, None]
            through_edge = reward + discount * returns
            node_add = jnp.where(is_chance[:, None], expected, one_visit(own))
            edge_add = jnp.where(
                is_chance[:, None],
                expected,
                one_visit(for_player(through_edge, links.parent_player)),
            )
        node_stats = c.node_stats.at[b, at_node].add(node_add, mode="drop")
        edge_stats = c.edge_stats.at[b, at_parent, links.action].add(edge_add, mode="drop")
        return Backup(
            node=jnp.where(live, links.parent, NO_CHILD),
            returns=jnp.where(live[:, None], through_edge, c.returns),
            node_stats=node_stats,
            edge_stats=edge_stats,
        )

    done = jax.lax.while_loop(
        lambda c: jnp.any(c.node >= 0),
        repeated(level, spec.speed.levels_per_iteration),
        Backup(leaf, returns, tree.node_stats, tree.edge_stats),
    )
    return tree.replace(node_stats=done.node_stats, edge_stats=done.edge_stats)


def choose_action(
    mask: Array, weights: Array, greedy: Array, temperature: Array | float, keys: Array
) -> Array:
    """`[B]` int32: the move at temperature `temperature` (scalar or `[B]`; 0: `greedy`).

    Samples `weights ** (1 / T)` over the legal moves with positive weight (as AlphaZero's
    N^(1/T) and mctx), so a move with zero weight is never sampled however high `T`.
    """
    B = mask.shape[0]
    temp = jnp.broadcast_to(jnp.asarray(temperature, jnp.float32), (B,))
    positive = mask & (weights > 0)
    logits = jnp.log(jnp.where(positive, weights, 1.0)) / jnp.maximum(temp, 1e-6)[:, None]
    sampled = jax.vmap(jax.random.categorical)(keys, jnp.where(positive, logits, -jnp.inf))
    # (defensive: were no legal move left with a positive weight, the greedy move)
    usable = jnp.take_along_axis(positive, sampled[:, None], axis=1)[:, 0]
    return jnp.where((temp > 0) & usable, sampled, greedy).astype(jnp.int32)


# --- configuration and the checks at the edge ------------------------------------------------


def advance(
    reuse: bool, chance: bool, tree: Tree, action: Array, outcome: Array | None = None
) -> Tree:
    """Keep the subtree of `action [B]` (with reuse), else empty the trees. In games with
    chance (`chance`), the subtree of the chance `outcome [B]` drawn after it (None: unknown,
    those rows emptied); `outcome` is ignored in games without chance."""
    if jnp.shape(action) != (tree.batch_size,):
        raise ValueError(
            f"action must have shape ({tree.batch_size},), one per game, got {jnp.shape(action)}"
        )
    if outcome is not None and jnp.shape(outcome) != (tree.batch_size,):
        raise ValueError(
            f"outcome must have shape ({tree.batch_size},), one per game, got {jnp.shape(outcome)}"
        )
    if reuse and chance:
        if outcome is None:
            outcome = jnp.full((tree.batch_size,), -1, jnp.int32)
        return advance_trees(tree, action, jnp.asarray(outcome, jnp.int32))
    if reuse:
        return advance_trees(tree, action)
    return reset_trees(tree, jnp.ones_like(tree.next_free, jnp.bool_))


def reset(tree: Tree, done: Array) -> Tree:
    """Empty the trees of the games where `done [B]`."""
    if jnp.shape(done) != (tree.batch_size,):
        raise ValueError(
            f"done must have shape ({tree.batch_size},), one per game, got {jnp.shape(done)}"
        )
    return reset_trees(tree, done)


def validate_search_call(
    spec: SearchSpec, tree: Tree, params: Params, env_states: PyTree, key: PRNGKey, temperature: Any
) -> None:
    """Check a `search` call's arguments against the trees and the network, from shapes alone.

    Raises:
        ValueError: naming the argument and what was expected.
    """
    B, A = tree.batch_size, spec.env.num_actions
    games = {int(x.shape[0]) if x.ndim else 0 for x in jax.tree_util.tree_leaves(env_states)}
    if games != {B}:
        raise ValueError(
            f"env_states hold {sorted(games)} games along their leading axis, but the trees "
            f"were made for {B} (search.init(batch_size))"
        )
    if jnp.ndim(temperature) and jnp.shape(temperature) != (B,):
        raise ValueError(
            f"temperature must be a scalar or have shape ({B},) (one per game), "
            f"got shape {jnp.shape(temperature)}"
        )
    if not isinstance(temperature, jax.core.Tracer):
        t = jnp.asarray(temperature)
        if not isinstance(t, jax.core.Tracer) and not bool(jnp.all((t >= 0) & jnp.isfinite(t))):
            raise ValueError(f"temperature must be a finite number >= 0, got {temperature}")
    is_one_key(jnp.asarray(key), B)  # else a ValueError naming `key`
    logits, value = jax.eval_shape(
        lambda p, s, k: spec.evaluate(p, s, row_keys(k, B)[0]), params, env_states, key
    )
    if logits.shape != (B, A):
        raise ValueError(
            f"the network's policy has shape {logits.shape}, expected (batch, num_actions) = "
            f"({B}, {A}) for {spec.env.name!r}"
        )
    if value.shape != (B,):
        raise ValueError(f"the network's value has shape {value.shape}, expected ({B},)")


def checked_search(
    spec: SearchSpec,
    tree: Tree,
    params: Params,
    env_states: PyTree,
    key: PRNGKey,
    temperature: Array | float = 0.0,
    *,
    num_simulations: int,
    reuse: bool,
) -> tuple[Tree, SearchOutput]:
    """`run_search` after `validate_search_call`."""
    validate_search_call(spec, tree, params, env_states, key, temperature)
    return run_search(
        spec,
        tree,
        params,
        env_states,
        key,
        temperature,
        num_simulations=num_simulations,
        reuse=reuse,
    )


def validate_search_args(
    env: Env,
    eval_fn: EvalFn | None,
    state_eval_fn: StateEvalFn | None,
    *,
    selector: Selector,
    num_simulations: int,
    max_nodes: int,
    discount: float,
    reuse: bool | None,
    levels_per_iteration: int | None,
    chance_widening: float = 1.0,
) -> tuple[Selector, int, int, bool, int]:
    """Check `make_search`'s arguments and fill in their defaults.

    Returns:
        `(selector, num_simulations, max_nodes, reuse, levels_per_iteration)`; Gumbel's
        selector is rebuilt for `num_simulations` when it was built for another count.

    Raises:
        ValueError, TypeError: naming the argument and the allowed range.
    """
    if (eval_fn is None) == (state_eval_fn is None):
        raise ValueError("pass exactly one of eval_fn or state_eval_fn")
    # child indices and visit counts are stored as float32, exact up to 2**24
    num_simulations = check_count("num_simulations", num_simulations, low=1, high=MAX_NODES - 1)
    max_nodes = check_count("max_nodes", max_nodes, low=2, high=MAX_NODES)
    if not 0.0 < discount <= 1.0:
        raise ValueError(f"discount must be in (0, 1], got {discount}")
    if not 0.0 <= chance_widening <= 1.0:
        raise ValueError(f"chance_widening must be in [0, 1], got {chance_widening}")
    if levels_per_iteration is None:
        levels_per_iteration = default_levels_per_iteration()
    levels_per_iteration = check_count("levels_per_iteration", levels_per_iteration, low=1)
    if not isinstance(selector, Selector):
        raise TypeError("selector must be built by puct(), muzero_puct() or gumbel()")
    if selector.name == "gumbel" and selector.options.get("num_simulations") != num_simulations:
        from turbozero.search.gumbel import gumbel
        from turbozero.search.selector import with_options

        selector = gumbel(**with_options(selector.options, num_simulations=num_simulations))
    # with chance nodes the tree branches on outcomes: the drawn one's subtree can be kept
    known_dynamics = env.deterministic or env.chance is not None
    if reuse is None:
        reuse = selector.reusable and known_dynamics
    if reuse and not selector.reusable:
        raise ValueError(f"reuse=True is not supported with the {selector.name!r} selector")
    if reuse and not known_dynamics:
        raise ValueError(
            f"reuse=True needs a deterministic environment or one with a chance split "
            f"(env.chance); {env.name!r} has neither"
        )
    if env.chance is not None:
        if max_nodes < 3:
            raise ValueError(
                f"max_nodes must be >= 3 for {env.name!r}, a game with chance (an expansion "
                f"may add a chance node and its first outcome), got {max_nodes}"
            )
        if tree_codecs(env)[0].width is None:
            raise ValueError(
                f"{env.name!r}: a search with chance nodes needs states and afterstates that "
                f"pack into words (leaves of 1, 2 or 4 bytes, no PRNG keys)"
            )
    return selector, num_simulations, max_nodes, bool(reuse), levels_per_iteration


#: `init_tree` as one compiled program per game and tree size (op by op, a tree's seven arrays
#: and their `.at[].set` compile about a dozen small programs for each new size)
_init_tree_program = jax.jit(
    init_tree, static_argnums=0, static_argnames=("batch_size", "max_nodes")
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
    levels_per_iteration: int | None = None,
    speed: SpeedPaths | None = None,
    chance_widening: float = 1.0,
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
            `reusable` and requires a deterministic environment or one with chance nodes
            (`env.chance`: the tree branches on outcomes, see `advance`).
        state_eval_fn: instead of `eval_fn`, evaluate environment states directly
            (`(params, states [B], key) -> (logits, value)`), e.g. random rollouts.
        levels_per_iteration: tree levels per `while_loop` iteration in the walk's last phase
            and in the backup, >= 1; results do not depend on it, speed does (default:
            `default_levels_per_iteration()`). Overrides `speed`'s.
        speed: the speed paths to compile (default: all on); results do not depend on them.
        chance_widening: games with chance: a chance node with `n` visits descends into the
            first `ceil(n ** chance_widening)` outcomes of an order drawn in proportion to
            their probabilities (progressive widening, `outcome_scores`), in [0, 1]; 1 opens
            every outcome at once (most probable first), 0 keeps to one drawn outcome.

    Returns:
        A `Search` of pure functions.

    Raises:
        ValueError: for out-of-range arguments, naming the argument.
    """
    if levels_per_iteration is None and speed is not None:
        levels_per_iteration = speed.levels_per_iteration
    selector, num_simulations, max_nodes, reuse, levels = validate_search_args(
        env,
        eval_fn,
        state_eval_fn,
        selector=selector,
        num_simulations=num_simulations,
        max_nodes=max_nodes,
        discount=discount,
        reuse=reuse,
        levels_per_iteration=levels_per_iteration,
        chance_widening=chance_widening,
    )
    if state_eval_fn is None:
        assert eval_fn is not None
        state_eval_fn = functools.partial(evaluate_observations, env, eval_fn)
    codec, after_codec = tree_codecs(env)
    spec = SearchSpec(
        env=env,
        evaluate=state_eval_fn,
        selector=selector,
        codec=codec,
        discount=float(discount),
        speed=(speed or default_speed_paths())._replace(levels_per_iteration=levels),
        after_codec=after_codec,
        chance_widening=float(chance_widening),
    )

    def init(batch_size: int) -> Tree:
        batch_size = check_count("batch_size", batch_size, low=1)
        return _init_tree_program(env, batch_size=batch_size, max_nodes=max_nodes)

    return Search(
        init=init,
        search=functools.partial(
            checked_search, spec, num_simulations=num_simulations, reuse=reuse
        ),
        advance=functools.partial(advance, reuse, env.chance is not None),
        reset=reset,
        env=env,
        selector=selector,
        num_simulations=num_simulations,
        max_nodes=max_nodes,
        reuse=reuse,
        discount=float(discount),
        spec=spec,
    )


def shard_search(search: Search, mesh: jax.sharding.Mesh, axis: str) -> Search:
    """`search` with each device of `mesh` searching its own games (split along `axis`).

    Under `jax.jit` alone, XLA's partitioner cannot tell that a game's tree rows stay on the
    device holding the game (the search reads them through flat indices), so it gathers the
    indices and sums the rows across devices at every tree level, and the loops over levels
    wait for every device's games. Here `search`, `advance` and `reset` run under
    `jax.shard_map`: every device runs the one-device program on its games, with no collective
    inside the search. Each game draws from its own key (`key` is split per game first), so the
    results are those of one device; a network that reads its key sees the first local game's.

    Args:
        search: from `make_search`.
        mesh: the devices; the batch of games (its size divisible by the devices along `axis`)
            is split along `axis`, parameters are replicated.
        axis: the mesh axis name of the games.
    """
    from jax.sharding import PartitionSpec

    split, same = PartitionSpec(axis), PartitionSpec()
    # no collective inside: nothing to check of which values vary over the devices (the check
    # would refuse the search's `cond`s whose branches build constants)
    local = functools.partial(jax.shard_map, mesh=mesh, check_vma=False)
    run_search = local(
        lambda tree, params, states, keys, temp: search.search(tree, params, states, keys, temp),
        in_specs=(split, same, split, split, split),
        out_specs=(split, split),
    )
    run_advance = local(search.advance, in_specs=split, out_specs=split)
    run_reset = local(search.reset, in_specs=split, out_specs=split)

    def sharded(tree: Tree, params, env_states, key, temperature=0.0):
        B = tree.batch_size
        temp = jnp.broadcast_to(jnp.asarray(temperature, jnp.float32), (B,))
        return run_search(tree, params, env_states, row_keys(key, B), temp)

    return search._replace(search=sharded, advance=run_advance, reset=run_reset)
