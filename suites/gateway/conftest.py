"""Fixtures for the scoped CDP gateway suite: three pages, a gateway bound to A behind the tap, real MCP children.

The gateway's upstream is always a tap endpoint labelled "gateway", so the tap counts exactly what the gateway (and
every client behind it) made reach Chromium. Negative controls build a broken one instead (`unscoped=True`: the
`UnscopedGateway` of `suites/sabotage.py`, which shows and forwards everything).

The tests are split as the gateway is: `test_gateway_scope.py`, `test_gateway_relay.py`, `test_gateway_watch.py`,
and `test_gateway_admission.py` (in-process, on real loopback sockets).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import tempfile
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from fixtures_sites.server import FixtureServer
from lab.cdp import CDPClient
from lab.tap import CDPTap
from lab.workspace import LabPage, Workspace
from runtime.gateway import GatewayEvent, ScopedGateway
from suites.sabotage import UnscopedGateway

BIN = Path(__file__).resolve().parents[2] / "backends" / "node_modules" / ".bin"
MCP_TIMEOUT = 60.0
"""Bound on every MCP request to a child (its first tool call launches its CDP connection)."""
EVENT_TIMEOUT = 10.0

Pages = tuple[LabPage, LabPage, LabPage]


async def attach(client: CDPClient, page: LabPage) -> str:
    return (await client.send("Target.attachToTarget", {"targetId": page.target_id, "flatten": True}))["sessionId"]


async def gift_checked(workspace: Workspace, page: LabPage) -> bool:
    return await workspace.evaluate(page, "document.getElementById('gift').checked")


class EventRecorder:
    """The gateway's `on_event` for tests: records events and resolves waits registered before the action."""

    def __init__(self) -> None:
        self.events: list[GatewayEvent] = []
        self._waiters: list[tuple[str, asyncio.Future[GatewayEvent]]] = []

    def __call__(self, event: GatewayEvent) -> None:
        self.events.append(event)
        keep = []
        for kind, future in self._waiters:
            if future.done():
                continue
            if kind == event.kind:
                future.set_result(event)
            else:
                keep.append((kind, future))
        self._waiters = keep

    def wait(self, kind: str, timeout: float = EVENT_TIMEOUT) -> Awaitable[GatewayEvent]:
        """Register a wait for the next event of `kind`; call before the action that causes it, await after."""
        future: asyncio.Future[GatewayEvent] = asyncio.get_running_loop().create_future()
        self._waiters.append((kind, future))

        async def bounded() -> GatewayEvent:
            try:
                return await asyncio.wait_for(future, timeout)
            except TimeoutError:
                raise TimeoutError(f"no {kind} gateway event within {timeout:g}s; saw {self.events}") from None

        return asyncio.ensure_future(bounded())


class RecordingClient(CDPClient):
    """A raw CDP client that also keeps every event it received, to prove what a client behind the gateway saw."""

    def __init__(self, ws: aiohttp.ClientWebSocketResponse, http: aiohttp.ClientSession) -> None:
        self.events: list[dict[str, Any]] = []
        super().__init__(ws, http)

    def _dispatch_event(self, message: dict[str, Any]) -> None:
        self.events.append(message)
        super()._dispatch_event(message)

    def targets_in_events(self) -> set[str]:
        """Every target id any received event was about."""
        seen = set()
        for message in self.events:
            params = message.get("params", {})
            target = (params.get("targetInfo") or {}).get("targetId") or params.get("targetId")
            if target:
                seen.add(target)
        return seen


def untouched(tap: CDPTap, *pages: LabPage) -> None:
    """Not one command reached these pages (the isolation check every test here ends with)."""
    for page in pages:
        calls = tap.by_target().get(page.target_id, Counter())
        assert not calls, f"{page.name} was touched: {dict(calls)}"


async def get_json(endpoint: str, path: str, method: str = "GET") -> tuple[int, Any]:
    async with aiohttp.ClientSession() as http, http.request(method, endpoint + path) as response:
        body = await response.text()
        with contextlib.suppress(ValueError):
            return response.status, await response.json(content_type=None)
        return response.status, body


async def browser_client(endpoint: str) -> RecordingClient:
    status, version = await get_json(endpoint, "/json/version")
    assert status == 200, version
    client = await RecordingClient.connect(version["webSocketDebuggerUrl"])
    assert isinstance(client, RecordingClient)
    return client


@pytest.fixture
async def three_pages(workspace: Workspace, fixture_server: FixtureServer) -> tuple[LabPage, LabPage, LabPage]:
    url = fixture_server.url("/dom_form/")
    return (
        await workspace.open("A", url, workspace.column(0, 3)),
        await workspace.open("B", url, workspace.column(1, 3)),
        await workspace.open("C", url, workspace.column(2, 3)),
    )


@pytest.fixture
def recorder() -> EventRecorder:
    return EventRecorder()


Gateways = Callable[..., Awaitable[ScopedGateway]]


@pytest.fixture
async def make_gateway(tap: CDPTap, recorder: EventRecorder) -> AsyncIterator[Gateways]:
    """`await make_gateway(page)`: a started gateway bound to `page`, upstream via the tap; closed after the test."""
    started: list[ScopedGateway] = []

    async def make(page: LabPage, *, unscoped: bool = False) -> ScopedGateway:
        kind = UnscopedGateway if unscoped else ScopedGateway
        gateway = kind(await tap.endpoint("gateway"), page.target_id, on_event=recorder)
        await gateway.start()
        started.append(gateway)
        return gateway

    yield make
    for gateway in started:
        await gateway.close()


@pytest.fixture
async def clients() -> AsyncIterator[list[CDPClient]]:
    """Raw clients a test opened; closed after it."""
    opened: list[CDPClient] = []
    yield opened
    for client in opened:
        await client.close()


@contextlib.asynccontextmanager
async def mcp_child(command: str, *args: str, env: dict[str, str] | None = None) -> AsyncIterator[ClientSession]:
    """An npm MCP server as a private stdio child: own TMPDIR/HOME/XDG_CACHE_HOME and cwd; always reaped."""
    with tempfile.TemporaryDirectory(prefix="cul-mcp-") as tmp:
        private = {"TMPDIR": tmp, "HOME": tmp, "XDG_CACHE_HOME": os.path.join(tmp, "cache"), **(env or {})}
        params = StdioServerParameters(command=str(BIN / command), args=list(args), env=private, cwd=tmp)
        # The child's stderr goes to ours, which pytest captures and shows when a test fails.
        async with (
            stdio_client(params) as (read, write),
            ClientSession(read, write, read_timeout_seconds=MCP_TIMEOUT) as session,
        ):
            await session.initialize()
            yield session


def tool_text(result: Any) -> str:
    """The text of a tools/call result; fails the test with that text when the tool reported an error."""
    text = "\n".join(getattr(part, "text", "") for part in result.content)
    assert not result.is_error, text
    return text
