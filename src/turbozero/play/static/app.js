// turbozero play: draws the server's game and sends the human's moves (the server checks them).
// One-player games (2048) are the human's to play; the agent plays a move when asked, or on and
// on while "Watch" is on. Chance shows as it falls: 2048's new tile, backgammon's dice.
// ?autoplay=N[&seed=S][&undo=1][&illegal=1][&agent=K][&watch=K] plays N random legal moves by
// clicking the page itself (and pressing 2048's arrow keys), then asks the agent for K moves
// (one-player games), and writes a JSON summary into #autoplay-log (the end-to-end test).
"use strict";

const $ = (id) => document.getElementById(id);
const SVG_NS = "http://www.w3.org/2000/svg";
const WATCH_DELAY_MS = 250; // between the agent's moves while watching
const ARROWS = { ArrowLeft: "←", ArrowUp: "↑", ArrowRight: "→", ArrowDown: "↓" };
let game = null;
let pending = Promise.resolve();
let busy = false;
let watching = false;
let watchLoop = Promise.resolve();

async function api(method, path, body) {
  const init = { method, headers: {} };
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const response = await fetch(path, init);
  const data = await response.json();
  if (!response.ok) throw new Error(data.error || response.statusText);
  return data;
}

// One request at a time; `pending` lets callers (autoplay) wait for the page to update.
function send(method, path, body, thinking) {
  if (busy) return pending;
  busy = true;
  $("error").textContent = "";
  if (thinking) setStatus("The agent is thinking…", false);
  pending = api(method, path, body)
    .then((data) => { game = data; render(); })
    .catch((err) => { $("error").textContent = err.message; render(); })
    .finally(() => { busy = false; });
  return pending;
}

function setStatus(text, over) {
  $("status").textContent = text;
  $("status").classList.toggle("over", over);
}

function svgElement() {
  return $("board").querySelector("svg");
}

// The board action under a point on screen (nearest cell centre within its radius), or null.
function actionAt(clientX, clientY) {
  const svg = svgElement();
  if (!game || !game.cells || !svg) return null;
  const ctm = svg.getScreenCTM();
  if (!ctm) return null;
  const p = new DOMPoint(clientX, clientY).matrixTransform(ctm.inverse());
  let best = null;
  let bestDistance = Infinity;
  for (const [action, x, y, r] of game.cells) {
    const d = Math.hypot(p.x - x, p.y - y);
    if (d <= r && d < bestDistance) { best = action; bestDistance = d; }
  }
  return best;
}

function cellOf(action) {
  if (!game || !game.cells) return null;
  const cells = game.cells.filter((c) => c[0] === action);
  return cells.length ? cells : null;
}

function keyOf(action) {
  if (!game || !game.keys) return null;
  const found = Object.entries(game.keys).find(([, a]) => a === action);
  return found ? found[0] : null;
}

function yourMoveText() {
  if (game.cells) return "Your move: click the board.";
  if (game.keys) return "Your move: an arrow key or a button below.";
  return "Your move: pick one below.";
}

