"""The search tree: a struct of arrays with a fixed node capacity per game.

Letters: B games, N node capacity (`max_nodes`), A actions, P players.

Node 0 is always the root. Each node holds the environment state reached through its parent edge
and small packed rows, laid out for the selection walk, which reads one node per game per tree
level, and for the backup, which adds to one row of each statistics array per level:

- `edges[b, n]` `[3, A]` float32, written when `n` is expanded: per action the softmax of the
  network's logits over the legal actions (`PROBS`, computed once here rather than at every
  visit), the child's index (`CHILD`: `NO_CHILD` = none yet, `ILLEGAL` = an illegal action; exact
  in float32 below 2**24 nodes), and the logit itself (`PRIOR`, illegal actions at `NEG_LOGIT`).
  In that order because only Gumbel's rule reads the logits below the root: the others gather
  the first two rows alone.
- `edge_stats[b, n]` `[A, 2]` float32: per action, the visits through the edge (`E_VISITS`) and
  the sum of the returns through it for the player to move at `n`, the edge's reward included
  (`E_VALUE`); the action value is `Q = E_VALUE / E_VISITS`. Only edges with a child hold
  meaningful statistics (every visit through an edge goes to its child): readers mask the rest,
  and the expansion that creates a child zeroes the statistics of the edge into it, so that the
  rest of a new node's row, left over from earlier trees, is never read or written.
- `node_stats[b, n]` `[2]` float32: the node's visits (`S_VISITS`) and the sum of the returns
  backed up through it for its own player to move (`S_VALUE`).
- `node[b, n]` `[2 + P]` float32, written at expansion: the network's value for the player to move
  (`N_RAW`, 0 at terminal nodes), whether the game is over there (`N_TERMINAL`: 1 over, 0 not,
  `CHANCE_NODE` for a chance node), and the reward vector received on the edge into the node
  (`N_REWARD:`).
- `links[b, n]` `[4]` int32: parent, action from the parent, player to move at the node, and
  player to move at the parent (what the backup walks with).
- `states[b, n]` `[W]` int32: the environment state, its leaves side by side as words (see
  `state_codec`), so that reading or writing a node's state is one gather or scatter rather than
  one per leaf (a pgx state has about ten). States with leaves that cannot be laid out as words
  (typed PRNG keys, 8-byte types) are stored as the pytree itself, leaves `[B, N, ...]`.

A gather of each row gives the selection rule everything about a node and its children (a layout
with per-child statistics stored at the child needs a second, scattered gather per level), and
the backup's additions are whole-row scatters.

Values are kept per player where they propagate (the backup carries a `[P]` vector of returns and
the rewards are `[P]`) and stored for the player they concern, which is what lets one-player
games and games whose players do not strictly alternate share one code path.

**Games with chance** (`env.chance` set): decision nodes hold states, chance nodes hold the
afterstate of their parent's move (`N_TERMINAL == CHANCE_NODE`; a chance node is never terminal).
A chance node's edges are its outcomes: `PROBS` the outcome probabilities, `CHILD` `ILLEGAL` for
impossible outcomes, `PRIOR` their logarithms. Edge rows are `max(A, C)` wide (a decision node's
extra columns illegal) and the state rows wide enough for a state or an afterstate (`tree_codecs`).
Games without chance keep the layout above exactly.

Nodes are allocated in increasing index order, so a child's index is always larger than its
parent's. A tree row with `next_free == 0` is empty: the next search evaluates its root.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from turbozero import struct
from turbozero.envs.chance import afterstate_shape
from turbozero.envs.core import Env
from turbozero.struct import pytree_bytes
from turbozero.types import Array, PyTree

NO_CHILD = -1
ILLEGAL = -2  # the `CHILD` entry of an illegal action
NEG_LOGIT = -1e9  # stored prior logit of an illegal action (finite: softmax stays NaN-free)
LEGAL_ABOVE = NEG_LOGIT / 2  # a stored logit above this is a legal action's

PROBS, CHILD, PRIOR = 0, 1, 2  # rows of `edges[b, n]`
E_VISITS, E_VALUE = 0, 1  # columns of `edge_stats[b, n, a]`
S_VISITS, S_VALUE = 0, 1  # columns of `node_stats[b, n]`
N_RAW, N_TERMINAL, N_REWARD = 0, 1, 2  # columns of `node[b, n]`
CHANCE_NODE = -1.0  # the `N_TERMINAL` entry of a chance node
# columns of `links[b, n]`
L_PARENT, L_ACTION, L_PLAYER, L_PARENT_PLAYER = 0, 1, 2, 3


class StateCodec(NamedTuple):
    """Packs an environment state (any leading axes) into one int32 row `[..., W]` and back.

    Attributes:
        pack: `pack(states) -> [..., W] int32` (or the states unchanged when `width` is None).
        unpack: the inverse.
        width: `W`, words per state; None when states are stored as pytrees.
    """

    pack: Callable[[PyTree], PyTree]
    unpack: Callable[[PyTree], PyTree]
    width: int | None


class _Leaf(NamedTuple):
    shape: tuple[int, ...]
    dtype: np.dtype
    size: int  # elements
    words: int  # int32 words in the row


def state_codec(env: Env) -> StateCodec:
    """The word layout of `env`'s states (see `pytree_codec`)."""
    example, _ = jax.eval_shape(env.init, jax.random.PRNGKey(0))
    return pytree_codec(example)


