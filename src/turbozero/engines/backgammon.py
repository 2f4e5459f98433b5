"""Backgammon's rules on the host, for the engines: the one place that translates pgx's
positions and moves into an engine's (pubeval, gnubg) and back.

pgx keeps the board from the mover's side, `_board` `[28]` int: indices 0..23 are the mover's
24-point to its 1-point (the mover's checkers positive and moving to higher indices, the
opponent's negative), 24 the mover's bar (positive), 25 the opponent's bar (negative), 26 the
mover's checkers off (positive) and 27 the opponent's (negative). One pgx action moves one
checker with one die: `6 * source + die - 1`, source 1 the bar and 2..25 the indices 0..23
(source 0 is the no-op, legal only when no checker can move).

An engine chooses a whole turn (one checker per die, two dice or four for doubles) under the
rules of backgammon, which pgx does not enforce: the most dice that can be played must be played,
and when only one of two dice can be, the larger if it can. `turn_plays` lists the plays of a
turn under those rules, each as the pgx actions that make it and the position it reaches, so an
engine's choice is found by its resulting position and played one pgx action at a time. (pgx
allows a superset: an agent trained on pgx may play a die fewer than the rules ask; its games
are scored by pgx as they were played.)

Engines number points from the player's side, 1 to 24, with 25 the bar and 0 off; gnubg's board
is two lists of 25 counts, the opponent's first, each from its owner's side (index 24 the bar).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

BAR, OPPONENT_BAR, OFF, OPPONENT_OFF = 24, 25, 26, 27  # pgx `_board` indices
CHECKERS = 15
NO_OP = 0  # the pgx action that passes (legal only when no checker can move)
GAME = "backgammon"  # pgx's id, the game the engines here and gnubg's move quality are for


def is_backgammon(env_name: str) -> bool:
    """Whether `env_name` (a config's `env` or an `Env.name`, `pgx:` prefix allowed) is the
    backgammon these engines play."""
    return env_name.removeprefix("pgx:") == GAME


class Play(NamedTuple):
    """One legal play of a turn: the pgx actions that make it, in order, and the position after
    it (`[28]` int8 bytes, still from the mover's side)."""

    actions: tuple[int, ...]
    after: bytes


def action_of(source_index: int, die: int) -> int:
    """The pgx action moving a checker from `source_index` (0..23, or `BAR`) with `die` (1..6)."""
    source = 1 if source_index == BAR else source_index + 2
    return 6 * source + die - 1


def micro_moves(board: np.ndarray, die: int) -> list[tuple[int, np.ndarray]]:
    """`[(action, board after), ...]`: every pgx-legal move of one checker with `die`.

    The rules are pgx's own (`pgx.backgammon._is_action_legal`): a checker on the bar enters
    first; a point with two or more opposing checkers is closed; a lone one is hit to its bar;
    bearing off needs every checker home and the exact die, or a larger one from the rearmost
    point.
    """
    sources = [BAR] if board[BAR] > 0 else [i for i in range(24) if board[i] > 0]
    out = []
    for src in sources:
        after = _moved(board, src, die)
        if after is not None:
            out.append((action_of(src, die), after))
    return out


def micro_step(board: np.ndarray, action: int) -> np.ndarray:
    """The position after the pgx action `action` (a ValueError where pgx would not allow it)."""
    source, die = action // 6, action % 6 + 1
    src = BAR if source == 1 else source - 2
    b = np.asarray(board, np.int8)
    after = None if source == 0 or (src != BAR and b[BAR] > 0) else _moved(b, src, die)
    if after is None or (src != BAR and b[src] <= 0) or (src == BAR and b[BAR] <= 0):
        raise ValueError(f"pgx action {action} is not legal in {b.tolist()}")
    return after


def _moved(board: np.ndarray, src: int, die: int) -> np.ndarray | None:
    """The board after moving the mover's checker on `src` with `die`, or None if illegal."""
    tgt = die - 1 if src == BAR else src + die
    after = board.copy()
    if tgt <= 23:
        if board[tgt] < -1:
            return None
        if after[tgt] == -1:  # a hit
            after[tgt] = 0
            after[OPPONENT_BAR] -= 1
        after[src] -= 1
        after[tgt] += 1
        return after
    home = board[OFF] + board[18:24].clip(min=0).sum() == CHECKERS
    rear = next((i for i in range(24) if board[i] > 0), 24)  # the rearmost checker's index
    distance = 24 - src
    if not (home and (distance == die or (distance < die and src == rear))):
        return None
    after[src] -= 1
    after[OFF] += 1
    return after


def turn_plays(board: Sequence[int] | np.ndarray, dice: Sequence[int]) -> list[Play]:
    """The legal plays of a turn under the rules of backgammon, one per resulting position.

    Args:
        board: pgx's `_board` `[28]`, from the mover's side.
        dice: the dice left to play, 1..6 each (two, four for doubles; fewer mid-turn).

    Returns:
        The plays that use the most dice that can be used (when only one of two different dice
        can be, the larger if it can), one per distinct resulting position, in a fixed order;
        `[Play((NO_OP,), board)]` when no checker can move.
    """
    start = np.asarray(board, np.int8)
    found: dict[bytes, tuple[int, tuple[int, ...], int]] = {}  # after -> (dice used, actions, die)

    def walk(b: np.ndarray, left: tuple[int, ...], actions: tuple[int, ...], first: int) -> None:
        moved = False
        for die in sorted(set(left), reverse=True):
            rest = list(left)
            rest.remove(die)
            for action, after in micro_moves(b, die):
                moved = True
                walk(after, tuple(rest), (*actions, action), first or die)
        if not moved and actions:
            key = b.tobytes()
            if key not in found or len(actions) > found[key][0]:
                found[key] = (len(actions), actions, first)

    walk(start, tuple(int(d) for d in dice), (), 0)
    if not found:
        return [Play((NO_OP,), start.tobytes())]
    most = max(used for used, _, _ in found.values())
    plays = {k: v for k, v in found.items() if v[0] == most}
    distinct = sorted(set(int(d) for d in dice))
    if most == 1 and len(distinct) == 2:  # one die only: the larger where it can be played
        larger = [k for k, v in plays.items() if _die_of(v[1][0]) == distinct[1]]
        if larger:
            plays = {k: plays[k] for k in larger}
    return [Play(v[1], k) for k, v in sorted(plays.items())]


def _die_of(action: int) -> int:
    return action % 6 + 1


def flip(board: Sequence[int] | np.ndarray) -> np.ndarray:
    """The position from the other player's side, as pgx turns its board when the turn passes."""
    b = np.asarray(board, np.int8)
    out = np.empty(28, np.int8)
    out[:24] = -b[23::-1]
    out[BAR], out[OPPONENT_BAR] = -b[OPPONENT_BAR], -b[BAR]
    out[OFF], out[OPPONENT_OFF] = -b[OPPONENT_OFF], -b[OFF]
    return out


def is_race(board: Sequence[int] | np.ndarray) -> bool:
    """Whether the checkers have parted (no more contact): nobody on the bar and every one of the
    mover's checkers past every one of the opponent's."""
    b = np.asarray(board)
    if b[BAR] > 0 or b[OPPONENT_BAR] < 0:
        return False
    mine = np.flatnonzero(b[:24] > 0)
    theirs = np.flatnonzero(b[:24] < 0)
    return mine.size == 0 or theirs.size == 0 or mine.min() > theirs.max()


def to_gnubg(board: Sequence[int] | np.ndarray) -> tuple[list[int], list[int]]:
    """gnubg's board for pgx's `board`: `(opponent, mover)`, each 25 counts from its owner's side
    (index p - 1 its p-point, index 24 its bar)."""
    b = np.asarray(board, int)
    mover = [max(int(b[24 - p]), 0) for p in range(1, 25)] + [int(b[BAR])]
    # the opponent's q-point is the mover's (25 - q)-point: pgx index q - 1
    opponent = [max(-int(b[q - 1]), 0) for q in range(1, 25)] + [-int(b[OPPONENT_BAR])]
    return opponent, mover


def from_gnubg(opponent: Sequence[int], mover: Sequence[int]) -> np.ndarray:
    """pgx's `_board` `[28]` int8 for gnubg's `(opponent, mover)` board (the inverse of
    `to_gnubg`; the checkers off are what is missing of each side's 15)."""
    b = np.zeros(28, np.int8)
    for p in range(1, 25):
        b[24 - p] += mover[p - 1]
        b[p - 1] -= opponent[p - 1]
    b[BAR] = mover[24]
    b[OPPONENT_BAR] = -opponent[24]
    b[OFF] = CHECKERS - sum(mover)
    b[OPPONENT_OFF] = -(CHECKERS - sum(opponent))
    return b


def apply_engine_move(board: Sequence[int] | np.ndarray, move: Sequence[int]) -> np.ndarray:
    """The position after an engine's move `(from, to, from, to, ...)`: points from the mover's
    side, 25 the bar and 0 off, one checker per pair (a lone opposing checker on `to` is hit)."""
    b = np.asarray(board, np.int8).copy()
    for src, dst in zip(move[0::2], move[1::2], strict=True):
        i = BAR if src == 25 else 24 - src
        if b[i] <= 0:
            raise ValueError(f"no checker of the mover on its point {src} in move {tuple(move)}")
        b[i] -= 1
        if dst <= 0:
            b[OFF] += 1
            continue
        j = 24 - dst
        if b[j] < -1:
            raise ValueError(f"point {dst} is closed in move {tuple(move)}")
        if b[j] == -1:
            b[j] = 0
            b[OPPONENT_BAR] -= 1
        b[j] += 1
    return b


def pubeval_inputs(board: Sequence[int] | np.ndarray) -> np.ndarray:
    """Tesauro's pubeval encoding `[122]` float32 of a position after the mover's move, from the
    mover's side: five inputs per point (an opposing blot; one, at least two, exactly three of
    the mover's checkers; half the count beyond three), the opponent's checkers on the bar
    (halved) and the mover's checkers off (a fifteenth each)."""
    b = np.asarray(board, int)
    x = np.zeros(122, np.float32)
    for i in range(24):  # block j - 1 of pubeval's is the mover's (25 - j)-point: pgx index j - 1
        n, base = b[i], 5 * i
        if n == -1:
            x[base] = 1.0
        elif n == 1:
            x[base + 1] = 1.0
        elif n >= 2:
            x[base + 2] = 1.0
            x[base + 3] = float(n == 3)
            x[base + 4] = (n - 3) / 2.0 if n >= 4 else 0.0
    x[120] = -float(b[OPPONENT_BAR]) / 2.0  # (a negative count: the opponent's bar)
    x[121] = float(b[OFF]) / 15.0
    return x
