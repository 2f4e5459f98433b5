"""The play server: a game kept by the server, driven over HTTP as the page drives it."""

from __future__ import annotations

import contextlib
import json
import random
import re
import socket
import threading
import urllib.error
import urllib.request

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import turbozero
from turbozero.alphazero import train
from turbozero.config import get_preset
from turbozero.gamespec import move_label
from turbozero.play import Game, board_cells, make_server
from turbozero.play.server import url_of

TINY_RUN = [
    "num_games=8",
    "train_batch_size=16",
    "collection_steps_per_epoch=9",
    "num_epochs=1",
    "eval_every=1",
    "eval_games=4",
    "eval_opponents=random",
    "search.num_simulations=8",
    "search.max_nodes=12",
    "memory_capacity=16",
    "warmup_steps=0",
    "augment=false",
    "train_steps_per_epoch=4",
    "eval_simulations=0",
    "eval_accuracy=false",
]


@pytest.fixture(scope="session")
def tiny_run(tmp_path_factory):
    """A one-epoch tic-tac-toe run directory (seconds with a warm compilation cache)."""
    run = tmp_path_factory.mktemp("play") / "ttt"
    train(get_preset("tic_tac_toe").make().with_overrides(TINY_RUN), run, progress=False)
    return run


@contextlib.contextmanager
def running(game: Game, **kwargs):
    """The URL of a server for `game` (`make_server(game, port=0, **kwargs)`), in a thread."""
    server = make_server(game, port=0, **kwargs)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield url_of(server)
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


@pytest.fixture(scope="module")
def served(tiny_run):
    """`(url, game)`: a server for one game against the tiny run's agent, in a thread."""
    game = Game(turbozero.load_agent(tiny_run), human_first=True, seed=0)
    game.warm_up()
    with running(game) as url:
        yield url, game


