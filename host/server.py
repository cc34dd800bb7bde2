"""The console's HTTP side: static files, a small JSON API and one event stream, on a loopback port that answers
nobody but the console.

Every web page in the browser can make requests to any loopback port, and the console's API starts turns and
changes settings. So each request passes these checks, in this order, before anything else:

1. `Host` must be `127.0.0.1:<port>` or `localhost:<port>` (421 otherwise): a DNS-rebinding page, whose requests
   carry its own host name, gets nothing.
2. The path must start with `/<secret>/`, a 256-bit secret made per run (404 otherwise): only whoever was given the
   console's URL can address it.
3. `Origin`, when present, must be the console's own origin, and `Sec-Fetch-Site`, when present, must say
   `same-origin` or `none` (403 otherwise): another Page's script — even one that learned the secret — can neither
   read an answer nor have a request acted on, including the "simple" no-CORS POSTs a browser sends without asking.
4. An API request (`api/...`, the event stream included) must carry the console's cookie (403 otherwise). The URL's
   secret alone is no proof once it can leak (a process list, a debugging port's target list, a Page that showed
   the console), and a process that is not a browser sends whatever `Origin` and `Sec-Fetch-Site` it likes. So when
   the app opens the console window it puts a second per-run secret in the browser's cookie jar through its own
   CDP connection (`cookie_param`): HttpOnly (no page script reads it), SameSite=Strict (no other site's request
   carries it) and scoped to the path `/<secret>/` (cookies ignore ports: the path keeps it from any other server
   on 127.0.0.1 that does not already know the secret). No other process is given it; the scoped gateways refuse
   every cookie read (`runtime/gateway/allowlist.py`).

Static files (the console's own HTML, script and style, as published in this repository) need no cookie: they hold
nothing of the run. Bodies are size-limited and every answer says `no-store`, `nosniff`, `no-referrer` (the secret
never leaves in a `Referer`) and a strict content security policy: the console loads only its own files.

The event stream (`GET /<secret>/api/events`, Server-Sent Events) replays the event log (`EventLog`: a ring buffer
whose snapshot events replace their predecessors) to each new subscriber, then streams updates; a reconnecting
`EventSource` resumes after its `Last-Event-ID`.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import hmac
import json
import logging
import re
import secrets
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any, Protocol

from aiohttp import web

from host.turns import ConsoleRefusal
from host.windows import Rect
from runtime.listeners import BACKLOG, BoundedAppRunner

log = logging.getLogger(__name__)

CONSOLE_DIR = Path(__file__).resolve().parent / "console"
DEMO_DIR = Path(__file__).resolve().parent / "demo"
DEMO_TITLE = "computer-use demo"
"""Part of the demo Page's title: the demo script (host/scripts/demo.json) finds the Page by it."""
MAX_BODY = 64 * 1024
"""Bytes of a request body at most (a message is at most 16,000 characters)."""

STATIC = re.compile(r"[a-z0-9][a-z0-9_-]*\.(html|js|css|png|svg)")
TYPES = {
    "html": "text/html",
    "js": "text/javascript",
    "css": "text/css",
    "png": "image/png",
    "svg": "image/svg+xml",
}
HEADERS = {
    "Cache-Control": "no-store",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cross-Origin-Resource-Policy": "same-origin",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
        "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    ),
}
SAME_ORIGIN_FETCH = ("same-origin", "none")
COOKIE = "computer_use_console"
"""The console's cookie (see the module docstring, check 4)."""
TAIL = web.RequestKey("tail", str)
"""The path after `/<secret>/`, set by the guard for the route."""


class ConsoleActions(Protocol):
    """What the console's API asks the app to do. Each raises `ConsoleRefusal` with a message for the user."""

    async def send_message(self, text: str, pages: list[str]) -> None: ...

    async def decide(self, decision: str) -> None: ...

    async def set_backend(self, backend: str) -> None: ...

    async def set_access(self, handle: str, enabled: bool) -> None: ...

    async def new_chat(self) -> None: ...

    async def open_url(self, url: str, placement: str, screen: Rect | None = None) -> None: ...

    async def refresh_pages(self, screen: Rect | None = None) -> None: ...

    async def grant_access(self, client: str, pages: list[str], bound: str, minutes: float | None) -> None: ...

    async def revoke_access(self, client: str) -> None: ...

    async def deny_access(self, client: str) -> None: ...


