"""The CDP tap: a recording proxy between any CDP client and Chromium.

Clients connect to an endpoint the tap hands out (one listening port per label, so a test can tell its clients
apart even when they only accept a bare `http://host:port`). The tap forwards every frame unchanged in both
directions and records a parsed copy: each command as (connection, label, target, session, method, category),
each event likewise. `/json/*` answers are rewritten so their WebSocket URLs point back at the tap. An answer is
matched to its command by its head and tail as Chromium writes them (`answer_key`), not parsed, unless it creates a
session (the tracker reads those) or comes in another shape: a long Page's accessibility tree is megabytes.

An endpoint may front its own upstream (`endpoint(label, upstream=...)`), including one whose URL carries a path
(a scoped gateway's `http://127.0.0.1:PORT/<secret>`): every byte between a backend and its gateway then crosses
the tap too. `watch(*needles)` makes the tap look for byte strings (canaries) in every frame either way and every
`/json/*` request and answer; `sightings(needle)` says where each was seen.

A malformed client frame closes that client with a logged reason. When Chromium goes away the tap closes its
clients, records an incident and keeps every count, so the test that lost the browser can still report them.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
import re
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass
from typing import Any

import aiohttp
from aiohttp import web

from lab.tap.classify import classify
from lab.tap.sessions import BROWSER, UNKNOWN, SessionTracker

log = logging.getLogger(__name__)

ANSWER_HEAD = re.compile(r'\{"id":(\d+),"(?:result|error)":')
ANSWER_SESSION = re.compile(r',"sessionId":"([^"\\]+)"\}$')
"""How Chromium writes an answer: its id first, then its result or error, then (on a session) its sessionId last."""


def answer_key(text: str) -> tuple[str | None, int] | None:
    """(sessionId, id) of an answer written as Chromium writes them, read from its head and its last 100
    characters; None for anything else (an event, or an answer in another shape: those are parsed whole)."""
    head = ANSWER_HEAD.match(text)
    if head is None:
        return None
    tail = ANSWER_SESSION.search(text[-100:])
    return (tail.group(1) if tail else None), int(head.group(1))


@dataclass(frozen=True)
class Record:
    """One command a client sent (`kind="command"`) or one event Chromium delivered to it (`kind="event"`)."""

    seq: int
    time: float
    kind: str
    conn: int
    label: str
    target: str
    session: str | None
    method: str
    category: str


@dataclass(frozen=True)
class Sighting:
    """One frame (or `/json/*` request or answer) that contained a watched needle.

    `direction` is "sent" (client to upstream) or "received" (upstream to client); `kind` is "command", "answer",
    "event" or "http"; `method` is the command's (for an answer, the command it answers), the event's, or
    `HTTP /json/...`; `target` is what the tap attributes the frame to."""

    needle: str
    label: str
    conn: int
    direction: str
    kind: str
    method: str
    target: str


@dataclass(frozen=True)
class Incident:
    conn: int
    label: str
    kind: str  # "malformed_frame" | "upstream_closed" | "upstream_refused" | "browser_gone"
    detail: str


class ChromiumGone(RuntimeError):
    """Chromium died while clients were connected through the tap. The counts up to that point are kept."""


class CDPTap:
    def __init__(self, upstream_http: str) -> None:
        self.upstream_http = upstream_http.rstrip("/")
        self.records: list[Record] = []
        self.incidents: list[Incident] = []
        self.trackers: dict[int, SessionTracker] = {}
        self.seen: list[Sighting] = []
        self._needles: set[str] = set()
        self._upstreams: dict[int, str] = {}
        self._passes: dict[int, tuple[str, ...]] = {}
        self._seq = itertools.count(1)
        self._conn_ids = itertools.count(1)
        self._labels: dict[int, str] = {}
        self._clients: set[web.WebSocketResponse] = set()
        self._on_connect: list[Callable[[str], None]] = []
        self._runner: web.AppRunner | None = None
        self._http: aiohttp.ClientSession | None = None

    # -- lifecycle ---------------------------------------------------------------------------------------------

    async def start(self) -> CDPTap:
        app = web.Application()
        app.router.add_route("*", "/json{tail:.*}", self._proxy_http)
        app.router.add_get("/devtools/{kind}/{id}", self._proxy_ws)
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await self._runner.setup()
        self._http = aiohttp.ClientSession()
        return self

    async def endpoint(self, label: str = "client", upstream: str | None = None, passes: tuple[str, ...] = ()) -> str:
        """The `http://127.0.0.1:PORT` CDP endpoint whose clients are recorded under `label` (one port a label).

        With `upstream` (any CDP endpoint URL, path included), a new port that forwards there instead of to the
        tap's own upstream, recorded under `label` too; several such ports may share a label. `passes` names the
        client's handshake headers that port passes on upstream (a browser farm's door wants its client's header,
        not the tap's)."""
        assert self._runner is not None, "start() the tap first"
        for port, known in self._labels.items():
            if (
                upstream is None
                and known == label
                and port not in self._upstreams
                and self._passes.get(port, ()) == passes
            ):
                return f"http://127.0.0.1:{port}"
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self._labels[port] = label
        if upstream is not None:
            self._upstreams[port] = upstream.rstrip("/")
        if passes:
            self._passes[port] = passes
        return f"http://127.0.0.1:{port}"

    async def close(self) -> None:
        for client in list(self._clients):
            with contextlib.suppress(Exception):
                await client.close()
        if self._runner is not None:
            await self._runner.cleanup()
        if self._http is not None:
            await self._http.close()

    # -- what tests read ---------------------------------------------------------------------------------------

    def count(
        self,
        *,
        target: str | None = None,
        label: str | None = None,
        conn: int | None = None,
        category: str | Iterable[str] | None = None,
        method: str | None = None,
        kind: str = "command",
    ) -> int:
        """How many recorded commands (or events) match every given filter."""
        categories = {category} if isinstance(category, str) else set(category) if category is not None else None
        return sum(
            1
            for r in self.records
            if r.kind == kind
            and (target is None or r.target == target)
            and (label is None or r.label == label)
            and (conn is None or r.conn == conn)
            and (categories is None or r.category in categories)
            and (method is None or r.method == method)
        )

    def by_target(self, kind: str = "command", label: str | None = None) -> dict[str, Counter[str]]:
        """{target: Counter(method)} of every recorded command (or event)."""
        table: dict[str, Counter[str]] = {}
        for r in self.records:
            if r.kind == kind and (label is None or r.label == label):
                table.setdefault(r.target, Counter())[r.method] += 1
        return table

    def watch(self, *needles: str) -> None:
        """Look for these strings in every frame from now on (until `clear()`); see `sightings`."""
        self._needles.update(n for n in needles if n)

    def sightings(self, needle: str | None = None, label: str | None = None) -> list[Sighting]:
        """Every frame, either way, that contained `needle` (any watched needle if None), on `label`'s ports."""
        return [s for s in self.seen if (needle is None or s.needle == needle) and (label is None or s.label == label)]

    def unknown_sessions(self, label: str | None = None) -> list[Record]:
        """Records the tap could attribute to no target: traffic on a session it never saw created."""
        return [r for r in self.records if r.target.startswith(UNKNOWN) and (label is None or r.label == label)]

    def connections(self, label: str | None = None) -> list[int]:
        return sorted({r.conn for r in self.records if label is None or r.label == label})

    @contextlib.contextmanager
    def on_connect(self, callback: Callable[[str], None]) -> Iterator[None]:
        """Call `callback(label)` as each WebSocket client connects, before its upstream connection opens: a moment
        its client is certainly alive and waiting (the installed app's audit notes a backend's process then, which a
        session that opens and closes within one turn gives no other sure moment for)."""
        self._on_connect.append(callback)
        try:
            yield
        finally:
            self._on_connect.remove(callback)

    @property
    def browser_gone(self) -> bool:
        return any(i.kind == "browser_gone" for i in self.incidents)

    def check_browser(self) -> None:
        if self.browser_gone:
            raise ChromiumGone(f"Chromium died during the test; tap counts so far: {dict(self.by_target())}")

    def clear(self) -> None:
        """Forget records, incidents, watched needles and sightings (between tests). Live connections keep their
        session tracking."""
        self.records.clear()
        self.incidents.clear()
        self.seen.clear()
        self._needles.clear()

    def trace_lines(self) -> list[str]:
        lines = [json.dumps(asdict(r), separators=(",", ":")) for r in self.records]
        lines += [json.dumps({"incident": asdict(i)}, separators=(",", ":")) for i in self.incidents]
        return lines

    # -- recording ---------------------------------------------------------------------------------------------

    def _record(self, kind: str, conn: int, label: str, target: str, session: str | None, method: str) -> None:
        self.records.append(
            Record(next(self._seq), time.time(), kind, conn, label, target, session, method, classify(method))
        )

    def _look(self, data: str, where: tuple[str, int, str, str, str, str]) -> None:
        """Record a sighting of every watched needle in `data`; `where` is (label, conn, direction, kind, method,
        target)."""
        for needle in self._needles:
            if needle in data:
                self.seen.append(Sighting(needle, *where))

    def _port_of(self, request: web.Request) -> int:
        sockname = request.transport.get_extra_info("sockname") if request.transport else None
        return sockname[1] if sockname else -1

    def _label_of(self, request: web.Request) -> str:
        return self._labels.get(self._port_of(request), "?")

    def _upstream_of(self, request: web.Request) -> tuple[str, str]:
        """(`http://host:port[/path]`, `host:port[/path]`) of the upstream this request's port forwards to."""
        upstream = self._upstreams.get(self._port_of(request), self.upstream_http)
        return upstream, upstream.split("://", 1)[1]

    def _record_command(self, conn: int, label: str, tracker: SessionTracker, message: dict[str, Any]) -> None:
        tracker.on_command(message)
        method: str = message["method"]
        params = message.get("params") if isinstance(message.get("params"), dict) else None
        session = message.get("sessionId")
        if method == "Target.sendMessageToTarget" and params is not None:
            # Non-flatten mode: the real command is wrapped; attribute it to the session it is addressed to.
            with contextlib.suppress(ValueError, TypeError, KeyError):
                inner = json.loads(params["message"])
                inner_session = params.get("sessionId")
                self._record("command", conn, label, tracker.target_of(inner_session), inner_session, inner["method"])
                return
        self._record("command", conn, label, tracker.target_of(session, params), session, method)

    @staticmethod
    def _malformed(data: str) -> tuple[dict[str, Any] | None, str]:
        try:
            message = json.loads(data)
        except ValueError as exc:
            return None, f"not JSON: {exc}"
        if not isinstance(message, dict):
            return None, "not a JSON object"
        if not isinstance(message.get("id"), int) or not isinstance(message.get("method"), str):
            return None, "a command needs an integer id and a string method"
        if "params" in message and not isinstance(message["params"], dict):
            return None, "params must be an object"
        return message, ""

    # -- HTTP /json/* ------------------------------------------------------------------------------------------

    async def _proxy_http(self, request: web.Request) -> web.StreamResponse:
        assert self._http is not None
        label = self._label_of(request)
        parts = request.path.strip("/").split("/")  # ["json", "activate", "<id>"]
        name = "/".join(parts[:2]) if len(parts) > 1 else "json/list"
        target = parts[2] if len(parts) > 2 and name in ("json/activate", "json/close") else BROWSER
        conn = next(self._conn_ids)
        method = f"HTTP /{name}"
        self._record("command", conn, label, target, None, method)
        upstream_http, upstream_hostport = self._upstream_of(request)
        sent = await request.read()
        self._look(request.path_qs + sent.decode("utf-8", "replace"), (label, conn, "sent", "http", method, target))
        try:
            async with self._http.request(request.method, upstream_http + request.path_qs, data=sent) as upstream:
                body = await upstream.read()
                status, content_type = upstream.status, upstream.content_type
        except aiohttp.ClientError as exc:
            self.incidents.append(Incident(0, label, "upstream_refused", f"{request.path}: {exc}"))
            return web.Response(status=502, text=f"Chromium is not reachable: {exc}")
        text = body.decode("utf-8", "replace")
        self._look(text, (label, conn, "received", "http", method, target))
        text = text.replace(upstream_hostport, request.host)
        return web.Response(status=status, text=text, content_type=content_type)

    # -- WebSocket ---------------------------------------------------------------------------------------------

    async def _proxy_ws(self, request: web.Request) -> web.StreamResponse:
        assert self._http is not None
        label = self._label_of(request)
        conn = next(self._conn_ids)
        kind, target_id = request.match_info["kind"], request.match_info["id"]
        tracker = SessionTracker(BROWSER if kind == "browser" else target_id)
        self.trackers[conn] = tracker
        for callback in list(self._on_connect):
            callback(label)
        client = web.WebSocketResponse(max_msg_size=0)
        await client.prepare(request)
        upstream_http, upstream_hostport = self._upstream_of(request)
        port = self._port_of(request)
        ws_url = "ws://" + upstream_hostport + request.path_qs
        try:
            passed = {name: request.headers[name] for name in self._passes.get(port, ()) if name in request.headers}
            upstream = await self._http.ws_connect(ws_url, max_msg_size=0, headers=passed)
        except (aiohttp.ClientError, OSError) as exc:
            self.incidents.append(Incident(conn, label, "upstream_refused", f"{ws_url}: {exc}"))
            await client.close(code=aiohttp.WSCloseCode.INTERNAL_ERROR, message=b"Chromium refused the connection")
            return client
        self._clients.add(client)
        try:
            await self._pump(conn, label, tracker, client, upstream, upstream_http)
        finally:
            self._clients.discard(client)
            await upstream.close()
            await client.close()
        return client

    async def _pump(
        self,
        conn: int,
        label: str,
        tracker: SessionTracker,
        client: web.WebSocketResponse,
        upstream: aiohttp.ClientWebSocketResponse,
        upstream_http: str,
    ) -> None:
        asked: dict[tuple[str | None, int], tuple[str, str]] = {}  # (sessionId, id) -> (method, target)

        async def from_client() -> None:
            async for frame in client:
                if frame.type != aiohttp.WSMsgType.TEXT:
                    reason = f"{frame.type.name} frame; CDP frames are JSON text"
                    message = None
                else:
                    message, reason = self._malformed(frame.data)
                if message is None:
                    log.warning("tap: closing client %s (%s): %s", conn, label, reason)
                    self.incidents.append(Incident(conn, label, "malformed_frame", reason))
                    await client.close(code=aiohttp.WSCloseCode.UNSUPPORTED_DATA, message=reason.encode()[:120])
                    return
                self._record_command(conn, label, tracker, message)
                session, params = message.get("sessionId"), message.get("params")
                about = tracker.target_of(session, params if isinstance(params, dict) else None)
                asked[(session, message["id"])] = (message["method"], about)
                if self._needles:
                    self._look(frame.data, (label, conn, "sent", "command", message["method"], about))
                await upstream.send_str(frame.data)

        async def from_upstream() -> None:
            async for frame in upstream:
                if frame.type != aiohttp.WSMsgType.TEXT:
                    continue
                key = answer_key(frame.data)
                if key in asked and not tracker.awaits_attach(key):
                    # An answer the tracker has no use for: matched by its head and tail, never parsed (an
                    # accessibility tree of a long page is megabytes).
                    method, about = asked.pop(key)
                    if self._needles:
                        self._look(frame.data, (label, conn, "received", "answer", method, about))
                    await client.send_str(frame.data)
                    continue
                message = json.loads(frame.data)
                if "id" in message:
                    tracker.on_response(message)
                    method, about = asked.pop((message.get("sessionId"), message["id"]), ("?", "?"))
                    if self._needles:
                        self._look(frame.data, (label, conn, "received", "answer", method, about))
                else:
                    # Track first, forward second: a session must exist before the client can use it.
                    tracker.on_event(message)
                    session = message.get("sessionId")
                    params = message.get("params") if isinstance(message.get("params"), dict) else None
                    about = tracker.target_of(session, params)
                    self._record("event", conn, label, about, session, message.get("method", "?"))
                    if self._needles:
                        self._look(frame.data, (label, conn, "received", "event", message.get("method", "?"), about))
                await client.send_str(frame.data)

        client_task = asyncio.create_task(from_client())
        upstream_task = asyncio.create_task(from_upstream())
        done, pending = await asyncio.wait({client_task, upstream_task}, return_when=asyncio.FIRST_COMPLETED)
        for task in pending:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        for task in done:
            if task.exception() is not None:
                log.warning("tap: connection %s (%s) ended with %r", conn, label, task.exception())
        if upstream_task in done and not client.closed:
            gone = not await self._chromium_answers(upstream_http)
            kind = "browser_gone" if gone else "upstream_closed"
            self.incidents.append(Incident(conn, label, kind, f"Chromium closed connection {conn}"))
            await client.close(code=aiohttp.WSCloseCode.GOING_AWAY, message=kind.encode())

    async def _chromium_answers(self, upstream_http: str) -> bool:
        assert self._http is not None
        try:
            async with self._http.get(upstream_http + "/json/version", timeout=aiohttp.ClientTimeout(2)) as r:
                return r.status == 200
        except (aiohttp.ClientError, OSError, TimeoutError):
            return False
