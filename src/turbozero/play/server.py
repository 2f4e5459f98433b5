"""Play against a trained agent in the browser: one `Game`, served by Starlette on uvicorn.

The server binds to 127.0.0.1 only and serves the page from the package (no CDN, no network).
Every move the browser sends is checked by the `Game` against the legal mask of its position.

JSON API (every answer is the game's snapshot, see `Game.snapshot`; errors are
``{"error": "..."}`` with status 400, 404 for an unknown path, 405 for a GET of a POST route,
403 for a foreign Host or a POST from a page of another origin (browsers name it; a website the
user visits must not play here), 502 when the agent's engine fails (the error names it), or
500 when the agent fails otherwise):

    GET  /api/state                      the game now
    POST /api/move  {"action": int}      the human's move, then the agent's reply
    POST /api/agent                      one-player games: the agent plays the next move
    POST /api/undo                       take back the human's last move and the replies after it
    POST /api/new   {"human_first": bool} a new game (the key is optional)

The page itself is `GET /` (`static/index.html`, `static/app.js`, `static/style.css`).
"""

from __future__ import annotations

import asyncio
import errno
import json
import socket
import threading
import time
from collections.abc import Callable, Mapping
from importlib import resources
from typing import Any, cast

import h11
import uvicorn
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send
from uvicorn.protocols.http.h11_impl import H11Protocol

import turbozero
from turbozero.io import outside
from turbozero.io.main_thread import serve_main_thread
from turbozero.play.session import Game, IllegalMoveError, engine_side, fresh_seed
from turbozero.validate import is_digits

HOST = "127.0.0.1"
MAX_BODY_BYTES = 4096
#: seconds a client may take to send its request body, or stay silent within its request head
#: (a stalled client is dropped, its request not applied)
READ_TIMEOUT_SECONDS = 10.0
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")

_STATIC_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
}
_NO_STORE = {"Cache-Control": "no-store"}


class BadBodyError(ValueError):
    """A request body the API refuses; `close` when the connection cannot be trusted after it
    (over the size limit, or cut short)."""

    def __init__(self, message: str, *, close: bool = False) -> None:
        super().__init__(message)
        self.close = close


# --------------------------------------------------------------------------- the app


def make_app(game: Game, *, read_timeout: float = READ_TIMEOUT_SECONDS) -> Starlette:
    """The page and its JSON API for `game` (see the module docstring), as a Starlette app.

    The game's JAX work runs in Starlette's thread pool (the `Game` holds its own lock), so a
    slow agent does not stall the event loop; a body not received within `read_timeout`
    seconds is refused.
    """
    static = _static_files()

    async def page(request: Request) -> Response:
        name = request.path_params.get("name", "index.html")
        if name not in static:
            raise HTTPException(404)
        body, content_type = static[name]
        return Response(body, headers=_NO_STORE, media_type=content_type)

    async def state(request: Request) -> Response:
        return await _answer(game.snapshot)

    async def move(request: Request) -> Response:
        return await _post(request, read_timeout, lambda body: game.move(_action(body)))

    async def agent(request: Request) -> Response:
        return await _post(request, read_timeout, lambda body: game.agent_move())

    async def undo(request: Request) -> Response:
        return await _post(request, read_timeout, lambda body: game.undo())

    async def new(request: Request) -> Response:
        return await _post(request, read_timeout, lambda body: game.new(_human_first(body)))

    routes = [
        Route("/", page),
        Route("/static/{name}", page),
        Route("/api/state", state),
        Route("/api/move", move, methods=["POST"]),
        Route("/api/agent", agent, methods=["POST"]),
        Route("/api/undo", undo, methods=["POST"]),
        Route("/api/new", new, methods=["POST"]),
    ]
    return Starlette(
        routes=routes,
        middleware=[Middleware(_SameMachineOnly)],
        exception_handlers={HTTPException: _http_error},
    )


