"""What the TD learner needs of a game, from the game's file (`GameSpec.afterstates`): `TDRules`
for a two-player dice game, `SoloRules` for a one-player game with rewards and chance after the
move (2048).

Either way the learner plays on the game's own board array (not through `Env.step`). With
`TDRules` the mover lists its plays for the dice, keeps the one whose afterstate (the position
it leaves, the opponent to roll) its value function rates best, and the board is turned to the
opponent's side; with `SoloRules` the player keeps the move of highest reward plus afterstate
value, and chance acts on the afterstate.
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
        start: the starting board, from the side of the player to move (a NumPy or JAX array).
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
        rolls: `[K, 2]` int, every roll a player can get, each once (backgammon's 21).
        roll_weights: `[K]` float, their probabilities.
        turn_ends: `turn_ends(state) -> []` bool: whether the plays `state_plays` lists end the
            mover's turn (not the first half of a double): where not, the search at play
            (`turbozero.td.lookahead`) chooses at 0 ply.
    """

    num_features: int
    results: tuple[float, ...]
    start: Any
    roll: Callable[[PRNGKey], Array]
    plays: Callable[[Array, Array], tuple[Array, Array, Array]]
    again: Callable[[Array], Array]
    features: Callable[[Array], Array]
    result: Callable[[Array], tuple[Array, Array]]
    flip: Callable[[Array], Array]
    state_plays: Callable[[Any], tuple[Array, Array, Array]]
    no_move: int
    rolls: Any
    roll_weights: Any
    turn_ends: Callable[[Any], Array]


class SoloRules(NamedTuple):
    """A one-player game whose moves earn rewards and whose chance falls after the move (2048's
    new tile), for `turbozero.td` in JAX. A board is `[C]` small integers (shape letters: `C`
    cells, `A` actions, `K` chance outcomes, `S` symmetries).

    The learner rates afterstates (a move's result before chance acts) by the rewards still to
    come, picks the move of highest reward plus value, and lets chance place what it places.

    Attributes:
        num_actions: `A`, the `Env`'s actions (a move is its action's index).
        cell_values: each cell holds 0 .. `cell_values - 1` for the n-tuple network (a larger
            value is read as the largest).
        symmetries: `[S, C]` int cell permutations under which values are the same (the first
            the identity): the n-tuple network shares its tables across them.
        tuples: the n-tuple network's default groups of cells.
        value_scale: the rewards' size, the MLP's output unit (2048: 1,000 points).
        start: `start(key) -> [C]` a new game's board.
        moves: `moves(board [C]) -> (afterstates [A, C], rewards [A], valid [A])`.
        chance: `chance(afterstate [C], key) -> [C]` the board chance leaves.
        outcomes: `outcomes(afterstate [C]) -> (boards [K, C], probabilities [K])`, every
            board chance may leave (probability 0 where it cannot): the expectimax's.
        state_board: `state_board(env_state) -> [C]` the board of a state of the game's `Env`.
    """

    num_actions: int
    cell_values: int
    symmetries: Any
    tuples: tuple[tuple[int, ...], ...]
    value_scale: float
    start: Callable[[PRNGKey], Array]
    moves: Callable[[Array], tuple[Array, Array, Array]]
    chance: Callable[[Array, PRNGKey], Array]
    outcomes: Callable[[Array], tuple[Array, Array]]
    state_board: Callable[[Any], Array]
