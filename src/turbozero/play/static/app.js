// turbozero play: draws the server's game and sends the human's moves (the server checks them).
// ?autoplay=N[&seed=S][&undo=1][&illegal=1] plays N random legal moves by clicking the page
// itself (the end-to-end test uses it) and writes a JSON summary into #autoplay-log.
"use strict";

const $ = (id) => document.getElementById(id);
const SVG_NS = "http://www.w3.org/2000/svg";
let game = null;
let pending = Promise.resolve();
let busy = false;

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

function render() {
  if (!game) return;
  $("title").textContent = `${game.env}: you against ${game.agent}` +
    ` (you move ${game.human_first ? "first" : "second"})`;
  drawBoard();
  if (game.over) setStatus(game.result.text, true);
  else if (game.to_move === "human") setStatus(game.cells ? "Your move: click the board." : "Your move.", false);
  else setStatus("The agent is thinking…", false);

  // Legal moves the board cannot take (pass, swap), or all of them when there is no board.
  const moves = $("moves");
  moves.replaceChildren();
  if (!game.over && game.to_move === "human") {
    for (const m of game.moves) {
      if (cellOf(m.action)) continue;
      const b = document.createElement("button");
      b.type = "button";
      b.textContent = m.label;
      b.dataset.action = m.action;
      b.addEventListener("click", () => send("POST", "/api/move", { action: m.action }, true));
      moves.append(b);
    }
  }
  $("undo").disabled = !game.can_undo;

  const reply = game.reply;
  const tbody = $("top").querySelector("tbody");
  tbody.replaceChildren();
  if (reply) {
    $("reply").textContent = `Played ${reply.label} (${(reply.seconds * 1000).toFixed(0)} ms).`;
    const v = reply.value;
    $("value").textContent = `Value estimate: ${v >= 0 ? "+" : ""}${v.toFixed(2)} ` +
      "(for the agent: −1 loses, +1 wins)";
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
    li.textContent = `${h.by === "human" ? "you" : "agent"}: ${h.label}`;
    history.append(li);
  }
  history.scrollTop = history.scrollHeight;
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
  if (game.last_cell) {
    const [x, y, r] = game.last_cell;
    if (game.env.startsWith("go_")) svg.append(circle(x, y, r * 0.3, "#e0452f", "none", 0));
    else svg.append(square(x, y, r * 0.9, "#e0452f", 2.5));
  }
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

$("undo").addEventListener("click", () => send("POST", "/api/undo"));
$("new-human").addEventListener("click", () => send("POST", "/api/new", { human_first: true }, false));
$("new-agent").addEventListener("click", () => send("POST", "/api/new", { human_first: false }, true));

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

async function play(action, summary) {
  const cells = cellOf(action);
  if (cells) { clickCell(cells[0]); summary.board_clicks += 1; }
  else { document.querySelector(`#moves button[data-action="${action}"]`).click(); summary.button_clicks += 1; }
  await pending;
}

async function autoplay(params) {
  const summary = { done: false, human_moves: 0, board_clicks: 0, button_clicks: 0, undone: false,
    illegal_error: null, error: null };
  try {
    const limit = parseInt(params.get("autoplay"), 10) || 1000;
    const rand = mulberry32(parseInt(params.get("seed") || "0", 10));
    while (!game.over && game.to_move === "human" && summary.human_moves < limit) {
      const before = game.history.length;
      const action = game.legal[Math.floor(rand() * game.legal.length)];
      await play(action, summary);
      if (game.history.length <= before) throw new Error(`move ${action} was not played: ${$("error").textContent}`);
      summary.human_moves += 1;
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
    summary.done = true;
  } catch (err) {
    summary.error = String(err);
  }
  Object.assign(summary, { over: game.over, result: game.result, history: game.history,
    status: $("status").textContent });
  $("autoplay-log").textContent = JSON.stringify(summary);
  document.body.dataset.autoplay = summary.done ? "done" : "error";
}

async function main() {
  await send("GET", "/api/state");
  const params = new URLSearchParams(location.search);
  if (params.has("autoplay")) await autoplay(params);
}

main();