COALESCED = ("pages", "grants", "settings")
"""Event types that each carry the whole current state of one list: a newer one replaces the older in the log."""
LATEST_KEPT = ("turn", "notice")
"""Event types whose newest one is never evicted (the turn's state, the notice of each cause): the console's current
state."""
MAX_EVENTS = 5000
MAX_EVENT_BYTES = 4 * 1024 * 1024
"""The event log's bound: at most this many events and this many bytes of event JSON (the oldest go first)."""


def _size(raw: str) -> int:
    return len(raw.encode())


class EventLog:
    """What the console was told, in order: replayed to each new subscriber, then streamed.

    A ring buffer with coalesced snapshots, so it stays bounded however long the app runs and whatever a Page does:

    - an event whose type is in `COALESCED` (the Pages list, the MCP clients, the settings) replaces the log's
      previous one of its type, wherever it is: a Page that rewrites its URL every few milliseconds leaves one
      `pages` event, the current one, not its history;
    - past `max_events` events or `max_bytes` bytes of JSON the oldest events go first (messages, text, cards, old
      turn states), but never a coalesced one nor the newest of a `LATEST_KEPT` type: a console load always gets
      the current state, and the turns' cards are what fills the bound.

    Ids are absolute (the SSE `id:`), so a coalesced or evicted event leaves a gap and `Last-Event-ID` still resumes
    where the subscriber was. `max_events` and `max_bytes` are class attributes (a test variant may change them)."""

    max_events: int = MAX_EVENTS
    max_bytes: int = MAX_EVENT_BYTES

    def __init__(self) -> None:
        self._entries: list[tuple[int, str, str]] = []  # (id, type if kept specially else "", JSON), ids ascending
        self._latest: dict[str, int] = {}  # LATEST_KEPT type -> the id of its newest event
        self.next_id = 0
        """The id the next event gets: take it before an action to follow what the action causes."""
        self.bytes = 0
        self._changed = asyncio.Event()
        self.closed = False

    @property
    def events(self) -> list[str]:
        """The events a subscriber starting now is replayed, oldest first."""
        return [event for _, _, event in self._entries]

    def since(self, start: int) -> list[str]:
        """The retained events with id `start` or later."""
        return [event for _, _, event in self._entries[self._position(start) :]]

    def publish(self, event: dict[str, Any]) -> None:
        raw = json.dumps(event, ensure_ascii=False)
        kind = event.get("type", "")
        kind = kind if kind in COALESCED or kind in LATEST_KEPT else ""
        if kind == "notice":  # one notice per cause is the console's state: the app's outlives a turn's
            kind = f"notice:{event.get('cause', 'app')}"
        if kind in COALESCED:
            for position in range(len(self._entries) - 1, -1, -1):  # the one to replace is usually recent
                if self._entries[position][1] == kind:
                    self.bytes -= _size(self._entries.pop(position)[2])
                    break
        elif kind:
            self._latest[kind] = self.next_id
        self._entries.append((self.next_id, kind, raw))
        self.next_id += 1
        self.bytes += _size(raw)
        self.trim()
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    def new_chat(self) -> None:
        """A new chat: the old one's messages, text and cards leave the log (a reload shows the new chat only),
        then `new_chat` tells the consoles following it to clear their history."""
        kept = [entry for entry in self._entries if entry[1]]
        self.bytes = sum(_size(raw) for _, _, raw in kept)
        self._entries = kept
        self.publish({"type": "new_chat"})

    def trim(self) -> None:
        """Evict the oldest evictable events once the log is over its bound (the newest event always stays), down to
        a tenth below it: a pass over the log then comes once per tenth of the bound, not on every event of a full
        log (a long run's turns would otherwise pay a pass over 5,000 events per card)."""
        if len(self._entries) <= self.max_events and self.bytes <= self.max_bytes:
            return
        excess = len(self._entries) - (self.max_events - self.max_events // 10)
        target = self.max_bytes - self.max_bytes // 10
        kept: list[tuple[int, str, str]] = []
        last = len(self._entries) - 1
        for position, entry in enumerate(self._entries):
            index, kind, raw = entry
            pinned = kind in COALESCED or self._latest.get(kind) == index or position == last
            if pinned or (excess <= 0 and self.bytes <= target):
                kept.append(entry)
            else:
                excess -= 1
                self.bytes -= _size(raw)
        self._entries = kept

    def _position(self, start: int) -> int:
        return bisect.bisect_left(self._entries, start, key=lambda entry: entry[0])

    def close(self) -> None:
        self.closed = True
        self._changed.set()

    async def follow(self, start: int) -> AsyncIterator[tuple[int, str]]:
        """Yield (id, event JSON) from id `start` on, waiting for more, until the log is closed."""
        cursor = max(start, 0)
        while not self.closed:
            changed = self._changed
            while (position := self._position(cursor)) < len(self._entries):
                index, _, event = self._entries[position]
                yield index, event
                cursor = index + 1
            if self.closed:
                return
            await changed.wait()


def _json(data: dict[str, Any], status: int = 200) -> web.Response:
    return web.json_response(data, status=status, headers=HEADERS)


class ConsoleServer:
    """The console's port. `host_allowed`, `origin_allowed`, `proven` and `reserved_origins` are the checks a
    negative control can take away (a subclass overriding one), never a setting."""

    def __init__(self, actions: ConsoleActions, events: EventLog, console_dir: Path | None = None) -> None:
        self.actions = actions
        self.events = events
        self.console_dir = console_dir or CONSOLE_DIR
        self.secret = secrets.token_urlsafe(32)
        self.proof = secrets.token_urlsafe(32)
        """The console cookie's value: only ever handed to the browser, through the app's own CDP connection."""
        self.port = 0
        self.subscribed = asyncio.Event()
        """Set once a console has opened the event stream (its script runs, its page is built)."""
        self._runner: web.AppRunner | None = None
        self._routes: dict[str, Callable[[dict[str, Any]], Awaitable[None]]] = {
            "api/message": self._message,
            "api/decide": self._decide,
            "api/new_chat": self._new_chat,
            "api/settings": self._settings,
            "api/access": self._access,
            "api/open": self._open,
            "api/refresh": self._refresh,
            "api/grant": self._grant,
            "api/revoke": self._revoke,
            "api/deny": self._deny,
        }

    @property
    def origin(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        return f"{self.origin}/{self.secret}/"

    def reserved_origins(self) -> list[str]:
        """The origins that are the chat, never a Page: the console's, by both names its port answers to. No Page
        opens on them, and a Page that navigates there is out of every agent's reach (`PageRegistry.reserve`)."""
        return [self.origin, f"http://localhost:{self.port}"]

    def cookie_param(self) -> dict[str, Any]:
        """The console's cookie as CDP's `Storage.setCookies` takes it: host-only on the console's origin, path
        `/<secret>/`, HttpOnly, SameSite=Strict, for this run only (a session cookie)."""
        return {
            "name": COOKIE,
            "value": self.proof,
            "url": self.url,
            "path": f"/{self.secret}/",
            "httpOnly": True,
            "sameSite": "Strict",
        }

    async def start(self, port: int = 0) -> ConsoleServer:
        app = web.Application(middlewares=[self._guard], client_max_size=MAX_BODY)
        app.router.add_route("*", "/{tail:.*}", self._dispatch)
        self._runner = BoundedAppRunner(app, access_log=None, handle_signals=False, shutdown_timeout=2.0)
        await self._runner.setup()
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            sock.close()
            await self._runner.cleanup()
            raise
        self.port = sock.getsockname()[1]
        await web.SockSite(self._runner, sock, backlog=BACKLOG).start()
        return self

    async def close(self) -> None:
        self.events.close()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    # -- who is calling -----------------------------------------------------------------------------------------

    def host_allowed(self, request: web.Request) -> bool:
        return request.headers.get("Host", "") in (f"127.0.0.1:{self.port}", f"localhost:{self.port}")

    def origin_allowed(self, request: web.Request) -> bool:
        origin = request.headers.get("Origin")
        if origin is not None and origin != f"http://{request.headers.get('Host', '')}":
            return False
        return request.headers.get("Sec-Fetch-Site", "none") in SAME_ORIGIN_FETCH

    def proven(self, request: web.Request) -> bool:
        """The request carries the console's cookie (compared in constant time): it comes from the console window
        the app opened, whatever its headers say."""
        cookie = request.cookies.get(COOKIE, "")
        return hmac.compare_digest(cookie.encode(), self.proof.encode())

    def _tail(self, request: web.Request) -> str | None:
        """The path after `/<secret>/`, or None when the path does not start with it (compared in constant time)."""
        first, slash, tail = request.path[1:].partition("/")
        if not slash or not hmac.compare_digest(first.encode(), self.secret.encode()):
            return None
        return tail

    @web.middleware
    async def _guard(self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]):
        if not self.host_allowed(request):
            return self._refuse(request, 421, "wrong Host")
        tail = self._tail(request)
        if tail is None:
            return self._refuse(request, 404, "no secret")
        if not self.origin_allowed(request):
            return self._refuse(request, 403, "foreign Origin")
        if tail.startswith("api/") and not self.proven(request):
            return self._refuse(request, 403, "no console cookie")
        request[TAIL] = tail
        return await handler(request)

    @staticmethod
    def _refuse(request: web.Request, status: int, why: str) -> web.Response:
        origin = request.headers.get("Origin", "-")[:100]
        # The path may hold the secret (a wrong Origin with the right secret): log only what is safe to show.
        log.warning("console refused %s (%s): %s from Origin %s", status, why, request.method, origin)
        return web.Response(status=status, text=f"{status}\n", headers=HEADERS)

    # -- routes -------------------------------------------------------------------------------------------------

    async def _dispatch(self, request: web.Request) -> web.StreamResponse:
        tail = request[TAIL]
        if request.method == "GET":
            if tail == "api/events":
                return await self._stream(request)
            return self._static(tail or "index.html")
        if request.method == "POST" and tail in self._routes:
            try:
                body = json.loads(await request.read())
            except (ValueError, RecursionError):
                return _json({"error": "the body is not JSON"}, 400)
            if not isinstance(body, dict):
                return _json({"error": "the body is not a JSON object"}, 400)
            try:
                await self._routes[tail](body)
            except ConsoleRefusal as refusal:
                return _json({"error": str(refusal)}, refusal.status)
            return _json({"ok": True})
        return web.Response(status=404 if request.method in ("GET", "POST") else 405, headers=HEADERS)

    def _static(self, name: str) -> web.Response:
        match = STATIC.fullmatch(name)
        path = self.console_dir / name
        if match is None or not path.is_file():
            return web.Response(status=404, headers=HEADERS)
        return web.Response(
            body=path.read_bytes(), content_type=TYPES[match.group(1)], charset="utf-8", headers=HEADERS
        )

    async def _stream(self, request: web.Request) -> web.StreamResponse:
        try:
            start = int(request.headers.get("Last-Event-ID", "-1")) + 1
        except ValueError:
            start = 0
        response = web.StreamResponse(headers={**HEADERS, "Content-Type": "text/event-stream"})
        await response.prepare(request)
        self.subscribed.set()
        with contextlib.suppress(ConnectionError):
            async for index, event in self.events.follow(start):
                await response.write(f"id: {index}\ndata: {event}\n\n".encode())
        return response

    async def _message(self, body: dict[str, Any]) -> None:
        text, pages = body.get("text"), body.get("pages", [])
        if not isinstance(text, str) or not isinstance(pages, list) or not all(isinstance(p, str) for p in pages):
            raise ConsoleRefusal("a message is {text: string, pages: [handle, ...]}", 400)
        await self.actions.send_message(text, pages)

    async def _decide(self, body: dict[str, Any]) -> None:
        decision = body.get("decision")
        if decision not in ("continue", "allow", "stop", "retry"):
            raise ConsoleRefusal("decision is continue, allow, stop or retry", 400)
        await self.actions.decide(decision)

    async def _new_chat(self, body: dict[str, Any]) -> None:
        await self.actions.new_chat()

    async def _settings(self, body: dict[str, Any]) -> None:
        backend = body.get("backend")
        if not isinstance(backend, str):
            raise ConsoleRefusal("settings are {backend: string}", 400)
        await self.actions.set_backend(backend)

    async def _access(self, body: dict[str, Any]) -> None:
        page, enabled = body.get("page"), body.get("enabled")
        if not isinstance(page, str) or not isinstance(enabled, bool):
            raise ConsoleRefusal("access is {page: handle, enabled: boolean}", 400)
        await self.actions.set_access(page, enabled)

    async def _open(self, body: dict[str, Any]) -> None:
        url, placement = body.get("url"), body.get("placement", "right")
        if not isinstance(url, str) or not isinstance(placement, str):
            raise ConsoleRefusal("open is {url: string, placement: left|right|above|below, screen?}", 400)
        await self.actions.open_url(url, placement, _screen(body))

    async def _refresh(self, body: dict[str, Any]) -> None:
        await self.actions.refresh_pages(_screen(body))

    async def _grant(self, body: dict[str, Any]) -> None:
        client, pages, bound, minutes = body.get("client"), body.get("pages"), body.get("bound"), body.get("minutes")
        if (
            not isinstance(client, str)
            or not isinstance(pages, list)
            or not all(isinstance(p, str) for p in pages)
            or not isinstance(bound, str)
            or not (minutes is None or (isinstance(minutes, int | float) and not isinstance(minutes, bool)))
        ):
            raise ConsoleRefusal(
                "a grant is {client: id, pages: [handle, ...], bound: revoke|time|page, minutes?}", 400
            )
        await self.actions.grant_access(client, pages, bound, minutes)

    async def _revoke(self, body: dict[str, Any]) -> None:
        client = body.get("client")
        if not isinstance(client, str):
            raise ConsoleRefusal("revoke is {client: id}", 400)
        await self.actions.revoke_access(client)

    async def _deny(self, body: dict[str, Any]) -> None:
        client = body.get("client")
        if not isinstance(client, str):
            raise ConsoleRefusal("deny is {client: id}", 400)
        await self.actions.deny_access(client)


SCREEN_KEYS = ("availLeft", "availTop", "availWidth", "availHeight")
SCREEN_RANGE = 100_000
"""Pixels: a work area's position and size must be within this (no screen is larger)."""
MIN_SCREEN = 200


def _screen(body: dict[str, Any]) -> Rect | None:
    """The work area the console read from its browser (`screen.availLeft/Top/Width/Height`), if it sent one."""
    screen = body.get("screen")
    if screen is None:
        return None
    values = [screen.get(key) if isinstance(screen, dict) else None for key in SCREEN_KEYS]
    if not all(isinstance(v, int) and not isinstance(v, bool) and abs(v) <= SCREEN_RANGE for v in values):
        raise ConsoleRefusal("screen is {availLeft, availTop, availWidth, availHeight}: integers (pixels)", 400)
    left, top, width, height = values
    if width < MIN_SCREEN or height < MIN_SCREEN:  # type: ignore[operator]
        raise ConsoleRefusal(f"a screen's work area is at least {MIN_SCREEN}×{MIN_SCREEN} pixels", 400)
    return Rect(left, top, width, height)  # type: ignore[arg-type]


class DemoServer:
    """The `--demo` Page: one static page on a loopback origin of its own (a Page is never the console's origin).

    It holds nothing secret, but it is a port we open, so it too answers only requests addressed to it by name. It
    is meant to be loaded by the browser, so it takes no secret and no Origin check: one GET of one static file, no
    state and no action, is all any page's script can get from it."""

    def __init__(self) -> None:
        self.port = 0
        self._runner: web.AppRunner | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/demo/"

    async def start(self) -> DemoServer:
        app = web.Application(client_max_size=MAX_BODY)
        app.router.add_get("/demo/", self._page)
        self._runner = BoundedAppRunner(app, access_log=None, handle_signals=False, shutdown_timeout=2.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = self._runner.addresses[0][1]
        return self

    async def _page(self, request: web.Request) -> web.Response:
        if request.headers.get("Host", "") not in (f"127.0.0.1:{self.port}", f"localhost:{self.port}"):
            return web.Response(status=421)
        return web.Response(
            body=(DEMO_DIR / "index.html").read_bytes(),
            content_type="text/html",
            charset="utf-8",
            headers={"Cache-Control": "no-store", "X-Content-Type-Options": "nosniff"},
        )

    async def close(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
