"""The chance events of pgx's 2048 and backgammon, split out of their steps bit for bit.

Each game's `_step` is cut where it draws from its key: `decide` is what comes before the draw,
`resolve` what comes after with the drawn outcome, and `sample` the draw itself, made with the
same `jax.random` calls on the same key as pgx's (so a split step equals pgx's step exactly).
The rules common to every pgx game (finished games, illegal actions, the observation) are applied
once, around these, in `turbozero.envs.pgx.split_pgx_step`. They use pgx's private helpers: the
tests compare the split with pgx's `step` and fail if a pgx release changes them.

Outcomes:
    2048, C = 32: `outcome = 16 * is_four + cell`, the new tile's cell (0..15, row-major) and
        whether it is a 4 (p = 0.1) rather than a 2 (p = 0.9), uniform over the empty cells.
    backgammon, C = 36: `outcome = 6 * die0 + die1`, pgx's ordered dice (0..5 for 1..6), each
        1/36. Ordered because pgx's state keeps the dice in the order rolled (its `_dice` and
        `_playable_dice`); rolls 2-5 and 5-2 give positions that play alike but differ there.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import pgx.backgammon as bg
import pgx.play2048 as p2048

from turbozero.types import Array, PRNGKey

State = Any  # the game's pgx State


class ChanceRules(NamedTuple):
    """One pgx game's `_step` cut at its draw (for games not over, legal actions or not).

    Attributes:
        num_outcomes: `C`.
        decide: `decide(state, action) -> (state, chance)`: pgx's step up to the draw (the step
            count already advanced), and `[]` bool whether the draw happens.
        probabilities: `probabilities(state) -> [C]` float32 of the draw, for a state `decide`
            returned with `chance` True.
        resolve: `resolve(state, outcome) -> state`: pgx's step from the draw on.
        sample: `sample(state, key) -> int32 []`: the outcome pgx's step draws from `key`.
    """

    num_outcomes: int
    decide: Callable[[State, Array], tuple[State, Array]]
    probabilities: Callable[[State], Array]
    resolve: Callable[[State, Array], State]
    sample: Callable[[State, PRNGKey], Array]


def _rotate(board: Array, action: Array, sign: int) -> Array:
    """pgx 2048's turn of the 4x4 board so that `action` slides left (`sign=-1` turns back)."""
    return jax.lax.switch(action, [lambda k=k: jnp.rot90(board, sign * k) for k in range(4)])


def decide_2048(state: p2048.State, action: Array) -> tuple[p2048.State, Array]:
    """Slide and merge: the board before the new tile, and the merge's reward."""
    board = _rotate(state._board.reshape((4, 4)), action, 1)
    board, reward = jax.vmap(p2048._slide_and_merge)(board)
    board = _rotate(board, action, -1)
    state = state.replace(_board=board.ravel(), rewards=jnp.float32([reward.sum()]))
    return state, jnp.bool_(True)  # a tile is added after every move


def probabilities_2048(state: p2048.State) -> Array:
    """A 2 (0.9) or a 4 (0.1) on an empty cell, each equally likely. pgx draws its cell from
    the empty ones; with none (an illegal move on a full board) its draw picks cell 0."""
    empty = state._board == 0
    cells = jnp.where(empty.any(), empty, jnp.arange(16) == 0).astype(jnp.float32)
    cells = cells / cells.sum()
    return jnp.concatenate([0.9 * cells, 0.1 * cells])


def resolve_2048(state: p2048.State, outcome: Array) -> p2048.State:
    """The new tile placed; legal moves and the end of the game follow from the board."""
    board = state._board.at[outcome % 16].set(outcome // 16 + 1)  # 1: a 2, 2: a 4
    mask = p2048._legal_action_mask(board.reshape((4, 4)))
    return state.replace(_board=board, legal_action_mask=mask, terminated=~mask.any())


def sample_2048(state: p2048.State, key: PRNGKey) -> Array:
    """pgx's `_add_random_num` draws: the cell from `key`'s first half, the tile from its
    second."""
    key_cell, key_tile = jax.random.split(key)
    cell = jax.random.choice(key_cell, jnp.arange(16), p=(state._board == 0))
    tile = jax.random.choice(key_tile, jnp.int32([1, 2]), p=jnp.array([0.9, 0.1]))
    return (16 * (tile - 1) + cell).astype(jnp.int32)


def stats_2048(state: p2048.State) -> dict[str, Array]:
    """A game's figures (`Env.episode_stats`): its largest tile, and whether it reached the
    1024 and 2048 tiles (1.0 or 0.0). pgx's board holds each tile's log2 (0 for empty)."""
    top = jnp.max(state._board)
    return {
        "max_tile": jnp.where(top > 0, 2.0**top, 0.0).astype(jnp.float32),
        "reached_1024": (top >= 10).astype(jnp.float32),
        "reached_2048": (top >= 11).astype(jnp.float32),
    }


def decide_backgammon(state: bg.State, action: Array) -> tuple[bg.State, Array]:
    """The checker moved (or the turn passed on); the dice are rolled when the turn ends (no
    die left to play, or the no-op) unless the move bore off the last checker."""
    moved = bg._update_by_action(state, action)
    won = bg._is_all_off(moved._board)
    state = jax.lax.cond(won, lambda: bg._winning_step(moved), lambda: moved)
    roll = ~won & (bg._is_turn_end(moved) | (action // 6 == 0))
    return state, roll


def probabilities_backgammon(state: bg.State) -> Array:
    """Two ordered dice, each pair equally likely."""
    return jnp.full((36,), 1 / 36, jnp.float32)


def resolve_backgammon(state: bg.State, outcome: Array) -> bg.State:
    """pgx's `_change_turn` with the dice of `outcome`: the board turned to the next player's
    view and their legal moves for these dice."""
    dice = jnp.stack([outcome // 6, outcome % 6]).astype(jnp.int32)
    board = bg._flip_board(state._board)
    return state.replace(
        current_player=(state.current_player + 1) % 2,
        _board=board,
        _turn=(state._turn + 1) % 2,
        _dice=dice,
        _playable_dice=bg._set_playable_dice(dice),
        _played_dice_num=jnp.int32(0),
        legal_action_mask=bg._legal_action_mask(board, dice),
    )


def sample_backgammon(state: bg.State, key: PRNGKey) -> Array:
    """pgx's `_roll_dice` draw."""
    dice = bg._roll_dice(key)
    return (6 * dice[0] + dice[1]).astype(jnp.int32)


CHANCE_RULES: dict[str, ChanceRules] = {
    "2048": ChanceRules(32, decide_2048, probabilities_2048, resolve_2048, sample_2048),
    "backgammon": ChanceRules(
        36, decide_backgammon, probabilities_backgammon, resolve_backgammon, sample_backgammon
    ),
}
