"""`TDRules`: what the TD learner needs of a game, from the game's file (`GameSpec.afterstates`).

The learner plays whole turns on the game's own board array (not through `Env.step`): the mover
lists its plays for the dice, keeps the one whose afterstate (the position it leaves, the
opponent to roll) its value function rates best, and the board is turned to the opponent's side.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from turbozero.types import Array, PRNGKey


class TDRules(NamedTuple):
    """A two-player dice game's turns for `turbozero.td`, in JAX (shape letters: `N` plays,
    `F` features, `R` results).

    Attributes:
        num_features: `F`.
        results: `R` points of a finished game for the player who just moved, ascending and
            symmetric (a loss of x is the opponent's win of x): the value head's classes.
        start: the starting board, from the side of the player to move.
        roll: `roll(key) -> dice [2]`, the mover's roll.
        plays: `plays(board, dice) -> (boards [N, *], first actions [N], valid [N])`: every
            way to play the dice (a half turn where `again`), the board after each.
        again: `again(dice) -> []` bool: the roll is played twice (backgammon's doubles).
        features: `features(board) -> [F]` float32: the value network's input for an afterstate,
            from the side of the player who just moved.
        result: `result(board) -> (over [] bool, index [] int32 into results)`: whether the
            player who just moved has won with that afterstate, and by how much.
        flip: `flip(board) -> board`: the position from the other player's side.
        state_plays: `state_plays(state) -> (boards [N, *], actions [N], valid [N])`: `plays` of
            a state of the game's `Env` (its board and dice left), the agents' moves.
        no_move: the `Env`'s action when no play is valid.
    """

    num_features: int
    results: tuple[float, ...]
    start: Array
    roll: Callable[[PRNGKey], Array]
    plays: Callable[[Array, Array], tuple[Array, Array, Array]]
    again: Callable[[Array], Array]
    features: Callable[[Array], Array]
    result: Callable[[Array], tuple[Array, Array]]
    flip: Callable[[Array], Array]
    state_plays: Callable[[Any], tuple[Array, Array, Array]]
    no_move: int