def tree_codecs(env: Env) -> tuple[StateCodec, StateCodec | None]:
    """The codecs of the tree's state rows: `(states, afterstates)`; afterstates None for games
    without chance. With chance both pack into rows of the wider of the two widths (the
    narrower padded with zeros), or both are None-width when either cannot be packed."""
    states = state_codec(env)
    if env.chance is None:
        return states, None

    after = pytree_codec(afterstate_shape(env))
    if states.width is None or after.width is None:
        plain = StateCodec(lambda s: s, lambda s: s, None)
        return plain, plain
    width = max(states.width, after.width)
    return _padded(states, width), _padded(after, width)


def _padded(codec: StateCodec, width: int) -> StateCodec:
    """`codec` packing into rows of `width >= codec.width` words (zeros after its own)."""
    assert codec.width is not None
    own = codec.width
    if own == width:
        return codec

    def pack(states: PyTree) -> Array:
        rows = codec.pack(states)
        return jnp.pad(rows, [(0, 0)] * (rows.ndim - 1) + [(0, width - own)])

    return StateCodec(pack, lambda rows: codec.unpack(rows[..., :own]), width)


def edge_width(env: Env) -> int:
    """`A`, or `max(A, C)` for games with chance: the width of the tree's edge rows."""
    if env.chance is None:
        return env.num_actions
    return max(env.num_actions, env.chance.num_outcomes)


def pytree_codec(example: PyTree) -> StateCodec:
    """The word layout of pytrees shaped like `example` (see the module docstring), exact for
    every leaf of 1, 2 or 4 bytes (bool, int8-32, uint8-32, float16/bfloat16/float32).

    Booleans take one bit each (32 to a word: pgx states carry their observation and legal moves
    as booleans), 4-byte leaves one word per element by bit cast, 1- and 2-byte leaves one word
    per element by widening. Words rather than bytes: a byte row costs a byte-by-byte bit cast of
    every 4-byte leaf on each write and read, and gathers and scatters move as many elements as
    the row has bytes.
    """
    leaves, treedef = jax.tree_util.tree_flatten(example)
    specs = []
    for leaf in leaves:
        if jax.dtypes.issubdtype(leaf.dtype, jax.dtypes.extended):
            return StateCodec(lambda s: s, lambda s: s, None)
        dtype = np.dtype(leaf.dtype)
        if dtype.itemsize not in (1, 2, 4):
            return StateCodec(lambda s: s, lambda s: s, None)
        size = math.prod(leaf.shape)
        words = -(-size // 32) if dtype == np.bool_ else size
        specs.append(_Leaf(tuple(leaf.shape), dtype, size, words))
    bits = jnp.arange(32, dtype=jnp.uint32)

    def pack(states: PyTree) -> Array:
        parts = []
        for x, spec in zip(jax.tree_util.tree_leaves(states), specs, strict=True):
            lead = x.shape[: x.ndim - len(spec.shape)]
            flat = x.reshape((*lead, spec.size))
            if spec.dtype == np.bool_:
                pad = spec.words * 32 - spec.size
                flat = jnp.pad(flat, [(0, 0)] * len(lead) + [(0, pad)])
                grouped = flat.reshape((*lead, spec.words, 32)).astype(jnp.uint32)
                # an unrolled OR of shifted slices fuses into one elementwise loop (a sum over
                # the minor axis of 32 runs as an unvectorised reduction, three times slower)
                packed = grouped[..., 0]
                for i in range(1, 32):
                    packed = packed | (grouped[..., i] << i)
                word = jax.lax.bitcast_convert_type(packed, jnp.int32)
            elif spec.dtype.itemsize == 4:
                word = jax.lax.bitcast_convert_type(flat, jnp.int32)
            elif jnp.issubdtype(spec.dtype, jnp.floating):  # 1- and 2-byte floats: their bits
                raw = jnp.uint8 if spec.dtype.itemsize == 1 else jnp.uint16
                word = jax.lax.bitcast_convert_type(flat, raw).astype(jnp.int32)
            else:
                word = flat.astype(jnp.int32)
            parts.append(word)
        return jnp.concatenate(parts, axis=-1)

    def unpack(rows: Array) -> PyTree:
        lead = rows.shape[:-1]
        out, offset = [], 0
        for spec in specs:
            seg = rows[..., offset : offset + spec.words]
            offset += spec.words
            if spec.dtype == np.bool_:
                unsigned = jax.lax.bitcast_convert_type(seg, jnp.uint32)
                flags = (unsigned[..., None] >> bits) & 1
                value = flags.reshape((*lead, spec.words * 32))[..., : spec.size] != 0
            elif spec.dtype.itemsize == 4:
                value = jax.lax.bitcast_convert_type(seg, spec.dtype)
            elif jnp.issubdtype(spec.dtype, jnp.floating):
                raw = jnp.uint8 if spec.dtype.itemsize == 1 else jnp.uint16
                value = jax.lax.bitcast_convert_type(seg.astype(raw), spec.dtype)
            else:
                value = seg.astype(spec.dtype)
            out.append(value.reshape((*lead, *spec.shape)))
        return jax.tree_util.tree_unflatten(treedef, out)

    return StateCodec(pack, unpack, sum(spec.words for spec in specs))


def same_states(a: PyTree, b: PyTree) -> Array:
    """`[B]` bool: whether row `b` of two batches of stored states (packed rows `[B, W]` or
    pytrees with leaves `[B, ...]`) holds the same state, bit for bit (NaNs equal to NaNs, PRNG
    keys compared by their data)."""
    same = None
    for x, y in zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b), strict=True):
        if jax.dtypes.issubdtype(x.dtype, jax.dtypes.extended):
            x, y = jax.random.key_data(x), jax.random.key_data(y)
        eq = x == y
        if jnp.issubdtype(x.dtype, jnp.floating):
            eq = eq | (jnp.isnan(x) & jnp.isnan(y))
        row = jnp.all(eq.reshape((eq.shape[0], -1)), axis=-1)
        same = row if same is None else same & row
    assert same is not None, "a state has at least one array"
    return same


