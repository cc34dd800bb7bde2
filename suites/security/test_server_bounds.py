"""Every server bounded (issue 29): a flood of slow request heads or of MCP sessions leaves each listener answering a
legitimate client.

The attacker is live and bounded: a second uid (`nobody`, through `setpriv`) opens `FLOOD` sockets on loopback to a
listener and sends each a request head that never ends (a slowloris), against the app's own listeners (/mcp and /v1
on one uvicorn port, the console's aiohttp port) and a scoped gateway's port, all at once, while the app's pairing
socket (which `nobody` cannot reach: its directory is 0700) shares the process's file descriptors with them. While
every flood holds its sockets, a legitimate client of each listener gets its answer: a new MCP client initializes and
lists the tool, `/v1` answers a call, the console serves its page, `computer-use connect`'s pairing is answered and
the gateway serves `/json/version`. Measured: what each listener held of the flood (the flood's sockets the server
had not closed), the answer times, and the process's open file descriptors; then every slow socket is closed by the
head deadline. The head deadline is shortened for the run (`HEAD_TIMEOUT` below) so the suite stays fast.

The MCP session cap: a flood of `initialize` requests (raw HTTP, no client behind them) fills the session manager to
its cap and no further (503 beyond), a live client's calls go on meanwhile, and a new client gets in once the flood's
sessions idle out (the idle timeout shortened for the run).

A whole head followed by a body that stops short is closed by the same deadline on uvicorn (`/mcp` and `/v1` read a
whole body before they answer), unanswered.

Negative controls, each caught by the same check: a deadline that covers the head only, a uvicorn protocol without the
head deadline (a subclass put into
the app through `runtime.transports.mcp.http.BoundedH11Protocol`), an aiohttp listener without the connection cap
(`BoundedAppRunner.server_class` back to aiohttp's `web.Server`), and the SDK's default session manager (10,000
sessions, 30 minutes).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import resource
import socket
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass
from typing import Any

import aiohttp
import h11
import pytest
import uvicorn
from aiohttp import web
from mcp import Client
from mcp.server.streamable_http_manager import DEFAULT_MAX_SESSIONS, DEFAULT_SESSION_IDLE_TIMEOUT

import host.pairing as pairing_module
import runtime.transports.mcp.http as http_module
from host.app import HostApp
from runtime.gateway import ScopedGateway
from runtime.listeners import MAX_CONNECTIONS, BoundedAppRunner, BoundedH11Protocol
from runtime.transports.client import HostedClient
from runtime.transports.http_api import CONNECTION_HEADER, PATH
from runtime.transports.mcp.server import TOOL
from suites.harness import Desk
from suites.host.conftest import StartApp, start_app  # noqa: F401  (the host suite's fixture: the app, closed after)
from suites.proofs import record_cost
from suites.protocol.test_http_api import Served, serving
from suites.reliability.conftest import CALL_LIMIT, within
from suites.security.test_tokens_transports import BEARER, Line

FLOOD = 1200
"""Slow sockets per listener: more than the ~1,100 that used to stop every listener of the app together."""
HEAD_TIMEOUT = 6.0
"""The head deadline for the run (production: `runtime.listeners.HEAD_TIMEOUT`, 10 s)."""
ANSWER_LIMIT = 5.0
"""How long a legitimate client may wait for its answer under the flood (unflooded: milliseconds)."""
CONNECT_LIMIT = 15.0
"""How long the flood may take to open its sockets (a full accept queue retries a SYN after 1 s, 3 s, ...)."""
DRAIN_LIMIT = HEAD_TIMEOUT + 8.0
"""How long after the legitimate answers every slow socket must have been closed by the head deadline."""
LISTEN = "0A"
"""The listening socket's state in /proc/net/tcp (not a connection)."""
SLACK = 8
"""Connections a listener may be seen over its cap: closed in this loop turn, their descriptor released in the next."""
NOBODY = ("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups")
PYTHON = "/usr/bin/python3"
"""The system's Python (the flood needs only its standard library): `nobody` cannot enter the venv's /root/.pyenv."""
CAP = 64
"""The documented MCP session cap (docs/http.md)."""
PAIRINGS = 64
"""The documented pairing cap (docs/security.md)."""
SESSION_FLOOD = 100
FLOOD_CLIENT = {"name": "flood", "version": "0"}
SESSION_IDLE = 1.5