function render() {
  if (!game) return;
  const onePlayer = game.players === 1;
  $("title").textContent = onePlayer
    ? `${game.env}: you play, or let ${game.agent} move for you`
    : `${game.env}: you against ${game.agent}` +
      ` (you move ${game.human_first ? "first" : "second"}` +
      `${game.colour ? `, you play ${game.colour}` : ""})`;
  drawBoard();
  if (game.over) setStatus(game.result.text, true);
  else if (watching) setStatus(`Watching ${game.agent} play…`, false);
  else if (game.to_move === "human") setStatus(yourMoveText(), false);
  else setStatus("The agent is thinking…", false);
  renderScoreAndChance();

  // Legal moves the board cannot take (pass, swap), or all of them when there is no board.
  const moves = $("moves");
  moves.replaceChildren();
  if (!game.over && game.to_move === "human") {
    // Keyed moves (2048's arrows) keep their buttons, disabled where the move changes nothing,
    // so the row does not shift; other moves are offered while legal.
    const offered = game.key_moves || game.moves;
    for (const m of offered) {
      if (cellOf(m.action)) continue;
      const b = document.createElement("button");
      b.type = "button";
      const key = keyOf(m.action);
      b.textContent = key && ARROWS[key] ? `${ARROWS[key]} ${m.label}` : m.label;
      b.dataset.action = m.action;
      b.disabled = !game.legal.includes(m.action);
      if (b.disabled) b.title = "this move would change nothing";
      b.addEventListener("click", () => send("POST", "/api/move", { action: m.action }, true));
      moves.append(b);
    }
  }
  $("undo").disabled = !game.can_undo;
  $("new-human").textContent = onePlayer ? "New game" : "New game: you first";
  $("new-agent").hidden = onePlayer;
  $("agent-move").hidden = !onePlayer;
  $("watch").hidden = !onePlayer;
  $("agent-move").disabled = game.over || watching;
  $("watch").disabled = game.over && !watching;
  $("watch").textContent = watching ? "Stop watching" : "Watch the agent play";

  const reply = game.reply;
  const tbody = $("top").querySelector("tbody");
  tbody.replaceChildren();
  $("top").hidden = !reply; // no empty table before the agent's first move
  if (reply) {
    $("reply").textContent = `Played ${reply.label} (${(reply.seconds * 1000).toFixed(0)} ms).`;
    const v = reply.value;
    $("value").textContent = `Value estimate: ${v >= 0 ? "+" : ""}${v.toFixed(2)} ` +
      (onePlayer ? "(the return it expects from here)"
        : reply.value_unit === "points" ? "(the points the agent expects to win; below 0, to lose)"
        : "(for the agent: −1 loses, +1 wins)");
    // a search's visit shares, or the policy's own probabilities for an agent that does not search
    $("top").querySelector("thead th:last-child").textContent =
      reply.searched ? "search weight" : "policy weight";
    for (const t of reply.top) {
      const tr = document.createElement("tr");
      const name = document.createElement("td");
      name.textContent = t.label;
      const weight = document.createElement("td");
      const bar = document.createElement("span");
      bar.className = "bar";
      bar.style.width = `${Math.round(t.weight * 120)}px`;
      weight.append(bar, `${(t.weight * 100).toFixed(1)}%`);
      tr.append(name, weight);
      tbody.append(tr);
    }
  } else {
    $("reply").textContent = "No move yet.";
    $("value").textContent = "";
  }

  const history = $("history");
  history.replaceChildren();
  for (const h of game.history) {
    const li = document.createElement("li");
    li.className = h.by;
    li.textContent = `${h.by === "human" ? "you" : "agent"}: ${h.label}` +
      (h.chance ? `, then ${h.chance}` : "");
    history.append(li);
  }
  history.scrollTop = history.scrollHeight;
  $("history-note").hidden = !game.history_note;
  $("history-note").textContent = game.history_note || "";
}

// The score of a one-player game; the chance as it fell: 2048's new tile, backgammon's dice.
function renderScoreAndChance() {
  const score = $("score");
  score.hidden = game.score === null;
  if (game.score !== null) {
    const largest = game.tiles ? Math.max(...game.tiles.flat()) : null;
    score.textContent = `Score: ${game.score}` + (largest ? ` · largest tile ${largest}` : "");
  }
  const chance = $("chance");
  let text = "";
  if (game.dice && !game.over) {
    const whose = game.dice.player === "human" ? "yours" : "the agent's";
    text = `Dice: ${game.dice.rolled.join("-")}, ${whose}` +
      (game.dice.left.length ? ` (to play: ${game.dice.left.join(", ")})` : "");
  } else if (game.tiles && game.chance) {
    text = `New tile: ${game.chance.label}`;
  }
  chance.hidden = !text;
  chance.textContent = text;
}

