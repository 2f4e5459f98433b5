"""Backgammon: pgx's game with the dice as chance events, and everything turbozero adds to it.

Its parts: move and roll names as players write them, the dice split out of pgx's step, what the
play page shows (the dice, the points numbered from the human's side, the moves as a list), the
engines (`pubeval`, `gnubg:PLY`, `turbozero.engines`), gnubg's move-quality measure, and the
preset.

pgx's board and actions, and backgammon's rules on the host that the engines play by, are
described in `turbozero.engines.backgammon`.

The dice (C = 36): `outcome = 6 * die0 + die1`, pgx's ordered dice (0..5 for 1..6), each 1/36.
Ordered because pgx's state keeps the dice in the order rolled (its `_dice` and
`_playable_dice`); rolls 2-5 and 5-2 give positions that play alike but differ there. The split
uses pgx's private helpers; the tests compare it with pgx's `step` and fail if a pgx release
changes them.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import jax
import jax.numpy as jnp
import numpy as np
import pgx.backgammon as bg

from turbozero.config import register_preset
from turbozero.engines import quality
from turbozero.engines.backgammon import (
    BAR,
    CHECKERS,
    GAME,
    NO_OP,
    OFF,
    OPPONENT_BAR,
    OPPONENT_OFF,
)
from turbozero.engines.players import GNUBG, PUBEVAL
from turbozero.envs.pgx import ChanceRules
from turbozero.gamespec import Board, GameSpec, Judge, Page, register_game
from turbozero.td.rules import TDRules
from turbozero.types import Array, PRNGKey

if TYPE_CHECKING:
    pass


# -- names and drawing ----------------------------------------------------------------------


POINT_BAR, POINT_OFF = 25, 0  # the bar and off as point numbers, as players number them
COLOURS = ("black", "white")  # pgx backgammon's `_turn`: 0 black, 1 white (drawn so)
# pgx's drawing of backgammon (`pgx/_src/dwg/`), in its SVG user units: a 25-unit grid drawn from
# (12.5, 12.5), the top points' tips at 6 grid units and the bottom points' at 8 (the point
# numbers go in the band between them)
GRID, GRID_ORIGIN = 25.0, 12.5


def _dice_label(outcome: int) -> str:
    """Backgammon's chance outcome `6 * die0 + die1` (0..5 for 1..6) named as the roll."""
    return f"rolled {outcome // 6 + 1}-{outcome % 6 + 1}"


def backgammon_move(action: int) -> tuple[int, int, int] | None:
    """`(from, to, die)` of pgx backgammon's `action = 6 * source + die_index`, in points
    numbered from the mover's side (24 down to 1 into the home board; `POINT_BAR` 25,
    `POINT_OFF` 0), or None for the no-op (sources 0), legal only when no checker can move.

    pgx keeps the board from the mover's side: index 0 is the 24-point and 23 the 1-point;
    source 1 is the bar, sources 2..25 the indices 0..23.
    """
    source, die = action // 6, action % 6 + 1
    if source == 0:
        return None
    start = POINT_BAR if source == 1 else 24 - (source - 2)
    return start, max(start - die, POINT_OFF), die


def backgammon_label(action: int, board: Sequence[int] | None = None) -> str:
    """A backgammon move as players write it, with its die: "13/8 (die 5)", "bar/22 (die 3)",
    "6/off (die 6)", "no move (pass)"; "13/8*" when `board` (pgx's `_board`, from the mover's
    side) shows the move hits a lone opposing checker."""
    move = backgammon_move(action)
    if move is None:
        return "no move (pass)"
    start, end, die = move
    hit = board is not None and end != POINT_OFF and int(board[24 - end]) == -1
    where = f"{'bar' if start == POINT_BAR else start}/{'off' if end == POINT_OFF else end}"
    return f"{where}{'*' if hit else ''} (die {die})"


def colour_and_points(state: Any, player: int) -> tuple[str | None, list[list[Any]]]:
    """`player`'s colour (pgx's `_turn` is the mover's) and the point numbers written over the
    drawing from their side (`Page.colour_and_points`: the play page and the game records)."""
    mover_colour = int(np.asarray(state._turn))  # pgx keeps the board from the mover's side
    colour = mover_colour if int(state.current_player) == player else 1 - mover_colour
    return COLOURS[colour], point_numbers(black=colour == 0)