def _static_files() -> dict[str, tuple[bytes, str]]:
    """The page's files by name, read once from the package."""
    folder = resources.files("turbozero.play") / "static"
    files: dict[str, tuple[bytes, str]] = {}
    for item in folder.iterdir():
        suffix = "." + item.name.rsplit(".", 1)[-1] if "." in item.name else ""
        if item.is_file() and suffix in _STATIC_TYPES:
            files[item.name] = (item.read_bytes(), _STATIC_TYPES[suffix])
    return files


def _json(status: int, data: Any, headers: Mapping[str, str] | None = None) -> Response:
    return JSONResponse(data, status, headers={**_NO_STORE, **(headers or {})})


async def _answer(work: Callable[[], dict[str, Any]]) -> Response:
    """`work()`'s snapshot, run in a worker thread; a refused move is 400, an engine's failure
    502 (its one line), any other error 500 (the server keeps serving and says what went
    wrong)."""
    try:
        return _json(200, await run_in_threadpool(work))
    except IllegalMoveError as err:
        return _json(400, {"error": str(err)})
    except Exception as err:
        failure = outside.failure_behind(err)
        if isinstance(failure, Exception):
            return _json(502, {"error": str(failure)})
        return _json(500, {"error": repr(err)})


def _end_engines_at_once() -> None:
    """End the engines' processes now (`turbozero.io.outside.end_all`)."""
    outside.end_all(at_once=True)


async def _post(
    request: Request, read_timeout: float, work: Callable[[dict[str, Any]], dict[str, Any]]
) -> Response:
    """Read the request's JSON body, then answer with `work(body)` (see `_answer`)."""
    try:
        body = await _json_body(request, read_timeout)
    except BadBodyError as err:
        return _json(400, {"error": str(err)}, {"Connection": "close"} if err.close else None)
    return await _answer(lambda: work(body))


async def _json_body(request: Request, read_timeout: float) -> dict[str, Any]:
    """The request's body as a JSON object (`{}` when empty), received within `read_timeout`.

    Raises:
        BadBodyError: the body is over `MAX_BODY_BYTES`, short of its Content-Length when the
            time is up or the client left, not JSON, or not a JSON object.
    """
    given = request.headers.get("content-length")
    if given is not None and not is_digits(given.strip()):
        raise BadBodyError(f"Content-Length must be a byte count, got {given!r}")
    length = None if given is None else int(given)
    too_long = f"request body over {MAX_BODY_BYTES} bytes"
    if length is not None and length > MAX_BODY_BYTES:
        raise BadBodyError(too_long, close=True)
    chunks: list[bytes] = []

    async def receive() -> None:
        async for chunk in request.stream():
            chunks.append(chunk)
            if sum(map(len, chunks)) > MAX_BODY_BYTES:  # a chunked body states no length
                raise BadBodyError(too_long, close=True)

    try:
        await asyncio.wait_for(receive(), read_timeout)
    except (TimeoutError, ClientDisconnect):  # the client stalled or left mid-body
        got = sum(map(len, chunks))
        raise BadBodyError(
            f"request body shorter than its Content-Length ({got} of {length} bytes)"
            if length is not None
            else f"request body unfinished after {read_timeout:g} s ({got} bytes)",
            close=True,
        ) from None
    try:
        data = json.loads(b"".join(chunks) or b"{}", object_pairs_hook=_unique_keys)
    except DuplicateKeyError as err:
        raise BadBodyError(f"request body names {err} twice: send each key once") from None
    except (ValueError, RecursionError) as err:  # not UTF-8, not JSON, nested too deep
        reason = str(err).splitlines()[0][:200]
        raise BadBodyError(f"request body is not JSON: {reason}") from None
    if not isinstance(data, dict):
        raise BadBodyError("request body must be a JSON object")
    return data


class DuplicateKeyError(ValueError):
    """A JSON object naming one key twice (which value counts would be a guess)."""


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise DuplicateKeyError(repr(key))
        out[key] = value
    return out


def _action(body: dict[str, Any]) -> Any:
    if "action" not in body:
        raise IllegalMoveError('send {"action": <int>}')
    return body["action"]


