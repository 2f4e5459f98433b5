"""The play page's games with chance, driven over HTTP: 2048 (one player: the human plays, the
agent moves when asked) and backgammon (moves chosen from a list; the dice as they fall).

The page tests serve an agent trained for them (about 110 s of compiling and training, cold),
so they are integration runs and run in `make check`; the move names run in `make test`."""

from __future__ import annotations

import functools
import random
import re
from types import SimpleNamespace

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import turbozero
from tests.play.test_server import new_game, request, running
from turbozero.alphazero import train
from turbozero.alphazero.config import AlphaZeroConfig, NetworkConfig, SearchConfig
from turbozero.games.backgammon import backgammon_marks, backgammon_move, off_labels, point_numbers
from turbozero.play import Game
from turbozero.play.games import agent_turn_marks, game_view, move_choices

#: a couple of seconds of training on a warm compilation cache: a run for `load_agent`
TINY_CHANCE = dict(
    num_games=4,
    network=NetworkConfig(kind="mlp", hidden=(16,)),
    max_episode_steps=12,
    memory_capacity=16,
    train_batch_size=8,
    warmup_steps=0,
    collection_steps_per_epoch=4,
    train_steps_per_epoch=2,
    num_epochs=1,
    eval_games=2,
    eval_record_games=0,
)
TINY_2048 = AlphaZeroConfig(
    env="2048",
    search=SearchConfig(selector="muzero_puct", num_simulations=4, max_nodes=12),
    truncation="bootstrap",
    value_scale=100.0,
    eval_opponents=(),
    **TINY_CHANCE,  # type: ignore[arg-type]
)
TINY_BACKGAMMON = AlphaZeroConfig(
    env="backgammon",
    search=SearchConfig(num_simulations=4, max_nodes=12),
    eval_opponents=("random",),
    **TINY_CHANCE,  # type: ignore[arg-type]
)
# a move as players write it, with its die: "13/8 (die 5)", "bar/22* (die 3)", "6/off (die 6)"
MOVE = re.compile(r"^(bar|\d{1,2})/(off|\d{1,2})(\*?) \(die ([1-6])\)$")
PASS = "no move (pass)"


@pytest.fixture(scope="session")
def run_2048(tmp_path_factory):
    """A one-epoch 2048 run directory."""
    run = tmp_path_factory.mktemp("play") / "2048"
    train(TINY_2048, run, progress=False)
    return run


@pytest.fixture(scope="session")
def run_backgammon(tmp_path_factory):
    """A one-epoch backgammon run directory."""
    run = tmp_path_factory.mktemp("play") / "backgammon"
    train(TINY_BACKGAMMON, run, progress=False)
    return run


def serve_game(run, seed: int = 0):
    game = Game(turbozero.load_agent(run), human_first=True, seed=seed)
    game.warm_up()
    return game


@pytest.fixture(scope="module")
def served_2048(run_2048):
    """`(url, game)`: a server for a 2048 game, in a thread."""
    game = serve_game(run_2048)
    with running(game) as url:
        yield url, game


@pytest.fixture(scope="module")
def served_backgammon(run_backgammon):
    """`(url, game)`: a server for a backgammon game against the tiny run's agent."""
    game = serve_game(run_backgammon)
    with running(game) as url:
        yield url, game


def move(url: str, action: int) -> dict:
    status, state = request(url, "/api/move", {"action": action})
    assert status == 200, state
    return state


def replay_outcomes(game: Game, history: list[dict]):
    """The game's first state stepped through the history with the outcomes it records (the
    chance split, `Env.chance`), and the summed rewards: what the page claims happened."""
    chance = game.env.chance
    decide, resolve = jax.jit(chance.decide), jax.jit(chance.resolve)
    state = game._plies[0].state
    returns = np.zeros(game.env.num_players)
    for h in history:
        state, meta = resolve(decide(state, h["action"]), jnp.int32(h["outcome"] or 0))
        returns += np.asarray(meta.rewards)
    return state, returns


# ------------------------------------------------------------------------------ 2048


