"""The isolation and token proofs over every transport the runtime serves: in-process, stdio and streamable HTTP.

The token is bound to the MCP connection it was minted for, and the runtime finds that connection through a private
attribute of the SDK (`runtime.transports.mcp.server.connection_of`). In-memory clients alone never showed that the
binding holds where it matters, so every proof here runs three ways:
- in-process: the SDK's `mcp.Client` on the runtime's server object (what the other suites do);
- stdio: the runtime's own stdio transport (`runtime.transports.mcp.stdio.stdio_server`, what `computer-use serve`
  runs) on two real OS pipes, one server loop per connection as with one server process per client, the SDK's stdio
  framing on the client's ends (the SDK's own stdio client only spawns processes);
- streamable HTTP: the runtime's HTTP app (`runtime.transports.mcp.http.http_app`) behind its bearer check under uvicorn
  on a free 127.0.0.1 port, reached over TCP by the SDK's streamable HTTP client with the bearer header.
The runtime stays in this process so the test can mint tokens with its host (as `suites/reliability/
test_cancellation.py` does). Real Chromium, backends and fixture server, as everywhere.

Each refusal is checked before any backend call (0 CDP commands through the tap, 0 writes), and each check has its
negative control: a broken verifier or connection lookup injected into the real runtime, which the check must catch.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import socket
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from dataclasses import dataclass
from typing import Any

import httpx2
import pytest
import uvicorn
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.server.context import ServerRequestContext

import runtime.transports.mcp.server as mcp_server
from fixtures_sites.server import FixtureServer
from lab.tap import CDPTap
from runtime.assembly import Runtime
from runtime.capability.token import Claims
from runtime.capability.verifier import CALL_KEY, TOKEN_KEY, CapabilityVerifier
from runtime.models import ComputerUseResult
from runtime.transports.client import HostedClient
from runtime.transports.mcp.http import bounded_config, http_app
from runtime.transports.mcp.server import TOOL
from runtime.transports.mcp.stdio import stdio_server
from suites.harness import Agent, Desk, client_in_task
from suites.isolation.test_isolation import observe_act_verify_on_a, others
from suites.proofs import assert_no_runtime_calls, assert_no_writes, assert_untouched, report_figures
from suites.reliability.conftest import CALL_LIMIT, within
from suites.reliability.test_cancellation import over_stdio

TRANSPORTS = ("in_process", "stdio", "streamable_http")
STATELESS = "2026-07-28"
"""The stateless protocol version the SDK's client adopts without an initialize handshake."""
BEARER = secrets.token_urlsafe(24)
CONNECT_LIMIT = 30.0


# -- the transports -----------------------------------------------------------------------------------------------


@contextlib.asynccontextmanager
async def over_http(runtime: Runtime) -> AsyncIterator[str]:
    """The runtime's HTTP app, bearer-protected, under uvicorn on a free loopback port; yields its MCP URL. The
    socket listens before uvicorn starts, so a client may connect at once."""
    listening = socket.socket()
    listening.bind(("127.0.0.1", 0))
    listening.listen()
    port = listening.getsockname()[1]
    app = http_app(runtime.server, "127.0.0.1", BEARER)
    server = uvicorn.Server(bounded_config(app, log_level="warning", timeout_graceful_shutdown=5, lifespan="on"))
    serving = asyncio.create_task(server.serve(sockets=[listening]))
    try:
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        server.should_exit = True
        await within(serving, CALL_LIMIT, "the HTTP server's end")
        listening.close()


@dataclass
class Line:
    """One transport to the runtime's server, on which a test opens as many MCP connections as it needs."""

    kind: str
    runtime: Runtime
    stack: AsyncExitStack
    url: str | None = None

    async def client(self, mode: str = "legacy") -> Client:
        """A new MCP connection (`legacy`: the initialize handshake; `STATELESS`: none), closed after the test."""
        if self.kind == "in_process":
            target: Any = self.runtime.server
        elif self.kind == "stdio":
            target, _ = await self.stack.enter_async_context(over_stdio(self.runtime, framing=stdio_server))
        else:
            assert self.url is not None
            target = self.url

        @contextlib.asynccontextmanager
        async def opened() -> AsyncIterator[Client]:
            if self.kind != "streamable_http":
                async with Client(target, mode=mode) as client:
                    yield client
                return
            headers = {"Authorization": f"Bearer {BEARER}"}
            async with (
                httpx2.AsyncClient(headers=headers, timeout=CALL_LIMIT) as http,
                Client(streamable_http_client(target, http_client=http), mode=mode) as client,
            ):
                yield client

        return await self.stack.enter_async_context(client_in_task(None, CONNECT_LIMIT, opened=opened))

    async def agent(self, desk: Desk) -> Agent:
        return Agent(HostedClient(await self.client()), desk)