function drawBoard() {
  const board = $("board");
  board.classList.toggle("clickable", Boolean(game.cells) && game.to_move === "human" && !game.over);
  if (!game.svg) {
    board.textContent = "(this game has no drawing; pick a move below)";
    return;
  }
  board.innerHTML = game.svg;
  const svg = svgElement();
  const w = parseFloat(svg.getAttribute("width"));
  const h = parseFloat(svg.getAttribute("height"));
  if (!svg.getAttribute("viewBox")) svg.setAttribute("viewBox", `0 0 ${w} ${h}`);
  // Small boards at 380 px, wide ones (hex, 19x19 go) up to 640 px.
  if (w > 0) $("board-panel").style.flexBasis = `${Math.round(Math.max(380, Math.min(640, w * 1.3)))}px`;
  svg.removeAttribute("width");
  svg.removeAttribute("height");
  // Mark the last move: a dot on a Go stone, a square frame around other games' cells (a ring
  // would read as a mark of its own, an O over an X). Then the winning line, if any.
  // (ringed in white: a backgammon stack taller than five reaches the point numbers)
  for (const [text, x, y] of game.board_labels || []) {
    const t = label(x, y, text);
    t.setAttribute("class", "board-label");
    svg.append(t);
  }
  if (game.chance && game.chance.cell) { // the tile that just fell
    const [x, y, r] = game.chance.cell;
    const frame = square(x, y, r * 0.92, "#2f6fde", 3);
    frame.id = "new-tile";
    svg.append(frame);
  }
  if (game.last_cell) {
    const [x, y, r] = game.last_cell;
    if (game.env.startsWith("go_")) svg.append(circle(x, y, r * 0.3, "#e0452f", "none", 0));
    else svg.append(square(x, y, r * 0.9, "#e0452f", 2.5));
  }
  // Backgammon: the agent's last turn, each checker move its own numbered arrow, bowed away
  // from the row of point numbers into the half of the board it starts in (a straight line
  // along the row struck the numbers through and merged a checker's two moves into one).
  const arrows = game.agent_arrows || [];
  if (arrows.length) svg.append(arrowHead());
  const middle = parseFloat((svg.getAttribute("viewBox") || "0 0 0 0").split(/\s+/)[3]) / 2;
  arrows.forEach(([x1, y1, x2, y2], i) => {
    const length = Math.hypot(x2 - x1, y2 - y1);
    const bow = (y1 >= middle ? 1 : -1) * (12 + 0.25 * length);
    const cx = (x1 + x2) / 2, cy = (y1 + y2) / 2 + bow;
    const arrow = document.createElementNS(SVG_NS, "path");
    for (const [k, v] of Object.entries({ d: `M ${x1} ${y1} Q ${cx} ${cy} ${x2} ${y2}`,
      fill: "none", stroke: "#e0452f", "stroke-width": 2.5, opacity: 0.85,
      "marker-end": "url(#agent-head)", "pointer-events": "none" })) arrow.setAttribute(k, v);
    arrow.setAttribute("class", "agent-arrow");
    const order = label((x1 + 2 * cx + x2) / 4, (y1 + 2 * cy + y2) / 4, String(i + 1));
    order.setAttribute("class", "agent-arrow-order");
    svg.append(arrow, order);
  });
  const line = game.winning_cells || [];
  if (line.length >= 2) {
    const [x1, y1] = line[0];
    const [x2, y2] = line[line.length - 1];
    const stroke = document.createElementNS(SVG_NS, "line");
    for (const [k, v] of Object.entries({ x1, y1, x2, y2, stroke: "#e0452f", "stroke-width": 6,
      "stroke-linecap": "round", opacity: 0.75, "pointer-events": "none" })) stroke.setAttribute(k, v);
    stroke.id = "winning-line";
    svg.append(stroke);
  }
  const hover = circle(0, 0, 1, "rgba(47, 111, 222, 0.25)", "none", 0);
  hover.id = "hover";
  hover.setAttribute("visibility", "hidden");
  hover.setAttribute("pointer-events", "none");
  svg.append(hover);
}