@pytest.mark.slow  # (serves a trained run: see the module's docstring)
def test_a_one_player_game_is_served_with_its_tiles_score_and_arrow_keys(served_2048):
    url, _ = served_2048
    for human_first in (True, False):  # a one-player game is the human's whatever is asked
        state = new_game(url, human_first)
        assert (state["env"], state["players"], state["to_move"]) == ("2048", 1, "human")
        assert state["human_first"] and state["history"] == [] and state["score"] == 0
        assert state["svg"].startswith("<svg") and state["chance"] is None
        tiles = np.array(state["tiles"])
        assert tiles.shape == (4, 4) and np.count_nonzero(tiles) == 2
        assert set(tiles[tiles > 0].tolist()) <= {2, 4}
        assert [m["action"] for m in state["moves"]] == state["legal"]
        names = {0: "left", 1: "up", 2: "right", 3: "down"}
        assert all(m["label"] == names[m["action"]] for m in state["moves"])
        assert state["keys"] == {"ArrowLeft": 0, "ArrowUp": 1, "ArrowRight": 2, "ArrowDown": 3}
        assert state["dice"] is None and state["board_labels"] == []


@pytest.mark.slow  # (serves a trained run: see the module's docstring)
def test_2048_moves_show_the_tile_that_fell_and_add_the_merges_to_the_score(served_2048):
    url, game = served_2048
    rng = random.Random(0)
    state = new_game(url)
    for _ in range(12):
        before = state
        state = move(url, rng.choice(before["legal"]))
        assert len(state["history"]) == len(before["history"]) + 1  # no reply in one player
        last = state["history"][-1]
        assert last["by"] == "human" and last["outcome"] is not None
        found = re.fullmatch(r"a ([24]) at ([a-d])([1-4])", last["chance"])
        assert found and state["chance"]["label"] == last["chance"]
        row, col = int(found.group(3)) - 1, "abcd".index(found.group(2))
        assert state["tiles"][row][col] == int(found.group(1))  # the new tile is on the board
        assert last["outcome"] == 16 * (found.group(1) == "4") + 4 * row + col
        x, y, r = state["chance"]["cell"]  # where pgx draws that cell: 50 units from (25, 25)
        assert (x, y, r) == (25 + 50 * col + 25, 25 + 50 * row + 25, 25)
        assert state["score"] >= before["score"]
    final, returns = replay_outcomes(game, state["history"])
    tiles = [[2**e if e else 0 for e in row] for row in np.asarray(final._board).reshape(4, 4)]
    assert tiles == state["tiles"]
    assert state["score"] == pytest.approx(returns[0])


@pytest.mark.slow  # (serves a trained run: see the module's docstring)
def test_2048_refuses_illegal_and_malformed_moves_with_400(served_2048):
    url, _ = served_2048
    rng = random.Random(1)
    state = new_game(url)
    for bad in (4, -1, "0", True, None, 1.0):
        status, answer = request(url, "/api/move", {"action": bad})
        assert status == 400 and answer["error"], bad
    for _ in range(500):  # play on until a direction changes nothing
        if len(state["legal"]) < 4:
            break
        state = move(url, rng.choice(state["legal"])) if not state["over"] else new_game(url)
    illegal = next(a for a in range(4) if a not in state["legal"])
    status, answer = request(url, "/api/move", {"action": illegal})
    assert status == 400 and "illegal move" in answer["error"]
    assert request(url, "/api/state")[1]["history"] == state["history"]


@pytest.mark.slow  # (serves a trained run: see the module's docstring)
def test_the_agent_moves_in_a_one_player_game_when_asked_and_undo_takes_it_back(served_2048):
    url, game = served_2048
    state = move(url, new_game(url)["legal"][0])
    status, after = request(url, "/api/agent", {})
    assert status == 200
    assert [h["by"] for h in after["history"]] == ["human", "agent"]
    reply = after["reply"]
    assert reply["action"] == after["history"][-1]["action"] and reply["label"] in (
        "left",
        "up",
        "right",
        "down",
    )
    assert after["history"][-1]["outcome"] is not None and after["to_move"] == "human"
    n = game.compiled_policy._cache_size()
    request(url, "/api/agent", {})
    assert game.compiled_policy._cache_size() == n == 1  # no compilation per move
    request(url, "/api/undo", {})
    status, undone = request(url, "/api/undo", {})  # the agent's move, then the human's
    assert status == 200 and undone["history"] == state["history"]
    request(url, "/api/undo", {})
    assert request(url, "/api/undo", {})[0] == 400  # nothing left


