"""The play page in headless Chromium: clicks on the board play whole games against the agent.

The page's `?autoplay=N` mode picks random legal moves and plays them by dispatching mouse clicks
at the cells' screen positions, so the page's own click handler maps them back to moves; it then
writes a JSON summary into the DOM, which `--dump-dom` prints. Needs Debian's `chromium`
(`apt-get install -y chromium`).
"""

from __future__ import annotations

import html
import json
import re
import shutil
import struct
import subprocess
import threading

import pytest

import turbozero
from tests.play.test_chance_games import (  # noqa: F401 (fixtures)
    MOVE,
    PASS,
    replay_outcomes,
    run_2048,
    run_backgammon,
    served_2048,
    served_backgammon,
)
from tests.play.test_server import replay, request, tiny_run  # noqa: F401 (fixture)
from turbozero.play import Game, make_server
from turbozero.play.server import url_of

pytestmark = pytest.mark.slow

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1000,720",
    "--virtual-time-budget=60000",  # ms of page time; fetches to the server pause it
]


def run_chromium(tmp_path, url: str, *extra: str) -> str:
    if shutil.which(CHROMIUM) is None:
        pytest.fail(f"{CHROMIUM} is absent: `make check` installs it (apt-get install -y chromium)")
    profile = tmp_path / f"profile-{len(list(tmp_path.iterdir()))}"
    profile.mkdir()
    done = subprocess.run(
        [CHROMIUM, *FLAGS, f"--user-data-dir={profile}", *extra, url],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


@pytest.fixture(scope="module")
def served(tiny_run):  # noqa: F811
    game = Game(turbozero.load_agent(tiny_run), human_first=True, seed=1)
    game.warm_up()
    server = make_server(game, port=0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield url_of(server), game
    server.shutdown()
    server.server_close()
    thread.join()


def autoplay_summary(dom: str) -> dict:
    m = re.search(r'<pre id="autoplay-log"[^>]*>(.*?)</pre>', dom, re.S)
    assert m and m.group(1), dom[-3000:]
    return json.loads(html.unescape(m.group(1)))


@pytest.mark.parametrize("human_first", [True, False])
def test_clicks_in_the_browser_play_a_whole_game_with_legal_replies_and_the_right_result(
    served, tmp_path, human_first
):
    url, game = served
    assert request(url, "/api/new", {"human_first": human_first})[0] == 200
    dom = run_chromium(tmp_path, url + "?autoplay=100&seed=3&undo=1&illegal=1", "--dump-dom")
    summary = autoplay_summary(dom)
    assert summary["error"] is None and summary["done"], summary
    assert 'data-autoplay="done"' in dom
    # every human move was a click on the board (tic-tac-toe has no pass button)
    assert summary["board_clicks"] >= summary["human_moves"] >= 3 and summary["button_clicks"] == 0
    assert summary["undone"]  # the Undo button restored the position
    assert "illegal" in summary["illegal_error"]  # a click on a taken square was refused
    _, state = request(url, "/api/state")
    assert state["over"] and summary["over"]
    assert summary["history"] == state["history"]
    assert state["history"][0]["by"] == ("human" if human_first else "agent")
    (first, second), legal = replay(game.env, state["history"])
    assert all(legal)  # the agent's replies were legal too
    human, agent = (first, second) if human_first else (second, first)
    expected = "human" if human > agent else "agent" if agent > human else "draw"
    assert state["result"]["winner"] == expected
    assert summary["status"] == state["result"]["text"]  # the page says who won
    # the last move framed by a square (a ring read as an O over an X), the winning line drawn
    assert re.search(r'<rect[^>]*id="last-move"', dom)
    assert ('id="winning-line"' in dom) == (expected != "draw")
    # the columns and rows named as the moves are (a..c, 1..3), and the human's mark said
    labels = re.findall(r'<text[^>]*class="board-label"[^>]*>([^<]*)</text>', dom)
    assert sorted(labels) == ["1", "2", "3", "a", "b", "c"]
    mark = "X" if human_first else "O"
    assert f"you play {mark})" in dom


def test_a_screenshot_of_a_game_in_progress_is_a_png(served, tmp_path):
    url, _ = served
    assert request(url, "/api/new", {"human_first": True})[0] == 200
    shot = tmp_path / "play.png"
    run_chromium(tmp_path, url + "?autoplay=2&seed=5", f"--screenshot={shot}")
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 2000
    width, height = struct.unpack(">II", data[16:24])
    assert (width, height) == (1000, 720)
    _, state = request(url, "/api/state")
    assert len(state["history"]) == 4 and not state["over"]  # two moves each, shown in the shot


def test_2048_in_the_browser_by_buttons_and_arrow_keys_then_the_agent_moves_and_is_watched(
    served_2048,  # noqa: F811
    tmp_path,
):
    """A one-player game: the human's moves by the buttons and the arrow keys, each showing
    the tile that fell; then "Agent: one move" twice and "Watch the agent play" until it has
    made two more moves."""
    url, game = served_2048
    assert request(url, "/api/new", {"human_first": True})[0] == 200
    query = "?autoplay=6&seed=2&undo=1&agent=2&watch=2"
    dom = run_chromium(tmp_path, url + query, "--dump-dom")
    summary = autoplay_summary(dom)
    assert summary["error"] is None and summary["done"], summary
    assert summary["human_moves"] == 6 and summary["undone"]
    assert summary["key_presses"] >= 2 and summary["button_clicks"] >= 2  # both ways played
    assert all(re.fullmatch(r"New tile: a [24] at [a-d][1-4]", c) for c in summary["chance"])
    assert summary["agent_moves"] == 2 and summary["watched"] >= 2
    _, state = request(url, "/api/state")
    assert summary["history"] == state["history"]
    assert [h["by"] for h in state["history"]].count("agent") == 2 + summary["watched"]
    assert summary["score"].startswith(f"Score: {state['score']:g}")
    assert re.search(r'<rect[^>]*id="new-tile"', dom)  # the tile that fell is framed
    if not state["over"]:  # the four arrows stay, those that would change nothing disabled
        buttons = re.findall(r'<button[^>]*data-action="(\d)"[^>]*>', dom)
        assert sorted(int(a) for a in buttons) == [0, 1, 2, 3]
        disabled = [
            b for b in re.findall(r'<button[^>]*data-action="\d"[^>]*>', dom) if "disabled" in b
        ]
        assert len(disabled) == 4 - len(state["legal"])
    final, returns = replay_outcomes(game, state["history"])
    assert returns[0] == state["score"]


def test_backgammon_in_the_browser_moves_from_the_list_and_shows_the_dice(
    served_backgammon,  # noqa: F811
    tmp_path,
):
    url, game = served_backgammon
    assert request(url, "/api/new", {"human_first": True})[0] == 200
    dom = run_chromium(tmp_path, url + "?autoplay=8&seed=4&undo=1", "--dump-dom")
    summary = autoplay_summary(dom)
    assert summary["error"] is None and summary["done"], summary
    assert summary["undone"] and summary["board_clicks"] == summary["key_presses"] == 0
    assert summary["button_clicks"] == summary["human_moves"] == 8  # (the first then undone)
    assert all(c.startswith("Dice: ") for c in summary["chance"] if c), summary["chance"]
    _, state = request(url, "/api/state")
    assert summary["history"] == state["history"]
    assert all(h["label"] == PASS or MOVE.match(h["label"]) for h in state["history"])
    assert any(h["chance"] for h in state["history"])  # turns passed with the dice rolled
    labels = re.findall(r'<text[^>]*class="board-label"[^>]*>([^<]*)</text>', dom)
    assert len(labels) == 26 and sorted(labels[24:]) == ["the agent's off", "your checkers off"]
    assert "numbered from its own side" in dom  # the agent's moves are written from its side
    # the agent's last turn drawn as arrows with heads, one per checker move, numbered in order
    arrows = re.findall(r'<path[^>]*class="agent-arrow"', dom)
    assert len(arrows) == len(state["agent_arrows"])
    assert all('marker-end="url(#agent-head)"' in a for a in arrows)
    order = re.findall(r'<text[^>]*class="agent-arrow-order"[^>]*>([^<]*)</text>', dom)
    assert order == [str(i + 1) for i in range(len(arrows))]
    assert all('paint-order="stroke"' in t for t in re.findall(r"<text[^>]*board-label", dom))
    last_agent = [h for h in _last_run(state["history"], "agent") if h["label"] != PASS]
    assert len(state["agent_arrows"]) == len(last_agent)
    final, _ = replay_outcomes(game, state["history"])
    assert (final._board == game._plies[-1].state._board).all()


def _last_run(history: list[dict], by: str) -> list[dict]:
    """The moves of `by`'s last run of moves in `history` (its last turn), in order."""
    ends = [i for i, h in enumerate(history) if h["by"] == by]
    if not ends:
        return []
    first = last = ends[-1]
    while first > 0 and history[first - 1]["by"] == by:
        first -= 1
    return history[first : last + 1]


#: each "×N" count's box and its enclosing box's (the smallest rect holding its left top)
OFF_MEASURE = """<script>
const rects = [...document.querySelectorAll('svg rect')].map(r => r.getBoundingClientRect());
const out = [];
for (const t of document.querySelectorAll('svg text')) {
  if (!t.textContent.startsWith('×')) continue;
  const r = t.getBoundingClientRect();
  const inside = rects.filter(q =>
  q.left <= r.left && q.right > r.left && q.top <= r.top && q.bottom > r.top);
  const box = inside.reduce((a, q) => (a && a.width <= q.width ? a : q), null);
  out.push([r.left, r.top, r.right, r.bottom, box.left, box.top, box.right, box.bottom]);
}
const pre = document.createElement('pre'); pre.id = 'measure';
pre.textContent = JSON.stringify(out); document.body.append(pre);
</script>"""


def test_backgammon_borne_off_counts_lie_inside_their_boxes(tmp_path):
    """pgx writes "×15" past its box; the game's `Page.redraw` sizes it to fit."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    from turbozero.arena.records import fit_svg

    env = turbozero.envs.make("backgammon")
    state, _ = env.init(jax.random.PRNGKey(0))
    board = np.zeros(28, np.int32)
    board[26], board[27], board[0] = 15, -14, -1  # every count two digits wide
    svg = env.render_svg(state.replace(_board=jnp.asarray(board)))
    drawing = fit_svg(svg).replace("<svg", '<svg style="width:100%;height:auto"', 1)
    page = tmp_path / "off.html"
    page.write_text(
        f"<html><body><div style='width:800px'>{drawing}</div>{OFF_MEASURE}</body></html>"
    )
    dom = run_chromium(tmp_path, page.as_uri(), "--dump-dom")
    found = re.search(r'<pre id="measure">(.*?)</pre>', dom, re.S)
    assert found, dom[-2000:]
    counts = json.loads(html.unescape(found.group(1)))
    assert len(counts) == 2
    for left, top, right, bottom, box_left, box_top, box_right, box_bottom in counts:
        assert box_left <= left and right <= box_right and box_top <= top and bottom <= box_bottom
