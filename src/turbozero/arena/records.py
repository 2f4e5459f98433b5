"""Game records: replay a match's games on the host and draw them as an HTML page of SVG boards."""

from __future__ import annotations

import base64
import functools
import gzip
import html
import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from turbozero.arena.match import MatchResult
from turbozero.envs.chance import step_with_outcome
from turbozero.envs.core import Env
from turbozero.gamespec import colour_and_points, coordinate_labels, move_label, outcome_label
from turbozero.types import PyTree


def replay_game(env: Env, result: MatchResult, game: int) -> list[PyTree]:
    """The states of game `game` of `result`, from `init` to its last move (unbatched).

    The match must have been played with `max_steps` (so that its actions were recorded); the
    environment's randomness is rebuilt from `result.game_keys` exactly as `play_match` drew it.

    Raises:
        ValueError: if the match recorded no actions or `game` is out of range.
    """
    states, _ = _replay(env, result, game)
    return states


def _replay(env: Env, result: MatchResult, game: int) -> tuple[list[PyTree], list[int]]:
    """`replay_game`'s states, and the player id that made each move."""
    states, movers, _ = _replay_with_chance(env, result, game)
    return states, movers


def _replay_with_chance(
    env: Env, result: MatchResult, game: int
) -> tuple[list[PyTree], list[int], list[int | None]]:
    """`replay_game`'s states, the player id that made each move, and the chance outcome that
    followed each move (None: none fell). A game with chance is stepped through its split
    (`Env.chance`, the same step bit for bit) so that each outcome is known."""
    if result.actions is None:
        raise ValueError("result has no actions: play the match with max_steps to record them")
    if not 0 <= game < result.num_games:
        raise ValueError(f"game must be in [0, {result.num_games}), got {game}")
    game_key = jnp.asarray(result.game_keys[game])
    init, step = _replay_programs(env)
    state, meta = init(jax.random.fold_in(game_key, 0))
    states, movers, outcomes = [state], [], []
    # the game's own length bounds it (continuous actions have no end marker; discrete ones
    # are -1 once the game is over)
    actions = np.asarray(result.actions[: int(result.lengths[game]), game])
    for t, action in enumerate(actions):
        movers.append(int(meta.cur_player_id))
        move = jnp.asarray(action, jnp.float32) if env.continuous else jnp.int32(action)
        state, meta, outcome, drawn = step(state, move, jax.random.fold_in(game_key, t + 1))
        states.append(state)
        outcomes.append(int(outcome) if bool(drawn) else None)
    return states, movers, outcomes


@functools.lru_cache(maxsize=16)
def _replay_programs(env: Env) -> tuple[Any, Any]:
    """`(init, step)` compiled once per game (`step` through the chance split)."""
    return jax.jit(env.init), jax.jit(step_with_outcome(env))


def render_game_svgs(env: Env, states_sequence: Sequence[PyTree]) -> list[str]:
    """SVG text of each (unbatched) state through `env.render_svg` (pgx's visualizer for pgx).

    Raises:
        ValueError: if the environment cannot draw itself.
    """
    if env.render_svg is None:
        raise ValueError(f"environment {env.name!r} has no render_svg")
    return [env.render_svg(jax.device_get(state)) for state in states_sequence]


def replay_game_movers(env: Env, result: MatchResult, game: int) -> list[int]:
    """The player id that made each move of game `game` of `result` (`[lengths[game]]`)."""
    _, movers = _replay(env, result, game)
    return movers


def fit_svg(svg: str) -> str:
    """`svg` scaled by its container: a `viewBox` from its `width` and `height`, which it loses.

    pgx draws with fixed `width`/`height` and no `viewBox`; sized by CSS alone, such a drawing is
    cut to the box's top-left corner instead of scaled.
    """
    head_end = svg.find(">")
    if not svg.startswith("<svg") or head_end < 0:
        raise ValueError("not an SVG document: it must start with '<svg'")
    head, rest = svg[:head_end], svg[head_end:]
    if "viewBox" in head:
        return svg
    sizes = {}
    for name in ("width", "height"):
        m = re.search(rf'\s{name}="([0-9.]+)(?:px)?"', head)
        if m is None:
            raise ValueError(f"the SVG has no numeric {name} to build a viewBox from")
        sizes[name] = m.group(1)
        head = head[: m.start()] + head[m.end() :]
    return f'{head} viewBox="0 0 {sizes["width"]} {sizes["height"]}"{rest}'


def game_outcome(result: MatchResult, game: int) -> str:
    """Agent A's result in game `game`: "win", "draw" or "loss" (two players), or "return R"."""
    ret = float(np.asarray(result.returns)[game, int(np.asarray(result.player_a)[game])])
    if not result.name_b:
        return f"return {ret:g}"
    return "win" if ret > 0 else "loss" if ret < 0 else "draw"