@struct.dataclass
class Tree(struct.Struct):
    """A batch of search trees. Every array has leading axes `[B, N]`."""

    edges: Array  # [B, N, 3, A] float32: PROBS, CHILD, PRIOR per action
    edge_stats: Array  # [B, N, A, 2] float32: E_VISITS, E_VALUE per action
    node_stats: Array  # [B, N, 2] float32: S_VISITS, S_VALUE
    node: Array  # [B, N, 2 + P] float32: N_RAW, N_TERMINAL, N_REWARD[P]
    links: Array  # [B, N, 4] int32: L_PARENT, L_ACTION, L_PLAYER, L_PARENT_PLAYER
    states: PyTree  # [B, N, W] int32 packed states (or a pytree, leaves [B, N, ...])
    next_free: Array  # [B] int32, number of allocated nodes

    @property
    def batch_size(self) -> int:
        return int(self.node.shape[0])

    @property
    def max_nodes(self) -> int:
        return int(self.node.shape[1])

    @property
    def num_actions(self) -> int:
        return int(self.edges.shape[3])

    # Readable views (computed; the search itself reads the packed rows).
    @property
    def visits(self) -> Array:
        """`[B, N]` int32 visits of each node."""
        return self.node_stats[..., S_VISITS].astype(jnp.int32)

    @property
    def children(self) -> Array:
        """`[B, N, A]` int32 child index per action: `NO_CHILD` where unexpanded, `ILLEGAL` for
        illegal actions."""
        return self.edges[..., CHILD, :].astype(jnp.int32)

    @property
    def prior_logits(self) -> Array:
        """`[B, N, A]` the network's logits as stored: shifted so that the best legal one is 0,
        clamped at `LEGAL_ABOVE / 2` (a softmax is unchanged), illegal actions at `NEG_LOGIT`."""
        return self.edges[..., PRIOR, :]

    @property
    def mask(self) -> Array:
        """`[B, N, A]` bool legal actions of expanded nodes."""
        return self.edges[..., CHILD, :] > ILLEGAL

    @property
    def parent(self) -> Array:
        """`[B, N]` int32 parent index (`NO_CHILD` for the root)."""
        return self.links[..., L_PARENT]

    @property
    def player(self) -> Array:
        """`[B, N]` int32 player to move at each node."""
        return self.links[..., L_PLAYER]

    @property
    def terminal(self) -> Array:
        """`[B, N]` bool: the game is over at the node."""
        return self.node[..., N_TERMINAL] > 0

    @property
    def chance(self) -> Array:
        """`[B, N]` bool: the node is a chance node (games with chance)."""
        return self.node[..., N_TERMINAL] == CHANCE_NODE


