"""Root fixtures: one fixture server, one Chromium, one CDP tap per test session (per xdist worker).

Per test: the ledger is attributed to the test and reset after it (pending waiters rejected, held answers
released), the tap's records are cleared before it, and the tap trace, per-target counts and ledger rows are
attached to the Allure report. A Chromium that died during a test is reported as that test's error, counts kept.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator

import allure
import pytest

from fixtures_sites.server import FixtureServer
from lab.browser import Chromium, launch
from lab.cdp import CDPClient
from lab.tap import CDPTap
from lab.workspace import Workspace


@pytest.fixture(scope="session")
async def fixture_server() -> AsyncIterator[FixtureServer]:
    server = await FixtureServer().start()
    yield server
    await server.stop()


@pytest.fixture(scope="session")
async def chromium() -> AsyncIterator[Chromium]:
    browser = await launch()
    yield browser
    await browser.close()


@pytest.fixture(scope="session")
async def lab_cdp(chromium: Chromium) -> AsyncIterator[CDPClient]:
    """The lab's own direct CDP connection (window shell); never passes through the tap."""
    client = await chromium.connect()
    yield client
    await client.close()


@pytest.fixture(scope="session")
async def tap(chromium: Chromium) -> AsyncIterator[CDPTap]:
    cdp_tap = await CDPTap(chromium.http_endpoint).start()
    yield cdp_tap
    await cdp_tap.close()


@pytest.fixture
async def workspace(lab_cdp: CDPClient) -> AsyncIterator[Workspace]:
    ws = Workspace(lab_cdp)
    yield ws
    await ws.close_all()


@pytest.fixture(autouse=True)
def _lab_bookkeeping(request: pytest.FixtureRequest) -> Iterator[None]:
    """Attribute ledger rows to this test, start the tap's count at zero, and report both afterwards."""
    server: FixtureServer | None = None
    cdp_tap: CDPTap | None = None
    if "fixture_server" in request.fixturenames:
        server = request.getfixturevalue("fixture_server")
        server.begin_test(request.node.nodeid)
    if "tap" in request.fixturenames:
        cdp_tap = request.getfixturevalue("tap")
        cdp_tap.clear()
    yield
    if cdp_tap is not None:
        if cdp_tap.records or cdp_tap.incidents:
            counts = {target: dict(methods) for target, methods in cdp_tap.by_target().items()}
            allure.attach(json.dumps(counts, indent=2), "cdp-tap counts per target", allure.attachment_type.JSON)
            allure.attach("\n".join(cdp_tap.trace_lines()), "cdp-tap trace.jsonl", allure.attachment_type.TEXT)
        cdp_tap.check_browser()
    if server is not None:
        snapshot = server.ledger.snapshot()
        if snapshot["writes"] or snapshot["attacker_hits"]:
            allure.attach(json.dumps(snapshot, indent=2), "write ledger", allure.attachment_type.JSON)
        leftovers = server.reset()
        if leftovers:
            allure.attach("\n".join(leftovers), "left pending at the end of the test", allure.attachment_type.TEXT)
