"""2048: pgx's one-player game with its new tiles as chance events, the play page's tiles and
arrow keys, and its preset.

The new tile (C = 32): `outcome = 16 * is_four + cell`, the tile's cell (0..15, row-major) and
whether it is a 4 (p = 0.1) rather than a 2 (p = 0.9), uniform over the empty cells. pgx's
`_step` is cut where it draws: `decide` is the slide and merge, `resolve` places the drawn tile,
`sample` is the draw itself, made with the same `jax.random` calls on the same key as pgx's (so
a split step equals pgx's step exactly; the tests compare them).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import jax
import jax.numpy as jnp
import numpy as np
import pgx.play2048 as p2048

from turbozero.config import register_preset
from turbozero.envs.pgx import ChanceRules
from turbozero.gamespec import LETTERS, Board, GameSpec, Page, register_game
from turbozero.td.rules import SoloRules
from turbozero.types import Array, PRNGKey

if TYPE_CHECKING:
    from turbozero.envs.pgx import ChanceRules

#: pgx 2048's actions 0..3 (the board turned so that the move slides left, then turned back)
DIRECTIONS = ("left", "up", "right", "down")
#: the arrow keys (browser `KeyboardEvent.key`) and the actions they play
KEYS = {"ArrowLeft": 0, "ArrowUp": 1, "ArrowRight": 2, "ArrowDown": 3}
# pgx's drawing (`pgx/_src/dwg/`), in its SVG user units: 50-unit cells from (25, 25)
_TILE, _TILE_ORIGIN = 50.0, 25.0


def _direction_label(action: int) -> str:
    return DIRECTIONS[action] if 0 <= action < len(DIRECTIONS) else f"action {action}"


def _tile_label(outcome: int) -> str:
    """The chance outcome `16 * is_four + cell` named as the tile and its cell ("a 2 at c1")."""
    cell = outcome % 16
    return f"a {4 if outcome // 16 else 2} at {LETTERS[cell % 4]}{cell // 4 + 1}"


# -- the new tile ------------------------------------------------------------------------------


def _rotate(board: Array, action: Array, sign: int) -> Array:
    """pgx 2048's turn of the 4x4 board so that `action` slides left (`sign=-1` turns back)."""
    return jax.lax.switch(action, [lambda k=k: jnp.rot90(board, sign * k) for k in range(4)])


def decide(state: p2048.State, action: Array) -> tuple[p2048.State, Array]:
    """Slide and merge: the board before the new tile, and the merge's reward."""
    board = _rotate(state._board.reshape((4, 4)), action, 1)
    board, reward = jax.vmap(p2048._slide_and_merge)(board)
    board = _rotate(board, action, -1)
    state = state.replace(_board=board.ravel(), rewards=jnp.float32([reward.sum()]))
    return state, jnp.bool_(True)  # a tile is added after every move


def probabilities(state: p2048.State) -> Array:
    """A 2 (0.9) or a 4 (0.1) on an empty cell, each equally likely. pgx draws its cell from
    the empty ones; with none (an illegal move on a full board) its draw picks cell 0."""
    empty = state._board == 0
    cells = jnp.where(empty.any(), empty, jnp.arange(16) == 0).astype(jnp.float32)
    cells = cells / cells.sum()
    return jnp.concatenate([0.9 * cells, 0.1 * cells])