SLOWLORIS = r"""
import selectors, socket, sys, time
port, count, limit = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
head = b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: "
selector = selectors.DefaultSelector()
for _ in range(count):
    s = socket.socket()
    s.setblocking(False)
    s.connect_ex(("127.0.0.1", port))
    selector.register(s, selectors.EVENT_WRITE)
held, began = [], time.monotonic()
deadline = began + limit
while selector.get_map() and time.monotonic() < deadline:
    for key, _ in selector.select(max(0.0, deadline - time.monotonic())):
        s = key.fileobj
        selector.unregister(s)
        if s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) == 0:
            try:
                s.send(head)
                held.append(s)
            except OSError:
                pass
print("held", len(held), round(time.monotonic() - began, 2), flush=True)

def closed(s):
    try:
        return s.recv(1) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True

for line in sys.stdin:
    command = line.split()
    if command[0] == "count":
        print("closed", sum(closed(s) for s in held), flush=True)
    elif command[0] == "drain":
        start, end = time.monotonic(), time.monotonic() + float(command[1])
        open_ = {s for s in held if not closed(s)}
        for s in open_:
            selector.register(s, selectors.EVENT_READ)
        while open_ and time.monotonic() < end:
            for key, _ in selector.select(max(0.0, end - time.monotonic())):
                if closed(key.fileobj):
                    selector.unregister(key.fileobj)
                    open_.discard(key.fileobj)
        print("closed", len(held) - len(open_), round(time.monotonic() - start, 2), flush=True)
"""


class Slowloris:
    """One flood of slow heads from `nobody` against one port: `held` sockets opened and left mid-head."""

    def __init__(self, name: str, port: int) -> None:
        self.name = name
        self.port = port
        self.held = 0
        self.took = 0.0
        self._process: asyncio.subprocess.Process | None = None

    async def start(self) -> None:
        self._process = await asyncio.create_subprocess_exec(
            *NOBODY,
            PYTHON,
            "-c",
            SLOWLORIS,
            str(self.port),
            str(FLOOD),
            str(CONNECT_LIMIT),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
        )
        words = await self._line(CONNECT_LIMIT + 5)
        assert words[0] == "held", words
        self.held, self.took = int(words[1]), float(words[2])

    async def _line(self, limit: float) -> list[str]:
        assert self._process is not None
        assert self._process.stdout is not None
        line = await within(self._process.stdout.readline(), limit, f"the {self.name} flood's report")
        return line.decode().split()

    async def ask(self, command: str, limit: float) -> list[str]:
        assert self._process is not None
        assert self._process.stdin is not None
        self._process.stdin.write(command.encode() + b"\n")
        await self._process.stdin.drain()
        return await self._line(limit)

    async def closed(self) -> int:
        """How many of the held sockets the server has closed so far."""
        return int((await self.ask("count", 5))[1])

    async def drain(self, limit: float) -> tuple[int, float]:
        """Wait (at most `limit` seconds) until the server closed every held socket: how many it closed, and when."""
        words = await self.ask(f"drain {limit}", limit + 5)
        return int(words[1]), float(words[2])

    async def stop(self) -> None:
        if self._process is not None and self._process.returncode is None:
            self._process.kill()
            await self._process.wait()


@pytest.fixture
async def floods() -> AsyncIterator[Callable[[str, int], Slowloris]]:
    started: list[Slowloris] = []

    def make(name: str, port: int) -> Slowloris:
        started.append(Slowloris(name, port))
        return started[-1]

    yield make
    for flood in started:
        await flood.stop()


@pytest.fixture
def short_heads(monkeypatch: pytest.MonkeyPatch) -> None:
    """The head deadline shortened for the run, on every listener built after this."""
    monkeypatch.setattr(BoundedH11Protocol, "head_timeout", HEAD_TIMEOUT)
    monkeypatch.setattr(BoundedAppRunner, "head_timeout", HEAD_TIMEOUT)


def open_descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


