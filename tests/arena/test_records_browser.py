"""The game records page in headless Chromium: every board drawn inside its frame.

Needs Debian's `chromium` (`make check` installs it).
"""

from __future__ import annotations

import html
import json
import re

import jax
import pytest

import turbozero
from tests.play.test_browser import run_chromium
from turbozero.arena import perfect_agent, play_match, random_agent
from turbozero.arena import records as records_module
from turbozero.arena.records import records_page

pytestmark = pytest.mark.slow

#: shows every position, then writes each drawn element's box beside its frame's into the DOM
MEASURE = """<script>
document.body.classList.remove('js');
const out = [];
for (const frame of document.querySelectorAll('.frame')) {
  const f = frame.getBoundingClientRect();
  let worst = 0;
  for (const el of frame.querySelectorAll('svg *')) {
    if (!el.getBBox || el.tagName === 'g' || el.tagName === 'defs') continue;
    const r = el.getBoundingClientRect();
    if (r.width === 0 && r.height === 0) continue;
    worst = Math.max(worst, f.left - r.left, f.top - r.top, r.right - f.right, r.bottom - f.bottom);
  }
  out.push(worst);
}
const pre = document.createElement('pre');
pre.id = 'measure';
pre.textContent = JSON.stringify(out);
document.body.append(pre);
</script>"""


def overflow_per_board(tmp_path, page: str) -> list[float]:
    path = tmp_path / f"page{len(list(tmp_path.iterdir()))}.html"
    path.write_text(page.replace("</body>", MEASURE + "</body>"))
    dom = run_chromium(tmp_path, path.as_uri(), "--dump-dom")
    m = re.search(r'<pre id="measure">(.*?)</pre>', dom, re.S)
    assert m, dom[-2000:]
    return json.loads(html.unescape(m.group(1)))


@pytest.fixture(scope="module")
def pages(tic_tac_toe, connect_four):
    out = {}
    for env in (tic_tac_toe, connect_four):
        r = play_match(
            env,
            random_agent(env),
            perfect_agent(env),
            jax.random.PRNGKey(1),
            num_games=4,
            max_steps=42,
        )
        out[env.name] = (env, {"perfect": r})
    return out


@pytest.mark.parametrize("game", ["tic_tac_toe", "connect_four"])
def test_every_board_of_the_records_page_lies_inside_its_frame(pages, tmp_path, game):
    env, results = pages[game]
    boards = overflow_per_board(tmp_path, records_page(env, results, 2, game))
    assert len(boards) >= 10  # the start and every move of two games
    assert max(boards) <= 0.5, boards


def test_the_measure_sees_a_board_cut_off_when_nothing_scales_it(pages, tmp_path, monkeypatch):
    env, results = pages["connect_four"]
    monkeypatch.setattr(records_module, "fit_svg", lambda svg: svg)  # pgx's fixed-size drawing
    boards = overflow_per_board(tmp_path, records_page(env, results, 2, "connect_four"))
    assert max(boards) > 20, boards


def test_a_long_game_sent_compressed_is_drawn_by_the_page_with_every_board(tmp_path, monkeypatch):
    env = turbozero.envs.make("2048")
    r = play_match(env, random_agent(env), None, jax.random.PRNGKey(4), num_games=1, max_steps=30)
    monkeypatch.setattr(records_module, "FRAMES_INLINE_BYTES", 10_000)
    page = records_page(env, {"self": r}, 1, "2048")
    assert "<figure>" not in page.split("<script>")[0]  # every board is in the packed block
    path = tmp_path / "packed.html"
    path.write_text(page)
    dom = run_chromium(tmp_path, path.as_uri(), "--dump-dom")
    assert 'data-ready="1"' in dom, dom[-2000:]
    figures = re.findall(
        r"<figure[^>]*><figcaption>(.*?)</figcaption><div class=\"frame\"><svg", dom
    )
    assert len(figures) == 31 and figures[0] == "start"
    assert re.fullmatch(r"move 30 of 30: random plays \w+, then a [24] at [a-d][1-4]", figures[-1])
    assert len(re.findall(r'<figure class="now">', dom)) == 1  # the last board shown
