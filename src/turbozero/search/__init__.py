"""Batched tree search over real environment dynamics (usable alone, like mctx)."""

from turbozero.search.gumbel import gumbel
from turbozero.search.puct import muzero_puct, puct
from turbozero.search.search import (
    Search,
    SearchOutput,
    SearchSpec,
    SpeedPaths,
    compiler_options,
    make_search,
    shard_search,
    value_vector,
)
from turbozero.search.selector import NodeView, Selector
from turbozero.search.tree import Tree, advance_trees, init_tree, reset_trees, tree_bytes

__all__ = [
    "NodeView",
    "Search",
    "SearchOutput",
    "SearchSpec",
    "Selector",
    "SpeedPaths",
    "Tree",
    "advance_trees",
    "compiler_options",
    "gumbel",
    "init_tree",
    "make_search",
    "muzero_puct",
    "puct",
    "reset_trees",
    "shard_search",
    "tree_bytes",
    "value_vector",
]