// The arrowhead the agent's arrows end in (an SVG marker, drawn in the arrow's colour).
function arrowHead() {
  const defs = document.createElementNS(SVG_NS, "defs");
  const marker = document.createElementNS(SVG_NS, "marker");
  for (const [k, v] of Object.entries({ id: "agent-head", viewBox: "0 0 10 10", refX: 8, refY: 5,
    markerWidth: 5, markerHeight: 5, orient: "auto-start-reverse" })) marker.setAttribute(k, v);
  const tip = document.createElementNS(SVG_NS, "path");
  tip.setAttribute("d", "M 0 0 L 10 5 L 0 10 z");
  tip.setAttribute("fill", "#e0452f");
  marker.append(tip);
  defs.append(marker);
  return defs;
}

// A small label over the board, ringed in white so that it reads over checkers and stones.
function label(x, y, text) {
  const t = document.createElementNS(SVG_NS, "text");
  for (const [k, v] of Object.entries({ x, y, "text-anchor": "middle", "dominant-baseline": "middle",
    "font-size": 11, "font-family": "sans-serif", fill: "#6b7383", stroke: "#fff",
    "stroke-width": 3, "paint-order": "stroke", "pointer-events": "none" })) t.setAttribute(k, v);
  t.textContent = text;
  return t;
}

function square(x, y, half, stroke, width) {
  const s = document.createElementNS(SVG_NS, "rect");
  for (const [k, v] of Object.entries({ x: x - half, y: y - half, width: 2 * half, height: 2 * half,
    rx: half * 0.15, fill: "none", stroke, "stroke-width": width, "pointer-events": "none" })) s.setAttribute(k, v);
  s.id = "last-move";
  return s;
}

function circle(x, y, r, fill, stroke, width) {
  const c = document.createElementNS(SVG_NS, "circle");
  c.setAttribute("cx", x);
  c.setAttribute("cy", y);
  c.setAttribute("r", r);
  c.setAttribute("fill", fill);
  c.setAttribute("stroke", stroke);
  c.setAttribute("stroke-width", width);
  c.setAttribute("pointer-events", "none");
  return c;
}

$("board").addEventListener("click", (event) => {
  if (!game || game.over || game.to_move !== "human") return;
  const action = actionAt(event.clientX, event.clientY);
  if (action !== null) send("POST", "/api/move", { action }, true);
});

$("board").addEventListener("mousemove", (event) => {
  const hover = document.getElementById("hover");
  if (!hover) return;
  const action = game && !game.over && game.to_move === "human" ? actionAt(event.clientX, event.clientY) : null;
  const cells = action === null || !game.legal.includes(action) ? null : cellOf(action);
  if (!cells || cells.length !== 1) { hover.setAttribute("visibility", "hidden"); return; }
  const [, x, y, r] = cells[0];
  hover.setAttribute("cx", x);
  hover.setAttribute("cy", y);
  hover.setAttribute("r", r * 0.8);
  hover.setAttribute("visibility", "visible");
});

document.addEventListener("keydown", (event) => {
  if (!game || game.over || game.to_move !== "human" || !game.keys || watching) return;
  if (event.altKey || event.ctrlKey || event.metaKey) return;
  const action = game.keys[event.key];
  if (action === undefined) return;
  event.preventDefault(); // an arrow key moves the tiles, not the page
  send("POST", "/api/move", { action }, true); // the server refuses a move that changes nothing
});

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// Watch the agent play a one-player game: its moves one request at a time, until stopped.
function toggleWatch() {
  if (watching) { watching = false; render(); return watchLoop; }
  watching = true;
  render();
  watchLoop = (async () => {
    while (watching && game && !game.over) {
      await send("POST", "/api/agent", {}, false);
      if ($("error").textContent) break;
      await sleep(WATCH_DELAY_MS);
    }
    watching = false;
    render();
  })();
  return watchLoop;
}

$("undo").addEventListener("click", () => send("POST", "/api/undo"));
$("new-human").addEventListener("click", () => send("POST", "/api/new", { human_first: true }, false));
$("new-agent").addEventListener("click", () => send("POST", "/api/new", { human_first: false }, true));
$("agent-move").addEventListener("click", () => send("POST", "/api/agent", {}, true));
$("watch").addEventListener("click", () => { toggleWatch(); });

