"""Cancellation, for real: an MCP client cancels a `computer_use` act while the Page's write is held by the fixture
server, and the *server* honours it — proven on the server's side, not by the client giving up.

What is real: the runtime's own MCP server (`Runtime.server`, the one `computer-use serve` runs) with the real
service, backends, Chromium and fixture server; the SDK's MCP client (`mcp.Client`, legacy handshake) which, when the
call's task is cancelled, sends `notifications/cancelled` for the request; and two transports:
- streamable HTTP: the runtime's HTTP app (`runtime.transports.mcp.http.http_app`, what `computer-use serve
  --transport http` serves) under uvicorn on a free 127.0.0.1 port of this test process, reached over TCP by the
  SDK's streamable HTTP client;
- stdio: the SDK's stdio transport (`mcp.server.stdio.stdio_server`, given explicit streams) on two real OS pipes,
  with the client on the other ends framed the same way (the SDK's own stdio client only spawns processes). Both
  directions are recorded as they cross the pipes, so the test can see the wire itself.
Both run in this process so that the test can mint tokens with the runtime's host and read its journal.

Honoured means: the server records the call as `cancelled` in its journal (the protocol answers nothing to a
cancelled request, so that record is where the outcome shows); the Page's write lease is released (another session
writes to the Page at once instead of waiting for the lease); the frame the act carried is spent; and the one write
that had reached the server stays the only one. The negative controls run the same check against a service that
shields its calls from cancellation, and against one that answers and records a cancelled call as done
(`suites/honesty/variants.py`); it must catch both.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
import uvicorn
from mcp.client import Transport
from mcp.server.stdio import stdio_server

from fixtures_sites.server import FixtureServer, Stall
from runtime.assembly import Runtime
from runtime.models import ComputerUseResult
from runtime.service import CallRecord, ComputerUseService
from runtime.transports.client import HostedClient
from runtime.transports.mcp.http import http_app
from suites.harness import Agent, Desk, client_in_task, ref_of
from suites.honesty.variants import CancelReportedAsDone
from suites.reliability.conftest import ACT_LIMIT, CALL_LIMIT, Variant, assert_outcome, within

LEASE_TIMEOUT = 3.0
"""How long an act waits for the Page's write lease here: a lease still held answers `timeout` after this."""

HELD_ACT_TIMEOUT = 120.0
"""The act_timeout here: far longer than any check waits, so an act that ignores its cancellation still holds the
lease when the check looks (only honouring the cancel frees it in time)."""

TRANSPORTS = ("streamable_http", "stdio")


@pytest.fixture
def runtime(faults_runtime: Runtime) -> Runtime:
    """This module's runtime under the suites' `desk` and `agent`: the reliability bounds and recorded backends."""
    return faults_runtime


# -- stdio on real pipes ------------------------------------------------------------------------------------------


@dataclass
class PipeEnd:
    """One end of an OS pipe as the SDK's stdio transport uses a file: lines of UTF-8 text in, or out. Every line
    that crosses is kept in `wire`."""

    reader: asyncio.StreamReader | None = None
    writer: asyncio.WriteTransport | None = None
    wire: list[dict[str, Any]] = field(default_factory=list)

    def __aiter__(self) -> AsyncIterator[str]:
        return self._lines()

    async def _lines(self) -> AsyncIterator[str]:
        assert self.reader is not None
        while line := await self.reader.readline():
            self.wire.append(json.loads(line))
            yield line.decode()

    async def write(self, text: str) -> None:
        assert self.writer is not None
        self.wire.append(json.loads(text))
        self.writer.write(text.encode())

    async def flush(self) -> None:
        pass  # a pipe transport writes what it can at once and buffers the rest; nothing to wait for here

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()


async def pipe() -> tuple[PipeEnd, PipeEnd]:
    """A real OS pipe as (read end, write end), both non-blocking in this event loop."""
    read_fd, write_fd = os.pipe()
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=16 * 1024 * 1024)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(read_fd, "rb", 0))
    writer, _ = await loop.connect_write_pipe(asyncio.Protocol, os.fdopen(write_fd, "wb", 0))
    return PipeEnd(reader=reader), PipeEnd(writer=writer)  # type: ignore[arg-type]


@dataclass
class Wire:
    """Both directions of the stdio connection, as each side wrote them to its pipe."""

    to_server: list[dict[str, Any]]
    to_client: list[dict[str, Any]]


Framing = Callable[..., contextlib.AbstractAsyncContextManager[Any]]
"""A stdio transport given explicit streams: `stdio_server(stdin=…, stdout=…)` yielding (read, write)."""


