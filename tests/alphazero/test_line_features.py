"""Rules of the k-in-a-row input features (`network.line_features`)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pgx
import pytest

from tests.alphazero.test_selfplay_and_trainer import TINY
from turbozero.nets.lines import (
    NUM_LINE_FEATURES,
    line_cells,
    line_features,
)


def test_the_boards_have_the_known_number_of_lines():
    """Connect Four has 69 winning lines (24 across, 21 up, 12 per diagonal), tic-tac-toe 8."""
    assert line_cells(6, 7, 4).shape == (69, 4)
    assert line_cells(3, 3, 3).shape == (8, 3)
    assert {tuple(sorted(line)) for line in line_cells(3, 3, 3).tolist()} == {
        (0, 1, 2), (3, 4, 5), (6, 7, 8), (0, 3, 6), (1, 4, 7), (2, 5, 8), (0, 4, 8), (2, 4, 6),
    }  # fmt: skip


def _connect_four(moves):
    env = pgx.make("connect_four")
    state = env.init(jax.random.PRNGKey(0))
    for column in moves:
        state = env.step(state, column)
    return state.observation[None]  # [1, 6, 7, 2], pgx's row 0 the top


def test_a_cell_that_completes_an_open_line_is_marked_for_its_side_only():
    """After 3 3 4 4 5 5 (first player on the bottom row, columns 3-5; second player above),
    the first player (to move) completes four at the bottom of column 2 or 6; the second player
    has three in row 4 too, completed at row 4 of columns 2 and 6."""
    planes = np.asarray(line_features(_connect_four([3, 3, 4, 4, 5, 5]), 4))[0]
    assert planes.shape == (6, 7, NUM_LINE_FEATURES)
    mine, theirs = planes[..., 0], planes[..., 1]
    assert set(zip(*np.nonzero(mine), strict=True)) == {(5, 2), (5, 6)}
    assert set(zip(*np.nonzero(theirs), strict=True)) == {(4, 2), (4, 6)}


def test_a_line_holding_the_other_sides_mark_is_closed():
    """Three of the first player's marks across the bottom with the second player's mark at one
    end: only the other end completes the line."""
    # first player 1 2 3 across the bottom, second player at 0 (bottom) and stacked on 1, 2
    planes = np.asarray(line_features(_connect_four([1, 0, 2, 1, 3, 2]), 4))[0]
    assert set(zip(*np.nonzero(planes[..., 0]), strict=True)) == {(5, 4)}


def test_occupied_cells_read_zero_and_twos_count_open_lines_over_four():
    """Tic-tac-toe, the mover with the centre, the opponent with a corner: an empty cell's
    plane 2 counts the mover's open lines through it holding one mark (k - 2), over 4, plane 4
    all its open lines, over 8."""
    board = np.zeros((1, 3, 3, 2), np.float32)
    board[0, 1, 1, 0] = 1.0  # the mover's centre
    board[0, 0, 0, 1] = 1.0  # the opponent's corner
    planes = np.asarray(line_features(jnp.asarray(board), 3))[0]
    assert np.all(planes[1, 1, :6] == 0) and np.all(planes[0, 0, :6] == 0)
    # (2, 2): the diagonal through the centre holds the opponent's corner: closed; no line
    # through (2, 2) other than it passes the centre
    assert planes[2, 2, 2] == 0
    # (0, 1): its column passes the centre, open: one line; its row holds the corner: closed
    assert planes[0, 1, 2] == pytest.approx(0.25)
    # (1, 0): row 1 through the centre; the column 0 holds the corner
    assert planes[1, 0, 2] == pytest.approx(0.25)
    # (2, 0): the anti-diagonal through the centre, open
    assert planes[2, 0, 2] == pytest.approx(0.25)
    assert planes[..., 3].max() == pytest.approx(0.25)  # the opponent's one corner likewise
    # open lines through (0, 1): its column only (its row holds the opponent's corner), over 8;
    # for the opponent, its row only (the column passes the mover's centre)
    assert planes[0, 1, 4] == pytest.approx(1 / 8) and planes[0, 1, 5] == pytest.approx(1 / 8)
    # (2, 2): row 2 and column 2 are empty, open for both; the diagonal holds both sides' marks
    assert planes[2, 2, 4] == pytest.approx(2 / 8) and planes[2, 2, 5] == pytest.approx(2 / 8)


def test_the_last_plane_says_whether_the_mover_moved_first():
    """Equal marks on both sides: the mover moved first (1 on every cell); one fewer: 0."""
    assert np.all(np.asarray(line_features(_connect_four([]), 4))[..., 6] == 1.0)
    assert np.all(np.asarray(line_features(_connect_four([3]), 4))[..., 6] == 0.0)
    assert np.all(np.asarray(line_features(_connect_four([3, 2]), 4))[..., 6] == 1.0)


def test_line_features_is_a_resnet_option_for_k_in_a_row_games_only():
    """The option adds its planes to the resnet's input (its first convolution reads 2 + 7
    channels on Connect Four), and is refused for an MLP or a game without winning lines."""
    from turbozero import envs
    from turbozero.alphazero.learner import make_network
    from turbozero.config import ConfigError

    cfg = TINY.with_overrides(["network.kind=resnet", "network.line_features=true"])
    net = make_network(cfg, envs.make("tic_tac_toe"))
    assert net.config.line_length == 3
    four = make_network(cfg.with_overrides(["env=connect_four"]), envs.make("connect_four"))
    params = four.init(jax.random.PRNGKey(0), jnp.zeros((1, 6, 7, 2)))["params"]
    assert params["Conv_0"]["kernel"].shape[2] == 2 + NUM_LINE_FEATURES
    with pytest.raises(ConfigError, match=r"network\.line_features=true .* network\.kind"):
        TINY.with_overrides(["network.kind=mlp", "network.line_features=true"])
    with pytest.raises(ConfigError, match=r"line_features=true needs a game .* 'othello'"):
        cfg.with_overrides(["env=othello"])
    assert TINY.network.line_features is False  # the class default: the network as before