@pytest.fixture(params=TRANSPORTS)
def transport(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
async def line(desk: Desk, transport: str) -> AsyncIterator[Line]:
    async with AsyncExitStack() as stack:
        url = await stack.enter_async_context(over_http(desk.runtime)) if transport == "streamable_http" else None
        yield Line(transport, desk.runtime, stack, url)


@pytest.fixture
async def agent(desk: Desk, line: Line) -> Agent:
    """The suites' agent, connected over `transport`."""
    return await line.agent(desk)


@pytest.fixture
async def foreign(desk: Desk, line: Line) -> Agent:
    """A second client with its own MCP connection over the same transport."""
    return await line.agent(desk)


# -- the checks ---------------------------------------------------------------------------------------------------


async def present(client: Client, meta: dict[str, str] | None, **arguments: Any) -> ComputerUseResult:
    """One raw `computer_use` call with exactly this `_meta`."""
    raw = await client.call_tool(TOOL, arguments, meta=meta)
    return ComputerUseResult.model_validate(raw.structured_content)


def assert_refused(result: ComputerUseResult, code: str, words: str, case: str) -> None:
    refused = result.status == "failed" and result.reason_code == code and words in (result.message or "")
    assert refused, f"{case}: expected {code} saying {words!r}, got {result}"
    assert result.hint, f"{case}: no hint in {result}"


def observe_a(desk: Desk) -> dict[str, Any]:
    return {"command": "observe", "page": desk.handle("A")}


async def check_bad_tokens(desk: Desk, agent: Agent, foreign: Agent, tap: CDPTap, server: FixtureServer) -> None:
    """Missing, forged, replayed, stale, cross-connection and mismatched-call-id tokens: each refused with its
    reason, 0 CDP commands, 0 writes."""
    request = await desk.request()
    used_call, used = request.mint(agent.client.connection)
    first = await present(agent.client.client, {TOKEN_KEY: used, CALL_KEY: used_call}, command="list_pages")
    assert first.status == "ok", first  # binds the agent's connection
    stale_call, stale = request.mint(agent.client.connection)
    fresh = await desk.request()  # a newer model request: the older Page Context is stale
    tap.clear()
    forged_call, forged = fresh.mint(agent.client.connection)
    forged = forged[:-4] + ("AAAA" if not forged.endswith("AAAA") else "BBBB")
    cases = {
        "missing": (None, "invalid_capability", "missing"),
        "forged": ({TOKEN_KEY: forged, CALL_KEY: forged_call}, "invalid_capability", "not signed"),
        "replayed": ({TOKEN_KEY: used, CALL_KEY: used_call}, "invalid_capability", "already used"),
        "stale": ({TOKEN_KEY: stale, CALL_KEY: stale_call}, "page_context_stale", "newer model request"),
    }
    for case, (meta, code, words) in cases.items():
        assert_refused(await present(agent.client.client, meta, **observe_a(desk)), code, words, case)
    await check_cross_connection(desk, fresh.mint(agent.client.connection), foreign)
    await check_call_id_mismatch(desk, fresh.mint(agent.client.connection), agent)
    assert_no_runtime_calls(tap)
    assert_no_writes(server)


async def check_cross_connection(desk: Desk, minted: tuple[str, str], foreign: Agent) -> None:
    """A token minted for the agent's connection, presented on another connection."""
    call, token = minted
    crossed = await present(foreign.client.client, {TOKEN_KEY: token, CALL_KEY: call}, **observe_a(desk))
    assert_refused(crossed, "invalid_capability", "another MCP connection", "cross-connection")


async def check_call_id_mismatch(desk: Desk, minted: tuple[str, str], agent: Agent) -> None:
    """The agent's own token, on its own connection, presented for another tool call."""
    _, token = minted
    moved = await present(agent.client.client, {TOKEN_KEY: token, CALL_KEY: "another-call"}, **observe_a(desk))
    assert_refused(moved, "invalid_capability", "another tool call", "call-id mismatch")


async def check_foreign_first(desk: Desk, agent: Agent, foreign: Agent, tap: CDPTap, server: FixtureServer) -> None:
    """A token of the agent's, presented first on a foreign connection, is void for the agent too; the agent's
    connection is not poisoned (its next token works)."""
    request = await desk.request()
    bound = await agent.call(request, command="list_pages")
    assert bound.status == "ok", bound  # the legitimate connection is bound to its nonce
    call, token = request.mint(agent.client.connection)
    meta = {TOKEN_KEY: token, CALL_KEY: call}
    tap.clear()
    stolen = await present(foreign.client.client, meta, **observe_a(desk))
    assert_refused(stolen, "invalid_capability", "another MCP connection", "foreign presentation")
    after = await present(agent.client.client, meta, **observe_a(desk))
    void = after.status == "failed" and after.reason_code == "invalid_capability"
    assert void, f"the token was not void after a foreign presentation: the legitimate connection got {after}"
    assert "presented on another MCP connection first" in (after.message or ""), after
    assert_no_runtime_calls(tap)
    assert_no_writes(server)
    still = await agent.call(request, command="list_pages")
    assert still.status == "ok", still


async def check_stateless_refused(desk: Desk, stateless: Client, tap: CDPTap, server: FixtureServer) -> None:
    """A genuine, fresh token on a stateless client: refused, saying there is no connection to bind it to."""
    request = await desk.request()
    call, token = request.mint("conn-" + secrets.token_hex(8))
    tap.clear()
    result = await present(stateless, {TOKEN_KEY: token, CALL_KEY: call}, **observe_a(desk))
    assert_refused(result, "invalid_capability", "no MCP connection to bind the token to", "stateless")
    assert_no_runtime_calls(tap)
    assert_no_writes(server)


async def check_unidentified_refused(desk: Desk, agent: Agent, tap: CDPTap, server: FixtureServer) -> None:
    """With the SDK's connection attribute gone (as if the SDK had renamed it), a genuine token is refused."""
    request = await desk.request()
    tap.clear()
    result = await agent.call(request, **observe_a(desk))
    assert_refused(result, "invalid_capability", "cannot tell which MCP connection", "connection not found")
    assert_no_runtime_calls(tap)
    assert_no_writes(server)


# -- the broken variants the negative controls inject ---------------------------------------------------------------


class IgnoresConnection(CapabilityVerifier):
    """Broken: never checks which connection presents a token (the binding is not enforced)."""

    def bind(self, nonce: str, connection: object) -> None:
        pass


class IgnoresCallId(CapabilityVerifier):
    """Broken: accepts a token whatever tool call it is presented for."""

    def check_call(self, meta: Any, claims: Claims) -> None:
        pass


class KeepsForeignTokens(CapabilityVerifier):
    """Broken: a token refused on a foreign connection stays usable for its own (bound before it is spent)."""

    def spend(self, claims: Claims, connection: object) -> None:
        self.bind(claims.connection, connection)
        super().spend(claims, connection)


def per_request_session(request: ServerRequestContext[Any, Any]) -> object | None:
    """Broken: binds a token to whatever the SDK's session holds, even for a stateless client, and to the per-request
    session itself when the SDK's connection is not found."""
    found = getattr(request.session, mcp_server.CONNECTION_ATTRIBUTE, None)
    return found if found is not None else request.session


def inject(desk: Desk, variant: type[CapabilityVerifier]) -> None:
    verifier = desk.runtime.service.verifier
    assert issubclass(variant, type(verifier))
    verifier.__class__ = variant  # the same object and state; only the overridden rule differs


# -- the proofs ---------------------------------------------------------------------------------------------------

ISOLATION = ("isolation:b-untouched", "isolation:chat-untouched", "isolation:other-window-untouched")


@pytest.mark.req("capability:real-transports", *ISOLATION, "action:type", "verify:element-state")
async def test_over_every_transport_observe_act_verify_on_a_never_touch_b_the_chat_or_another_window(
    layout: Desk, agent: Agent, tap: CDPTap
) -> None:
    await observe_act_verify_on_a(agent)
    figures = report_figures(tap, {"A": layout.target("A"), **others(layout)})
    assert sum(figures["A"].values()) > 0  # the tap saw the work on A, so zeros elsewhere mean something
    assert_untouched(tap, others(layout))


@pytest.mark.before_any_backend
@pytest.mark.req(
    "capability:real-transports",
    "capability:missing",
    "capability:forged",
    "capability:replayed",
    "capability:stale",
    "capability:cross-connection",
    "capability:call-id-mismatch",
    "reason:invalid_capability",
    "reason:page_context_stale",
)
async def test_over_every_transport_bad_tokens_stop_before_any_backend_call(
    layout: Desk, agent: Agent, foreign: Agent, tap: CDPTap, fixture_server: FixtureServer
) -> None:
    await check_bad_tokens(layout, agent, foreign, tap, fixture_server)


@pytest.mark.before_any_backend
@pytest.mark.req("capability:foreign-first", "capability:real-transports")
async def test_a_token_presented_first_on_a_foreign_connection_is_void_for_its_own_connection_too(
    layout: Desk, agent: Agent, foreign: Agent, tap: CDPTap, fixture_server: FixtureServer
) -> None:
    await check_foreign_first(layout, agent, foreign, tap, fixture_server)


@pytest.mark.before_any_backend
@pytest.mark.req("capability:stateless-refused", "reason:invalid_capability")
async def test_a_stateless_client_is_refused_because_it_has_no_connection_to_bind_a_token_to(
    layout: Desk, line: Line, tap: CDPTap, fixture_server: FixtureServer
) -> None:
    await check_stateless_refused(layout, await line.client(mode=STATELESS), tap, fixture_server)


@pytest.mark.before_any_backend
@pytest.mark.req("capability:connection-unidentified", "reason:invalid_capability")
async def test_when_the_sdk_no_longer_shows_the_connection_every_token_is_refused(
    layout: Desk, agent: Agent, tap: CDPTap, fixture_server: FixtureServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(mcp_server, "CONNECTION_ATTRIBUTE", "_connection_moved")
    await check_unidentified_refused(layout, agent, tap, fixture_server)


# -- negative controls --------------------------------------------------------------------------------------------


@pytest.mark.before_any_backend
@pytest.mark.negative_control
@pytest.mark.req("capability:cross-connection", "capability:real-transports")
async def test_the_cross_connection_check_catches_a_verifier_that_ignores_the_connection(
    layout: Desk, agent: Agent, foreign: Agent
) -> None:
    request = await layout.request()
    assert (await agent.call(request, command="list_pages")).status == "ok"  # the agent's connection is bound
    inject(layout, IgnoresConnection)
    with pytest.raises(AssertionError, match="cross-connection: expected invalid_capability"):
        await check_cross_connection(layout, request.mint(agent.client.connection), foreign)


@pytest.mark.before_any_backend
@pytest.mark.negative_control
@pytest.mark.req("capability:call-id-mismatch")
async def test_the_call_id_check_catches_a_verifier_that_skips_it(layout: Desk, agent: Agent) -> None:
    inject(layout, IgnoresCallId)
    request = await layout.request()
    with pytest.raises(AssertionError, match="call-id mismatch: expected invalid_capability"):
        await check_call_id_mismatch(layout, request.mint(agent.client.connection), agent)


@pytest.mark.before_any_backend
@pytest.mark.negative_control
@pytest.mark.req("capability:foreign-first")
async def test_the_foreign_first_check_catches_a_verifier_that_keeps_the_token_usable(
    layout: Desk, agent: Agent, foreign: Agent, tap: CDPTap, fixture_server: FixtureServer
) -> None:
    inject(layout, KeepsForeignTokens)
    with pytest.raises(AssertionError, match="was not void after a foreign presentation"):
        await check_foreign_first(layout, agent, foreign, tap, fixture_server)


@pytest.mark.before_any_backend
@pytest.mark.negative_control
@pytest.mark.req("capability:stateless-refused")
async def test_the_stateless_check_catches_a_runtime_that_binds_stateless_calls_to_something(
    layout: Desk, line: Line, tap: CDPTap, fixture_server: FixtureServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(mcp_server, "connection_of", per_request_session)
    stateless = await line.client(mode=STATELESS)
    with pytest.raises(AssertionError, match="stateless: expected invalid_capability"):
        await check_stateless_refused(layout, stateless, tap, fixture_server)


@pytest.mark.before_any_backend
@pytest.mark.negative_control
@pytest.mark.req("capability:connection-unidentified")
async def test_the_unidentified_connection_check_catches_a_lookup_that_falls_back(
    layout: Desk, agent: Agent, tap: CDPTap, fixture_server: FixtureServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(mcp_server, "CONNECTION_ATTRIBUTE", "_connection_moved")
    monkeypatch.setattr(mcp_server, "connection_of", per_request_session)
    with pytest.raises(AssertionError, match="connection not found: expected invalid_capability"):
        await check_unidentified_refused(layout, agent, tap, fixture_server)
