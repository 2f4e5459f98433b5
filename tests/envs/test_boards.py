"""Per-game board knowledge: move names and the line that won."""

from __future__ import annotations

from turbozero.games.backgammon import backgammon_label, backgammon_move
from turbozero.gamespec import board_cells, move_label, outcome_label, winning_line


def test_moves_are_named_as_players_name_them():
    assert [move_label("tic_tac_toe", a) for a in (0, 4, 8)] == ["a1", "b2", "c3"]
    assert move_label("connect_four", 0) == "column 1"
    assert move_label("othello", 64) == "pass" and move_label("othello", 9) == "b2"
    assert move_label("go_9x9", 0) == "A9" and move_label("go_9x9", 81) == "pass"
    assert move_label("hex", 121) == "swap"
    assert move_label("some_game", 3) == "action 3"


def test_chance_games_name_their_moves_and_outcomes_as_players_do():
    assert [move_label("2048", a) for a in range(4)] == ["left", "up", "right", "down"]
    assert outcome_label("2048", 2) == "a 2 at c1" and outcome_label("2048", 16 + 15) == "a 4 at d4"
    assert outcome_label("backgammon", 6 * 2 + 4) == "rolled 3-5"
    assert outcome_label("tic_tac_toe", 3) == "outcome 3"
    # pgx backgammon: action = 6 * source + die index; source 0 the no-op, 1 the bar, 2 + i the
    # mover's board index i (index 0 the 24-point, 23 the 1-point)
    assert backgammon_move(3) is None and move_label("backgammon", 3) == "no move (pass)"
    assert (
        backgammon_move(6 * 1 + 2) == (25, 22, 3)
        and move_label("backgammon", 8) == "bar/22 (die 3)"
    )
    assert move_label("backgammon", 6 * (2 + 11) + 4) == "13/8 (die 5)"
    assert move_label("backgammon", 6 * (2 + 18) + 5) == "6/off (die 6)"
    assert move_label("backgammon", 6 * (2 + 21) + 5) == "3/off (die 6)"  # the die is larger
    board = [0] * 28
    board[16] = -1  # a lone opposing checker on the 8-point
    assert backgammon_label(6 * (2 + 11) + 4, board) == "13/8* (die 5)"
    board[16] = -2
    assert backgammon_label(6 * (2 + 11) + 4, board) == "13/8 (die 5)"


def test_winning_line_finds_rows_columns_and_diagonals():
    e = -1
    assert winning_line("tic_tac_toe", [0, 0, 0, 1, 1, e, e, e, e]) == [0, 1, 2]
    assert winning_line("tic_tac_toe", [1, 0, e, 0, 1, e, 0, e, 1]) == [0, 4, 8]
    assert winning_line("tic_tac_toe", [e, e, 1, 0, 1, e, 1, 0, 0]) == [2, 4, 6]
    assert winning_line("tic_tac_toe", [0, 1, 0, 0, 1, 1, 1, 0, 0]) == []  # a draw
    board = [e] * 42
    for r, c in ((5, 0), (4, 1), (3, 2), (2, 3)):  # a rising diagonal of four
        board[r * 7 + c] = 1
    assert sorted(winning_line("connect_four", board)) == [17, 23, 29, 35]
    board[17] = 0
    assert winning_line("connect_four", board) == []
    assert winning_line("othello", [0] * 64) == []  # not won by a line


def test_connect_four_cells_are_row_major_like_its_board():
    cells = board_cells("connect_four")
    assert cells is not None and len(cells) == 42
    assert [c[0] for c in cells[:8]] == [0, 1, 2, 3, 4, 5, 6, 0]  # a column's cells play it


def test_one_entry_per_game_drives_augmentation_perfect_players_and_solvers():
    from turbozero.alphazero.learner import augmentations
    from turbozero.arena.accuracy import solved_games
    from turbozero.arena.perfect import perfect_games
    from turbozero.envs import GAMES, make
    from turbozero.games import all_games

    assert set(all_games()) == set(GAMES)
    assert sorted(perfect_games()) == ["connect_four", "tic_tac_toe"]  # (in registration order)
    assert sorted(solved_games()) == ["connect_four", "tic_tac_toe"]
    counts = {name: len(augmentations(make(name))) for name in ("tic_tac_toe", "connect_four")}
    assert counts == {"tic_tac_toe": 7, "connect_four": 1}  # (the identity is not repeated)
    assert augmentations(make("2048")) == []


def test_go_on_seven_by_seven_is_built_checked_drawn_and_named_from_its_file():
    import jax

    from turbozero import envs

    env = envs.make("go_7x7")
    assert (env.num_actions, env.observation_shape, env.deterministic) == (50, (7, 7, 17), True)
    envs.check(env, batch_size=2, num_steps=8)
    state = env.step(env.init(jax.random.PRNGKey(0))[0], 24, jax.random.PRNGKey(0))[0]
    assert env.render_svg(jax.device_get(state)).count("<circle") == 1  # the stone on D4
    assert move_label("go_7x7", 24) == "D4" and move_label("go_7x7", 49) == "pass"
    assert len(board_cells("go_7x7")) == 49


def test_games_drawn_with_compilation_off_are_drawn_as_compiled():
    """Backgammon's and othello's drawings run with JAX's compilation off (`Page.draw_eagerly`:
    pgx's drawing turns the board with `lax.cond`, a program compiled per drawing); the drawing
    is the compiled one's, with either side to move."""
    import jax
    import jax.numpy as jnp
    from pgx._src.visualizer import Visualizer

    from turbozero import envs
    from turbozero.gamespec import game_spec

    for name, moves in (("backgammon", (0, 13, 0)), ("othello", (19, 18))):
        env, page = envs.make(name), game_spec(name).page
        assert page.draw_eagerly
        state = env.init(jax.random.PRNGKey(1))[0]
        turns = set()
        for action in moves:
            state = jax.tree.map(jnp.asarray, jax.device_get(state))
            compiled = Visualizer(color_theme="light").get_dwg(states=state).tostring()
            compiled = compiled if page.redraw is None else page.redraw(compiled)
            assert env.render_svg(state) == compiled, name
            turns.add(int(state._turn if name == "backgammon" else state._x.turn))
            legal = jnp.flatnonzero(state.legal_action_mask)
            state = env.step(state, legal[action % len(legal)], jax.random.PRNGKey(2))[0]
        assert turns == {0, 1}, name  # (both sides' boards, the cond's two branches)
