"""The batched search loop: select, expand (one environment step and one network call for the
whole batch of games), back up; `num_simulations` times inside one compiled program.

Letters: B games, N node capacity, A actions, P players.

Every simulation reads and writes only the nodes on its path: selection and backup are
`while_loop`s over a small `[B]` carry (current node per game) that gather from and scatter into
the tree by index, so their cost is proportional to the depth walked, not to `max_nodes`. (A
`vmap` over a `while_loop` that carries the tree would `select` the whole tree at every step.)
The walk is batch-synchronous (a level costs the whole batch), so its deep tail, which few games
reach, runs on a quarter of the lanes (`walk`); likewise only the roots of empty trees are
evaluated, as a small batch when they are few (`evaluate_empty_roots`).

When the tree is full (`next_free == max_nodes`), a simulation that reaches an unexpanded edge
does not expand: selection is restricted to expanded children where a node has any, and a
simulation that still ends at a node without expanding backs up that node's own evaluation.
`SearchOutput.full_events` counts those simulations.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp

from turbozero import struct
from turbozero.envs.core import Env
from turbozero.search.selector import (
    NodeView,
    Selector,
    first_argmax,
    is_one_key,
    masked_softmax,
    row_keys,
)
from turbozero.search.tree import (
    CHILD,
    E_VALUE,
    E_VISITS,
    ILLEGAL,
    L_ACTION,
    L_PARENT,
    L_PARENT_PLAYER,
    L_PLAYER,
    LEGAL_ABOVE,
    N_RAW,
    N_REWARD,
    N_TERMINAL,
    NEG_LOGIT,
    NO_CHILD,
    PRIOR,
    PROBS,
    S_VALUE,
    S_VISITS,
    Tree,
    advance_trees,
    gather_rows,
    init_tree,
    reset_trees,
    same_states,
    state_codec,
)
from turbozero.types import Array, EvalFn, Params, PRNGKey, PyTree
from turbozero.validate import check_count

COMPACT_MIN_LANES = 8  # fewer lanes than this: no compaction (walks, root evaluations)
MAX_NODES = 2**24  # node indices are exact in the tree's float32 rows up to here

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
        advance: `advance(tree, action [B]) -> tree`: keep the played child's subtree when reuse
            is on, otherwise empty the trees.
        reset: `reset(tree, done [B]) -> tree`: empty the rows of finished games.
        env, selector, num_simulations, max_nodes, reuse, discount: the configuration.
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
    discount: float = 1.0


def value_vector(value: Array, player: Array, num_players: int) -> Array:
    """`[B, P]` per-player values from the value `[B]` of the player to move (zero-sum for 2)."""
    if num_players == 1:
        return value[:, None]
    players = jnp.arange(num_players)[None, :]
    return jnp.where(players == player[:, None], value[:, None], -value[:, None])


def computed_once(x: PyTree, always_true: Array) -> PyTree:
    """`x` itself, made to be computed into buffers of its own on XLA:CPU.

    XLA:CPU fuses an elementwise producer into each of its consumers, recomputing it in every one.
    After the expansion's environment step that repeats the step's elementwise tail (pgx selects
    between the parent's and the new legal moves, rewards and flags per element) in each fusion
    that reads the new state: the new node's edge rows, its packed state, its node row and the
    network's input (`bench/profile.py selfplay`, othello, 256 games: the edge-row fusion took
    37 ms of a 1.2 s call, 5 ms with this). An
    `optimization_barrier` does not stop it (XLA:CPU removes barriers before fusion); a `cond`
    whose predicate it cannot evaluate at compile time does, since a conditional's operands are
    buffers. `always_true` must be True at run time (the false branch returns zeros). Other
    backends get `x` unchanged: only XLA:CPU was measured, and on a GPU a conditional can cost a
    round trip to the host for its predicate."""
    if jax.default_backend() != "cpu":
        return x
    return jax.lax.cond(
        always_true, lambda v: v, lambda v: jax.tree_util.tree_map(jnp.zeros_like, v), x
    )


def default_levels_per_iteration() -> int:
    """`make_search`'s default `levels_per_iteration`: 1 when JAX's default backend (at the time
    the search is built) is the CPU, 4 otherwise.

    A level applied to a game whose walk (or backup) is over changes nothing (the batch already
    walks in lock-step, so finished games sit through the levels of the others), so `n` levels per
    loop iteration give the same result with `1/n` of the iterations and at most `n - 1` idle
    levels. On a GPU each `while_loop` iteration costs a round trip to the host for its condition
    (or, with `compiler_options()`, a graph node). Measured on an H100 with `bench/unroll.py`
    (tiny network, batch 1024, 64 simulations, `muzero_puct` and `gumbel`, othello and
    connect_four): 4 levels against 1 gave 1.30x to 1.71x with XLA's default GPU options and 1.10x
    to 1.44x with `compiler_options()`; 2 and 8 levels (8 measured with `compiler_options()` only)
    did no better than 4 in any cell. On this project's 2-core CPU
    two levels gave mixed results (0.88 to 1.07 over three runs), so the CPU keeps one.
    """
    return 1 if jax.default_backend() == "cpu" else 4


#: XLA:GPU command types recorded into command buffers (CUDA graphs) by `compiler_options()`:
#: XLA's default list (as of JAX 0.11.2, jaxlib's CUDA 13 build) plus `CONDITIONAL` and `WHILE`.
#: Spelled out because `jax.jit(compiler_options=...)` does not take XLA_FLAGS' `+WHILE` form.
GPU_COMMAND_BUFFER = "FUSION,CUBLAS,CUBLASLT,CUSTOM_CALL,CUDNN,CONDITIONAL,WHILE"


def _is_cuda() -> bool:
    """Whether JAX's first device is an NVIDIA GPU (its platform version names CUDA)."""
    version = getattr(jax.devices()[0].client, "platform_version", "")
    return "cuda" in str(version).lower()


