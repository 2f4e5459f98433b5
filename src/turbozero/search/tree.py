"""The search tree: a struct of arrays with a fixed node capacity per game.

Letters: B games, N node capacity (`max_nodes`), A actions, P players.

Node 0 is always the root. A node stores the environment state reached through its parent edge,
the reward vector received on that edge, the network's evaluation, and its visit statistics.
`value_sum[b, n, p]` is the sum of the returns backed up through node `n` for player `p`, not
counting the reward on the edge into `n`. Child `c` of node `n` therefore has, for the player `p`
to move at `n`, the action value `Q = reward[c, p] + discount * value_sum[c, p] / visits[c]`.
Keeping values per player (instead of flipping signs) is what lets one-player games and games
whose players do not strictly alternate share one code path.

Nodes are allocated in increasing index order, so a child's index is always larger than its
parent's. A tree row with `next_free == 0` is empty: the next search evaluates its root.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from turbozero import struct
from turbozero.envs.core import Env
from turbozero.types import Array, PyTree

NO_CHILD = -1
NEG_LOGIT = -1e9  # stored prior logit of an illegal action (finite: softmax stays NaN-free)


@struct.dataclass
class Tree(struct.Struct):
    """A batch of search trees. Every array has leading axes `[B, N]`."""

    visits: Array  # [B, N] int32
    value_sum: Array  # [B, N, P] float32, returns backed up through the node
    raw_value: Array  # [B, N, P] float32, the evaluation at expansion (0 at terminal nodes)
    reward: Array  # [B, N, P] float32, reward received on the edge into the node
    prior_logits: Array  # [B, N, A] float32, network logits, illegal actions at NEG_LOGIT
    mask: Array  # [B, N, A] bool, legal actions
    children: Array  # [B, N, A] int32, child index or NO_CHILD
    parent: Array  # [B, N] int32, parent index (NO_CHILD for the root)
    action: Array  # [B, N] int32, action on the edge from the parent
    player: Array  # [B, N] int32, player to move
    terminal: Array  # [B, N] bool, game over (terminated or truncated)
    states: PyTree  # leaves [B, N, ...], environment state at each node
    next_free: Array  # [B] int32, number of allocated nodes

    @property
    def batch_size(self) -> int:
        return int(self.visits.shape[0])

    @property
    def max_nodes(self) -> int:
        return int(self.visits.shape[1])

    @property
    def num_actions(self) -> int:
        return int(self.children.shape[2])


def init_tree(env: Env, *, batch_size: int, max_nodes: int) -> Tree:
    """An empty batch of trees (every row's next search evaluates its root)."""
    B, N, A, P = batch_size, max_nodes, env.num_actions, env.num_players
    state_shape, _ = jax.eval_shape(env.init, jax.random.PRNGKey(0))
    states = jax.tree_util.tree_map(lambda s: jnp.zeros((B, N, *s.shape), s.dtype), state_shape)
    return Tree(
        visits=jnp.zeros((B, N), jnp.int32),
        value_sum=jnp.zeros((B, N, P), jnp.float32),
        raw_value=jnp.zeros((B, N, P), jnp.float32),
        reward=jnp.zeros((B, N, P), jnp.float32),
        prior_logits=jnp.zeros((B, N, A), jnp.float32),
        mask=jnp.zeros((B, N, A), jnp.bool_),
        children=jnp.full((B, N, A), NO_CHILD, jnp.int32),
        parent=jnp.full((B, N), NO_CHILD, jnp.int32),
        action=jnp.zeros((B, N), jnp.int32),
        player=jnp.zeros((B, N), jnp.int32),
        terminal=jnp.zeros((B, N), jnp.bool_),
        states=states,
        next_free=jnp.zeros((B,), jnp.int32),
    )


def tree_bytes(env: Env, batch_size: int, max_nodes: int) -> int:
    """Bytes a tree of this configuration takes, computed without allocating it."""
    shapes = jax.eval_shape(lambda: init_tree(env, batch_size=batch_size, max_nodes=max_nodes))
    return int(
        sum(
            np.prod(x.shape) * np.dtype(x.dtype).itemsize for x in jax.tree_util.tree_leaves(shapes)
        )
    )


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


def advance_trees(tree: Tree, action: Array) -> Tree:
    """Make the child reached by `action [B]` the new root, keeping its subtree (subtree reuse).

    Rows whose root has no such child (the move leads outside the tree) are emptied. Storage is
    compacted in one vectorised pass: kept nodes are renumbered in their old order, so children
    keep larger indices than their parents.
    """
    B, N = tree.visits.shape
    b = jnp.arange(B)
    child = tree.children[b, 0, action]
    has_child = (tree.next_free > 0) & (child >= 0)
    allocated = jnp.arange(N)[None, :] < tree.next_free[:, None]
    keep = _subtree_members(tree.parent, jnp.where(has_child, child, N)) & allocated
    keep = keep & has_child[:, None]
    new_index = jnp.cumsum(keep, axis=1) - 1  # [B, N]
    dest = jnp.where(keep, new_index, N)  # out of range: dropped by the scatter

    def move(x):
        out = jnp.zeros_like(x)
        return out.at[b[:, None], dest].set(x, mode="drop")

    remap = lambda idx: jnp.where(  # noqa: E731
        idx >= 0,
        jnp.take_along_axis(new_index, jnp.maximum(idx, 0).reshape(B, -1), 1).reshape(idx.shape),
        NO_CHILD,
    )
    children = remap(tree.children)
    parent = remap(tree.parent)
    moved = tree.replace(
        visits=move(tree.visits),
        value_sum=move(tree.value_sum),
        raw_value=move(tree.raw_value),
        reward=move(tree.reward),
        prior_logits=move(tree.prior_logits),
        mask=move(tree.mask),
        children=move(children),
        parent=move(parent),
        action=move(tree.action),
        player=move(tree.player),
        terminal=move(tree.terminal),
        states=jax.tree_util.tree_map(move, tree.states),
        next_free=jnp.sum(keep, axis=1).astype(jnp.int32),
    )
    # The new root has no parent; its stored edge reward no longer matters.
    return moved.replace(
        parent=moved.parent.at[:, 0].set(NO_CHILD),
        reward=moved.reward.at[:, 0].set(0.0),
    )