def held_on(port: int) -> int:
    """Connections this process holds on its listening `port`, as the kernel lists them (`/proc/net/tcp`): what the
    server accepted and has not closed, whatever the flood believes."""
    mine = set()
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            target = os.readlink(f"/proc/self/fd/{fd}")
            if target.startswith("socket:["):
                mine.add(target[8:-1])
    held = 0
    with open("/proc/net/tcp", encoding="ascii") as table:
        for row in list(table)[1:]:
            fields = row.split()
            local_port, state, inode = int(fields[1].split(":")[1], 16), fields[3], fields[9]
            held += local_port == port and state != LISTEN and inode in mine
    return held


# -- the legitimate clients ----------------------------------------------------------------------------------------


async def mcp_answers(app: HostApp) -> str:
    async with Client(app.mcp_url, mode="legacy") as client:
        tools = [tool.name for tool in (await client.list_tools()).tools]
    assert tools == [TOOL], tools
    return "initialize + tools/list"


async def v1_answers(app: HostApp) -> str:
    url = app.mcp_url.removesuffix("/mcp") + PATH
    headers = {CONNECTION_HEADER: "legitimate-client-0001"}
    async with aiohttp.ClientSession() as http, http.post(url, json={"command": "list_pages"}, headers=headers) as got:
        body = await got.json()
    assert got.status == 200, (got.status, body)
    assert body.get("reason_code") == "invalid_capability", body  # answered by the service: no token was sent
    return "200 invalid_capability"


async def console_answers(app: HostApp) -> str:
    headers = {"Sec-Fetch-Site": "none", "Sec-Fetch-Mode": "navigate", "Sec-Fetch-Dest": "document"}
    async with aiohttp.ClientSession() as http, http.get(app.console.url, headers=headers) as got:
        await got.read()
    assert got.status == 200, got.status
    return "200"


async def pairing_answers(app: HostApp) -> str:
    assert app.pairing is not None, "the app serves no pairing socket"
    reader, writer = await asyncio.open_unix_connection(str(app.pairing.path))
    try:
        hello = json.loads(await reader.readline())
    finally:
        writer.close()
    assert hello.get("type") == "paired", hello
    return "paired"


def gateway_answers(gateway: ScopedGateway) -> Callable[[HostApp], Awaitable[str]]:
    async def answers(_: HostApp) -> str:
        async with aiohttp.ClientSession() as http, http.get(gateway.url + "/json/version") as got:
            await got.read()
        assert got.status == 200, got.status
        return "200"

    return answers


@dataclass
class Answer:
    listener: str
    what: str
    ms: float


async def answered(name: str, client: Callable[[HostApp], Awaitable[str]], app: HostApp) -> Answer:
    started = time.perf_counter()
    what = await within(client(app), ANSWER_LIMIT, f"the {name} answer under the flood")
    return Answer(name, what, round((time.perf_counter() - started) * 1000, 1))


# -- the checks ----------------------------------------------------------------------------------------------------


async def check_slow_heads(
    app: HostApp, targets: dict[str, int], clients: dict[str, Callable[[HostApp], Awaitable[str]]], make: Any
) -> dict[str, Any]:
    """Flood every target port at once; every client answered meanwhile; each listener held at most its cap of the
    flood; then the head deadline closes every slow socket. Returns the figures."""
    before = open_descriptors()
    floods = [make(name, port) for name, port in targets.items()]
    await asyncio.gather(*(flood.start() for flood in floods))
    for flood in floods:
        assert flood.held >= FLOOD * 0.9, f"the {flood.name} flood opened only {flood.held} sockets"
    held = {flood.name: held_on(flood.port) for flood in floods}
    answers = [await answered(name, client, app) for name, client in clients.items()]
    during = open_descriptors()
    after = {flood.name: held_on(flood.port) for flood in floods}
    figures: dict[str, Any] = {
        "flood_per_listener": {flood.name: flood.held for flood in floods},
        "flood_opened_in_s": {flood.name: flood.took for flood in floods},
        "held_by_server_before_answers": held,
        "held_by_server_after_answers": after,
        "answers_ms": {answer.listener: answer.ms for answer in answers},
        "open_fds_before": before,
        "open_fds_during": during,
        "fd_soft_limit": resource.getrlimit(resource.RLIMIT_NOFILE)[0],
    }
    for name, count in held.items():
        most = max(count, after[name])
        cap = MAX_CONNECTIONS
        assert most <= cap + SLACK, f"the {name} listener held {most} connections, its cap is {cap}"
        # Answered under the flood, not after it: the listener still held a full cap of slow heads meanwhile.
        assert min(after[name], count) >= MAX_CONNECTIONS * 0.9, f"the {name} flood ended before the answers: {held}"
    drained = await asyncio.gather(*(flood.drain(DRAIN_LIMIT) for flood in floods))
    figures["closed_by_head_deadline_s"] = {
        flood.name: seconds for flood, (_, seconds) in zip(floods, drained, strict=True)
    }
    for flood, (closed, _) in zip(floods, drained, strict=True):
        left = flood.held - closed
        assert left == 0, f"{left} slow heads still open on the {flood.name} listener {DRAIN_LIMIT:g} s after the flood"
    return figures


