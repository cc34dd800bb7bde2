"""The scoped CDP gateway: a per-ComputerSession CDP endpoint that shows its client exactly one page.

Only the backend the runtime hands the endpoint to may reach it. Every request and handshake is admitted
(`_admit`) in this order, each refusal recorded in `refusals` and never forwarded:

1. Who calls (`_check_caller`): the peer's socket must belong to the gateway's own uid (`runtime.loopback`), else
   403. Another local user reaches every loopback port; with a leaked secret it must still get nothing.
2. `Host` must name the gateway's own address and port, else 421: a DNS-rebound page's requests name its host.
3. A request carrying `Origin`, `Sec-Fetch-Site` or any `Sec-Fetch-*` header but `Sec-Fetch-Mode` comes from a web
   page (browsers add `Origin` to every WebSocket handshake and cross-origin request, `Sec-Fetch-Site`/`-Dest`/
   `-Mode` to every request; CDP clients send none, but Node's `fetch()` sends `Sec-Fetch-Mode`): 403, secret or
   not.
4. Every gateway URL carries a per-gateway secret as its first path segment
   (`http://127.0.0.1:PORT/<secret>/json/version`, `ws://127.0.0.1:PORT/<secret>/devtools/browser/…`), because any
   page's script can open a WebSocket to any loopback port (not subject to CORS) and *send* a simple `fetch()`
   there: a request without it is answered 404. The backend gets the URL in a 0600 file, never on its command line.

A backend (the `@playwright/mcp` or `chrome-devtools-mcp` child, or our own adapter) is a general CDP client: left
alone it enumerates, attaches to and initializes every page of the browser. Behind this gateway it sees one target,
the bound page, and whatever Chromium auto-attaches under it (its OOPIF iframes and workers):

- HTTP discovery (`/json/version`, `/json/list`) names only the gateway and the bound page; `/json/new|activate|close`
  are refused.
- `Target.getTargets` and target events are filtered to the bound page; a browser-level `Target.setAutoAttach` is
  turned into one `Target.attachToTarget` of the bound page, so the client never learns other pages exist.
- Commands on sessions that are not the bound page's, and every method off the policy's allowlists (`allowlist.py`:
  one for the browser level, one for the page's sessions, built from what each backend sends), are refused with a
  CDP error that names the gateway, and recorded in `refusals`.

The gateway also watches the bound page on its own browser connection (`Target.setDiscoverTargets` only, no call
on any page) and reports popups it opens, its crash or its destruction, and the loss of the browser, through
`on_event`: a popup is invisible to the client behind the filter, so the runtime must hear of it here.

Every client connection gets its own upstream connection. Client command ids are remapped to ids the gateway
assigns per upstream connection, so the gateway's own calls can never collide with a client's. An answer the
gateway neither reads nor rewrites goes back unparsed, with only its id replaced (`_pass_answer`): on the catalogue,
an `Accessibility.getFullAXTree` through the gateway took 657 ms p50 parsed and re-encoded, 408 ms passed on.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import itertools
import json
import logging
import os
import re
import secrets
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import urlsplit

import aiohttp
from aiohttp import web

from runtime.gateway.allowlist import FORWARD, Policy, Verdict, refusal_message, static_verdict
from runtime.listeners import BACKLOG, BoundedAppRunner
from runtime.loopback import peer_uid
from runtime.pipe import http_base, http_session

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT = 10.0
"""Bound on every upstream HTTP request, connect and the discovery handshake."""

REFUSED_CODE = -32000

REFUSALS_KEPT = 10_000
"""Bound on `ScopedGateway.refusals`: a page can make a gateway refuse requests as fast as it can send them, so
past this many the oldest half is dropped (a few MB at most)."""

LOADERS_KEPT = 4096
"""Bound on the frames per client whose loader the gateway remembers (`_lifecycle`)."""
PAST_DOCUMENTS = 64
"""Replaced documents of the bound page the gateway remembers, so a late answer cannot bring one back."""

ANSWER_HEAD = re.compile(r'\{"id":(\d+),"(?:result|error)":')
"""How Chromium starts every answer: its id first. An answer the gateway need not read is passed on with only the
id replaced, never parsed (an accessibility tree of a long page is megabytes: a parse and a re-encode of it here
doubled the JSON work of the backend's read)."""
READ_ANSWERS = frozenset(
    {"Target.getTargets", "Page.getFrameTree", "Target.attachToTarget", "Browser.getWindowForTarget"}
)
"""Methods whose answers the gateway reads or rewrites (`_rewrite_result`): parsed whole, always."""

NODE_FETCH = "sec-fetch-mode"
"""The one `Sec-Fetch-*` header a CDP client sends: Node's `fetch()` adds it to every request (`_check_web`)."""

EventKind = Literal["popup", "crashed", "destroyed", "detached", "upstream_lost"]


@dataclass(frozen=True)
class GatewayEvent:
    """Something the runtime must know about the bound page; the client behind the gateway may never see it.

    - `popup`: a new target whose opener is the bound page (or one of its frames); `target_id` is the popup's.
    - `crashed`: the bound page's renderer crashed.
    - `destroyed`: the bound target is gone (closed, or replaced by another target).
    - `detached`: Chromium detached a client's session from the bound page without the client asking.
    - `upstream_lost`: the gateway's browser connection closed; nothing behind this gateway works any more.
    """

    kind: EventKind
    target_id: str
    detail: str = ""
    url: str = ""


@dataclass(frozen=True)
class RefusedCommand:
    """A command (or HTTP request, `conn == 0`) the gateway answered with an error and never forwarded."""

    conn: int
    method: str
    reason: str
    session_id: str | None = None


@dataclass(frozen=True)
class Absorbed:
    """A command the gateway answered `{}` without forwarding (see `allowlist.ABSORBED`)."""

    conn: int
    method: str
    session_id: str | None = None


class GatewayError(RuntimeError):
    """The gateway could not start: the upstream endpoint did not answer or the bound target does not exist."""


@dataclass
class _Pending:
    client_id: int
    method: str
    params: dict[str, Any]
    session_id: str | None
    auto_attach: bool = False  # the upstream call was the gateway's attachToTarget standing in for setAutoAttach


@dataclass
class _Client:
    conn: int
    browser_level: bool  # /devtools/browser/… (root session = browser) or /devtools/page/<bound> (root = page)
    ws: web.WebSocketResponse
    upstream: aiohttp.ClientWebSocketResponse
    sessions: dict[str, str] = field(default_factory=dict)
    """sessionId → targetId of every session this client may use: the bound page's and its children's."""
    detaching: set[str] = field(default_factory=set)
    pending: dict[int, _Pending] = field(default_factory=dict)
    ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    auto_attached: bool = False
    send_lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    loaders: dict[tuple[str | None, str], str] = field(default_factory=dict)
    """(sessionId, frameId) → the loaderId whose `init` lifecycle event the client has seen (see `_lifecycle`)."""


class ScopedGateway:
    """A CDP endpoint (`http://127.0.0.1:PORT`) through which a client sees and touches only `target_id`."""

    def __init__(
        self,
        upstream_http: str,
        target_id: str,
        *,
        on_event: Callable[[GatewayEvent], None] | None = None,
        policy: Policy = static_verdict,
    ) -> None:
        """`upstream_http`: the browser's endpoint, `http://host:port` or a private Chromium's `unix:/path`
        (`runtime.pipe`). `policy`: the static method table (`allowlist.static_verdict`); the target checks are the
        gateway's own."""
        self.policy = policy
        self.upstream = upstream_http
        self.upstream_http = http_base(upstream_http)
        self.target_id = target_id
        self.refusals: list[RefusedCommand] = []
        self.absorbed: list[Absorbed] = []
        self.forwarded: Counter[tuple[str, str]] = Counter()
        """(level, method) → how many commands the gateway let through; level is "browser" or "page" (the bound
        page's sessions and its children's): what the backend behind it really uses, against `allowlist.py`."""
        self.events: list[GatewayEvent] = []
        self.target_info: dict[str, Any] = {}
        """The bound target's latest `TargetInfo`, as discovery reported it."""
        self.document: str | None = None
        """The loaderId of the bound page's current document, as the backend's own traffic shows it (see
        `_note_document`); None until the backend has read the frame tree."""
        self.documents = 0
        """How many documents of the bound page the gateway has seen (`document` is the latest)."""
        self._past_documents: deque[str] = deque(maxlen=PAST_DOCUMENTS)
        self._on_event = on_event
        self._upstream_hostport = urlsplit(self.upstream_http).netloc
        self._secret = secrets.token_urlsafe(32)
        self._hostport = ""
        self._browser_ws = ""
        self._children: set[str] = set()
        self._windows: set[int] = set()
        self._conn_ids = itertools.count(1)
        self._clients: dict[int, _Client] = {}
        self._handlers: set[asyncio.Task[Any]] = set()
        self._http: aiohttp.ClientSession | None = None
        self._runner: web.AppRunner | None = None
        self._discovery: aiohttp.ClientWebSocketResponse | None = None
        self._discovery_task: asyncio.Task[None] | None = None
        self._closing = False
        self._lost: str | None = None

    @property
    def lost(self) -> str | None:
        """Why the bound page is out of reach (crashed, destroyed, detached, the browser connection closed), once
        it is; None while it lives. Sticky. The one owner of the target's state: the runtime's session and the
        backend behind this gateway both ask here (`BackendConfig.target_state`)."""
        return self._lost

    # -- lifecycle ---------------------------------------------------------------------------------------------

    async def start(self) -> str:
        """Watch the bound target upstream, then listen; returns the CDP endpoint URL for `--cdp-endpoint`."""
        self._http = http_session(self.upstream)
        try:
            version = await self._upstream_json("/json/version")
            self._browser_ws = version["webSocketDebuggerUrl"]
            await self._start_discovery()
            app = web.Application()
            app.router.add_route("*", "/{tail:.*}", self._serve)
            self._runner = BoundedAppRunner(app, access_log=None, handle_signals=False, shutdown_timeout=2.0)
            await self._runner.setup()
            site = web.TCPSite(self._runner, "127.0.0.1", 0, backlog=BACKLOG)
            await site.start()
            port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        except BaseException:
            await self.close()
            raise
        self._hostport = f"127.0.0.1:{port}"
        return self.url

    @property
    def url(self) -> str:
        """`http://127.0.0.1:PORT/<secret>`: what `--cdp-endpoint` / `--browserUrl` take. Both CDP clients append
        `/json/version` to the path (playwright-core's `urlToWSEndpoint`, puppeteer's `getWSEndpointURL`), and so
        does `runtime.cdp.CDPConnection.connect`, so the secret survives into every request they make."""
        return f"http://{self._base}"

    @property
    def _base(self) -> str:
        """`127.0.0.1:PORT/<secret>`: the gateway's address and secret, what every URL it hands out starts with."""
        if not self._hostport:
            raise RuntimeError("start() the gateway first")
        return f"{self._hostport}/{self._secret}"

    async def close(self) -> None:
        """Close every client connection, its upstream connection and the gateway's own browser connection."""
        self._closing = True
        for client in list(self._clients.values()):
            with contextlib.suppress(Exception):
                await client.ws.close(code=aiohttp.WSCloseCode.GOING_AWAY, message=b"gateway closed")
            with contextlib.suppress(Exception):
                await client.upstream.close()
        if self._handlers:
            await asyncio.wait(self._handlers, timeout=DEFAULT_TIMEOUT)
        if self._discovery is not None:
            with contextlib.suppress(Exception):
                await self._discovery.close()
        if self._discovery_task is not None:
            self._discovery_task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._discovery_task
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        if self._http is not None:
            await self._http.close()

    async def __aenter__(self) -> ScopedGateway:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- scope: what the client may see and do ------------------------------------------------------------------

    def _visible(self, target_id: str | None) -> bool:
        """The bound target and the children Chromium auto-attached under it; nothing else exists for a client."""
        return target_id == self.target_id or target_id in self._children

    def _decide(self, client: _Client, method: str, params: dict[str, Any], session_id: str | None) -> Verdict:
        if session_id is not None and session_id not in client.sessions:
            return Verdict("refuse", "the session is not the bound page's")
        browser_level = client.browser_level and session_id is None
        verdict = self.policy(method, params, browser_level)
        if verdict.action != "forward":
            return verdict
        return self._target_verdict(client, method, params, session_id, browser_level)

    def _target_verdict(
        self, client: _Client, method: str, params: dict[str, Any], session_id: str | None, browser_level: bool
    ) -> Verdict:
        other = Verdict("refuse", "it names a target other than the bound page")
        target = params.get("targetId")
        if method == "Target.setAutoAttach" and browser_level:
            return Verdict("auto_attach")
        if method in ("Target.attachToTarget", "Target.autoAttachRelated"):
            if not self._visible(target):
                return other
            if method == "Target.attachToTarget" and params.get("flatten") is not True:
                return Verdict("refuse", "only flatten sessions; non-flatten messages would bypass the gateway")
            return FORWARD
        if method == "Target.getTargetInfo":
            return FORWARD if target is None or self._visible(target) else other
        if method == "Target.detachFromTarget":
            named = params.get("sessionId")
            if named in client.sessions or (named is None and self._visible(target)):
                return FORWARD
            return Verdict("refuse", "the session is not the bound page's")
        if method == "Browser.getWindowForTarget":
            # Without a targetId it means the session's own target, which at browser level is no page at all.
            if target is None and browser_level:
                return other
            return FORWARD if target is None or self._visible(target) else other
        if method == "Browser.getWindowBounds":
            if params.get("windowId") in self._windows:
                return FORWARD
            return Verdict("refuse", "it names a window other than the bound page's")
        return FORWARD

    # -- upstream ----------------------------------------------------------------------------------------------

    async def _upstream_json(self, path: str) -> Any:
        assert self._http is not None
        try:
            async with self._http.get(
                self.upstream_http + path, timeout=aiohttp.ClientTimeout(DEFAULT_TIMEOUT)
            ) as response:
                response.raise_for_status()
                return await response.json(content_type=None)
        except (aiohttp.ClientError, OSError, TimeoutError, ValueError) as exc:
            raise GatewayError(f"the upstream CDP endpoint {self.upstream} did not answer {path}: {exc}") from exc

    async def _connect(self, ws_url: str) -> aiohttp.ClientWebSocketResponse:
        assert self._http is not None
        # Only the handshake is bounded; an open CDP connection may be idle for as long as its client likes.
        return await asyncio.wait_for(self._http.ws_connect(ws_url, max_msg_size=0), DEFAULT_TIMEOUT)

    def _rewrite(self, value: Any) -> Any:
        """Point every upstream URL in a /json answer at the gateway (secret included) instead."""
        return json.loads(json.dumps(value).replace(self._upstream_hostport, self._base))

    # -- admission: only the backend the runtime gave the URL to ------------------------------------------------

    async def _serve(self, request: web.Request) -> web.StreamResponse:
        """Every HTTP request and WebSocket handshake: admitted first, then routed by the path after the secret."""
        admitted = self._admit(request)
        if isinstance(admitted, web.Response):
            return admitted
        if admitted == "/json" or admitted.startswith("/json/"):
            return await self._serve_json(request, admitted)
        parts = admitted.split("/")  # ["", "devtools", kind, id]
        if request.method == "GET" and len(parts) == 4 and parts[1] == "devtools":
            return await self._serve_ws(request, parts[2], parts[3])
        return web.Response(status=404, text=f"computer_use gateway: no such endpoint {admitted}")

    def _admit(self, request: web.Request) -> str | web.Response:
        """The path after the secret, or the answer refusing the request (recorded, never forwarded).

        The caller, `Host`, `Origin` and `Sec-Fetch-*` are checked before the secret, so a refused caller or a page
        learns nothing about the secret: every request it can make gets the same answer. The secret is compared in
        constant time, and never written to a refusal or a log."""
        secret, _, rest = request.path[1:].partition("/")
        known = hmac.compare_digest(secret.encode(), self._secret.encode())
        path = request.path
        if known:
            path = f"/<secret>/{rest}"
        elif len(secret) >= 16:  # someone's try at a secret, maybe a near miss of this one: never recorded
            path = f"/<not the secret>/{rest}"
        shown = f"HTTP {request.method} {path[:200]}"
        for status, check in ((403, self._check_caller), (421, self._check_host), (403, self._check_web)):
            reason = check(request)
            if reason is not None:
                self._refuse(0, shown, reason, None)
                return web.Response(status=status, text=refusal_message(f"{request.method} request", reason))
        if not known:
            self._refuse(0, shown, "no or wrong gateway secret in the path", None)
            return web.Response(status=404, text="computer_use gateway: no such endpoint")
        return "/" + rest

    def _check_caller(self, request: web.Request) -> str | None:
        """Why the caller may not use this gateway, or None: its socket must be owned by the gateway's own uid.

        The secret keeps out whoever does not know it; this keeps out every other local user who does (a leaked
        URL, a backend's command line read from `ps`). Unknown counts as another user."""
        transport = request.transport
        peer = transport.get_extra_info("peername") if transport is not None else None
        local = transport.get_extra_info("sockname") if transport is not None else None
        if not peer or not local:
            return "the caller's address is unknown"
        uid = peer_uid(peer[:2], local[:2])
        if uid is None:
            return "the caller's uid cannot be found (no such loopback socket: not a local process, or gone)"
        if uid != os.geteuid():
            return f"the caller runs as uid {uid}, not as the gateway's uid {os.geteuid()}"
        return None

    def _check_host(self, request: web.Request) -> str | None:
        """Why `Host` is wrong, or None: it must name the gateway's own address and port, as every URL it hands out
        does (a DNS-rebound page's requests name the attacker's host)."""
        host = request.headers.get(aiohttp.hdrs.HOST)
        if host != self._hostport:
            return f"the request names Host {(host or '')[:100]!r}, not the gateway's {self._hostport}"
        return None

    @staticmethod
    def _check_web(request: web.Request) -> str | None:
        """Why the request comes from a web page, or None: browsers send `Origin` on every WebSocket handshake and
        cross-origin request, and `Sec-Fetch-Site` and `Sec-Fetch-Dest` on every request to a loopback address
        (forbidden headers: page script cannot drop them); CDP clients send neither. `Sec-Fetch-Mode` alone is
        Node's own `fetch()` (undici sends `Sec-Fetch-Mode: cors` on every request; puppeteer, and so
        chrome-devtools-mcp, reads `/json/version` with it): let through."""
        origin = request.headers.get(aiohttp.hdrs.ORIGIN)
        if origin is not None:
            return f"the request carries Origin {origin[:100]!r}: it comes from a web page"
        fetch = sorted(
            name for name in request.headers if name.lower().startswith("sec-fetch-") and name.lower() != NODE_FETCH
        )
        if fetch:
            return f"the request carries {', '.join(fetch)[:100]}: it comes from a web page"
        return None

    # -- HTTP discovery ----------------------------------------------------------------------------------------

    async def _serve_json(self, request: web.Request, path: str) -> web.StreamResponse:
        parts = [part for part in path.split("/") if part]  # ["json", "version"], ["json"], …
        name = parts[1] if len(parts) > 1 else "list"
        if name in ("new", "activate", "close"):
            reason = "a client behind the gateway may not open, focus or close pages"
            self._refuse(0, f"HTTP /json/{name}", reason, None)
            return web.Response(status=403, text=refusal_message(f"/json/{name}", reason))
        try:
            if name == "version" and len(parts) == 2:
                version = await self._upstream_json("/json/version")
                browser = urlsplit(version.get("webSocketDebuggerUrl", "")).path or "/devtools/browser/gateway"
                version["webSocketDebuggerUrl"] = f"ws://{self._base}{browser}"
                return web.json_response(version)
            if name == "list" and len(parts) <= 2:
                listing = await self._upstream_json("/json/list")
                return web.json_response(self._rewrite([t for t in listing if self._visible(t.get("id"))]))
        except GatewayError as exc:
            return web.Response(status=502, text=str(exc))
        return web.Response(status=404, text=f"computer_use gateway: no such endpoint {path}")

    # -- WebSocket clients -------------------------------------------------------------------------------------

    async def _serve_ws(self, request: web.Request, kind: str, ident: str) -> web.StreamResponse:
        assert self._http is not None
        conn = next(self._conn_ids)
        if kind == "page" and ident != self.target_id:
            reason = "the gateway exposes only the bound page"
            self._refuse(conn, f"connect /devtools/page/{ident}", reason, None)
            return web.Response(status=403, text=refusal_message("connect", reason))
        if kind not in ("browser", "page"):
            return web.Response(status=404, text=f"computer_use gateway: no such endpoint /devtools/{kind}")
        upstream_url = (
            self._browser_ws if kind == "browser" else f"ws://{self._upstream_hostport}/devtools/page/{ident}"
        )
        try:
            upstream = await self._connect(upstream_url)
        except (aiohttp.ClientError, OSError, TimeoutError) as exc:
            return web.Response(status=502, text=f"computer_use gateway: upstream refused the connection: {exc}")
        ws = web.WebSocketResponse(max_msg_size=0)
        try:
            await ws.prepare(request)
        except BaseException:
            await upstream.close()
            raise
        client = _Client(conn, kind == "browser", ws, upstream)
        self._clients[conn] = client
        task = asyncio.current_task()
        assert task is not None
        self._handlers.add(task)
        try:
            await self._pump(client)
        finally:
            self._clients.pop(conn, None)
            self._handlers.discard(task)
            await upstream.close()
            await ws.close()
        return ws

    async def _pump(self, client: _Client) -> None:
        async def from_client() -> None:
            async for frame in client.ws:
                message, problem = _parse_command(frame)
                if message is None:
                    self._refuse(client.conn, "(malformed frame)", problem, None)
                    log.warning("gateway: closing client %s: %s", client.conn, problem)
                    await client.ws.close(code=aiohttp.WSCloseCode.UNSUPPORTED_DATA, message=problem.encode()[:120])
                    return
                await self._on_command(client, message)

        async def from_upstream() -> None:
            async for frame in client.upstream:
                if frame.type != aiohttp.WSMsgType.TEXT:
                    continue
                if await self._pass_answer(client, frame.data):
                    continue
                try:
                    message = json.loads(frame.data)
                except ValueError:
                    log.warning("gateway: dropping a non-JSON frame from upstream on client %s", client.conn)
                    continue
                if "id" in message:
                    await self._on_answer(client, message)
                elif self._allow_event(client, message):
                    if message.get("method") == "Page.lifecycleEvent" and (init := self._lifecycle(client, message)):
                        await self._send(client, init)
                    if message.get("method") == "Page.frameNavigated":
                        self._note_document(client, message.get("sessionId"), message["params"].get("frame"))
                    await self._send(client, frame.data)

        client_task = asyncio.create_task(from_client())
        upstream_task = asyncio.create_task(from_upstream())
        done, pending = await asyncio.wait({client_task, upstream_task}, return_when=asyncio.FIRST_COMPLETED)
        for task in pending:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        for task in done:
            if not task.cancelled() and task.exception() is not None:
                log.warning("gateway: client %s ended with %r", client.conn, task.exception())
        if upstream_task in done and not client.ws.closed:
            await client.ws.close(code=aiohttp.WSCloseCode.GOING_AWAY, message=b"upstream closed")

    async def _send(self, client: _Client, text: str) -> None:
        async with client.send_lock:
            with contextlib.suppress(ConnectionError, aiohttp.ClientError, RuntimeError):
                await client.ws.send_str(text)

    async def _answer(self, client: _Client, message: dict[str, Any], body: dict[str, Any]) -> None:
        answer: dict[str, Any] = {"id": message["id"], **body}
        if message.get("sessionId") is not None:
            # Clients route answers by session first; an answer without its sessionId would never be matched.
            answer["sessionId"] = message["sessionId"]
        await self._send(client, json.dumps(answer))

    def _refuse(self, conn: int, method: str, reason: str, session_id: str | None) -> None:
        self.refusals.append(RefusedCommand(conn, method, reason, session_id))
        if len(self.refusals) > REFUSALS_KEPT:
            del self.refusals[: REFUSALS_KEPT // 2]
        log.info("gateway: refused %s on client %s: %s", method, conn, reason)

    async def _on_command(self, client: _Client, message: dict[str, Any]) -> None:
        method: str = message["method"]
        params: dict[str, Any] = message.get("params") or {}
        session_id: str | None = message.get("sessionId")
        verdict = self._decide(client, method, params, session_id)
        if verdict.action == "refuse":
            self._refuse(client.conn, method, verdict.reason, session_id)
            error = {"code": REFUSED_CODE, "message": refusal_message(method, verdict.reason)}
            await self._answer(client, message, {"error": error})
            return
        if verdict.action == "absorb":
            self.absorbed.append(Absorbed(client.conn, method, session_id))
            await self._answer(client, message, {"result": {}})
            return
        self.forwarded["browser" if client.browser_level and session_id is None else "page", method] += 1
        if method == "Target.detachFromTarget" and isinstance(params.get("sessionId"), str):
            client.detaching.add(params["sessionId"])
        pending = _Pending(message["id"], method, params, session_id)
        upstream_id = next(client.ids)
        if verdict.action == "auto_attach":
            if client.auto_attached or not params.get("autoAttach"):
                await self._answer(client, message, {"result": {}})
                return
            # Chromium sends its own Target.attachedToTarget before answering; that event reaches the client, and
            # the client's setAutoAttach is answered only after it, as Chromium would. Never synthesize a second
            # attachedToTarget: Playwright fails with "Duplicate target".
            client.auto_attached = True
            pending.auto_attach = True
            upstream: dict[str, Any] = {
                "id": upstream_id,
                "method": "Target.attachToTarget",
                "params": {"targetId": self.target_id, "flatten": True},
            }
        else:
            upstream = {**message, "id": upstream_id}
        client.pending[upstream_id] = pending
        try:
            await client.upstream.send_str(json.dumps(upstream))
        except (ConnectionError, aiohttp.ClientError, RuntimeError) as exc:
            client.pending.pop(upstream_id, None)
            await self._answer(client, message, {"error": {"code": REFUSED_CODE, "message": f"upstream gone: {exc}"}})

    async def _pass_answer(self, client: _Client, text: str) -> bool:
        """An answer to a command whose result the gateway neither reads nor rewrites, passed on unparsed with the
        client's id in place of the gateway's; False for anything else (parsed and handled whole)."""
        head = ANSWER_HEAD.match(text)
        if head is None:
            return False
        upstream_id = int(head.group(1))
        pending = client.pending.get(upstream_id)
        if pending is None or pending.auto_attach or pending.method in READ_ANSWERS:
            return False
        del client.pending[upstream_id]
        await self._send(client, f"{text[: head.start(1)]}{pending.client_id}{text[head.end(1) :]}")
        return True

    async def _on_answer(self, client: _Client, message: dict[str, Any]) -> None:
        pending = client.pending.pop(message["id"], None)
        if pending is None:
            return
        answer = {**message, "id": pending.client_id}
        if "result" in message:
            answer["result"] = self._rewrite_result(client, pending, message["result"])
        elif pending.auto_attach:
            client.auto_attached = False
        await self._send(client, json.dumps(answer))

    def _rewrite_result(self, client: _Client, pending: _Pending, result: dict[str, Any]) -> dict[str, Any]:
        method, params = pending.method, pending.params
        if pending.auto_attach:
            if isinstance(result.get("sessionId"), str):
                client.sessions.setdefault(result["sessionId"], self.target_id)
            return {}
        if method not in READ_ANSWERS:  # passed on unparsed (`_pass_answer`): a branch below must be listed there
            return result
        if method == "Target.getTargets":
            infos = [info for info in result.get("targetInfos", []) if self._visible(info.get("targetId"))]
            return {**result, "targetInfos": infos}
        if method == "Page.getFrameTree":
            self._note_document(client, pending.session_id, (result.get("frameTree") or {}).get("frame"))
        if method == "Target.attachToTarget" and isinstance(result.get("sessionId"), str):
            client.sessions.setdefault(result["sessionId"], params.get("targetId", self.target_id))
        elif method == "Browser.getWindowForTarget" and isinstance(result.get("windowId"), int):
            about = params.get("targetId") or (client.sessions.get(pending.session_id or "") or self.target_id)
            if about == self.target_id:
                self._windows.add(result["windowId"])
        return result

    def _allow_event(self, client: _Client, message: dict[str, Any]) -> bool:
        """Whether an upstream event may reach the client; tracks the sessions it creates or ends."""
        method: str = message.get("method", "")
        params: dict[str, Any] = message.get("params") or {}
        session_id = message.get("sessionId")
        if session_id is not None and session_id not in client.sessions:
            return False
        # The target of the session the event arrived on; None for the browser's own root session.
        parent = client.sessions[session_id] if session_id is not None else (None if client.browser_level else "")
        if method == "Target.attachedToTarget":
            child_session = params.get("sessionId")
            child = (params.get("targetInfo") or {}).get("targetId")
            if parent is not None and isinstance(child, str):
                # Auto-attached under the bound page (or under one of its children): its iframe or worker.
                self._children.add(child)
            elif not self._visible(child):
                return False
            if isinstance(child_session, str):
                client.sessions[child_session] = child
            return True
        if method == "Target.detachedFromTarget":
            ended = params.get("sessionId")
            if ended not in client.sessions:
                return False
            # The session stays usable on paper, so late commands get Chromium's own error rather than ours.
            if client.sessions[ended] == self.target_id and ended not in client.detaching:
                client.detaching.add(ended)
                self._emit(GatewayEvent("detached", self.target_id, f"client {client.conn} session {ended}"))
            return True
        if method in ("Target.targetCreated", "Target.targetInfoChanged"):
            return self._visible((params.get("targetInfo") or {}).get("targetId"))
        if method in ("Target.targetDestroyed", "Target.targetCrashed"):
            return self._visible(params.get("targetId"))
        if method == "Target.receivedMessageFromTarget":
            return False
        if parent is None:
            # The browser's root session: everything else there is browser-wide (downloads of any page, …).
            return method.startswith("Inspector.")
        return True

    def _note_document(self, client: _Client, session_id: str | None, frame: Any) -> None:
        """Track the bound page's document from what its backend reads: the main frame of a `Page.getFrameTree`
        answer or a `Page.frameNavigated` event on the page's own session. Both travel on the connection the
        backend's snapshot comes back on, in order, so when a snapshot reaches the runtime the document it was read
        from is already noted. A document once replaced is never taken back (a late answer on another connection)."""
        on_page = client.sessions.get(session_id) == self.target_id if session_id else not client.browser_level
        if not on_page or not isinstance(frame, dict) or "parentId" in frame:
            return
        loader = frame.get("loaderId")
        if not isinstance(loader, str) or not loader or loader == self.document or loader in self._past_documents:
            return
        if self.document is not None:
            self._past_documents.append(self.document)
        self.document = loader
        self.documents += 1

    @staticmethod
    def _lifecycle(client: _Client, message: dict[str, Any]) -> str | None:
        """The `init` lifecycle event Chromium did not send before this one, if any.

        Protocol quirk: `Page.setLifecycleEventsEnabled` on an already loaded document replays `commit`,
        `DOMContentLoaded`, `load`, ... but not `init`, and Puppeteer takes a frame's loaderId from `init` only.
        Every frame of a page the backend attached to late then has loaderId "", and chrome-devtools-mcp keys its
        uids on `loaderId_backendNodeId`: backend node ids are numbered per renderer process, so a node of the page
        and a node of a cross-site iframe can get the same uid, and a click on it lands on whichever came last.
        Sending the missing `init` (same frame, same loader) first gives every frame its real loaderId. Clients
        that ignore `init` (Playwright, our own adapter) are unaffected; a real navigation sends its own."""
        params = message.get("params") or {}
        frame, loader = params.get("frameId"), params.get("loaderId")
        if not isinstance(frame, str) or not isinstance(loader, str):
            return None
        key = (message.get("sessionId"), frame)
        seen = client.loaders.get(key)
        if params.get("name") == "init" or seen == loader:
            client.loaders[key] = loader
            return None
        client.loaders[key] = loader
        if len(client.loaders) > LOADERS_KEPT:  # a page can make frames without end
            del client.loaders[next(iter(client.loaders))]
        init: dict[str, Any] = {
            "method": "Page.lifecycleEvent",
            "params": {"frameId": frame, "loaderId": loader, "name": "init", "timestamp": params.get("timestamp", 0)},
        }
        if message.get("sessionId") is not None:
            init["sessionId"] = message["sessionId"]
        return json.dumps(init)

    # -- the gateway's own watch on the bound target -----------------------------------------------------------

    async def _start_discovery(self) -> None:
        assert self._http is not None
        try:
            self._discovery = await self._connect(self._browser_ws)
        except (aiohttp.ClientError, OSError, TimeoutError) as exc:
            raise GatewayError(f"could not connect to the browser at {self._browser_ws}: {exc}") from exc
        answered: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._discovery_task = asyncio.create_task(self._watch(self._discovery, answered))
        # The only call the gateway makes on its own: browser level, no page is touched.
        await self._discovery.send_str(
            json.dumps({"id": 1, "method": "Target.setDiscoverTargets", "params": {"discover": True}})
        )
        try:
            answer = await asyncio.wait_for(answered, DEFAULT_TIMEOUT)
        except TimeoutError:
            raise GatewayError("the browser did not answer Target.setDiscoverTargets") from None
        if "error" in answer:
            raise GatewayError(f"Target.setDiscoverTargets failed: {answer['error']}")
        # Chromium announces every existing target before it answers setDiscoverTargets.
        if not self.target_info:
            raise GatewayError(f"no target {self.target_id} in the browser")

    async def _watch(self, ws: aiohttp.ClientWebSocketResponse, answered: asyncio.Future[dict[str, Any]]) -> None:
        try:
            async for frame in ws:
                if frame.type != aiohttp.WSMsgType.TEXT:
                    continue
                try:
                    message = json.loads(frame.data)
                    if "id" in message:
                        if not answered.done():
                            answered.set_result(message)
                        continue
                    self._on_discovery_event(message.get("method", ""), message.get("params") or {})
                except Exception:
                    log.exception("gateway: could not handle a discovery frame %.200s", frame.data)
        finally:
            if not answered.done():
                answered.set_result({"error": "the browser connection closed"})
            if not self._closing:
                self._emit(GatewayEvent("upstream_lost", self.target_id, "the browser connection closed"))

    def _on_discovery_event(self, method: str, params: dict[str, Any]) -> None:
        info: dict[str, Any] = params.get("targetInfo") or {}
        target = info.get("targetId") or params.get("targetId")
        if method in ("Target.targetCreated", "Target.targetInfoChanged"):
            if target == self.target_id:
                self.target_info = info
            elif method == "Target.targetCreated" and info.get("openerId") in (self.target_id, *self._children):
                self._emit(GatewayEvent("popup", target, f"opened by {info['openerId']}", info.get("url", "")))
        elif method == "Target.targetCrashed" and target == self.target_id:
            self._emit(GatewayEvent("crashed", target, f"{params.get('status')} (code {params.get('errorCode')})"))
        elif method == "Target.targetDestroyed":
            self._children.discard(target)
            if target == self.target_id:
                self._emit(GatewayEvent("destroyed", target, "the bound target was closed or replaced"))

    def _emit(self, event: GatewayEvent) -> None:
        if event.kind != "popup" and self._lost is None:
            self._lost = f"{event.kind}: {event.detail}" if event.detail else event.kind
        self.events.append(event)
        if self._on_event is not None:
            try:
                self._on_event(event)
            except Exception:
                log.exception("gateway: on_event raised for %s", event)


def _parse_command(frame: aiohttp.WSMessage) -> tuple[dict[str, Any] | None, str]:
    """The command in a client frame, or None and why it is malformed."""
    if frame.type != aiohttp.WSMsgType.TEXT:
        return None, f"{frame.type.name} frame; CDP frames are JSON text"
    try:
        message = json.loads(frame.data)
    except ValueError as exc:
        return None, f"not JSON: {exc}"
    if not isinstance(message, dict):
        return None, "not a JSON object"
    if not isinstance(message.get("id"), int) or isinstance(message.get("id"), bool):
        return None, "a command needs an integer id"
    if not isinstance(message.get("method"), str):
        return None, "a command needs a string method"
    if "params" in message and not isinstance(message["params"], dict):
        return None, "params must be an object"
    if "sessionId" in message and not isinstance(message["sessionId"], str):
        return None, "sessionId must be a string"
    return message, ""