def point_numbers(*, black: bool) -> list[list[Any]]:
    """`[[number, x, y], ...]`: each backgammon point's number for the black or white player,
    where pgx draws that point's checkers (black's 24-point is white's 1-point)."""
    out: list[list[Any]] = []
    for index in range(24):  # pgx's drawn board: black's side, black moving 0 -> 23
        if index < 6:
            column, row = 12.5 - index, 7.6
        elif index < 12:
            column, row = 11.5 - index, 7.6
        elif index < 18:
            column, row = index - 11.5, 6.4
        else:
            column, row = index - 10.5, 6.4
        number = 24 - index if black else index + 1
        out.append([str(number), GRID_ORIGIN + column * GRID, GRID_ORIGIN + row * GRID])
    return out


# -- the dice -------------------------------------------------------------------------------


def decide(state: bg.State, action: Array) -> tuple[bg.State, Array]:
    """The checker moved (or the turn passed on); the dice are rolled when the turn ends (no
    die left to play, or the no-op) unless the move bore off the last checker."""
    moved = bg._update_by_action(state, action)
    won = bg._is_all_off(moved._board)
    state = jax.lax.cond(won, lambda: bg._winning_step(moved), lambda: moved)
    roll = ~won & (bg._is_turn_end(moved) | (action // 6 == 0))
    return state, roll


def probabilities(state: bg.State) -> Array:
    """Two ordered dice, each pair equally likely."""
    return jnp.full((36,), 1 / 36, jnp.float32)


def resolve(state: bg.State, outcome: Array) -> bg.State:
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


def sample(state: bg.State, key: PRNGKey) -> Array:
    """pgx's `_roll_dice` draw."""
    dice = bg._roll_dice(key)
    return (6 * dice[0] + dice[1]).astype(jnp.int32)


# -- the play page -------------------------------------------------------------------------


def move_text(state: Any, action: int) -> str:
    """`action`'s name in the position `state`, a hit marked with "*"."""
    return backgammon_label(action, np.asarray(state._board).tolist())


def move_choices(state: Any, legal: list[int]) -> list[dict[str, Any]]:
    """The moves the human chooses from: `[{"action", "label"}, ...]`, one per legal action,
    sorted from the back of the board (the bar first, then the highest point,
    the larger die first) as a player reads them; pgx marks its six no-op ids legal together,
    when no checker can move, and they are one choice: "no move (pass)" (action 0).
    """
    moves = sorted((a for a in legal if backgammon_move(a) is not None), key=_back_first)
    choices = [{"action": a, "label": move_text(state, a)} for a in moves]
    if len(moves) < len(legal):  # the no-op
        choices.append({"action": min(legal), "label": backgammon_label(min(legal))})
    return choices


def _back_first(action: int) -> tuple[int, int]:
    """Sort key of backgammon moves: from the bar and the highest point first, larger die first."""
    start, _, die = backgammon_move(action) or (0, 0, 0)
    return -start, -die


def view(state: Any, human_player: int) -> dict[str, Any]:
    """The page's dice, the human's colour, the point numbers from their side and whose
    borne-off checkers each box counts, and a note on the numbering (`Page.view`)."""
    out: dict[str, Any] = {}
    mover = int(state.current_player)
    colour, numbers = colour_and_points(state, human_player)
    left = sorted((int(d) + 1 for d in np.asarray(state._playable_dice) if d >= 0), reverse=True)
    out["dice"] = {
        "rolled": [int(d) + 1 for d in np.asarray(state._dice)],
        "left": left,
        "player": "human" if mover == human_player else "agent",
    }
    out["colour"] = colour
    out["board_labels"] = numbers + off_labels(human_black=colour == "black")
    out["history_note"] = (
        "Each side's moves are numbered from its own side, as players write them: "
        "the agent's 24-point is your 1-point."
    )
    return out


#: the borne-off count's type size: pgx's 34px writes "×15" 12 units past its box's right edge
#: (measured in Chromium); at 26px it ends 5 units inside
OFF_FONT = "26px"
_OFF_COUNT = re.compile(r'(<text[^>]*font-size=")34px("[^>]*>×\d+</text>)')


def redraw(svg: str) -> str:
    """pgx's backgammon drawing with the borne-off counts ("×15") inside their boxes
    (`Page.redraw`)."""
    return _OFF_COUNT.sub(rf"\g<1>{OFF_FONT}\g<2>", svg)


def off_labels(*, human_black: bool) -> list[list[Any]]:
    """`[[text, x, y], ...]`: whose borne-off checkers each of pgx's two "off" boxes counts
    (black's at the top right, white's at the bottom right), written beside the box."""
    x = GRID_ORIGIN + 15 * GRID
    black = "your checkers off" if human_black else "the agent's off"
    white = "the agent's off" if human_black else "your checkers off"
    return [[black, x, GRID_ORIGIN + 2.5 * GRID], [white, x, GRID_ORIGIN + 11.5 * GRID]]


def turn_marks(moves: list[tuple[Any, int]]) -> list[list[float]]:
    """Arrows `[[x1, y1, x2, y2], ...]` for the agent's last turn, whose moves `moves` are
    `(state before, action)` in order (a turn is up to four checker moves that the board cannot
    show as a cell)."""
    arrows = []
    for before, action in moves:
        marks = backgammon_marks(action, mover_black=int(np.asarray(before._turn)) == 0)
        if marks is not None:
            arrows.append(marks)
    return arrows


def backgammon_marks(action: int, *, mover_black: bool) -> list[float] | None:
    """`[x1, y1, x2, y2]` on pgx's drawing from where to where a backgammon move took a checker
    (the point numbers' places, the mover's bar, its "off" box), or None for a pass."""
    move = backgammon_move(action)
    if move is None:
        return None
    numbers = {int(n): (x, y) for n, x, y in point_numbers(black=mover_black)}
    bar = (GRID_ORIGIN + 6.5 * GRID, GRID_ORIGIN + (7.5 if mover_black else 6.5) * GRID)
    off = (GRID_ORIGIN + 15 * GRID, GRID_ORIGIN + (1 if mover_black else 13) * GRID)
    start, end, _ = move
    x1, y1 = bar if start == POINT_BAR else numbers[start]
    x2, y2 = off if end == POINT_OFF else numbers[end]
    return [x1, y1, x2, y2]


# -- whole turns in JAX (the TD learner's, `turbozero.td`) ----------------------------------

#: pgx's starting position, from the mover's side
START = (2, 0, 0, 0, 0, -5, 0, -3, 0, 0, 0, 5, -5, 0, 0, 0, 3, 0, 5, 0, 0, 0, 0, -2, 0, 0, 0, 0)
SOURCES = 15  # a mover's checkers stand on at most 15 places (the bar and the points)
#: the results of a game for the player who just moved: lost 3, 2, 1 points, won 1, 2, 3
RESULTS = (-3.0, -2.0, -1.0, 1.0, 2.0, 3.0)
NUM_FEATURES = 198


def jax_move(board: Array, src: Array, die: Array) -> tuple[Array, Array]:
    """`(legal [] bool, board after [28])`: the mover's checker on `src` (0..23, or `BAR`)
    moved `die` (1..6) pips, under pgx's rules (`micro_moves` does the same on the host)."""
    tgt = jnp.where(src == BAR, die - 1, src + die)
    to_point = tgt <= 23
    t = jnp.minimum(tgt, 23)
    home = board[OFF] + jnp.clip(board[18:24], 0).sum() == CHECKERS
    rear = jnp.min(jnp.where(board[:24] > 0, jnp.arange(24), 24))
    distance = 24 - src
    off_ok = (src < 24) & home & ((distance == die) | ((distance < die) & (src == rear)))
    legal = (board[src] >= 1) & ((src == BAR) | (board[BAR] == 0))
    legal = legal & jnp.where(to_point, board[t] >= -1, off_ok)
    hit = to_point & (board[t] == -1)
    # (masks rather than scatters: a game's 480 plays listed in about half the time)
    place = jnp.arange(board.shape[0])
    landing = jnp.where(to_point, place == t, place == OFF)
    gained = jnp.where(hit, 2, 1) * landing - (place == src) - hit * (place == OPPONENT_BAR)
    return legal, board + gained.astype(board.dtype)


def _sources(board: Array) -> tuple[Array, Array]:
    """`(places [15], occupied [15])`: where the mover has checkers (board indices, `BAR` for
    the bar), in board order, then unoccupied slots (place 0)."""
    occupied = jnp.concatenate([board[:24] > 0, board[BAR:OPPONENT_BAR] > 0])
    places = jnp.concatenate([jnp.arange(24), jnp.array([BAR])])
    # the k-th occupied place into slot k (a one-hot product: sorting 25 places cost more)
    slot = jnp.where(occupied, jnp.cumsum(occupied) - 1, SOURCES)
    pick = slot[None, :] == jnp.arange(SOURCES)[:, None]  # [15, 25]
    return (pick * places).sum(1), pick.any(1)


def _action(src: Array, die: Array) -> Array:
    """The pgx action of moving from `src` (index or `BAR`) with `die` (1..6)."""
    return 6 * jnp.where(src == BAR, 1, src + 2) + die - 1


def _one_die(board: Array, die: Array) -> tuple[Array, Array, Array]:
    """`(boards [15, 28], actions [15], legal [15])`: each move of one checker with `die`."""
    places, occupied = _sources(board)
    legal, boards = jax.vmap(lambda s: jax_move(board, s, die))(places)
    return boards, _action(places, die), legal & occupied


def dice_plays(board: Array, d1: Array, d2: Array) -> tuple[Array, Array, Array]:
    """The plays of two dice (`d1`, `d2`, 1..6; the same for half of a double's turn).

    Returns:
        `(boards [480, 28], first actions [480], valid [480])`: both dice in either order
        (2 x 15 x 15), then one die alone (2 x 15), valid under the rules of backgammon as
        `turn_plays` applies them: both dice where any play uses both, else the larger die where
        it can be played. No valid play: no checker can move.
    """

    def in_order(first: Array, second: Array) -> tuple[Array, ...]:
        boards1, actions1, legal1 = _one_die(board, first)
        boards2, _, legal2 = jax.vmap(lambda b: _one_die(b, second))(boards1)  # [15, 15, ...]
        both = legal1[:, None] & legal2
        alone = legal1 & ~legal2.any(axis=1)
        actions = jnp.broadcast_to(actions1[:, None], both.shape).reshape(-1)
        return boards2.reshape(-1, 28), actions, both.reshape(-1), boards1, actions1, alone

    b_a, act_a, both_a, b1_a, act1_a, alone_a = in_order(d1, d2)
    b_b, act_b, both_b, b1_b, act1_b, alone_b = in_order(d2, d1)
    both = jnp.concatenate([both_a, both_b])
    larger_first = d1 > d2
    larger_playable = jnp.where(larger_first, alone_a.any(), alone_b.any())
    alone_a = alone_a & ~(larger_playable & ~larger_first)
    alone_b = alone_b & ~(larger_playable & larger_first & (d1 != d2))
    alone = jnp.concatenate([alone_a, alone_b]) & ~both.any()
    boards = jnp.concatenate([b_a, b_b, b1_a, b1_b])
    actions = jnp.concatenate([act_a, act_b, act1_a, act1_b])
    return boards, actions, jnp.concatenate([both, alone])


def _units(n: Array) -> Array:
    """Tesauro's four inputs for `n` checkers on a point: at least 1, 2, 3, and half the rest."""
    return jnp.stack([n >= 1, n >= 2, n >= 3, jnp.maximum(n - 3, 0) / 2.0], -1).astype(jnp.float32)


def afterstate_features(board: Array) -> Array:
    """`[198]` float32 inputs of the position after a turn, from the side of the player who
    just moved (the opponent to roll): Tesauro's four units per point for each side (192), each
    side's checkers on the bar (halved) and off (a fifteenth), and each side's pip count / 167
    (the start's)."""
    b = board.astype(jnp.int32)
    mine, theirs = jnp.clip(b[:24], 0), jnp.clip(-b[:24], 0)
    pips_mine = (mine * (24 - jnp.arange(24))).sum() + 25 * b[BAR]
    pips_theirs = (theirs * (jnp.arange(24) + 1)).sum() - 25 * b[OPPONENT_BAR]
    counts = (b[BAR] / 2, -b[OPPONENT_BAR] / 2, b[OFF] / 15, -b[OPPONENT_OFF] / 15)
    extra = jnp.stack([*counts, pips_mine / 167, pips_theirs / 167]).astype(jnp.float32)
    return jnp.concatenate([_units(mine).reshape(-1), _units(theirs).reshape(-1), extra])


def afterstate_result(board: Array) -> tuple[Array, Array]:
    """`(over [] bool, result index [] int32 into RESULTS)`: whether the player who just moved
    bore off its last checker, and its points as pgx scores them (a gammon when the opponent
    bore off none, a backgammon when one of theirs is also still in the winner's home board)."""
    won = board[OFF] == CHECKERS
    gammon = board[OPPONENT_OFF] == 0
    backgammon = gammon & (board[18:24].sum() != 0)
    return won, (2 + 1 + gammon.astype(jnp.int32) + backgammon.astype(jnp.int32))


def jax_flip(board: Array) -> Array:
    """`flip` in JAX: the position from the other player's side."""
    return -jnp.concatenate([board[23::-1], board[24:26][::-1], board[26:28][::-1]])


def state_plays(state: Any) -> tuple[Array, Array, Array]:
    """`dice_plays` of a pgx state's dice left (the two largest, so half of a double's turn at
    a time), or one die's plays (padded to the same 480) when one is left; none when none is.

    Half a double is chosen on its own: a first half that leaves the rest of the double no move
    where another would not plays fewer dice than the rules ask (pgx allows it).
    """
    board = state._board.astype(jnp.int32)
    left = jnp.sort(jnp.where(state._playable_dice >= 0, state._playable_dice + 1, 0))[::-1]
    boards, actions, valid = dice_plays(board, left[0], left[1])
    one_boards, one_actions, one_valid = _one_die(board, left[0])
    pad = boards.shape[0] - SOURCES
    one_boards = jnp.concatenate([one_boards, jnp.broadcast_to(board, (pad, 28))])
    one_actions = jnp.concatenate([one_actions, jnp.zeros(pad, one_actions.dtype)])
    one_valid = jnp.concatenate([one_valid, jnp.zeros(pad, bool)])
    single = left[1] == 0
    return (
        jnp.where(single, one_boards, boards),
        jnp.where(single, one_actions, actions),
        jnp.where(single, one_valid, valid) & (left[0] > 0),  # (no die left: a finished game)
    )


#: `[21, 2]` the distinct rolls (lower die first)
ROLLS = np.array([(a, b) for a in range(1, 7) for b in range(a, 7)], np.int32)


def td_rules() -> TDRules:
    """Backgammon for the TD learner (`GameSpec.afterstates`): a turn is one `dice_plays`, or
    two for a double (each half chosen by its own position's value)."""

    def roll(key: PRNGKey) -> Array:
        return jax.random.randint(key, (2,), 1, 7)

    return TDRules(
        num_features=NUM_FEATURES,
        results=RESULTS,
        start=np.asarray(START, np.int32),  # (numpy: building the rules starts no backend)
        roll=roll,
        plays=lambda board, dice: dice_plays(board, dice[0], dice[1]),
        again=lambda dice: dice[0] == dice[1],
        features=afterstate_features,
        result=afterstate_result,
        flip=jax_flip,
        state_plays=state_plays,
        no_move=NO_OP,
        rolls=ROLLS,
        roll_weights=np.where(ROLLS[:, 0] == ROLLS[:, 1], 1 / 36, 2 / 36),
        turn_ends=lambda state: (state._playable_dice >= 0).sum() <= 2,
    )


# -- the game ----------------------------------------------------------------------------------


def chance_rules() -> ChanceRules:
    """The dice split out of pgx's step (`GameSpec.chance`)."""

    return ChanceRules(36, decide, probabilities, resolve, sample)


GAME_SPEC = register_game(
    GameSpec(
        name=GAME,
        description="Backgammon (2 players, dice as chance events: 36 ordered rolls)",
        board=Board(label=backgammon_label, outcome_label=_dice_label),
        stochastic=True,
        chance=chance_rules,
        afterstates=td_rules,
        engines={"pubeval": PUBEVAL, "gnubg": GNUBG},
        judge=Judge(
            "gnubg",
            quality.judged_positions,
            quality.metrics,
            max_positions=10_000,
            report=quality.report,
            log_text=quality.log_text,
            panels=quality.PANELS,
        ),
        page=Page(
            move_text=move_text,
            move_choices=move_choices,
            view=view,
            turn_marks=turn_marks,
            colour_and_points=colour_and_points,
            redraw=redraw,
            draw_eagerly=True,  # (pgx's drawing turns the board with `lax.cond`)
        ),
    )
)


register_preset(
    "backgammon",
    "Backgammon (two players) by TD learning over afterstates, TD-Gammon's method: an MLP rates "
    "the position each play leaves (Tesauro's inputs), 128 games of self-play at once, one "
    "gradient step a turn; 55 minutes on a 2-core CPU; evaluated against pubeval and gnubg at "
    "0 ply, and by gnubg's error rate on 200 positions (the engines extra)",
    algorithm="td",
    # about 2 minutes on 2 cores: two evaluations of 32 games against pubeval
    quick=(
        "num_epochs=4",
        "steps_per_epoch=200",
        "eval_every=2",
        "eval_games=32",
        "eval_opponents=pubeval",
        "eval_accuracy=false",
        "max_wall_seconds=240",
    ),
    settings={
        "env": "backgammon",
        "num_games": 128,
        "steps_per_epoch": 5000,  # about 35 s on 2 cores, an evaluation every 6 minutes
        "num_epochs": 200,
        "max_wall_seconds": 3300.0,  # the hour, with the last evaluation inside it
        "hidden": (80, 80),
        "learning_rate": 1e-3,
        "eval_every": 10,
        "eval_games": 100,
        "eval_opponents": ("pubeval", "gnubg:0"),
        "eval_accuracy": True,  # gnubg's error rate
        "eval_accuracy_positions": 200,
    },
)


register_preset(
    "backgammon_alphazero",
    "Backgammon by AlphaZero: MLP, muzero_puct with chance nodes for the dice (36 ordered "
    "rolls), 16 simulations in self-play, 64 in evaluation; 1,000 epochs (about 40 minutes on "
    "a 2-core CPU); the search with chance nodes at work (the `backgammon` preset, TD "
    "learning, is far stronger for the time: docs/benchmarks.md)",
    algorithm="alphazero",
    # about 2 minutes on 2 cores: two evaluations of 32 games against random
    quick=(
        "num_epochs=40",
        "eval_every=20",
        "eval_games=32",
        "eval_opponents=random",
        "eval_accuracy=false",
        "max_wall_seconds=240",
    ),
    settings={
        "env": "backgammon",
        "num_games": 64,
        "network": {"kind": "mlp", "hidden": (256, 256)},
        "search": {"selector": "muzero_puct", "num_simulations": 16, "max_nodes": 33},
        "temperature_moves": 20,
        "max_episode_steps": 1000,
        "memory_capacity": 256,
        "value_scale": 3.0,  # a gammon scores 2, a backgammon 3
        "train_batch_size": 512,
        "collection_steps_per_epoch": 32,
        "train_steps_per_epoch": 32,
        "num_epochs": 1000,
        "max_wall_seconds": 3300.0,  # a guard: 1,000 epochs took 40 minutes on a 2-core CPU
        "eval_every": 200,
        "eval_games": 32,
        "eval_simulations": 64,
        "eval_opponents": ("random", "pubeval", "network"),
        "eval_accuracy": True,  # gnubg's error rate
        "eval_accuracy_positions": 200,
        "root_value_weight": 0.0,
        # (measured before the defaults became the Connect Four recipe; kept as measured)
        "learning_rate": 1e-3,
        "ema_decay": 0.0,
        "overlap": False,
    },
)