def compiler_options(backend: str | None = None) -> dict[str, str]:
    """Options for `jax.jit(..., compiler_options=...)` of a program that runs a search.

    On an NVIDIA GPU, XLA records the search's `while_loop`s and `cond`s into the program's CUDA
    graphs as well (`xla_gpu_enable_command_buffer`), so a loop iteration no longer returns to the
    host for its condition. On an H100 (`bench/unroll.py`'s cells: batch 1024, 64 simulations,
    tiny network; with and without the option timed in separate processes) the search ran 1.6x
    to 2.1x faster at one level per iteration and 1.3x to 1.9x at four, with the same actions,
    weights and depths (compared exactly in a scratch run there); the trainer's self-play
    `collect` ran 1.24x to 1.37x faster (a scratch same-process A/B, not in `bench/`). The
    trainer's self-play, the arena (for agents that search) and the play server compile with
    these; pass them to your own `jit` of a search. They are not for every program: PPO's update,
    whose loops are fixed-length scans, ran 0.57x to 0.70x as fast with them (a scratch run), so
    it compiles without. Elsewhere (the CPU, ROCm, TPU) there is nothing to add: `{}`.

    Args:
        backend: `"cpu"`, `"gpu"`, `"cuda"`, `"rocm"` or `"tpu"`; default: JAX's default backend.
            `"gpu"` counts as CUDA when JAX's first device is an NVIDIA GPU.
    """
    if backend is None:
        backend = jax.default_backend()
    if backend == "gpu":
        backend = "cuda" if _is_cuda() else "rocm"
    if backend != "cuda":
        return {}
    return {"xla_gpu_enable_command_buffer": GPU_COMMAND_BUFFER}


def repeated(body: Callable, times: int) -> Callable:
    """`body` applied `times` times in a row."""

    def run(c):
        for _ in range(times):
            c = body(c)
        return c

    return run


