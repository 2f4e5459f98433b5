"""Board symmetries for data augmentation (square boards, actions indexing the squares)."""

from __future__ import annotations

import jax.numpy as jnp

from turbozero.alphazero.selfplay import AugmentFn
from turbozero.types import Array


def _square_symmetry(k: int, flip: bool, side: int) -> AugmentFn:
    def transform_board(x: Array) -> Array:
        x = jnp.rot90(x, k, axes=(0, 1))
        return jnp.flip(x, axis=1) if flip else x

    def fn(obs: Array, policy: Array, mask: Array):
        def move(v: Array) -> Array:
            board = v[: side * side].reshape(side, side)
            rest = v[side * side :]
            return jnp.concatenate([transform_board(board).reshape(-1), rest])

        return transform_board(obs), move(policy), move(mask)

    return fn


def square_symmetries(side: int) -> list[AugmentFn]:
    """The 7 non-identity symmetries of a `side x side` board (rotations and reflections).

    Observations are `[side, side, C]`; actions `0 .. side*side-1` index the squares row-major,
    and any further actions (e.g. othello's pass) are left in place.
    """
    return [
        _square_symmetry(k, flip, side)
        for k in range(4)
        for flip in (False, True)
        if (k, flip) != (0, False)
    ]


def horizontal_flip(columns: int) -> AugmentFn:
    """Left-right mirror for column-move games such as connect four (`[H, W, C]` boards)."""

    def fn(obs: Array, policy: Array, mask: Array):
        return jnp.flip(obs, axis=1), jnp.flip(policy[:columns]), jnp.flip(mask[:columns])

    return fn


def check_augment_fns(env, fns) -> None:
    """Refuse augmentations that do not map one position `(observation [*obs], policy [A], mask
    [A])` to the same shapes, before anything is compiled.

    Each is traced once with `jax.eval_shape` on one position of `env`; a factory passed instead
    of what it returns (`square_symmetries` for `square_symmetries(8)`) is named as such.

    Raises:
        ValueError: naming the offending entry and what it should be.
    """
    import jax

    example = env.observe(env.init(jax.random.PRNGKey(0))[0])
    A = env.num_actions
    position = (
        jax.ShapeDtypeStruct(jnp.shape(example), jnp.result_type(example)),
        jax.ShapeDtypeStruct((A,), jnp.float32),
        jax.ShapeDtypeStruct((A,), jnp.bool_),
    )
    want = [p.shape for p in position]
    for i, fn in enumerate(fns):
        what = f"augmentation {i} ({getattr(fn, '__name__', repr(fn))})"
        if not callable(fn):
            raise ValueError(f"{what} is not a function of (observation, policy, mask)")
        try:
            out = jax.eval_shape(fn, *position)
        except Exception as err:  # any failure here is the user's function
            raise ValueError(
                f"{what} failed on one position (observation {want[0]}, policy and mask "
                f"[{A}]): {type(err).__name__}: {err}. Augmentations map (observation, policy, "
                "mask) to the same; square_symmetries(side) and horizontal_flip(columns) build "
                "them (pass what they return, not the factories)"
            ) from None
        got = (
            [tuple(o.shape) for o in out]
            if isinstance(out, tuple | list) and len(out) == 3
            else None
        )
        if got != want:
            raise ValueError(
                f"{what} must return (observation, policy, mask) of shapes {want}, "
                f"got {got if got is not None else out}"
            )