def _human_first(body: dict[str, Any]) -> bool | None:
    first = body.get("human_first")
    if first is not None and not isinstance(first, bool):
        raise IllegalMoveError(f"human_first must be true or false, got {first!r}")
    return first


async def _http_error(request: Request, exc: Exception) -> Response:
    """Starlette's 404 and 405 in the API's JSON form."""
    assert isinstance(exc, HTTPException)
    path = request.url.path
    if exc.status_code == 405:
        message = f"{path} takes {(exc.headers or {}).get('Allow', 'another method')}"
    elif exc.status_code == 404:
        message = f"no such {'page' if request.method == 'GET' else 'endpoint'}: {path}"
    else:
        message = exc.detail
    return _json(exc.status_code, {"error": message}, exc.headers)


def _refusal(request: Request) -> str | None:
    """Why a request a website could have sent is refused, or None.

    A Host that is not this machine by name is a site whose name was pointed at 127.0.0.1 (DNS
    rebinding), which would otherwise read and move through its own page; a POST whose Origin
    (browsers name the page that sent it) is another site's is a website the user visits. The
    game is this machine's user's. Requests without an Origin (curl, scripts) are not a page's.
    """
    host = request.headers.get("host", "")
    server = request.scope.get("server")
    bound = str(server[0]) if server else ""
    foreign_host = host.rsplit(":", 1)[0] not in (*LOOPBACK_NAMES, bound)
    if request.method in ("GET", "HEAD"):
        return "this server answers to 127.0.0.1 only" if foreign_host else None
    origin = request.headers.get("origin")
    foreign_origin = origin is not None and origin.rstrip("/") not in (
        f"http://{host}",
        f"https://{host}",
    )
    if foreign_host or foreign_origin:
        return "moves come from this server's own page (127.0.0.1) only"
    return None