class Links(NamedTuple):
    """The `links` row of one node per game, by name (each `[L]` int32)."""

    parent: Array  # NO_CHILD for a root
    action: Array  # the action from the parent
    player: Array  # player to move at the node
    parent_player: Array  # player to move at the parent


class NodeInfo(NamedTuple):
    """The `node` row of one node per game, by name."""

    raw_value: Array  # [L] the network's value for the player to move (0 at terminal nodes)
    terminal: Array  # [L] bool: the game is over at the node
    reward: Array  # [L, P] the rewards received on the edge into the node


def read_links(tree: Tree, flat: Array) -> Links:
    """The links of the nodes at `flat [L]` (`b * N + node`): one gather."""
    row = gather_rows(tree.links, flat)
    return Links(row[:, L_PARENT], row[:, L_ACTION], row[:, L_PLAYER], row[:, L_PARENT_PLAYER])


def read_info(tree: Tree, flat: Array) -> NodeInfo:
    """The info of the nodes at `flat [L]`: one gather."""
    row = gather_rows(tree.node, flat)
    return NodeInfo(row[:, N_RAW], row[:, N_TERMINAL] > 0, row[:, N_REWARD:])


def links_row(links: Links) -> Array:
    """`[L, 4]` int32: `links` packed as stored."""
    return jnp.stack([links.parent, links.action, links.player, links.parent_player], axis=-1)


def info_row(raw_value: Array, terminal: Array, reward: Array) -> Array:
    """`[L, 2 + P]` float32: a node's info packed as stored (`terminal` as 0/1)."""
    head = jnp.stack([raw_value, terminal.astype(jnp.float32)], axis=-1)
    return jnp.concatenate([head, reward.astype(jnp.float32)], axis=-1)


def edge_rows(probs: Array, children: Array, prior: Array) -> Array:
    """`[L, 3, A]` float32: a node's edges packed as stored (children as float32)."""
    return jnp.stack([probs, children.astype(jnp.float32), prior], axis=1)


def one_visit(value: Array) -> Array:
    """`[L, 2]`: the statistics one visit adds (a count of 1 and its return `value [L]`), for
    `node_stats` (`S_VISITS, S_VALUE`) and `edge_stats` (`E_VISITS, E_VALUE`) alike."""
    return jnp.stack([jnp.ones_like(value), value], axis=-1)


def gather_rows(x: Array, flat: Array) -> Array:
    """`x [B, N, ...]` at rows `flat [L]` of its `[B * N]` flattening (`b * N + node`): `[L, ...]`.

    A gather through one flat index is faster on XLA:CPU than `x[b, node]`, whose index pairs are
    assembled and decoded per element (1.2x at 256 games, 1.7x at 64 in `bench/micro.py`), and
    the search's selection walk does four per tree level."""
    B, N = x.shape[:2]
    return x.reshape((B * N, -1))[flat].reshape((*flat.shape, *x.shape[2:]))


def init_tree(env: Env, *, batch_size: int, max_nodes: int) -> Tree:
    """An empty batch of trees (every row's next search evaluates its root)."""
    B, N, A, P = batch_size, max_nodes, edge_width(env), env.num_players
    codec = tree_codecs(env)[0]
    if codec.width is not None:
        states: PyTree = jnp.zeros((B, N, codec.width), jnp.int32)
    else:
        if env.chance is not None:
            raise ValueError(
                f"{env.name!r}: a search with chance nodes needs states and afterstates that "
                f"pack into words (leaves of 1, 2 or 4 bytes, no PRNG keys)"
            )
        state_shape, _ = jax.eval_shape(env.init, jax.random.PRNGKey(0))
        states = jax.tree_util.tree_map(lambda s: jnp.zeros((B, N, *s.shape), s.dtype), state_shape)
    edges = jnp.zeros((B, N, 3, A), jnp.float32).at[:, :, CHILD].set(NO_CHILD)
    links = jnp.zeros((B, N, 4), jnp.int32).at[:, :, L_PARENT].set(NO_CHILD)
    return Tree(
        edges=edges,
        edge_stats=jnp.zeros((B, N, A, 2), jnp.float32),
        node_stats=jnp.zeros((B, N, 2), jnp.float32),
        node=jnp.zeros((B, N, N_REWARD + P), jnp.float32),
        links=links,
        states=states,
        next_free=jnp.zeros((B,), jnp.int32),
    )


