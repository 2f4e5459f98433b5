"""GNU Backgammon's neural evaluator as an opponent (`gnubg:PLY`), in-process through the PyPI
package `gnubg` (the `engines` extra; its wheels bundle the weights and bear-off databases).

Each play of a turn is scored by gnubg's cubeless money-game equity of the position it leaves,
evaluated at `PLY` plies (0: the network alone; 1 and 2 look ahead over the opponent's rolls),
from the opponent's side (who is then on roll) and negated; the highest is played. gnubg's own
move list is not used to choose: its Python binding truncates a move at its first checker borne
off, so two plays can come back as the same tuple (`turbozero.engines.backgammon`'s tests check
that the plays listed here are the ones gnubg lists).
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

from turbozero.engines.backgammon import CHECKERS, OFF, OPPONENT_OFF, flip, to_gnubg
from turbozero.io.errors import MissingExtraError
from turbozero.io.main_thread import on_main_thread

MAX_PLY = 2  # the plies offered (a 3-ply evaluation takes seconds a move on a CPU)
_LOCK = threading.Lock()  # gnubg's evaluator keeps global state: one evaluation at a time


def require_gnubg(feature: str = "the gnubg opponent") -> Any:
    """The `gnubg` module, or a `MissingExtraError` naming the extra that installs it."""
    try:
        import gnubg
    except ImportError:
        raise MissingExtraError(feature, "engines", "gnubg") from None
    return gnubg


def win_points(after: np.ndarray) -> float:
    """The points the mover wins with every checker off in `after`: 1, 2 for a gammon (the
    opponent has none off), 3 for a backgammon (and one still on the bar or in the mover's home
    board, pgx's indices 18 to 23 and the opponent's bar)."""
    if after[OPPONENT_OFF] != 0:
        return 1.0
    stuck = (after[18:24] < 0).any() or after[25] < 0
    return 3.0 if stuck else 2.0


def equities(afters: list[np.ndarray], *, ply: int) -> np.ndarray:
    """`[P]` float64: the mover's cubeless money equity of each position after its play.

    gnubg looks ahead (`ply` >= 1) on the main thread only (it crashes elsewhere: seen with gnubg
    1.1.0a16), so those evaluations go there (`turbozero.io.main_thread`); 0 ply runs on
    any thread.
    """
    require_gnubg()
    if ply == 0:
        with _LOCK:
            return _equities(afters, 0)
    return on_main_thread(_locked_equities, afters, int(ply))


def _locked_equities(afters: list[np.ndarray], ply: int) -> np.ndarray:
    with _LOCK:
        return _equities(afters, ply)


def _equities(afters: list[np.ndarray], ply: int) -> np.ndarray:
    import gnubg

    cube = gnubg.cube_info()  # money game, centred cube (cubeless evaluations ignore it)
    context = gnubg.eval_context(0, ply, 1, 0, 0.0)  # cubeless, deterministic, no noise
    out = np.empty(len(afters))
    for k, after in enumerate(afters):
        if after[OFF] == CHECKERS:
            out[k] = win_points(after)
            continue
        out[k] = -float(gnubg.evaluate(to_gnubg(flip(after)), cube, context)[5])
    return out