def request(url: str, path: str, body=None) -> tuple[int, dict]:
    """`(status, json)` of a GET (no body) or a POST of `body` as JSON."""
    data = None if body is None else json.dumps(body).encode()
    method = "GET" if body is None else "POST"
    req = urllib.request.Request(
        url + path.lstrip("/"),
        data=data,
        method=method,
        headers={"Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(req, timeout=60) as response:
            return response.status, json.load(response)
    except urllib.error.HTTPError as err:
        with err:
            return err.code, json.load(err)


def new_game(url: str, human_first: bool = True) -> dict:
    status, state = request(url, "/api/new", {"human_first": human_first})
    assert status == 200
    return state


def replay(env, history: list[dict]) -> tuple[np.ndarray, list[bool]]:
    """The env's summed rewards of (first mover, second mover) over `history`, and whether each
    move was legal where it was played."""
    init, step = jax.jit(env.init), jax.jit(env.step)
    state, meta = init(jax.random.PRNGKey(0))
    first = int(meta.cur_player_id)
    returns = np.asarray(meta.rewards, np.float64)
    legal = []
    for h in history:
        legal.append(bool(meta.action_mask[h["action"]]) and not bool(meta.terminated))
        state, meta = step(state, h["action"], jax.random.PRNGKey(0))
        returns = returns + np.asarray(meta.rewards, np.float64)
    assert bool(meta.terminated)
    return returns[[first, 1 - first]], legal


def test_state_has_the_board_svg_and_the_legal_moves(served):
    url, _ = served
    state = new_game(url)
    assert state["env"] == "tic_tac_toe"
    assert state["svg"].startswith("<svg")
    assert state["to_move"] == "human" and not state["over"] and state["history"] == []
    assert state["legal"] == list(range(9))
    assert [m["label"] for m in state["moves"]][:3] == ["a1", "b1", "c1"]
    assert sorted(c[0] for c in state["cells"]) == list(range(9))


def test_the_page_and_its_files_are_served_from_the_package(served):
    url, _ = served
    with urllib.request.urlopen(url, timeout=10) as response:
        page = response.read().decode()
    assert "/static/app.js" in page and not re.search(r'(src|href)="(https?:)?//', page)
    for name in ("app.js", "style.css"):
        with urllib.request.urlopen(url + "static/" + name, timeout=10) as response:
            assert response.status == 200 and response.read()
    assert request(url, "/static/../server.py")[0] == 404
    assert request(url, "/api/nothing")[0] == 404


def test_illegal_moves_are_refused_with_400_and_a_json_error(served):
    url, _ = served
    new_game(url)
    status, state = request(url, "/api/move", {"action": 4})
    assert status == 200
    for bad in (4, 9, -1, "4", True, None, 2.0):
        status, answer = request(url, "/api/move", {"action": bad})
        assert status == 400 and answer["error"], bad
    assert request(url, "/api/move", {})[0] == 400
    assert request(url, "/api/move", [4])[0] == 400
    assert request(url, "/api/new", {"human_first": "yes"})[0] == 400
    assert "illegal" in request(url, "/api/move", {"action": 4})[1]["error"]
    assert request(url, "/api/state")[1]["history"] == state["history"]  # nothing changed


def test_a_legal_move_gets_a_legal_agent_reply_with_value_and_top_moves(served):
    url, game = served
    before = new_game(url)
    status, state = request(url, "/api/move", {"action": 4})
    assert status == 200
    human, agent = state["history"]
    assert (human["by"], human["action"], agent["by"]) == ("human", 4, "agent")
    assert agent["action"] in before["legal"] and agent["action"] != 4
    assert agent["action"] not in state["legal"]
    reply = state["reply"]
    assert reply["action"] == agent["action"] and -1.0 <= reply["value"] <= 1.0
    assert reply["searched"] is True  # (the page heads its weights "search weight")
    assert reply["value_unit"] == "outcome"  # (-1 loses, +1 wins)
    weights = [t["weight"] for t in reply["top"]]
    assert weights == sorted(weights, reverse=True) and sum(weights) <= 1.0 + 1e-5
    assert {t["action"] for t in reply["top"]} <= set(before["legal"]) - {4}
    assert state["to_move"] == "human" and state["can_undo"]


def test_replies_do_not_compile_the_policy_again(served):
    url, game = served
    new_game(url)
    n = game.compiled_policy._cache_size()
    request(url, "/api/move", {"action": 0})
    request(url, "/api/move", {"action": request(url, "/api/state")[1]["legal"][0]})
    assert game.compiled_policy._cache_size() == n == 1


def test_undo_restores_the_position_before_the_human_move(served):
    url, _ = served
    new_game(url)
    request(url, "/api/move", {"action": 0})
    _, before = request(url, "/api/state")
    _, after = request(url, "/api/move", {"action": before["legal"][-1]})
    assert len(after["history"]) == len(before["history"]) + 2
    status, undone = request(url, "/api/undo", {})
    assert status == 200
    for k in ("svg", "legal", "history", "to_move", "reply", "over"):
        assert undone[k] == before[k], k
    request(url, "/api/undo", {})
    status, answer = request(url, "/api/undo", {})
    assert status == 400 and "nothing to undo" in answer["error"]


def test_agent_first_game_opens_with_the_agents_move_that_cannot_be_undone(served):
    url, _ = served
    state = new_game(url, human_first=False)
    assert [h["by"] for h in state["history"]] == ["agent"]
    assert state["to_move"] == "human" and len(state["legal"]) == 8 and not state["can_undo"]
    assert state["reply"]["action"] == state["history"][0]["action"]
    assert request(url, "/api/undo", {})[0] == 400


@pytest.mark.parametrize("human_first", [True, False])
def test_a_full_game_ends_with_the_result_of_the_environment_rewards(served, human_first):
    url, game = served
    rng = random.Random(int(human_first))
    state = new_game(url, human_first)
    while not state["over"]:
        status, state = request(url, "/api/move", {"action": rng.choice(state["legal"])})
        assert status == 200
    (first, second), legal = replay(game.env, state["history"])
    assert all(legal)  # the agent's replies included
    human, agent = (first, second) if human_first else (second, first)
    result = state["result"]
    np.testing.assert_allclose(result["returns"][state["human_player"]], human)
    np.testing.assert_allclose(result["returns"][1 - state["human_player"]], agent)
    expected = "human" if human > agent else "agent" if agent > human else "draw"
    assert result["winner"] == expected
    assert state["legal"] == [] and state["to_move"] is None
    assert request(url, "/api/move", {"action": 0})[0] == 400
    # the line that won is drawn (three cells in a row of the winner's marks), a draw has none
    line = state["winning_cells"]
    if expected == "draw":
        assert line == []
    else:
        assert len(line) == 3 and all(any(c[1:3] == p for c in state["cells"]) for p in line)
        (x0, y0), (x1, y1), (x2, y2) = line
        assert (x1 - x0, y1 - y0) == (x2 - x1, y2 - y1)  # a straight line


def test_the_board_names_its_columns_and_rows_in_its_margin_and_says_which_mark_is_yours(served):
    url, game = served
    for human_first, mark in ((True, "X"), (False, "O")):
        state = new_game(url, human_first=human_first)
        assert state["colour"] == mark
        labels = {text: (x, y) for text, x, y in state["board_labels"]}
        assert sorted(labels) == ["1", "2", "3", "a", "b", "c"]
        cells = {c[0]: c[1:] for c in state["cells"]}
        for action in range(9):  # "b3" names the cell under "b" and beside "3"
            name = move_label("tic_tac_toe", action)
            x, y, r = cells[action]
            assert labels[name[0]][0] == x and labels[name[0]][1] < y - r  # above the board
            assert labels[name[1]][1] == y and labels[name[1]][0] < x - r  # left of it
        human = state["legal"][0]
        request(url, "/api/move", {"action": human})  # the mark it draws is the one named
        ply = next(p for p in game._plies if p.mover == "human")
        assert ("X", "O")[int(np.asarray(ply.state._x.board)[human])] == mark


def test_the_last_move_is_marked_on_its_cell(served):
    url, _ = served
    state = new_game(url, human_first=True)
    assert state["last_cell"] is None
    _, state = request(url, "/api/move", {"action": 4})
    reply = state["history"][-1]["action"]
    assert state["last_cell"] == next(c[1:] for c in state["cells"] if c[0] == reply)


def test_an_agent_that_moves_first_is_compiled_before_its_move_is_timed(tiny_run):
    calls = []

    class Spy(Game):
        def warm_up(self):
            calls.append("warm_up")
            return super().warm_up()

        def _policy(self, *args):
            calls.append("policy")
            return super()._policy(*args)

    game = Spy(turbozero.load_agent(tiny_run), human_first=False, seed=0)
    # compiled on the start position first, then the opening move (its time is thinking time)
    assert calls == ["warm_up", "policy", "policy"]
    assert game.snapshot()["history"][0]["by"] == "agent"
    game.warm_up()  # what serve() calls next: nothing left to compile
    assert game.compiled_policy._cache_size() == 1


def test_a_busy_port_gives_a_free_one(served):
    _, game = served
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        server = make_server(game, port=port)
        try:
            host, other = server.server_address[:2]
            assert host == "127.0.0.1" and other not in (0, port)
            assert url_of(server) == f"http://127.0.0.1:{other}/"
        finally:
            server.server_close()


def _drawn_centres(svg_before: str, svg_after: str) -> list[tuple[float, float]]:
    """Centres of the shapes `svg_after` adds, in the SVG's user units (pgx translations)."""
    shapes = re.compile(r"<(circle|line|polygon)[^>]*>")
    old = set(m.group(0) for m in shapes.finditer(svg_before))
    dx = sum(float(t.split(",")[0]) for t in re.findall(r"translate\(([^)]*)\)", svg_after))
    dy = sum(float(t.split(",")[1]) for t in re.findall(r"translate\(([^)]*)\)", svg_after))
    out = []
    for m in shapes.finditer(svg_after):
        tag = m.group(0)
        if tag in old:
            continue
        a = dict(re.findall(r'(\w+)="([^"]*)"', tag))
        if m.group(1) == "circle":
            x, y = float(a["cx"]), float(a["cy"])
        elif m.group(1) == "line":
            x, y = (float(a["x1"]) + float(a["x2"])) / 2, (float(a["y1"]) + float(a["y2"])) / 2
        else:
            pts = np.array([p.split(",") for p in a["points"].split()], float)
            x, y = pts.mean(0)
        out.append((x + dx, y + dy))
    return out


@pytest.mark.parametrize(("name", "action"), [("tic_tac_toe", 5), ("connect_four", 3)])
def test_board_cells_lie_where_pgx_draws_the_stone(name, action):
    env = turbozero.envs.make(name)
    state, _ = env.init(jax.random.PRNGKey(0))
    after, _ = env.step(state, action, jax.random.PRNGKey(0))
    drawn = _drawn_centres(env.render_svg(state), env.render_svg(after))
    cells = [(x, y) for a, x, y, _ in board_cells(name) if a == action]
    assert any(np.hypot(x - cx, y - cy) < 1.0 for x, y in drawn for cx, cy in cells)


def test_an_agent_that_fails_to_reply_leaves_the_human_to_move(served):
    """An agent that returns an action outside the game (a bug in a user's agent) is an error,
    and the human's move is taken back with it, instead of leaving the game at the agent's turn
    where every later move would be refused."""
    _, game = served
    from turbozero.arena.agents import AgentOutput

    class Broken:
        env = game.env

        @staticmethod
        def policy(states, key):
            A = game.env.num_actions
            action = jnp.full((1,), A, jnp.int32)
            return AgentOutput(action=action, weights=jnp.ones((1, A)) / A, value=jnp.zeros(1))

    broken = Game(Broken(), human_first=True)
    assert broken.agent_name == "agent"
    with pytest.raises(RuntimeError, match=f"illegal action {game.env.num_actions}"):
        broken.move(4)
    state = broken.snapshot()
    assert state["to_move"] == "human" and state["history"] == []
    # a new game the agent must open fails the same way and leaves the game before it
    with pytest.raises(RuntimeError, match=f"illegal action {game.env.num_actions}"):
        broken.new(human_first=False)
    after = broken.snapshot()
    assert after == state and broken.human_first


def _raw_post(url, path, body: bytes, headers: dict[str, str]):
    import http.client

    host, port = url.split("//", 1)[1].rstrip("/").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    conn.putrequest("POST", path, skip_host="Host" in headers)
    for name, value in {"Content-Length": str(len(body)), **headers}.items():
        conn.putheader(name, value)
    conn.endheaders()
    if body:
        conn.send(body)
    response = conn.getresponse()
    status, answer = response.status, json.load(response)
    conn.close()
    return status, answer


@pytest.mark.parametrize(
    "body", [b"\xff", b"[" * 4000, b'{"action": 1e400000}'], ids=["not utf-8", "deep", "huge"]
)
def test_a_body_that_is_not_json_is_refused_with_400(served, body):
    url, _ = served
    new_game(url)
    status, answer = _raw_post(url, "/api/move", body, {})
    assert status == 400 and answer["error"], answer


def test_a_body_naming_a_key_twice_is_refused_with_400_and_applies_nothing(served):
    url, _ = served
    state = new_game(url)
    status, answer = _raw_post(url, "/api/move", b'{"action": 1, "action": 2}', {})
    assert status == 400 and "'action' twice" in answer["error"], answer
    assert request(url, "/api/state")[1]["history"] == state["history"]


def test_a_move_sent_by_a_page_of_another_site_is_refused(served):
    url, _ = served
    state = new_game(url)
    host = url.split("//", 1)[1].rstrip("/")
    body = json.dumps({"action": 4}).encode()
    status, answer = _raw_post(url, "/api/move", body, {"Origin": "https://example.com"})
    assert status == 403 and "own page" in answer["error"]
    assert request(url, "/api/state")[1]["history"] == state["history"]
    port = host.rsplit(":", 1)[1]
    rebound = {"Host": f"evil.example:{port}", "Origin": f"http://evil.example:{port}"}
    assert _raw_post(url, "/api/move", body, rebound)[0] == 403  # a name pointed at 127.0.0.1
    status, _ = _raw_post(url, "/api/move", body, {"Origin": f"http://{host}"})
    assert status == 200  # the page itself


def test_a_get_of_a_post_route_says_so_and_an_unknown_post_route_is_404(served):
    url, _ = served
    assert request(url, "/api/move") == (405, {"error": "/api/move takes POST"})
    assert _raw_post(url, "/api/nope", b"[[[", {})[0] == 404


@pytest.mark.parametrize("length", ["-1", "many", "\u00b2"])
def test_a_malformed_content_length_is_refused_with_400(served, length):
    import http.client

    url, _ = served
    host, port = url.split("//", 1)[1].rstrip("/").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    conn.putrequest("POST", "/api/move")
    conn.putheader("Content-Length", length)
    conn.endheaders()
    response = conn.getresponse()
    assert response.status == 400 and "Content-Length" in json.load(response)["error"]
    conn.close()


def _raw(url: str, data: bytes, *, shut_write: bool = True, timeout: float = 30) -> bytes:
    """Send raw bytes to the server and read until it closes the connection."""
    import socket

    host, port = url.split("//", 1)[1].rstrip("/").split(":")
    with socket.create_connection((host, int(port)), timeout=timeout) as sock:
        sock.sendall(data)
        if shut_write:
            sock.shutdown(socket.SHUT_WR)
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


def test_every_route_checks_the_host_asked_for(served):
    url, _ = served
    port = url.rstrip("/").rsplit(":", 1)[1]
    for path in ("/api/state", "/", "/app.js"):
        head = f"GET {path} HTTP/1.1\r\nHost: evil.example:{port}\r\nConnection: close\r\n\r\n"
        answer = _raw(url, head.encode(), shut_write=False)
        assert answer.startswith(b"HTTP/1.1 403"), answer[:80]
        assert b'"history"' not in answer
    head = f"GET /api/state HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n"
    assert _raw(url, head.encode(), shut_write=False).startswith(b"HTTP/1.1 200")


def test_a_body_shorter_than_its_content_length_is_400_and_applies_nothing(served):
    _, game = served
    with running(game, read_timeout=0.5) as url:
        state = new_game(url)
        port = url.rstrip("/").rsplit(":", 1)[1]
        body = b'{"action": 4}'
        head = f"POST /api/move HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Length: 40\r\n\r\n"
        answer = _raw(url, head.encode() + body, shut_write=False)  # then the client stops sending
        assert answer.startswith(b"HTTP/1.1 400") and b"shorter than its Content-Length" in answer
        assert b"(13 of 40 bytes)" in answer
        assert request(url, "/api/state")[1]["history"] == state["history"]
        # a client that closes its side mid-body has left: dropped without an answer
        assert _raw(url, head.encode() + body) == b""
        assert request(url, "/api/state")[1]["history"] == state["history"]


def test_a_stalled_connection_is_dropped_and_says_nothing(served, capfd):
    import time

    _, game = served
    with running(game, read_timeout=0.5) as url:
        start = time.perf_counter()
        assert _raw(url, b"GET /api/st", shut_write=False, timeout=30) == b""  # closed on us
        assert time.perf_counter() - start < 10
        port = url.rstrip("/").rsplit(":", 1)[1]
        head = f"POST /api/new HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Length: 30\r\n\r\n"
        answer = _raw(url, head.encode() + b"{", shut_write=False)  # a body that never comes
        assert answer.startswith(b"HTTP/1.1 400")
    assert "Traceback" not in capfd.readouterr().err


@pytest.mark.slow
def test_ctrl_c_stops_the_play_command_without_a_traceback(tiny_run):
    """`turbozero play` serves until Ctrl-C, then exits 0 and prints nothing more, also with a
    browser's idle connection open (uvicorn closes it and hands the interrupt back to `serve`)."""
    import os
    import signal
    import subprocess
    import sys

    from tests.subprocesses import pythonpath

    env = {**os.environ, "PYTHONPATH": pythonpath()}
    cmd = [sys.executable, "-m", "turbozero.cli", "play", str(tiny_run), "--no-browser"]
    proc = subprocess.Popen(
        [*cmd, "--port", "0"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None
        lines = [proc.stdout.readline(), proc.stdout.readline()]
        found = re.search(r"ready in .*: (http://\S+)", lines[-1])
        assert found, lines
        url = found.group(1)
        assert request(url, "/api/state")[0] == 200
        host, port = url.split("//", 1)[1].rstrip("/").split(":")
        with socket.create_connection((host, int(port)), timeout=30):
            proc.send_signal(signal.SIGINT)
            out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    assert out == "" and "Traceback" not in err, (out, err)


def test_a_result_says_the_points_won_where_a_game_scores_more_than_one():
    from turbozero.play.session import result_text

    assert result_text(-1.0, 1.0) == ("agent", "The agent wins.")
    assert result_text(2.0, -2.0) == ("human", "You win (2 points)!")
    assert result_text(-3.0, 3.0) == ("agent", "The agent wins (3 points).")
    assert result_text(0.0, 0.0) == ("draw", "Draw.")


def test_a_play_session_deals_new_dice_each_start_unless_given_a_seed(capsys):
    """Without `--seed` each start draws its own (said on the ready line); a seed outside
    [0, 2**31) is refused by name before anything loads."""
    from turbozero.cli import main
    from turbozero.play.server import serve
    from turbozero.play.session import fresh_seed

    seeds = {fresh_seed() for _ in range(8)}
    assert len(seeds) > 1 and all(0 <= s < 2**31 for s in seeds)
    with pytest.raises(ValueError, match=r"seed must be an int in \[0, 2\*\*31 - 1\]"):
        serve(None, engine="random", game_id="tic_tac_toe", seed=-1)
    code = main(["play", "--engine", "random", "--game", "tic_tac_toe", "--seed", "-1"])
    assert code != 0 and "--seed" in capsys.readouterr().err