async def check_session_cap(served: Served, live: HostedClient, desk: Desk, fresh: Line) -> dict[str, Any]:
    """`SESSION_FLOOD` raw initialize requests: at most the cap admitted (503 beyond, saying why); the live client's
    call goes on; a new client gets in once the flood's sessions idle out, and calls."""
    manager = desk.runtime.server.session_manager
    freed = asyncio.Event()
    discard = manager._discard_session

    async def watched(session_id: str, transport: Any) -> None:
        await discard(session_id, transport)
        if len(manager._server_instances) < manager.max_sessions:  # type: ignore[operator]
            freed.set()

    manager._discard_session = watched  # type: ignore[method-assign]
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "flood", "version": "0"},
        },
    }
    headers = {
        "Authorization": f"Bearer {BEARER}",
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
    }
    statuses: list[int] = []
    refusals: set[str] = set()
    async with aiohttp.ClientSession() as http:

        async def one() -> None:
            async with http.post(served.base + "/mcp", json=initialize, headers=headers) as got:
                text = await got.text()
            statuses.append(got.status)
            if got.status != 200:
                refusals.add(text)

        await within(asyncio.gather(*(one() for _ in range(SESSION_FLOOD))), CALL_LIMIT, "the session flood")
    open_sessions = len(manager._server_instances)
    figures = {"flood": SESSION_FLOOD, "admitted": statuses.count(200), "refused_503": statuses.count(503)}
    figures["open_sessions"] = open_sessions
    assert open_sessions <= CAP, f"{open_sessions} MCP sessions open, the cap is {CAP}"
    assert all("Too many open sessions" in text for text in refusals), refusals
    result = await within(live.call(await desk.request(), command="list_pages"), CALL_LIMIT)
    assert (result.structured_content or {}).get("status") == "ok", f"the live client under the flood: {result}"
    # A session may also end during the flood (and its slot be taken again): what counts is room now, or the next end.
    freed.clear()
    while len(manager._server_instances) >= manager.max_sessions:  # type: ignore[operator]
        await within(freed.wait(), SESSION_IDLE + 10, "an idle session's end")
        freed.clear()
    newcomer = HostedClient(await fresh.client())
    result = await within(newcomer.call(await desk.request(), command="list_pages"), CALL_LIMIT)
    assert (result.structured_content or {}).get("status") == "ok", f"a new client after the idle timeout: {result}"
    return figures


@contextlib.asynccontextmanager
async def mcp_line(desk: Desk, served: Served) -> AsyncIterator[Line]:
    """MCP connections to the served app's /mcp, closed after."""
    async with AsyncExitStack() as stack:
        yield Line("streamable_http", desk.runtime, stack, served.base + "/mcp")


@pytest.fixture
async def one_page(desk: Desk) -> Desk:
    await desk.open("A", "/dom_form/", desk.workspace.column(0, 2))
    desk.authorize("A")
    return desk