def tree_bytes(env: Env, batch_size: int, max_nodes: int) -> int:
    """Bytes a tree of this configuration takes, computed without allocating it."""
    shapes = jax.eval_shape(lambda: init_tree(env, batch_size=batch_size, max_nodes=max_nodes))
    return pytree_bytes(shapes)


def reset_trees(tree: Tree, done: Array) -> Tree:
    """Empty the rows where `done [B]` is True (their next search starts afresh)."""
    return tree.replace(next_free=jnp.where(done, 0, tree.next_free))


def _subtree_members(parent: Array, new_root: Array) -> Array:
    """`[B, N]` bool: node is `new_root [B]` or one of its descendants.

    Pointer jumping: after round k every node knows whether `new_root` lies within 2**k steps
    up its parent chain. log2(N) rounds of vectorised gathers, no sequential loop over nodes.
    """
    _B, N = parent.shape
    nodes = jnp.arange(N)[None, :]
    hit = nodes == new_root[:, None]
    jump = parent
    for _ in range(max(1, int(np.ceil(np.log2(max(N, 2)))))):
        valid = jump >= 0
        safe = jnp.maximum(jump, 0)
        hit = hit | (valid & jnp.take_along_axis(hit, safe, axis=1))
        jump = jnp.where(valid, jnp.take_along_axis(jump, safe, axis=1), NO_CHILD)
    return hit


def advance_trees(tree: Tree, action: Array, outcome: Array | None = None) -> Tree:
    """Make the child reached by `action [B]` the new root, keeping its subtree (subtree reuse).

    In games with chance, pass `outcome [B]` int32 (the outcome drawn; -1: unknown): where the
    child is a chance node, its child by `outcome` becomes the root (rows of unknown outcomes are
    emptied); where the move had no chance event the child itself does. Rows whose root
    has no such child (the move leads outside the tree) are emptied. Storage is
    compacted in one vectorised pass: kept nodes are renumbered in their old order, so children
    keep larger indices than their parents.
    """
    B, N = tree.next_free.shape[0], tree.max_nodes
    b = jnp.arange(B)
    child = tree.edges[b, 0, CHILD, action].astype(jnp.int32)
    if outcome is not None:  # (static: games without chance keep the path below alone)
        safe = jnp.maximum(child, 0)
        at_chance = (child >= 0) & tree.chance[b, safe]
        grandchild = tree.edges[b, safe, CHILD, jnp.maximum(outcome, 0)].astype(jnp.int32)
        grandchild = jnp.where(outcome >= 0, grandchild, NO_CHILD)
        child = jnp.where(at_chance, grandchild, child)
    has_child = (tree.next_free > 0) & (child >= 0)
    allocated = jnp.arange(N)[None, :] < tree.next_free[:, None]
    keep = _subtree_members(tree.parent, jnp.where(has_child, child, N)) & allocated
    keep = keep & has_child[:, None]
    new_index = jnp.cumsum(keep, axis=1) - 1  # [B, N]
    dest = jnp.where(keep, new_index, N)  # out of range: dropped by the scatter
    # source[b, j]: the old index of the node that becomes node j (0 past the kept ones: those
    # rows are unallocated, never read, and rewritten whole when allocated)
    nodes = jnp.broadcast_to(jnp.arange(N, dtype=jnp.int32), (B, N))
    source = jnp.zeros((B, N), jnp.int32).at[b[:, None], dest].set(nodes, mode="drop")

    flat = (b[:, None] * N + source).reshape(-1)

    def move(x):  # a gather writes every row: no zero fill of the tree
        return gather_rows(x, flat).reshape(x.shape)

    def remap(idx):
        flat = jnp.maximum(idx, 0).reshape(B, -1)
        renamed = jnp.take_along_axis(new_index, flat, 1).reshape(idx.shape)
        return jnp.where(idx >= 0, renamed, idx)  # NO_CHILD and ILLEGAL stay

    children = remap(tree.children).astype(jnp.float32)
    links = tree.links.at[..., L_PARENT].set(remap(tree.parent))
    moved = tree.replace(
        edges=move(tree.edges.at[..., CHILD, :].set(children)),
        edge_stats=move(tree.edge_stats),
        node_stats=move(tree.node_stats),
        node=move(tree.node),
        links=move(links),
        states=jax.tree_util.tree_map(move, tree.states),
        next_free=jnp.sum(keep, axis=1).astype(jnp.int32),
    )
    # The new root has no parent (its stored incoming reward is never read again).
    return moved.replace(links=moved.links.at[:, 0, L_PARENT].set(NO_CHILD))