@contextlib.asynccontextmanager
async def over_stdio(runtime: Runtime, framing: Framing = stdio_server) -> AsyncIterator[tuple[Transport, Wire]]:
    """Serve `runtime.server` on a stdio transport over two OS pipes (the SDK's, or `framing`: e.g. the runtime's
    own `runtime.transports.mcp.stdio.stdio_server`, what `computer-use serve` runs); yield the client's transport.

    Closing works as with a server process: the client closes its end of the server's stdin, the server's loop
    sees EOF and ends, and closing the server's stdout ends the client's reading."""
    server_in, client_out = await pipe()
    client_in, server_out = await pipe()
    lowlevel = runtime.server._lowlevel_server  # what MCPServer.run_stdio_async runs, on the process's own stdio

    async def serve() -> None:
        try:
            async with framing(stdin=server_in, stdout=server_out) as (read, write):  # type: ignore[arg-type]
                await lowlevel.run(read, write, lowlevel.create_initialization_options())
        finally:
            server_out.close()

    @contextlib.asynccontextmanager
    async def client_side() -> AsyncIterator[Any]:
        async with stdio_server(stdin=client_in, stdout=client_out) as streams:  # type: ignore[arg-type]
            try:
                yield streams
            finally:
                client_out.close()

    serving = asyncio.create_task(serve())
    try:
        yield client_side(), Wire(client_out.wire, server_out.wire)
    finally:
        client_out.close()
        await within(serving, CALL_LIMIT, "the stdio server's end")


# -- streamable HTTP on a free port -------------------------------------------------------------------------------


@contextlib.asynccontextmanager
async def over_http(runtime: Runtime) -> AsyncIterator[str]:
    """Serve `runtime.server`'s HTTP app under uvicorn on a free loopback port; yield its MCP URL.

    The socket is bound and listening before uvicorn starts, so a client can connect at once (the kernel queues
    the connection until uvicorn accepts it): no wait for readiness."""
    listening = socket.socket()
    listening.bind(("127.0.0.1", 0))
    listening.listen()
    port = listening.getsockname()[1]
    config = uvicorn.Config(
        http_app(runtime.server, "127.0.0.1", None), log_level="warning", timeout_graceful_shutdown=5, lifespan="on"
    )
    server = uvicorn.Server(config)
    serving = asyncio.create_task(server.serve(sockets=[listening]))
    try:
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        server.should_exit = True
        await within(serving, CALL_LIMIT, "the HTTP server's end")
        listening.close()


@dataclass
class Connected:
    agent: Agent
    wire: Wire | None = None
    """The stdio wire (None over HTTP)."""


@pytest.fixture(params=TRANSPORTS)
async def connected(request: pytest.FixtureRequest, desk: Desk) -> AsyncIterator[Connected]:
    """An agent whose MCP connection to the runtime's server crosses a real transport."""
    desk.runtime.service.settings.lease_timeout = LEASE_TIMEOUT
    desk.runtime.service.settings.act_timeout = HELD_ACT_TIMEOUT
    if request.param == "stdio":
        async with over_stdio(desk.runtime) as (transport, wire), client_in_task(transport) as client:
            yield Connected(Agent(HostedClient(client), desk), wire)
    else:
        async with over_http(desk.runtime) as url, client_in_task(url) as client:
            yield Connected(Agent(HostedClient(client), desk))


# -- the check ----------------------------------------------------------------------------------------------------


def records_of(service: ComputerUseService, command: str, session_id: str | None) -> list[CallRecord]:
    return [r for r in service.journal if r.command == command and r.session_id == session_id]


@dataclass
class Cancelled:
    """An act the client cancelled while its write was held: what it carried, and the held write."""

    seen: ComputerUseResult
    held: Stall


async def cancel_a_held_submit(agent: Agent, server: FixtureServer) -> Cancelled:
    """Observe the expense form, submit it, and cancel the act while the server holds its POST."""
    seen = await agent.observe(page="left")
    held = server.stall("/stall/write")
    submit = ref_of(seen, '"Submit expense"')
    call = asyncio.ensure_future(agent.act(seen, type="click", ref=submit))
    await held.started()
    assert not call.done(), f"the act answered while its write was held: {call.result()}"
    call.cancel()  # the SDK client sends notifications/cancelled for the request and stops waiting
    with contextlib.suppress(asyncio.CancelledError):
        result = await call
        raise AssertionError(f"a cancelled act answered: {result}")
    return Cancelled(seen, held)


