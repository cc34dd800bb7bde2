"""Fixtures for the security proofs: the scoped gateways a real runtime starts, the broken variants negative
controls inject into it, and raw CDP clients that reach a gateway the way a backend does.

`gateways` records every `ScopedGateway` started during a test, whoever starts it (the runtime's session code or
the test), so a proof can name the ports, secrets and refusals of the live sessions without reaching into the
runtime's internals. A negative control sets `gateways.admission` (a broken admission room, a subclass overriding one
of its checks) or `gateways.policy` (a replaced policy table) before the runtime opens its sessions: each gateway
gets that part just before it starts, so the broken part runs inside the real runtime, with the real backends.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import pytest
from aiohttp import web

from fixtures_sites.server import FixtureServer
from lab.cdp import CDPClient
from lab.tap import CDPTap
from lab.workspace import LabPage, Workspace
from runtime.gateway import ScopedGateway
from runtime.gateway.admission import Admission
from runtime.gateway.allowlist import FORWARD, Policy, Verdict
from suites.gateway.conftest import clients  # noqa: F401  (the same fixture: raw clients closed after the test)

HTTP_TIMEOUT = aiohttp.ClientTimeout(total=10)


class GatewayWatch:
    """Every gateway started during the test, in start order, and the broken part to inject before each starts."""

    def __init__(self) -> None:
        self.started: list[ScopedGateway] = []
        self.admission: type[Admission] | None = None
        self.policy: Policy | None = None

    def port(self, gateway: ScopedGateway) -> int:
        port = urlsplit(gateway.url).port
        assert port is not None
        return port


@pytest.fixture
def gateways(monkeypatch: pytest.MonkeyPatch) -> GatewayWatch:
    watch = GatewayWatch()
    start = ScopedGateway.start

    async def watched_start(self: ScopedGateway) -> str:
        if watch.admission is not None:
            self.admission = watch.admission(self.ledger)
        if watch.policy is not None:
            self.policy = watch.policy
        url = await start(self)
        watch.started.append(self)
        return url

    monkeypatch.setattr(ScopedGateway, "start", watched_start)
    return watch


class OpenAdmission(Admission):
    """The broken variant of the admission check: no secret needed, `Origin` ignored (the gateway before issue 9)."""

    def admit(self, request: web.Request) -> str | web.Response:
        secret = "/" + self.secret
        return request.path.removeprefix(secret) if request.path.startswith(secret + "/") else request.path


def permissive(method: str, params: Mapping[str, Any], browser_level: bool) -> Verdict:
    """The broken variant of the policy table: every method passes (the gateway's own target checks still run)."""
    return FORWARD


async def raw_client(endpoint: str) -> CDPClient:
    """A browser-level CDP client on `endpoint`, found the way backends find it: `<endpoint>/json/version`."""
    async with aiohttp.ClientSession(timeout=HTTP_TIMEOUT) as http, http.get(endpoint + "/json/version") as answer:
        assert answer.status == 200, await answer.text()
        version = await answer.json()
    return await CDPClient.connect(version["webSocketDebuggerUrl"])


async def attach(client: CDPClient, target_id: str) -> str:
    return (await client.send("Target.attachToTarget", {"targetId": target_id, "flatten": True}))["sessionId"]


@pytest.fixture
async def bound(workspace: Workspace, fixture_server: FixtureServer) -> LabPage:
    """A page for gateways the test builds itself (no runtime): `/dom_form/` in a window of its own."""
    return await workspace.open("bound", fixture_server.url("/dom_form/"), workspace.column(0, 2))


@pytest.fixture
async def gateway(tap: CDPTap, bound: LabPage) -> AsyncIterator[ScopedGateway]:
    """A started gateway bound to `bound`, upstream through the tap (label "gateway"); closed after the test."""
    started = ScopedGateway(await tap.endpoint("gateway"), bound.target_id)
    await started.start()
    yield started
    await started.close()