def pick_games(result: MatchResult, count: int) -> list[int]:
    """Up to `count` games worth looking at: in a two-player match, first one game of each
    result that occurred (loss, draw, win: a 60-4-0 score shows a win and a draw, not two
    draws), then the rest, losses first, then draws, then wins.

    Returns game indices, alternating games where agent A moved first and second where both
    exist.
    """
    rank = {"loss": 0, "draw": 1, "win": 2}
    order = sorted(range(result.num_games), key=lambda g: (rank.get(game_outcome(result, g), 0), g))
    a_first = [bool(x) for x in np.asarray(result.a_first)]
    picked: list[int] = []
    for outcome in rank if result.name_b else ():
        games = [g for g in order if game_outcome(result, g) == outcome]
        if games and len(picked) < count:
            side = not picked or not a_first[picked[-1]]  # the other side than the last pick
            picked.append(next((g for g in games if a_first[g] == side), games[0]))
    sides = [[g for g in order if g not in picked and a_first[g] == f] for f in (True, False)]
    if picked and a_first[picked[-1]]:
        sides.reverse()  # go on from the side the last pick did not move first on
    while len(picked) < min(count, result.num_games):
        for side_games in sides:
            if side_games and len(picked) < count:
                picked.append(side_games.pop(0))
    return picked


_PAGE_STYLE = """
body{font:15px system-ui,sans-serif;margin:16px;color:#222}
h1{font-size:20px} h2{font-size:17px;margin:22px 0 6px}
section.game{display:inline-block;vertical-align:top;width:260px;margin:0 18px 18px 0}
.frame{width:240px;height:240px;border:1px solid #ccc;display:flex;align-items:center;
justify-content:center;overflow:hidden;background:#fff}
.frame svg{max-width:100%;max-height:100%;width:100%;height:auto}
.js figure{display:none} .js figure.now{display:block}
figure{margin:0} figcaption{font-size:13px;color:#555;margin:4px 0}
ol{font-size:13px;padding-left:28px;margin:6px 0}
li.now{font-weight:bold} button{margin-right:4px}
"""

#: a game whose drawings together exceed this many bytes (a long 2048 or backgammon game) is
#: sent gzip-compressed and drawn by the page's script (a 133-move 2048 game: 26 times smaller)
FRAMES_INLINE_BYTES = 200_000

_PAGE_SCRIPT = """
document.body.classList.add('js');
async function unpack(game) {  // a long game's boards, sent compressed
  const packed = game.querySelector('script.frames');
  if (!packed) return;
  const bytes = Uint8Array.from(atob(packed.textContent.trim()), (c) => c.charCodeAt(0));
  const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream('gzip'));
  const frames = JSON.parse(await new Response(stream).text());
  game.querySelector('.boards').innerHTML = frames.map(([caption, svg]) =>
    `<figure><figcaption>${caption}</figcaption><div class='frame'>${svg}</div></figure>`).join('');
}
function wire(game) {
  const figs = game.querySelectorAll('figure'), moves = game.querySelectorAll('li');
  let t = figs.length - 1;
  const show = (k) => {
    t = Math.max(0, Math.min(figs.length - 1, k));
    figs.forEach((f, i) => f.classList.toggle('now', i === t));
    moves.forEach((m, i) => m.classList.toggle('now', i === t - 1));
  };
  game.querySelector('.first').onclick = () => show(0);
  game.querySelector('.prev').onclick = () => show(t - 1);
  game.querySelector('.next').onclick = () => show(t + 1);
  game.querySelector('.last').onclick = () => show(figs.length - 1);
  moves.forEach((m, i) => { m.onclick = () => show(i + 1); });
  show(t);
}
Promise.all([...document.querySelectorAll('section.game')].map((game) =>
  unpack(game).then(() => wire(game)))).then(() => { document.body.dataset.ready = '1'; });
"""