async def check_pairing_cap(app: HostApp) -> dict[str, Any]:
    """`PAIRINGS` + 1 connections of the app's own user: the last is refused saying why, nothing else changes;
    once one pairing ends, a new client pairs."""
    assert app.pairing is not None, "the app serves no pairing socket"
    path = str(app.pairing.path)
    held: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []
    try:
        for _ in range(PAIRINGS):
            reader, writer = await within(asyncio.open_unix_connection(path), CALL_LIMIT)
            held.append((reader, writer))
            assert json.loads(await within(reader.readline(), CALL_LIMIT)).get("type") == "paired"
        reader, writer = await within(asyncio.open_unix_connection(path), CALL_LIMIT)
        over = json.loads(await within(reader.readline(), CALL_LIMIT))
        writer.close()
        assert over.get("type") == "refused", f"pairing {len(held) + 1} over the cap: {over}"
        assert "paired already" in over.get("message", ""), over
        held.pop(0)[1].close()
        answer = await within(pairing_answers(app), CALL_LIMIT, "a pairing once one ended")
    finally:
        for _, writer in held:
            writer.close()
    return {"pairings_held": len(held) + 1, "over_the_cap": over.get("type"), "after_one_ended": answer}


# -- the variants the negative controls put in ---------------------------------------------------------------------


class WithoutHeadDeadline(BoundedH11Protocol):
    """Broken: uvicorn as it was, waiting for ever for a head that never ends (the cap stays)."""

    head_timeout = 0.0


# -- the proofs ----------------------------------------------------------------------------------------------------


@pytest.fixture
async def flooded_app(start_app: StartApp, short_heads: None) -> HostApp:  # noqa: F811
    return await start_app(open_console=False)


@pytest.mark.req("transport:bounded-servers")
async def test_1200_slow_heads_on_every_listener_at_once_leave_each_answering_a_legitimate_client(
    flooded_app: HostApp, gateway: ScopedGateway, floods: Any
) -> None:
    app = flooded_app
    mcp_port = int(app.mcp_url.split(":")[2].split("/")[0])
    gateway_port = int(gateway.url.split(":")[2].split("/")[0])
    targets = {"mcp+v1 (uvicorn)": mcp_port, "console (aiohttp)": app.console.port, "gateway (aiohttp)": gateway_port}
    clients = {
        "/mcp": mcp_answers,
        "/v1": v1_answers,
        "console": console_answers,
        "pairing": pairing_answers,
        "gateway": gateway_answers(gateway),
    }
    figures = await check_slow_heads(app, targets, clients, floods)
    record_cost("server_bounds_slow_heads", figures)