// ---------------------------------------------------------------- autoplay (end-to-end test)

function mulberry32(seed) {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

// A real click at the centre of a board cell: the page's own handler maps it back to a move.
function clickCell([, x, y]) {
  const point = new DOMPoint(x, y).matrixTransform(svgElement().getScreenCTM());
  const target = document.elementFromPoint(point.x, point.y);
  target.dispatchEvent(new MouseEvent("click", { clientX: point.x, clientY: point.y, bubbles: true }));
}

// A board click where the move has a cell; else every other move by its arrow key (2048), the
// rest by their buttons.
async function play(action, summary) {
  const cells = cellOf(action);
  const key = keyOf(action);
  if (cells) { clickCell(cells[0]); summary.board_clicks += 1; }
  else if (key && summary.human_moves % 2 === 1) {
    document.dispatchEvent(new KeyboardEvent("keydown", { key, bubbles: true, cancelable: true }));
    summary.key_presses += 1;
  } else { document.querySelector(`#moves button[data-action="${action}"]`).click(); summary.button_clicks += 1; }
  await pending;
}

const agentMoves = () => game.history.filter((h) => h.by === "agent").length;

// The agent's moves in a one-player game: `clicks` by its button, then `watched` while watching.
async function autoplayAgent(clicks, watched, summary) {
  for (let i = 0; i < clicks && !game.over; i++) {
    const before = agentMoves();
    $("agent-move").click();
    await pending;
    if (agentMoves() !== before + 1) throw new Error(`the agent did not move: ${$("error").textContent}`);
    summary.agent_moves += 1;
  }
  if (watched > 0 && !game.over) {
    const start = agentMoves();
    $("watch").click();
    while (watching && agentMoves() - start < watched) await sleep(20);
    const loop = watchLoop;
    if (watching) $("watch").click(); // stop
    await loop;
    summary.watched = agentMoves() - start;
  }
}

async function autoplay(params) {
  const summary = { done: false, human_moves: 0, board_clicks: 0, button_clicks: 0, key_presses: 0,
    undone: false, illegal_error: null, chance: [], agent_moves: 0, watched: 0, error: null };
  try {
    const limit = parseInt(params.get("autoplay"), 10) || 1000;
    const rand = mulberry32(parseInt(params.get("seed") || "0", 10));
    while (!game.over && game.to_move === "human" && summary.human_moves < limit) {
      const before = game.history.length;
      const choices = game.moves.map((m) => m.action); // the legal moves as offered
      const action = choices[Math.floor(rand() * choices.length)];
      await play(action, summary);
      if (game.history.length <= before) throw new Error(`move ${action} was not played: ${$("error").textContent}`);
      summary.human_moves += 1;
      summary.chance.push($("chance").textContent);
      if (params.get("illegal") === "1" && summary.illegal_error === null && !game.over && cellOf(action) &&
          !game.legal.includes(action)) {
        await play(action, summary); // the square just taken: the server must refuse it
        summary.illegal_error = $("error").textContent;
      }
      if (params.get("undo") === "1" && !summary.undone) {
        const length = game.history.length;
        $("undo").click();
        await pending;
        summary.undone = game.history.length < length && game.history.length === before;
        if (!summary.undone) throw new Error("undo did not restore the position");
      }
    }
    if (game.players === 1) {
      await autoplayAgent(parseInt(params.get("agent") || "0", 10),
        parseInt(params.get("watch") || "0", 10), summary);
    }
    summary.done = true;
  } catch (err) {
    summary.error = String(err);
  }
  Object.assign(summary, { over: game.over, result: game.result, history: game.history,
    status: $("status").textContent, score: $("score").hidden ? null : $("score").textContent });
  $("autoplay-log").textContent = JSON.stringify(summary);
  document.body.dataset.autoplay = summary.done ? "done" : "error";
}

async function main() {
  await send("GET", "/api/state");
  const params = new URLSearchParams(location.search);
  if (params.has("autoplay")) await autoplay(params);
}

main();