def game_html(env: Env, result: MatchResult, game: int) -> str:
    """One game as an HTML section: its result, its moves by name (with the chance that fell
    after each: 2048's new tile, backgammon's dice) and every position drawn, with the names of
    the board's columns and rows the moves are given in (`coordinate_labels`); both sides'
    seats and colours in its title; backgammon's points numbered from agent A's side. A long
    game's drawings are compressed (`FRAMES_INLINE_BYTES`)."""
    states, movers, outcomes = _replay_with_chance(env, result, game)
    actions = np.asarray(result.actions)[: len(movers), game]
    player_a = int(np.asarray(result.player_a)[game])
    a_colour, overlay = colour_and_points(env.name, states[0], player_a)
    overlay = overlay + coordinate_labels(env.name)  # (the names the moves are given in)
    svgs = [_with_labels(fit_svg(s), overlay) for s in render_game_svgs(env, states)]
    names = [
        html.escape(result.name_a if m == player_a or not result.name_b else result.name_b)
        for m in movers
    ]
    labels = [
        html.escape(_move_text(env, int(a), o) if not env.continuous else str(a))
        for a, o in zip(actions, outcomes, strict=True)
    ]
    captions = ["start"] + [
        f"move {t + 1} of {len(labels)}: {names[t]} plays {labels[t]}" for t in range(len(labels))
    ]
    moves = "".join(f"<li>{n}: {lab}</li>" for n, lab in zip(names, labels, strict=True))
    colour = f", {a_colour}" if a_colour else ""
    if result.name_b:
        a_first = bool(result.a_first[game])
        side, other = ("first", "second") if a_first else ("second", "first")
        b_colour, _ = colour_and_points(env.name, states[0], 1 - player_a)
        other += f", {b_colour}" if b_colour else ""
        title = (
            f"{html.escape(result.name_a)} ({side}{colour}) vs {html.escape(result.name_b)} "
            f"({other}): {game_outcome(result, game)} in {len(labels)} moves"
        )
    else:
        title = f"{html.escape(result.name_a)}: {game_outcome(result, game)} in {len(labels)} moves"
    buttons = "".join(
        f"<button class='{c}' title='{t}'>{s}</button>"
        for c, t, s in (
            ("first", "start", "&laquo;"),
            ("prev", "back one move", "&#x25C0;"),
            ("next", "forward one move", "&#x25B6;"),
            ("last", "end", "&raquo;"),
        )
    )
    return (
        f"<section class='game'><h3>{title}</h3><div>{buttons}</div>"
        f"<div class='boards'>{_boards(captions, svgs)}</div><ol>{moves}</ol></section>"
    )


def _move_text(env: Env, action: int, outcome: int | None) -> str:
    """A move's name, and the chance outcome that followed it ("left, then a 2 at c1")."""
    text = move_label(env.name, action)
    return text if outcome is None else f"{text}, then {outcome_label(env.name, outcome)}"


def _boards(captions: list[str], svgs: list[str]) -> str:
    """The figures of a game's positions: inline, or compressed in a script block (base64 of
    gzip of `[[caption, svg], ...]`) that the page's script draws, for a long game."""
    if sum(len(svg) for svg in svgs) <= FRAMES_INLINE_BYTES:
        return "".join(
            f"<figure><figcaption>{c}</figcaption><div class='frame'>{svg}</div></figure>"
            for c, svg in zip(captions, svgs, strict=True)
        )
    data = json.dumps(list(zip(captions, svgs, strict=True))).encode()
    packed = base64.b64encode(gzip.compress(data, compresslevel=9, mtime=0)).decode()
    return (
        f"<script type='application/octet-stream' class='frames'>{packed}</script>"
        "<noscript>(this long game's boards are drawn by the page's script)</noscript>"
    )


def packed_frames(section: str) -> list[list[str]] | None:
    """`[[caption, svg], ...]` of a game section whose boards were compressed, else None (for
    tests and tools that read a records page)."""
    m = re.search(
        r"<script type='application/octet-stream' class='frames'>([^<]*)</script>", section
    )
    if m is None:
        return None
    frames: list[list[str]] = json.loads(gzip.decompress(base64.b64decode(m.group(1))))
    return frames


def _with_labels(svg: str, labels: list[list[Any]]) -> str:
    """`svg` with `[[text, x, y], ...]` written over it (in its user units) before it closes."""
    if not labels:
        return svg
    texts = "".join(
        f"<text x='{x:g}' y='{y:g}' text-anchor='middle' dominant-baseline='middle' "
        f"font-size='11' font-family='sans-serif' fill='#6b7383'>{html.escape(str(t))}</text>"
        for t, x, y in labels
    )
    end = svg.rindex("</svg>")
    return svg[:end] + texts + svg[end:]


def write_records(games_dir: Path, page: str) -> Path:
    """Write an evaluation's records page as `games_dir/latest.html` (the folder made if need
    be; the page replaced whole, so a reader never sees half of one); its path."""
    games_dir.mkdir(parents=True, exist_ok=True)
    target = games_dir / "latest.html"
    partial = games_dir / ".latest.html.partial"
    partial.write_text(page)
    partial.replace(target)
    return target


def records_page(
    env: Env, results: Mapping[str, MatchResult], games_per_opponent: int, title: str
) -> str:
    """An HTML page (no network needed) of up to `games_per_opponent` games of each match."""
    sections = []
    for opponent, result in results.items():
        games = pick_games(result, games_per_opponent)
        record = f"{result.wins} wins, {result.draws} draws, {result.losses} losses"
        head = f"vs {html.escape(opponent)} ({record} in {result.num_games} games)"
        if not result.name_b:
            head = f"{result.num_games} games, mean return {result.mean_return_a:g}"
        sections.append(f"<h2>{head}</h2>" + "".join(game_html(env, result, g) for g in games))
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
        f"<style>{_PAGE_STYLE}</style></head><body><h1>{html.escape(title)}</h1>"
        + "".join(sections)
        + f"<script>{_PAGE_SCRIPT}</script></body></html>"
    )