@pytest.mark.slow  # (serves a trained run: see the module's docstring)
def test_a_finished_one_player_game_says_its_score(served_2048):
    url, game = served_2048
    rng = random.Random(2)
    state = new_game(url)
    while not state["over"]:
        state = move(url, rng.choice(state["legal"]))
    _, returns = replay_outcomes(game, state["history"])
    result = state["result"]
    assert result["winner"] is None and result["returns"] == [pytest.approx(returns[0])]
    assert result["text"] == f"Game over: score {returns[0]:g}."
    assert state["score"] == pytest.approx(returns[0]) and state["legal"] == []
    assert state["to_move"] is None and state["moves"] == []
    for path, body in (("/api/move", {"action": 0}), ("/api/agent", {})):
        status, answer = request(url, path, body)
        assert status == 400 and "over" in answer["error"]


# ------------------------------------------------------------------------------ backgammon


def check_move_list(state: dict) -> None:
    """The move list offers each legal checker move once, named as players name them; pgx's
    six no-op ids (legal together, when no checker can move) are one choice, the pass."""
    legal, moves = state["legal"], state["moves"]
    labels = [m["label"] for m in moves]
    if set(legal) == set(range(6)):
        assert moves == [{"action": 0, "label": PASS}]
        return
    assert sorted(m["action"] for m in moves) == legal  # one to one with the mask
    assert len(set(labels)) == len(labels)
    for m in moves:
        found = MOVE.match(m["label"])
        assert found, m["label"]
        start, end, die = backgammon_move(m["action"])  # type: ignore[misc]
        assert int(found.group(4)) == die and die in state["dice"]["left"]
        assert found.group(1) == ("bar" if start == 25 else str(start))
        assert found.group(2) == ("off" if end == 0 else str(end))
        if end:
            assert start - die == end  # a point the die reaches


@pytest.mark.slow  # (serves a trained run: see the module's docstring)
def test_backgammon_shows_the_dice_and_its_moves_one_to_one_with_the_legal_mask(
    served_backgammon,
):
    url, _ = served_backgammon
    rng = random.Random(3)
    state = new_game(url)
    assert state["players"] == 2 and state["score"] is None and state["svg"].startswith("<svg")
    assert state["colour"] in ("black", "white") and state["tiles"] is None
    numbers = sorted(int(label[0]) for label in state["board_labels"] if label[0].isdigit())
    assert numbers == list(range(1, 25))
    rolls = 0
    for _ in range(20):
        if state["over"]:
            break
        dice = state["dice"]
        assert dice["player"] == "human" and state["to_move"] == "human"
        assert all(1 <= d <= 6 for d in dice["rolled"]) and dice["left"]
        check_move_list(state)
        before = len(state["history"])
        state = move(url, rng.choice(state["moves"])["action"])
        rolls += sum(h["chance"] is not None for h in state["history"][before:])
        for h in state["history"][before:]:
            roller = "you" if h["by"] == "agent" else "the agent"  # the next to move rolls
            assert h["chance"] is None or re.fullmatch(rf"{roller} rolled [1-6]-[1-6]", h["chance"])
    assert rolls >= 2  # turns passed, and the page said what was rolled