@pytest.mark.before_any_backend
@pytest.mark.req("transport:bounded-servers")
async def test_an_mcp_session_flood_stops_at_the_cap_and_a_new_client_gets_in_once_idle_sessions_end(
    one_page: Desk, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(http_module, "SESSION_IDLE_TIMEOUT", SESSION_IDLE)
    async with serving(one_page.runtime) as served, mcp_line(one_page, served) as line:
        live = HostedClient(await line.client())
        figures = await check_session_cap(served, live, one_page, line)
    record_cost("server_bounds_mcp_sessions", figures)


@pytest.mark.req("transport:bounded-servers")
async def test_pairings_stop_at_their_cap_with_a_reason_and_a_new_client_pairs_once_one_ends(
    start_app: StartApp,  # noqa: F811
) -> None:
    app = await start_app(open_console=False)
    record_cost("server_bounds_pairings", await check_pairing_cap(app))


# -- negative controls ---------------------------------------------------------------------------------------------


@pytest.mark.negative_control
@pytest.mark.req("transport:bounded-servers")
async def test_the_slow_head_check_catches_a_uvicorn_listener_without_the_head_deadline(
    start_app: StartApp,  # noqa: F811
    short_heads: None,
    floods: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(http_module, "BoundedH11Protocol", WithoutHeadDeadline)
    app = await start_app(open_console=False)
    port = int(app.mcp_url.split(":")[2].split("/")[0])
    with pytest.raises(AssertionError, match=r"slow heads still open on the mcp\+v1 \(uvicorn\) listener"):
        await check_slow_heads(app, {"mcp+v1 (uvicorn)": port}, {"/mcp": mcp_answers}, floods)


@pytest.mark.negative_control
@pytest.mark.req("transport:bounded-servers")
async def test_the_slow_head_check_catches_an_aiohttp_listener_without_the_connection_cap(
    start_app: StartApp,  # noqa: F811
    short_heads: None,
    floods: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(BoundedAppRunner, "server_class", web.Server)
    app = await start_app(open_console=False)
    with pytest.raises(AssertionError, match=r"the console \(aiohttp\) listener held \d+ connections, its cap is"):
        await check_slow_heads(app, {"console (aiohttp)": app.console.port}, {"console": console_answers}, floods)


@pytest.mark.before_any_backend
@pytest.mark.negative_control
@pytest.mark.req("transport:bounded-servers")
async def test_the_session_check_catches_the_sdks_default_session_manager(
    one_page: Desk, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(http_module, "MAX_SESSIONS", DEFAULT_MAX_SESSIONS)
    monkeypatch.setattr(http_module, "SESSION_IDLE_TIMEOUT", DEFAULT_SESSION_IDLE_TIMEOUT)
    async with serving(one_page.runtime) as served, mcp_line(one_page, served) as line:
        live = HostedClient(await line.client())
        with pytest.raises(AssertionError, match=r"\d+ MCP sessions open, the cap is 64"):
            await check_session_cap(served, live, one_page, line)


@pytest.mark.negative_control
@pytest.mark.req("transport:bounded-servers")
async def test_the_pairing_check_catches_a_pairing_server_without_a_cap(
    start_app: StartApp,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    app = await start_app(open_console=False)
    monkeypatch.setattr(pairing_module, "MAX_PAIRINGS", 1 << 20)
    with pytest.raises(AssertionError, match="pairing 65 over the cap"):
        await check_pairing_cap(app)


# -- a whole head, then a body a byte at a time --------------------------------------------------------------------


BODY_SLACK = 5.0
"""Seconds past the deadline the server may take to close a connection whose body stopped short."""


class ShortDeadline(BoundedH11Protocol):
    head_timeout = 0.5


class HeadOnlyDeadline(ShortDeadline):
    """Broken: the deadline covers the head only, so a body trickled after a whole head holds its connection (and,
    being served, is never the one the cap closes)."""

    def waiting_for_request(self) -> bool:
        return not self.transport.is_closing() and self.conn.their_state is h11.IDLE


async def reads_its_body(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """An app that, as `/v1` and `/mcp` do, reads the whole body before it answers."""
    if scope["type"] != "http":
        return
    while (await receive()).get("more_body"):
        pass
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"2")]})
    await send({"type": "http.response.body", "body": b"ok"})


async def check_slow_body(protocol: type[BoundedH11Protocol]) -> None:
    """A whole request is answered; a request whose body stops short is closed by the deadline, unanswered."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)  # connections queue from here: no wait for the server to be up
    port = sock.getsockname()[1]
    server = uvicorn.Server(
        uvicorn.Config(reads_its_body, http=protocol, lifespan="off", log_level="warning", timeout_graceful_shutdown=1)
    )
    serving_task = asyncio.create_task(server.serve(sockets=[sock]))
    head = b"POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 12\r\n\r\n"
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(head + b'{"a": "bcd"}')
        assert (await asyncio.wait_for(reader.readuntil(b"ok"), CALL_LIMIT)).startswith(b"HTTP/1.1 200"), "no answer"
        writer.close()
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(head + b'{"a"')  # 4 of 12 bytes, and no more
        try:
            left = await asyncio.wait_for(reader.read(), protocol.head_timeout + BODY_SLACK)
        except TimeoutError:
            raise AssertionError("a body stopped short still holds its connection past the deadline") from None
        finally:
            writer.close()
        assert left == b"", f"a request whose body never came was answered: {left[:80]!r}"
    finally:
        server.should_exit = True
        await asyncio.wait_for(serving_task, CALL_LIMIT)


@pytest.mark.req("transport:bounded-servers")
async def test_a_body_sent_short_after_a_whole_head_is_closed_by_the_request_deadline() -> None:
    await check_slow_body(ShortDeadline)


@pytest.mark.negative_control
@pytest.mark.req("transport:bounded-servers")
async def test_the_slow_body_check_catches_a_deadline_that_covers_the_head_only() -> None:
    with pytest.raises(AssertionError, match="still holds its connection"):
        await check_slow_body(HeadOnlyDeadline)
