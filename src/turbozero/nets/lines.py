"""Input features for games won by `k` marks in a row (tic-tac-toe, Connect Four).

A small network spends much of its width learning to see which lines of `k` cells are still
open and how full they are. These features count it for it, from the two stone planes of the
observation (`[..., 0]` the mover's marks, `[..., 1]` the opponent's, as pgx lays them out),
the way KataGo hands its network liberties and ladders, and whether the mover moved first
(which stone counts would otherwise make it sum over the whole board). Gravity is left to the
network.
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from turbozero.types import Array

#: planes `line_features` adds: the mover's and the opponent's completing cells, their cells
#: that would make `k - 1`, their open lines through each empty cell, and whether the mover
#: moved first
NUM_LINE_FEATURES = 7


def line_cells(rows: int, cols: int, k: int) -> np.ndarray:
    """Every line of `k` cells on a `rows` x `cols` board (rows, columns and both diagonals),
    as flat cell indices `row * cols + col`.

    Returns:
        `[L, k]` int32 (69 lines for Connect Four's 6 x 7 and k = 4; 8 for tic-tac-toe).
    """
    lines = []
    for dr, dc in ((0, 1), (1, 0), (1, 1), (1, -1)):
        for r in range(rows):
            for c in range(cols):
                end_r, end_c = r + dr * (k - 1), c + dc * (k - 1)
                if 0 <= end_r < rows and 0 <= end_c < cols:
                    lines.append([(r + dr * i) * cols + c + dc * i for i in range(k)])
    return np.asarray(lines, dtype=np.int32).reshape(-1, k)


def line_features(x: Array, k: int) -> Array:
    """Per cell, what the open lines through it hold, for each side.

    A line is open for a side when the other side has no mark in it. For an empty cell:
    plane 0 is 1 where the mover completes an open line of its own by playing there (a win, if
    the cell can be played), plane 1 the same for the opponent; planes 2 and 3 count the open
    lines with `k - 2` marks of the mover (of the opponent) through the cell, over 4; planes 4
    and 5 all the open lines through it, over 8. Occupied cells read 0 in these. Plane 6 is 1
    everywhere when both sides have as many marks (the mover moved first; in Connect Four
    which rows' threats count for whom depends on it), else 0: a sum over the whole board
    that convolutions alone see only at their full depth.

    Args:
        x: `[B, H, W, C]` with `C >= 2`: the mover's marks in channel 0, the opponent's in 1.
        k: the winning line's length, >= 2.

    Returns:
        `[B, H, W, NUM_LINE_FEATURES]` float32.
    """
    batch, rows, cols = x.shape[0], x.shape[1], x.shape[2]
    lines = line_cells(rows, cols, k)  # [L, k]
    incidence = np.zeros((len(lines), rows * cols), np.float32)  # [L, H*W]
    np.put_along_axis(incidence, lines, 1.0, axis=1)
    stones = x[..., :2].astype(jnp.float32).reshape(batch, rows * cols, 2)
    counts = jnp.einsum("lc,bcs->bls", incidence, stones)  # [B, L, 2] marks per line and side
    mine, theirs = counts[..., 0], counts[..., 1]
    open_mine, open_theirs = theirs == 0, mine == 0
    per_line = jnp.stack(
        [
            open_mine & (mine == k - 1),
            open_theirs & (theirs == k - 1),
            open_mine & (mine == k - 2),
            open_theirs & (theirs == k - 2),
            open_mine,
            open_theirs,
        ],
        axis=-1,
    ).astype(jnp.float32)  # [B, L, 6]
    per_cell = jnp.einsum("lc,blf->bcf", incidence, per_line)  # [B, H*W, 6] lines per cell
    empty = 1.0 - stones.sum(-1, keepdims=True)  # [B, H*W, 1]
    scaled = per_cell * jnp.asarray([1.0, 1.0, 0.25, 0.25, 0.125, 0.125])
    planes = jnp.concatenate([jnp.minimum(scaled[..., :2], 1.0), scaled[..., 2:]], -1) * empty
    marks = stones.sum(1)  # [B, 2]
    first = (marks[:, 0] == marks[:, 1]).astype(jnp.float32)  # [B]
    first = jnp.broadcast_to(first[:, None, None], (batch, rows * cols, 1))
    return jnp.concatenate([planes, first], -1).reshape(batch, rows, cols, NUM_LINE_FEATURES)