def resolve(state: p2048.State, outcome: Array) -> p2048.State:
    """The new tile placed; legal moves and the end of the game follow from the board."""
    board = state._board.at[outcome % 16].set(outcome // 16 + 1)  # 1: a 2, 2: a 4
    mask = p2048._legal_action_mask(board.reshape((4, 4)))
    return state.replace(_board=board, legal_action_mask=mask, terminated=~mask.any())


def sample(state: p2048.State, key: PRNGKey) -> Array:
    """pgx's `_add_random_num` draws: the cell from `key`'s first half, the tile from its
    second."""
    key_cell, key_tile = jax.random.split(key)
    cell = jax.random.choice(key_cell, jnp.arange(16), p=(state._board == 0))
    tile = jax.random.choice(key_tile, jnp.int32([1, 2]), p=jnp.array([0.9, 0.1]))
    return (16 * (tile - 1) + cell).astype(jnp.int32)


def stats(state: p2048.State) -> dict[str, Array]:
    """A game's figures (`Env.episode_stats`): its largest tile, and whether it reached the
    1024, 2048, 4096 and 8192 tiles (1.0 or 0.0), as players count a game's strength. pgx's
    board holds each tile's log2 (0 for empty)."""
    top = jnp.max(state._board)
    reached = {f"reached_{2**e}": (top >= e).astype(jnp.float32) for e in (10, 11, 12, 13)}
    return {"max_tile": jnp.where(top > 0, 2.0**top, 0.0).astype(jnp.float32), **reached}


# -- afterstates, for TD learning --------------------------------------------------------------

#: a cell's exponents in the slide table: 0 (empty) to 17 (131,072, the largest tile that fits)
_EXPONENTS = 18
#: the n-tuple network's groups of cells (row-major), Szubert and Jaskowski's and Yeh's four
#: 6-tuples: two straight 2x3 blocks and two bent ones, shared across the board's 8 symmetries
TUPLES = ((0, 1, 2, 3, 4, 5), (4, 5, 6, 7, 8, 9), (0, 1, 2, 4, 5, 6), (4, 5, 6, 8, 9, 10))


def _slide_row(row: Sequence[int]) -> tuple[list[int], int]:
    """One row of exponents slid and merged towards its first cell, and the merges' points."""
    tiles = [int(t) for t in row if t]
    out: list[int] = []
    points, i = 0, 0
    while i < len(tiles):
        if i + 1 < len(tiles) and tiles[i] == tiles[i + 1]:
            out.append(min(tiles[i] + 1, _EXPONENTS - 1))
            points += 2 ** (tiles[i] + 1)
            i += 2
        else:
            out.append(tiles[i])
            i += 1
    return out + [0] * (len(row) - len(out)), points


@functools.cache
def _row_table() -> tuple[np.ndarray, np.ndarray]:
    """Every row of four exponents (code: `sum(e_i * 18**i)`) slid left: the rows `[18**4, 4]`
    and their points `[18**4]` (a pure function of the rules, kept once built)."""
    codes = np.arange(_EXPONENTS**4)
    rows = np.stack([(codes // _EXPONENTS**i) % _EXPONENTS for i in range(4)], axis=1)
    slid = [_slide_row(r) for r in rows.tolist()]
    new = np.array([s[0] for s in slid], np.int32)
    return new, np.array([s[1] for s in slid], np.float32)


def _square_symmetries(side: int) -> np.ndarray:
    """`[8, side**2]` the cell permutations of a square board's symmetries, identity first."""
    cells = np.arange(side * side).reshape(side, side)
    return np.stack(
        [p.ravel() for k in range(4) for p in (np.rot90(cells, k), np.rot90(cells, k).T)]
    )


def solo_rules() -> SoloRules:
    """2048 for the TD learner (`GameSpec.afterstates`): a move slides and merges (pgx's
    `decide`, by a table of every row), its reward the merges' points; chance then places a 2
    (p = 0.9) or a 4 on an empty cell, as pgx does."""
    # (numpy here, constants when traced: building the rules starts no JAX backend)
    new_rows, row_points = _row_table()
    cells = np.arange(16).reshape(4, 4)
    view = np.stack([np.rot90(cells, a).ravel() for a in range(4)])  # action a slides left
    back = np.argsort(view, axis=1)
    powers = (_EXPONENTS ** np.arange(4)).astype(np.int32)

    def moves(board: Array) -> tuple[Array, Array, Array]:
        codes = (board[view].reshape(4, 4, 4) * powers).sum(-1)  # [actions, rows]
        slid = jnp.asarray(new_rows)[codes].reshape(4, 16)
        after = jnp.take_along_axis(slid, back, axis=1)
        return after, jnp.asarray(row_points)[codes].sum(-1), (after != board).any(-1)

    def chance(after: Array, key: PRNGKey) -> Array:
        k_cell, k_tile = jax.random.split(key)
        empty = after == 0
        cell = jax.random.categorical(k_cell, jnp.where(empty, 0.0, -jnp.inf))
        tile = jnp.where(jax.random.uniform(k_tile) < 0.1, 2, 1).astype(after.dtype)
        return jnp.where(empty.any(), after.at[cell].set(tile), after)

    def outcomes(after: Array) -> tuple[Array, Array]:
        empty = (after == 0).astype(jnp.float32)
        share = empty / jnp.maximum(empty.sum(), 1.0)
        boards = jnp.concatenate(
            [jax.vmap(lambda c, t=t: after.at[c].set(t))(jnp.arange(16)) for t in (1, 2)]
        )
        return boards.astype(after.dtype), jnp.concatenate([0.9 * share, 0.1 * share])

    def start(key: PRNGKey) -> Array:
        k1, k2 = jax.random.split(key)
        return chance(chance(jnp.zeros(16, jnp.int32), k1), k2)

    return SoloRules(
        num_actions=4,
        cell_values=16,
        symmetries=_square_symmetries(4),
        tuples=TUPLES,
        value_scale=1000.0,
        start=start,
        moves=moves,
        chance=chance,
        outcomes=outcomes,
        state_board=lambda state: state._board,
    )


# -- the play page -----------------------------------------------------------------------------


def chance_cell(outcome: int) -> list[float]:
    """`[x, y, r]` on pgx's drawing of the cell the new tile filled."""
    cell = outcome % 16
    x = _TILE_ORIGIN + (cell % 4 + 0.5) * _TILE
    y = _TILE_ORIGIN + (cell // 4 + 0.5) * _TILE
    return [x, y, _TILE / 2]


def view(state: Any, human_player: int) -> dict[str, Any]:
    """The tiles as numbers and the arrow keys (`Page.view`)."""
    del human_player
    exponents = np.asarray(state._board).reshape(4, 4)
    return {
        "tiles": [[int(2**e) if e else 0 for e in row] for row in exponents],
        "keys": dict(KEYS),
        "key_moves": [
            {"key": key, "action": action, "label": _direction_label(action)}
            for key, action in KEYS.items()
        ],
    }


# -- the game ----------------------------------------------------------------------------------


def chance_rules() -> ChanceRules:
    """The new tile split out of pgx's step (`GameSpec.chance`)."""

    return ChanceRules(32, decide, probabilities, resolve, sample)


GAME = register_game(
    GameSpec(
        name="2048",
        description="2048 (1 player, 4 actions, new tiles as chance events: 16 cells x {2, 4})",
        board=Board(label=_direction_label, outcome_label=_tile_label),
        stochastic=True,
        chance=chance_rules,
        afterstates=solo_rules,
        episode_stats=lambda: stats,
        page=Page(chance_cell=chance_cell, view=view),
    )
)


register_preset(
    "2048_alphazero",
    "2048 (one player) by AlphaZero: MLP, muzero_puct with min-max normalised Q, chance nodes "
    "for the new tiles (search.chance=sampled: one tile drawn per edge instead), the search's "
    "best move in self-play, value target half the search's root value; reports the largest "
    "tile (the `2048` preset, TD learning, is far stronger for the time: docs/benchmarks.md)",
    algorithm="alphazero",
    # about 2 minutes on 2 cores: two evaluations of 32 games (games cut at 640 moves)
    quick=(
        "num_epochs=80",
        "eval_every=40",
        "eval_games=32",
        "max_episode_steps=640",
        "max_wall_seconds=240",
    ),
    settings={
        "env": "2048",
        "num_games": 64,
        "network": {"kind": "mlp", "hidden": (256, 256)},
        "search": {
            "selector": "muzero_puct",
            "num_simulations": 32,
            "max_nodes": 65,
            "discount": 0.99,
        },
        "temperature_moves": 0,  # the best move (root noise still explores): longer games
        "root_value_weight": 0.5,  # value target: half the discounted return, half the root value
        "max_episode_steps": 2000,
        "memory_capacity": 512,
        "truncation": "bootstrap",
        "value_scale": 100.0,
        "num_epochs": 10_000,
        "max_wall_seconds": 1200.0,
        "eval_every": 100,  # 64 long games: every 25 epochs took 58% of an hour
        "eval_opponents": (),
        "eval_simulations": 0,
        # (measured before the defaults became the Connect Four recipe; kept as measured)
        "learning_rate": 1e-3,
        "ema_decay": 0.0,
        "overlap": False,
    },
)


register_preset(
    "2048",
    "2048 (one player) by TD learning over afterstates, Szubert and Jaskowski's method: an "
    "n-tuple network (four 6-cell tuples shared across the board's 8 symmetries) rates the "
    "board each move leaves before its new tile, 256 games at once, one update a move; "
    "55 minutes on a 2-core CPU; evaluated over 1,000 games at 1 ply (`eval --depth 1` also "
    "weighs every new tile and the best reply to it)",
    algorithm="td",
    # about 95 s on 2 cores: two evaluations of 100 games (a mean score near 26,000)
    quick=("num_epochs=6", "eval_every=3", "eval_games=100", "max_wall_seconds=240"),
    settings={
        "env": "2048",
        "value_net": "ntuple",
        "learning_rate": 0.25,  # the n-tuple network's step: a quarter of a board's TD error
        "num_games": 256,
        "steps_per_epoch": 5000,
        "num_epochs": 10_000,
        "max_wall_seconds": 3300.0,  # the hour, with the last evaluation inside it
        "checkpoint_every": 50,  # (about every 6 minutes)
        "keep_checkpoints": 2,  # (each holds two 268 MB networks: the latest and the best)
        "eval_every": 100,  # (about every 12 minutes; 1,000 games took about a minute)
        "eval_games": 1000,
        "eval_opponents": (),
        "eval_accuracy": False,
    },
)
