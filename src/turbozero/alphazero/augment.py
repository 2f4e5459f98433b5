"""Board symmetries for data augmentation (square boards, actions indexing the squares)."""

from __future__ import annotations

import jax.numpy as jnp

from turbozero.alphazero.selfplay import AugmentFn
from turbozero.types import Array


def _square_symmetry(k: int, flip: bool, side: int, extra_actions: int) -> AugmentFn:
    def transform_board(x: Array) -> Array:
        x = jnp.rot90(x, k, axes=(0, 1))
        return jnp.flip(x, axis=1) if flip else x

    def fn(obs: Array, policy: Array, mask: Array):
        def move(v: Array) -> Array:
            board = v[: side * side].reshape(side, side)
            rest = v[side * side :]
            return jnp.concatenate([transform_board(board).reshape(-1), rest])

        return transform_board(obs), move(policy), move(mask)

    del extra_actions
    return fn


def square_symmetries(side: int, *, extra_actions: int = 0) -> list[AugmentFn]:
    """The 7 non-identity symmetries of a `side x side` board (rotations and reflections).

    Observations are `[side, side, C]`; actions `0 .. side*side-1` index the squares row-major,
    and any further actions (e.g. pass) are left in place.
    """
    return [
        _square_symmetry(k, flip, side, extra_actions)
        for k in range(4)
        for flip in (False, True)
        if (k, flip) != (0, False)
    ]


def horizontal_flip(columns: int) -> AugmentFn:
    """Left-right mirror for column-move games such as connect four (`[H, W, C]` boards)."""

    def fn(obs: Array, policy: Array, mask: Array):
        return jnp.flip(obs, axis=1), jnp.flip(policy[:columns]), jnp.flip(mask[:columns])

    return fn