async def assert_cancellation_honoured(desk: Desk, agent: Agent, server: FixtureServer, act: Cancelled) -> None:
    """From the server's side, while the write is still held (so nothing but the cancellation can have ended the
    act): the Page's write lease is free, the call is recorded `cancelled`, its frame is spent. Then, once the
    write is let go, another session observes and writes to the Page, and the one write stays the only one."""
    assert act.held.holding
    lease = desk.runtime.registry.lease(desk.pages["A"])
    try:  # what the next act on the Page does first, bounded as it is
        await asyncio.wait_for(lease.acquire(), LEASE_TIMEOUT)
    except TimeoutError:
        raise AssertionError("the Page's write lease was not released: the cancelled act still holds it") from None
    lease.release()
    records = records_of(desk.runtime.service, "act", act.seen.computer_session_id)
    codes = [r.code for r in records]
    assert "ok" not in codes, f"the server reported success for the cancelled act: {records}"
    assert codes == ["cancelled"], f"the server's record of the cancelled act: {records}"
    submit = ref_of(act.seen, '"Submit expense"')
    assert_outcome(await within(agent.act(act.seen, type="click", ref=submit), CALL_LIMIT), "stale_observation")

    act.held.release(text="<!doctype html><title>Expense submitted</title><h1>Submitted</h1>", content_type="text/html")
    desk.authorize("A")  # a new turn: its first observe opens another session on the Page, with its own backend
    other = await within(agent.observe(page="left"), CALL_LIMIT, "observing the Page in a new session")
    assert other.computer_session_id != act.seen.computer_session_id
    back = await within(agent.act(other, type="navigate", url=server.url("/stall/")), ACT_LIMIT, "a write")
    assert back.reason_code is None, f"{back.reason_code}: {back.message}"
    assert [w.path for w in server.ledger.writes()] == ["/stall/write"]  # the one write that had arrived; no other


def assert_no_answer_on_the_wire(wire: Wire) -> None:
    """The client sent `notifications/cancelled` for the act's request, and the server never answered that id."""
    cancelled = [m["params"]["requestId"] for m in wire.to_server if m.get("method") == "notifications/cancelled"]
    assert len(cancelled) == 1, f"notifications/cancelled sent: {cancelled}"
    answers = [m for m in wire.to_client if "method" not in m and m.get("id") == cancelled[0]]
    assert answers == [], f"the server answered the cancelled request: {answers}"


@pytest.mark.req("honesty:cancel-during-act", "reason:cancelled", "writes:at-most-one")
async def test_a_client_cancel_during_a_held_act_is_honoured_by_the_server(
    desk: Desk, connected: Connected, fixture_server: FixtureServer, one_page_desk: Callable
) -> None:
    await one_page_desk("/stall/")
    act = await cancel_a_held_submit(connected.agent, fixture_server)
    await assert_cancellation_honoured(desk, connected.agent, fixture_server, act)
    if connected.wire is not None:  # checked last: later calls crossed the same pipe, so it has all been written
        assert_no_answer_on_the_wire(connected.wire)


class ShieldsItsCalls(ComputerUseService):
    """A broken rule: every call runs shielded from cancellation, so a cancelled act keeps going (and keeps the
    Page's write lease) while the client has stopped waiting."""

    async def handle(self, args, meta, connection):  # type: ignore[no-untyped-def]
        return await asyncio.shield(super().handle(args, meta, connection))


@pytest.mark.negative_control
@pytest.mark.parametrize("runtime_variant", [Variant("shields its calls", service=ShieldsItsCalls)], ids=str)
@pytest.mark.req("honesty:cancel-during-act")
async def test_the_cancellation_check_catches_a_server_that_does_not_honour_a_cancel(
    desk: Desk, connected: Connected, fixture_server: FixtureServer, one_page_desk: Callable
) -> None:
    await one_page_desk("/stall/")
    act = await cancel_a_held_submit(connected.agent, fixture_server)
    with pytest.raises(AssertionError, match="lease was not released"):
        await assert_cancellation_honoured(desk, connected.agent, fixture_server, act)
    assert records_of(desk.runtime.service, "act", act.seen.computer_session_id) == []  # nothing says `cancelled`


@pytest.mark.negative_control
@pytest.mark.parametrize(
    "runtime_variant", [Variant("reports a cancelled call as done", service=CancelReportedAsDone)], ids=str
)
@pytest.mark.req("honesty:cancel-during-act")
async def test_the_cancellation_check_catches_a_server_that_reports_a_cancelled_act_as_done(
    desk: Desk, connected: Connected, fixture_server: FixtureServer, one_page_desk: Callable
) -> None:
    await one_page_desk("/stall/")
    act = await cancel_a_held_submit(connected.agent, fixture_server)
    with pytest.raises(AssertionError, match="reported success for the cancelled act"):
        await assert_cancellation_honoured(desk, connected.agent, fixture_server, act)