class _SameMachineOnly:
    """ASGI middleware that answers 403 to every request `_refusal` refuses, on every route."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        refusal = _refusal(Request(scope)) if scope["type"] == "http" else None
        if refusal is None:
            await self.app(scope, receive, send)
        else:
            await _json(403, {"error": refusal})(scope, receive, send)


# --------------------------------------------------------------------------- serving


class _GuardedHTTP(asyncio.Protocol):
    """uvicorn's HTTP/1.1 connection (its `h11` protocol, driven only through the
    `asyncio.Protocol` interface), behind a guard that reads the same bytes with its own
    `h11.Connection` before uvicorn does. uvicorn takes the class as `Config(http=...)`.

    The guard adds two protections uvicorn does not have:
    - a deadline on the request head: a connection that has sent nothing, or part of a head, for
      `read_timeout` seconds is dropped (uvicorn waits as long as the client likes). A request
      whose head is complete is the app's to time out (`_json_body`); uvicorn closes a connection
      idle after its answer.
    - a request h11 cannot parse (a malformed head or Content-Length) is answered in the API's
      `{"error": ...}` form, naming the fault, and never reaches uvicorn. When an earlier request
      on the connection may still be being answered, the connection is closed instead, so the two
      answers cannot interleave.
    """

    read_timeout = READ_TIMEOUT_SECONDS

    def __init__(self, **uvicorn_args: Any) -> None:
        self._http = H11Protocol(**uvicorn_args)
        limit = uvicorn_args["config"].h11_max_incomplete_event_size
        self._reader: h11.Connection | None = h11.Connection(
            h11.SERVER, **({} if limit is None else {"max_incomplete_event_size": limit})
        )
        self._transport: asyncio.Transport | None = None
        self._silence: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.Transport, transport)  # (uvloop's is not a subclass)
        self._http.connection_made(self._transport)
        self._watch_silence()

    def data_received(self, data: bytes) -> None:
        answering = self._reader is not None and self._reader.their_state is h11.DONE
        fault = _read_requests(self._reader, data)
        if fault is None:
            self._http.data_received(data)
            self._watch_silence()
        elif answering:
            self._close()
        else:
            self._answer_400(fault)

    def eof_received(self) -> None:
        self._http.eof_received()  # (returns None: the transport closes itself)

    def connection_lost(self, exc: Exception | None) -> None:
        if self._silence is not None:
            self._silence.cancel()
        self._http.connection_lost(exc)

    def pause_writing(self) -> None:
        self._http.pause_writing()

    def resume_writing(self) -> None:
        self._http.resume_writing()

    def _watch_silence(self) -> None:
        if self._silence is not None:
            self._silence.cancel()
        loop = asyncio.get_running_loop()
        self._silence = loop.call_later(self.read_timeout, self._drop_if_within_a_head)

    def _drop_if_within_a_head(self) -> None:
        if self._reader is not None and self._reader.their_state is h11.IDLE:
            self._close()

    def _close(self) -> None:
        assert self._transport is not None
        self._reader = None
        self._transport.close()

    def _answer_400(self, fault: str) -> None:
        assert self._transport is not None
        body = json.dumps({"error": f"invalid HTTP request: {fault}"}).encode()
        head = (
            "HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n"
        )
        self._transport.write(head.encode() + body)
        self._close()


def _read_requests(reader: h11.Connection | None, data: bytes) -> str | None:
    """Follow the client's side of the connection in `reader` through `data`: None when the
    bytes parse (or `reader` can no longer follow: an upgrade, or a connection that must close,
    which uvicorn ends), else h11's reason why not.

    A client's next request means its last one was answered or is pipelined (uvicorn buffers it
    until then), so `reader` answers the last one itself (an empty 204) to start the next cycle.
    """
    if reader is None or reader.their_state in (h11.MUST_CLOSE, h11.CLOSED, h11.SWITCHED_PROTOCOL):
        return None
    try:
        if reader.their_state is h11.DONE and reader.our_state is h11.SEND_RESPONSE:
            reader.send(h11.Response(status_code=204, headers=[]))
            reader.send(h11.EndOfMessage())
        if reader.states == {h11.CLIENT: h11.DONE, h11.SERVER: h11.DONE}:
            reader.start_next_cycle()
    except h11.LocalProtocolError:
        return None  # (not expected: then uvicorn alone reads the connection, as it would)
    try:
        reader.receive_data(data)
        while reader.next_event() not in (h11.NEED_DATA, h11.PAUSED):
            pass
    except h11.RemoteProtocolError as err:
        return str(err)
    return None


class PlayServer:
    """`make_app`'s app served by uvicorn on a socket bound before it runs, so its address (a
    free port where 0 was asked for) is known at once and early clients wait in the backlog.

    `serve_forever()` blocks (run it in a thread for tests); `shutdown()`, from another thread,
    stops it and waits for it to return; `server_close()` releases the socket.
    """

    def __init__(
        self,
        app: Starlette,
        sock: socket.socket,
        *,
        quiet: bool = True,
        read_timeout: float = READ_TIMEOUT_SECONDS,
    ) -> None:
        protocol = type("Protocol", (_GuardedHTTP,), {"read_timeout": read_timeout})
        config = uvicorn.Config(
            app,
            http=protocol,
            lifespan="off",
            log_level="error" if quiet else "info",
            access_log=not quiet,
        )
        self.socket = sock
        host, port = sock.getsockname()[:2]
        self.server_address: tuple[str, int] = (str(host), int(port))
        self._server = uvicorn.Server(config)
        self._stopped = threading.Event()

    def serve_forever(self) -> None:
        """Answer requests until `shutdown()`, or Ctrl-C on the main thread (uvicorn finishes
        the answers under way, then raises the KeyboardInterrupt here); once per server, as
        the socket is closed at the end."""
        self._stopped.clear()
        try:
            self._server.run(sockets=[self.socket])
        finally:
            self._stopped.set()

    def shutdown(self) -> None:
        """Stop `serve_forever()`, running in another thread, and wait for it to return."""
        self._server.should_exit = True
        self._stopped.wait()

    def server_close(self) -> None:
        self.socket.close()


def make_server(
    game: Game,
    *,
    port: int = 0,
    host: str = HOST,
    quiet: bool = True,
    read_timeout: float = READ_TIMEOUT_SECONDS,
) -> PlayServer:
    """A server for `game` on `host:port`; a port in use (or 0) gets a free one.

    Its address is `server.server_address`; run it with `serve_forever()` (in a thread for
    tests). `quiet` keeps uvicorn to its errors.
    """
    if not 0 <= port <= 65535:
        raise ValueError(f"port must be in [0, 65535], got {port}")
    if not read_timeout > 0:
        raise ValueError(f"read_timeout must be > 0 seconds, got {read_timeout}")
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # restarts on a port just freed
    try:
        try:
            sock.bind((host, port))
        except OSError as err:
            if port == 0 or err.errno not in (errno.EADDRINUSE, errno.EACCES):
                raise
            sock.bind((host, 0))
        sock.listen()
    except OSError:
        sock.close()
        raise
    app = make_app(game, read_timeout=read_timeout)
    return PlayServer(app, sock, quiet=quiet, read_timeout=read_timeout)


def url_of(server: PlayServer) -> str:
    host, port = server.server_address
    return f"http://{host}:{port}/"


def serve(
    path: str | None,
    *,
    human_first: bool = False,
    num_simulations: int | None = None,
    port: int = 8000,
    open_browser: bool = True,
    which: str = "best",
    trust: bool = False,
    engine: str | None = None,
    game_id: str | None = None,
    seed: int | None = None,
    depth: int | None = None,
) -> None:
    """Load the agent of run `path` and serve a game against it until interrupted (Ctrl-C);
    `trust` as for `turbozero.load_agent`. With `engine` and `game_id` instead of `path`, the
    engine (`engine_side`) takes the agent's seat; engines that must run on the main thread
    (gnubg looking ahead) are served from it while the page runs on another. `seed` fixes the
    games' keys (the dice, the new tiles, the agent's sampling); None draws a new one each
    start (`fresh_seed`), said on the ready line so that a session can be replayed. `depth`: a
    TD agent's look-ahead in a one-player game (`turbozero.load_agent`'s)."""
    import webbrowser

    if seed is not None and not (isinstance(seed, int) and 0 <= seed < 2**31):
        raise ValueError(f"seed must be an int in [0, 2**31 - 1] (--seed), got {seed!r}")
    if (path is None) == (engine is None) or (engine is None) != (game_id is None):
        raise ValueError("play a run directory, or an engine with its game (engine and game_id)")
    if engine is not None:
        loaded: Any = engine_side(str(game_id), engine)
    else:
        loaded = turbozero.load_agent(
            str(path), num_simulations, which=which, trust=trust, depth=depth
        )
    start = time.perf_counter()
    print(f"turbozero play: {loaded.env.name}; compiling the agent ...", flush=True)
    seed = fresh_seed() if seed is None else seed

    def ready() -> Game:
        game = Game(loaded, human_first=human_first, seed=seed)  # refuses games it cannot serve
        game.warm_up()
        return game

    # (an engine's first moves run off the main thread, which a Ctrl-C then reaches at once)
    game = (
        ready() if engine is None else serve_main_thread(ready, on_interrupt=_end_engines_at_once)
    )
    seconds = time.perf_counter() - start
    server = make_server(game, port=port)
    url = url_of(server)
    if port and server.server_address[1] != port:
        print(f"port {port} is in use: serving on {server.server_address[1]}", flush=True)
    print(
        f"{game.agent_name} ready in {seconds:.1f} s: {url}  (seed {seed}; Ctrl-C stops)",
        flush=True,
    )
    if open_browser:
        webbrowser.open(url)
    try:
        if engine is None:
            server.serve_forever()
        else:
            serve_main_thread(server.serve_forever)
    except KeyboardInterrupt:
        if engine is not None:
            _end_engines_at_once()  # (a move under way ends with its engine: none waits)
            server.shutdown()
    finally:
        server.server_close()