def gather_lanes(flags: Array, lanes: int) -> tuple[Array, Array]:
    """Where the first `lanes` True entries of `flags [B]` are: `games [lanes]` int32 (0 past
    them) and `used [lanes]` (which lanes hold one). Entries past the first `lanes` are left
    out. Writing results back through `where(used, games, B)` with `mode="drop"` skips the
    unused lanes."""
    B = flags.shape[0]
    slot = jnp.where(flags, jnp.cumsum(flags) - 1, lanes)  # `lanes`: out of range, dropped
    games = jnp.zeros((lanes,), jnp.int32).at[slot].set(jnp.arange(B, dtype=jnp.int32), mode="drop")
    return games, jnp.arange(lanes) < jnp.sum(flags)


def _node_view(
    tree: Tree, node: Array | None, games: Array | None = None, logits: bool = True
) -> tuple[NodeView, Array, Array]:
    """The `NodeView` of `node [L]` of games `games [L]` (default: every game, `L = B`; `node`
    None: the roots), its children `[L, A]` and whether the game is over there `[L]`: one gather
    of each packed row (a slice for the roots). Without `logits` the `PRIOR` row is not read and
    the view's `prior_logits` are the logarithms of the stored probabilities."""
    if node is None:
        row, edge_stats = tree.edges[:, 0], tree.edge_stats[:, 0]
        node_stats, info = tree.node_stats[:, 0], tree.node[:, 0]
    else:
        games = jnp.arange(node.shape[0]) if games is None else games
        flat = games * tree.max_nodes + node
        edges = tree.edges if logits else tree.edges[:, :, :PRIOR]
        row = gather_rows(edges, flat)  # [L, 3 or 2, A]
        edge_stats = gather_rows(tree.edge_stats, flat)  # [L, A, 2]
        node_stats = gather_rows(tree.node_stats, flat)  # [L, 2]
        info = gather_rows(tree.node, flat)  # [L, 2 + P]
    children = row[:, CHILD]
    mask = children > ILLEGAL
    if row.shape[1] > PRIOR:
        prior = row[:, PRIOR]
    else:
        prior = jnp.where(mask, jnp.log(jnp.maximum(row[:, PROBS], 1e-30)), NEG_LOGIT)
    # an edge's statistics are only meaningful once it has a child (see `tree.py`)
    edge_visits = jnp.where(children >= 0, edge_stats[..., E_VISITS], 0.0)
    node_visits = node_stats[:, S_VISITS]
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
        raw_value=info[:, N_RAW],
    )
    return view, children.astype(jnp.int32), info[:, N_TERMINAL] > 0


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
        levels_per_iteration: tree levels per `while_loop` iteration in the walk's last phase
            (the whole walk below 32 games) and in the backup, >= 1; results do not depend on
            it, speed does (see `default_levels_per_iteration`, the default).

    Returns:
        A `Search` of pure functions.

    Raises:
        ValueError: for out-of-range arguments, naming the argument.
    """
    if (eval_fn is None) == (state_eval_fn is None):
        raise ValueError("pass exactly one of eval_fn or state_eval_fn")
    # child indices and visit counts are stored as float32, exact up to 2**24
    num_simulations = check_count("num_simulations", num_simulations, low=1, high=MAX_NODES - 1)
    max_nodes = check_count("max_nodes", max_nodes, low=2, high=MAX_NODES)
    if not 0.0 < discount <= 1.0:
        raise ValueError(f"discount must be in (0, 1], got {discount}")
    if levels_per_iteration is None:
        levels_per_iteration = default_levels_per_iteration()
    levels_per_iteration = check_count("levels_per_iteration", levels_per_iteration, low=1)
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
    codec = state_codec(env)

    if state_eval_fn is None:
        assert eval_fn is not None

        def evaluate(params, states, key):
            obs = jax.vmap(env.observe)(states)
            return eval_fn(params, obs, key)
    else:
        evaluate = state_eval_fn

    def check_net(params, states, key) -> None:
        B = jax.tree_util.tree_leaves(states)[0].shape[0]
        logits, value = jax.eval_shape(
            lambda p, s, k: evaluate(p, s, row_keys(k, B)[0]), params, states, key
        )
        if logits.shape != (B, A):
            raise ValueError(
                f"the network's policy has shape {logits.shape}, expected (batch, num_actions) = "
                f"({B}, {A}) for {env.name!r}"
            )
        if value.shape != (B,):
            raise ValueError(f"the network's value has shape {value.shape}, expected ({B},)")

    def store_prior(logits, mask):
        """The `PRIOR` and `PROBS` rows: logits shifted to a maximum of 0 over legal actions
        (illegal ones at `NEG_LOGIT`) and their softmax over legal actions."""
        logits = logits.astype(jnp.float32)
        top = jnp.max(jnp.where(mask, logits, -jnp.inf), axis=-1, keepdims=True)
        top = jnp.where(jnp.isfinite(top), top, 0.0)
        logits = jnp.where(mask, jnp.maximum(logits - top, LEGAL_ABOVE / 2), NEG_LOGIT)
        return logits, masked_softmax(logits, mask)

    def fresh_rows(logits, md, value) -> tuple[Array, Array, Array]:
        """A newly evaluated node's `edges [B, 3, A]` and `node [B, 2 + P]` rows, and its value
        for the player to move `[B]` (0 where the game terminated)."""
        own = jnp.where(md.terminated, 0.0, value.astype(jnp.float32))
        prior, probs = store_prior(logits, md.action_mask)
        children = jnp.where(md.action_mask, NO_CHILD, ILLEGAL).astype(jnp.float32)
        edges = jnp.stack([probs, children, prior], axis=1)
        terminal = (md.terminated | md.truncated).astype(jnp.float32)
        info = jnp.concatenate(
            [jnp.stack([own, terminal], axis=-1), md.rewards.astype(jnp.float32)], axis=-1
        )
        return edges, info, own

    def init(batch_size: int) -> Tree:
        return init_tree(
            env, batch_size=check_count("batch_size", batch_size, low=1), max_nodes=max_nodes
        )

    def evaluate_empty_roots(params, env_states, empty, key) -> tuple[Array, Array]:
        """`(logits [B, A], value [B])` float32 of the states where `empty [B]` (0 elsewhere).

        With subtree reuse only games that just started (or whose move left the tree) have
        empty trees, a few per move, so
        up to `B // 8` of them are gathered and evaluated as a small batch (a network call
        costs about its batch size); more than that, the whole batch; none, no call at all.
        """
        B = empty.shape[0]

        def run(states):
            logits, value = evaluate(params, states, key)
            return logits.astype(jnp.float32), value.astype(jnp.float32)

        def none():
            return jnp.zeros((B, A), jnp.float32), jnp.zeros((B,), jnp.float32)

        lanes = B // 8
        if lanes < COMPACT_MIN_LANES:
            return jax.lax.cond(jnp.any(empty), lambda: run(env_states), none)
        count = jnp.sum(empty)

        def few():
            games, used = gather_lanes(empty, lanes)
            logits, value = run(jax.tree_util.tree_map(lambda x: x[games], env_states))
            back = jnp.where(used, games, B)  # `B`: dropped
            zeros = none()
            return (
                zeros[0].at[back].set(logits, mode="drop"),
                zeros[1].at[back].set(value, mode="drop"),
            )

        branch = jnp.where(count == 0, 0, jnp.where(count <= lanes, 1, 2))
        return jax.lax.switch(branch, [none, few, lambda: run(env_states)])

    def init_roots(tree: Tree, params, env_states, key) -> Tree:
        """Write the given states at the roots; evaluate roots of empty trees."""
        B = tree.batch_size
        md = jax.vmap(env.metadata)(env_states)
        # A kept tree whose root holds another state than the given one (a reset forgotten
        # after an episode ended, an opponent's move the tree was not advanced by) is not that
        # state's tree: start it afresh rather than search another position's moves. The
        # stored root state is compared bit for bit (a float state computed differently in two
        # programs only costs its reuse); its legal moves as well, for trees whose root edges
        # were written for other moves.
        packed = codec.pack(env_states)
        kept_moves = tree.edges[:, 0, CHILD] > ILLEGAL
        stale = jnp.any(kept_moves != md.action_mask, axis=-1) | ~same_states(
            jax.tree_util.tree_map(lambda x: x[:, 0], tree.states), packed
        )
        empty = (tree.next_free == 0) | stale
        logits, value = evaluate_empty_roots(params, env_states, empty, key)
        fresh_edges, fresh_info, own = fresh_rows(logits, md, value)
        # (a root's incoming reward is never read: the backup stops at the root)
        root_info = jnp.where(empty[:, None], fresh_info, tree.node[:, 0])
        root_info = root_info.at[:, N_TERMINAL].set(fresh_info[:, N_TERMINAL])
        fresh_stats = jnp.stack([jnp.ones((B,)), own], axis=-1)

        def set_root(x, fresh):
            e = empty.reshape((B,) + (1,) * (fresh.ndim - 1))
            return x.at[:, 0].set(jnp.where(e, fresh, x[:, 0]))

        return tree.replace(
            states=jax.tree_util.tree_map(lambda x, s: x.at[:, 0].set(s), tree.states, packed),
            edges=set_root(tree.edges, fresh_edges),
            node_stats=set_root(tree.node_stats, fresh_stats),
            node=tree.node.at[:, 0].set(root_info),
            links=tree.links.at[:, 0].set(
                jnp.stack(
                    [
                        jnp.full((B,), NO_CHILD, jnp.int32),
                        jnp.zeros((B,), jnp.int32),
                        md.cur_player_id.astype(jnp.int32),
                        jnp.zeros((B,), jnp.int32),
                    ],
                    axis=-1,
                )
            ),
            next_free=jnp.where(empty, 1, tree.next_free),
        )

    def walk(step, carry, full):
        """Run `step(carry, games, is_full)` until every game's walk is done (`carry[2]`).

        The levels run batch-synchronously: each costs as much as the whole batch, however few
        games still walk. Deep paths are rare (in othello self-play with 256 games and `puct`,
        9% of the games' simulations go three levels deep, yet 99% of the batch's simulations
        run that level), so once at most a quarter of the games still walk, those are gathered
        into `B // 4` lanes and finish there, and their results are written back. That last
        phase runs `levels_per_iteration` levels per loop iteration; the first phase runs one, so
        that it stops where compaction starts.
        """
        B = full.shape[0]
        lanes = B // 4
        if lanes < COMPACT_MIN_LANES:
            return jax.lax.while_loop(
                lambda c: jnp.any(~c[2]),
                repeated(lambda c: step(c, None, full), levels_per_iteration),
                carry,
            )
        carry = jax.lax.while_loop(
            lambda c: jnp.sum(~c[2]) > lanes, lambda c: step(c, None, full), carry
        )
        games, used = gather_lanes(~carry[2], lanes)
        sub = jax.tree_util.tree_map(lambda x: x[games], carry)
        sub = (*sub[:2], sub[2] | ~used, *sub[3:])  # unused lanes: already done, never move
        sub_full = full[games]
        sub = jax.lax.while_loop(
            lambda c: jnp.any(~c[2]),
            repeated(lambda c: step(c, games, sub_full), levels_per_iteration),
            sub,
        )
        back = jnp.where(used, games, B)  # `B`: dropped
        return jax.tree_util.tree_map(lambda x, y: x.at[back].set(y, mode="drop"), carry, sub)

    def simulate(tree: Tree, params, ctx, k_env, k_net) -> tuple[Tree, Array, Array]:
        """One simulation; `k_env [B]` the environment step's key per game, `k_net` the
        network call's (one call for the batch)."""
        B, N = tree.batch_size, tree.max_nodes
        b = jnp.arange(B)
        full = tree.next_free >= N

        # 1. select: walk down until an unexpanded edge or a terminal node.
        def sel_step(c, games: Array | None, is_full: Array, is_root: bool):
            """One level for the games `games [L]` (None: all), `is_full [L]`."""
            node, edge, done, depth = c
            view, children, terminal = _node_view(
                tree, None if is_root else node, games, logits=selector.interior_logits
            )
            done = done | terminal  # reached (or started at) a finished game: stop there
            scores = selector.select(view, ctx if is_root else None, is_root)
            expanded = children >= 0
            allowed = view.mask & (
                ~is_full[:, None]
                | expanded
                | ~jnp.any(view.mask & expanded, axis=-1, keepdims=True)
            )
            if is_root:
                # The root's scores may exclude moves with -inf (Gumbel's sequential halving); the
                # best finite score, and where none is finite the best prior among allowed moves.
                finite = allowed & jnp.isfinite(scores)
                scores = jnp.where(
                    jnp.any(finite, axis=-1, keepdims=True),
                    jnp.where(finite, scores, -jnp.inf),
                    jnp.where(allowed, view.prior_logits, -jnp.inf),
                )
            else:
                # Interior scores are finite for every legal move under each rule (NaN, from a
                # network gone wrong, counts as not allowed).
                scores = jnp.where(allowed & ~jnp.isnan(scores), scores, -jnp.inf)
            a = first_argmax(scores)
            child = jnp.take_along_axis(children, a[:, None], axis=1)[:, 0]
            descend = ~done & (child >= 0)
            stop = ~done & (child == NO_CHILD)
            # Nothing allowed (no legal move in an unfinished game, or every score NaN): stop
            # without expanding, as in a full tree, rather than step an illegal move.
            stuck = ~done & (child == ILLEGAL)
            node = jnp.where(descend, child, node)
            edge = jnp.where(stop, a, edge)
            return node, edge, done | stop | stuck, depth + descend.astype(jnp.int32)

        start = jnp.zeros((B,), jnp.int32)
        carry = (start, jnp.full((B,), -1, jnp.int32), jnp.zeros((B,), jnp.bool_), start)
        carry = sel_step(carry, None, full, True)  # the root's rule (noise, halving) once
        node, edge, _, depth = walk(lambda c, g, f: sel_step(c, g, f, False), carry, full)
        wants = edge >= 0
        expand = wants & ~full
        full_event = wants & full

        # 2. expand: one environment step and one network call for the whole batch.
        flat = b * N + node
        parent_states = codec.unpack(
            jax.tree_util.tree_map(lambda x: gather_rows(x, flat), tree.states)
        )
        parent_links = gather_rows(tree.links, flat)
        parent_info = gather_rows(tree.node, flat)
        action = jnp.maximum(edge, 0)
        new_states, md = jax.vmap(env.step)(parent_states, action, k_env)
        # (next_free is never negative; XLA cannot know that, so the conditional stays)
        new_states, md = computed_once((new_states, md), tree.next_free[0] >= 0)
        logits, value = evaluate(params, new_states, k_net)
        player = md.cur_player_id.astype(jnp.int32)
        new_edges, new_info, own = fresh_rows(logits, md, value)
        new = jnp.where(expand, tree.next_free, N)  # N: out of range, the scatter drops it
        new_links = jnp.stack([node, action, player, parent_links[:, L_PLAYER]], axis=-1)

        def put(x, v):
            return x.at[b, new].set(v, mode="drop")

        # The rows of games that do not expand are dropped by `put`; filling them with the
        # parent's row makes the write read `parent_info`, so XLA orders it after that gather and
        # updates `tree.node` in place. Without the dependence it copied the whole `[B, N, 2 + P]`
        # array twice per simulation (a cost that grew with `max_nodes`).
        node_rows = jnp.where(expand[:, None], new_info, parent_info)

        edges = put(tree.edges, new_edges)
        at_parent = jnp.where(expand, node, N)
        edges = edges.at[b, at_parent, CHILD, action].set(new.astype(jnp.float32), mode="drop")
        # The new node's own edges have no children yet, so their stale statistics are never
        # read; the edge into it gets its first, clean statistics here.
        edge_stats = tree.edge_stats.at[b, at_parent, action].set(0.0, mode="drop")
        tree = tree.replace(
            states=jax.tree_util.tree_map(put, tree.states, codec.pack(new_states)),
            edges=edges,
            edge_stats=edge_stats,
            node_stats=put(tree.node_stats, jnp.zeros((B, 2), jnp.float32)),
            node=put(tree.node, node_rows),
            links=put(tree.links, new_links),
            next_free=tree.next_free + expand.astype(jnp.int32),
        )
        leaf = jnp.where(expand, new, node)
        depth = depth + expand.astype(jnp.int32)

        # 3. back up along the parent chain. The new node's evaluation, or the stopping node's own.
        g0 = value_vector(
            jnp.where(expand, own, parent_info[:, N_RAW]),
            jnp.where(expand, player, parent_links[:, L_PLAYER]),
            P,
        )
        players = jnp.arange(P)[None, :]

        def up_cond(c):
            return jnp.any(c[0] >= 0)

        def up_body(c):
            n, g, node_stats, edge_stats = c
            live = n >= 0
            flat = b * N + jnp.maximum(n, 0)
            links = gather_rows(tree.links, flat)  # [B, 4]
            reward = gather_rows(tree.node, flat)[:, N_REWARD:]  # [B, P]
            own = jnp.sum(jnp.where(players == links[:, L_PLAYER, None], g, 0.0), axis=-1)
            ones = jnp.ones((B,), jnp.float32)
            node_stats = node_stats.at[b, jnp.where(live, n, N)].add(
                jnp.stack([ones, own], axis=-1), mode="drop"
            )
            g_edge = reward + discount * g  # the return through the edge into n, per player
            parent = links[:, L_PARENT]
            to_parent = jnp.sum(
                jnp.where(players == links[:, L_PARENT_PLAYER, None], g_edge, 0.0), axis=-1
            )
            at_parent = jnp.where(live & (parent >= 0), parent, N)
            edge_stats = edge_stats.at[b, at_parent, links[:, L_ACTION]].add(
                jnp.stack([ones, to_parent], axis=-1), mode="drop"
            )
            g = jnp.where(live[:, None], g_edge, g)
            n = jnp.where(live, parent, NO_CHILD)
            return n, g, node_stats, edge_stats

        _, _, node_stats, edge_stats = jax.lax.while_loop(
            up_cond,
            repeated(up_body, levels_per_iteration),
            (leaf, g0, tree.node_stats, tree.edge_stats),
        )
        return tree.replace(node_stats=node_stats, edge_stats=edge_stats), depth, full_event

    def search(tree: Tree, params, env_states, key, temperature=0.0):
        B = tree.batch_size
        # Every game draws from its own key (a game's search is the same in any batch, on any
        # number of devices); a network call, one per batch, gets the first game's.
        parts = jax.vmap(lambda k: jax.random.split(k, 5))(row_keys(key, B))
        k_root, k_prep, k_sims, k_act, k_net = (parts[:, i] for i in range(5))
        if not reuse:  # every search starts afresh (as in mctx), advanced or not
            tree = reset_trees(tree, jnp.ones((B,), jnp.bool_))
        tree = init_roots(tree, params, env_states, k_root[0])
        ctx = selector.prepare(_node_view(tree, None)[0], k_prep)

        def body(i, c):
            tree, max_depth, fulls = c
            k_env = jax.vmap(jax.random.fold_in, (0, None))(k_sims, i)
            k_eval = jax.random.fold_in(k_net[0], i)
            tree, depth, full_event = simulate(tree, params, ctx, k_env, k_eval)
            return tree, jnp.maximum(max_depth, depth), fulls + full_event.astype(jnp.int32)

        zeros = jnp.zeros((B,), jnp.int32)
        tree, max_depth, fulls = jax.lax.fori_loop(0, num_simulations, body, (tree, zeros, zeros))
        view = _node_view(tree, None)[0]
        weights, greedy = selector.policy(view, ctx)
        temp = jnp.broadcast_to(jnp.asarray(temperature, jnp.float32), (B,))
        # weights ** (1 / T) over the legal moves with positive weight (as AlphaZero's N^(1/T)
        # and mctx): a move with zero weight is never sampled, however high T
        positive = view.mask & (weights > 0)
        logits = jnp.log(jnp.where(positive, weights, 1.0)) / jnp.maximum(temp, 1e-6)[:, None]
        sampled = jax.vmap(jax.random.categorical)(k_act, jnp.where(positive, logits, -jnp.inf))
        # (defensive: were no legal move left with a positive weight, the greedy move)
        usable = jnp.take_along_axis(positive, sampled[:, None], axis=1)[:, 0]
        action = jnp.where((temp > 0) & usable, sampled, greedy).astype(jnp.int32)
        out = SearchOutput(
            action=action,
            action_weights=weights,
            root_value=view.node_value,
            q_values=view.child_q,
            visit_counts=view.child_visits,
            max_depth=max_depth,
            tree_fullness=tree.next_free.astype(jnp.float32) / tree.max_nodes,
            full_events=fulls,
            root_player=tree.links[:, 0, L_PLAYER],
        )
        return tree, out

    def checked_search(tree: Tree, params, env_states, key, temperature=0.0):
        games = {int(x.shape[0]) if x.ndim else 0 for x in jax.tree_util.tree_leaves(env_states)}
        if games != {tree.batch_size}:
            raise ValueError(
                f"env_states hold {sorted(games)} games along their leading axis, but the trees "
                f"were made for {tree.batch_size} (search.init(batch_size))"
            )
        if jnp.ndim(temperature) and jnp.shape(temperature) != (tree.batch_size,):
            raise ValueError(
                f"temperature must be a scalar or have shape ({tree.batch_size},) (one per game), "
                f"got shape {jnp.shape(temperature)}"
            )
        if not isinstance(temperature, jax.core.Tracer):
            t = jnp.asarray(temperature)
            if not isinstance(t, jax.core.Tracer) and not bool(jnp.all((t >= 0) & jnp.isfinite(t))):
                raise ValueError(f"temperature must be a finite number >= 0, got {temperature}")
        is_one_key(jnp.asarray(key), tree.batch_size)  # else a ValueError naming `key`
        check_net(params, env_states, key)
        return search(tree, params, env_states, key, temperature)

    def advance(tree: Tree, action: Array) -> Tree:
        if jnp.shape(action) != (tree.batch_size,):
            raise ValueError(
                f"action must have shape ({tree.batch_size},), one per game, got "
                f"{jnp.shape(action)}"
            )
        if reuse:
            return advance_trees(tree, action)
        return reset_trees(tree, jnp.ones_like(tree.next_free, jnp.bool_))

    def reset(tree: Tree, done: Array) -> Tree:
        if jnp.shape(done) != (tree.batch_size,):
            raise ValueError(
                f"done must have shape ({tree.batch_size},), one per game, got {jnp.shape(done)}"
            )
        return reset_trees(tree, done)

    return Search(
        init=init,
        search=checked_search,
        advance=advance,
        reset=reset,
        env=env,
        selector=selector,
        num_simulations=num_simulations,
        max_nodes=max_nodes,
        reuse=bool(reuse),
        discount=float(discount),
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