@pytest.mark.slow  # (serves a trained run: see the module's docstring)
def test_backgammon_replies_play_the_dice_rolled_after_the_human_turn(served_backgammon):
    """Each roll in the history is the dice of the player who moves next: the agent's moves
    after the human's turn use its dice, and the human's dice are the agent's last roll."""
    url, game = served_backgammon
    rng = random.Random(4)
    state = new_game(url)
    checked = 0
    while not state["over"] and checked < 3:
        before = len(state["history"])
        state = move(url, rng.choice(state["moves"])["action"])
        new = state["history"][before:]
        if len(new) == 1:
            continue  # the human's turn goes on
        rolled = new[0]["outcome"]
        assert rolled is not None  # the turn passed: the agent's dice were rolled
        dice = {rolled // 6 + 1, rolled % 6 + 1}
        for h in new[1:]:
            assert h["by"] == "agent"
            found = MOVE.match(h["label"])
            assert h["label"] == PASS or (found and int(found.group(4)) in dice)
        if not state["over"]:
            last = new[-1]["outcome"]
            assert state["dice"]["rolled"] == [last // 6 + 1, last % 6 + 1]
            assert state["chance"]["label"] == new[-1]["chance"]
        checked += 1
    final, _ = replay_outcomes(game, state["history"])
    assert np.array_equal(np.asarray(final._board), np.asarray(game._plies[-1].state._board))


@pytest.mark.slow  # (serves a trained run: see the module's docstring)
def test_the_agent_does_not_move_for_the_human_in_a_two_player_game(served_backgammon):
    url, _ = served_backgammon
    state = new_game(url)
    status, answer = request(url, "/api/agent", {})
    assert status == 400 and "one-player games only" in answer["error"]
    assert request(url, "/api/state")[1]["history"] == state["history"]
    for bad in (156, -1, "14", None):
        assert request(url, "/api/move", {"action": bad})[0] == 400, bad
    illegal = next(a for a in range(6, 156) if a not in state["legal"])
    status, answer = request(url, "/api/move", {"action": illegal})
    assert status == 400 and "illegal move" in answer["error"]


# --------------------------------------------------------------------- backgammon's names


def _state(board: list[int], dice: tuple[int, int] = (2, 0)) -> SimpleNamespace:
    """A host backgammon position from the mover's side (pgx's `_board`, 28 entries)."""
    playable = [dice[0]] * 4 if dice[0] == dice[1] else [*dice, -1, -1]
    return SimpleNamespace(
        _board=np.array(board),
        _dice=np.array(dice),
        _playable_dice=np.array(playable),
        _turn=np.int32(0),
        current_player=np.int32(0),
    )


@functools.cache
def _legal_mask_program():
    """pgx's legal-move mask of backgammon, compiled once (op by op: about a hundred programs)."""
    import pgx.backgammon as bg

    return jax.jit(bg._legal_action_mask)


def _legal(state: SimpleNamespace) -> list[int]:
    mask = _legal_mask_program()(jnp.asarray(state._board), jnp.asarray(state._playable_dice))
    return [int(a) for a in np.flatnonzero(np.asarray(mask))]


START = [2, 0, 0, 0, 0, -5, 0, -3, 0, 0, 0, 5, -5, 0, 0, 0, 3, 0, 5, 0, 0, 0, 0, -2, 0, 0, 0, 0]


def test_the_opening_moves_are_named_as_players_write_them():
    state = _state(START, dice=(2, 0))  # a 3 and a 1
    labels = {m["label"] for m in move_choices("backgammon", state, _legal(state))}
    assert labels == {
        "24/21 (die 3)",
        "13/10 (die 3)",
        "8/5 (die 3)",
        "6/3 (die 3)",
        "24/23 (die 1)",
        "8/7 (die 1)",
        "6/5 (die 1)",
    }  # 13/12 lands on the opponent's five checkers


def test_a_hit_entering_from_the_bar_and_bearing_off_are_named():
    board = [0] * 28
    board[24] = 1  # one of ours on the bar
    board[2] = -1  # a lone opposing checker on our 22-point
    state = _state(board, dice=(2, 4))  # a 3 and a 5
    labels = [m["label"] for m in move_choices("backgammon", state, _legal(state))]
    assert labels == ["bar/20 (die 5)", "bar/22* (die 3)"]  # the larger die first
    home = [0] * 28
    home[21], home[26] = 1, 14  # our last checker on the 3-point
    state = _state(home, dice=(5, 1))  # a 6 and a 2
    labels = [m["label"] for m in move_choices("backgammon", state, _legal(state))]
    assert labels == ["3/off (die 6)", "3/1 (die 2)"]


def test_no_legal_move_is_one_pass_for_pgx_six_no_op_ids():
    board = [0] * 28
    board[24] = 1  # on the bar, and the opponent holds our 24- to 19-points
    for index in range(6):
        board[index] = -2
    state = _state(board, dice=(3, 4))
    assert _legal(state) == list(range(6))
    assert move_choices("backgammon", state, _legal(state)) == [{"action": 0, "label": PASS}]


def test_point_numbers_lie_on_the_columns_pgx_draws_the_checkers_in():
    env = turbozero.envs.make("backgammon")
    state, _ = env.init(jax.random.PRNGKey(0))
    svg = env.render_svg(jax.device_get(state))
    assert "translate(12.5,12.5)" in svg
    columns = {float(x) + 12.5 for x in re.findall(r'<circle cx="([\d.]+)"', svg)}
    black = {int(n): (x, y) for n, x, y in point_numbers(black=True)}
    white = {int(n): (x, y) for n, x, y in point_numbers(black=False)}
    for n in (24, 13, 8, 6):  # black's checkers at the start: its 24-, 13-, 8- and 6-points
        assert black[n][0] in columns and white[25 - n] == black[n]
    view = game_view("backgammon", jax.device_get(state), human_player=0)
    mover_is_black = int(state._turn) == 0
    human_is_black = mover_is_black == (int(state.current_player) == 0)
    assert view["colour"] == ("black" if human_is_black else "white")
    assert view["board_labels"][:24] == point_numbers(black=human_is_black)


def _action(start: int, die: int) -> int:
    """pgx's action for a move from `start` (the mover's numbering, 25 the bar) with `die`."""
    source = 1 if start == 25 else 24 - start + 2
    return 6 * source + die - 1


def test_the_agents_moves_are_arrows_between_the_points_numbered_from_the_movers_side():
    black = {int(n): (x, y) for n, x, y in point_numbers(black=True)}
    assert backgammon_move(_action(13, 5)) == (13, 8, 5)
    assert backgammon_marks(_action(13, 5), mover_black=True) == [*black[13], *black[8]]
    # white's 13-point is black's 12-point: the same move lies on the mirrored points
    assert backgammon_marks(_action(13, 5), mover_black=False) == [*black[12], *black[17]]
    x1, y1, x2, y2 = backgammon_marks(_action(25, 3), mover_black=True)  # from the bar
    assert (x2, y2) == black[22]
    assert 6 * 25 < x1 < 8 * 25  # the bar: between the two halves of the board
    off_box = off_labels(human_black=True)[0]  # black's box is the top one
    assert off_box[0] == "your checkers off"
    x1, y1, x2, y2 = backgammon_marks(_action(3, 6), mover_black=True)  # bearing off
    assert (x1, y1) == black[3] and x2 == off_box[1] and y2 < off_box[2]
    assert backgammon_marks(0, mover_black=True) is None  # a pass moves nothing
    state = _state(START)
    assert agent_turn_marks("backgammon", [(state, _action(13, 5)), (state, 0)]) == [
        backgammon_marks(_action(13, 5), mover_black=True)
    ]
    assert agent_turn_marks("tic_tac_toe", [(state, 4)]) == []


def test_the_page_names_whose_checkers_are_off_and_how_each_side_numbers_its_points():
    state = _state(START)  # black to move, player 0
    mine = game_view("backgammon", state, human_player=0)
    theirs = game_view("backgammon", state, human_player=1)
    assert mine["colour"] == "black" and theirs["colour"] == "white"
    assert [t for t, _, _ in mine["board_labels"][24:]] == ["your checkers off", "the agent's off"]
    assert [t for t, _, _ in theirs["board_labels"][24:]] == [
        "the agent's off",
        "your checkers off",
    ]
    assert "agent's 24-point is your 1-point" in mine["history_note"]


def test_2048_keeps_a_button_for_each_arrow_key_in_a_fixed_order():
    env = turbozero.envs.make("2048")
    state, _ = env.init(jax.random.PRNGKey(0))
    view = game_view("2048", jax.device_get(state), human_player=0)
    assert [m["key"] for m in view["key_moves"]] == [
        "ArrowLeft",
        "ArrowUp",
        "ArrowRight",
        "ArrowDown",
    ]
    assert [m["label"] for m in view["key_moves"]] == ["left", "up", "right", "down"]
    assert all(view["keys"][m["key"]] == m["action"] for m in view["key_moves"])
