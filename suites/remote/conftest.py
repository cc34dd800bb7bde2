"""Fixtures for the remote-browser proofs: the lab's browser, hands and tap, moved behind a farm's front door.

The browser is a Chromium in a network namespace (`suites/remote/farm.py`), reached only through its front door,
which wants a header. Here `lab_cdp` (the lab's hands: windows, pages, canaries) goes through the door with the
header, and the session tap fronts the door, passing the client's `Authorization` on, so what the tap counts is
what the runtime itself sent, header included: a runtime or gateway that dropped its header is refused at the door.
The runtime connects to `ws://127.0.0.1:<tap>/devtools/browser/<id>` with its header and never to a `/json` endpoint:
the door serves none. Without root or `ip`, every test here skips with the reason.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from urllib.parse import urlsplit

import pytest

from fixtures_sites.server import FixtureServer
from lab.cdp import CDPClient
from lab.netns import NamespaceUnavailable, unavailable
from lab.tap import CDPTap
from runtime.endpoint import BrowserEndpoint
from suites.isolation.test_canaries import agent, child  # noqa: F401  (the canary proof's own fixtures)
from suites.remote.farm import HEADER, Farm, farm


@pytest.fixture(scope="session")
async def remote(fixture_server: FixtureServer) -> AsyncIterator[Farm]:
    reason = unavailable()
    if reason is not None:
        pytest.skip(reason)
    try:
        async with farm(fixture_server) as running:
            yield running
    except NamespaceUnavailable as exc:
        pytest.skip(str(exc))


@pytest.fixture(scope="session")
async def lab_cdp(remote: Farm) -> AsyncIterator[CDPClient]:
    """The lab's own connection to the remote browser, through the door; never through the tap."""
    client = await CDPClient.connect(remote.door, headers=remote.headers)
    yield client
    await client.close()


@pytest.fixture(scope="session")
async def tap(remote: Farm) -> AsyncIterator[CDPTap]:
    door = urlsplit(remote.door)
    cdp_tap = await CDPTap(f"http://{door.netloc}").start()
    yield cdp_tap
    await cdp_tap.close()


async def through_tap(tap: CDPTap, remote: Farm, label: str = "runtime") -> BrowserEndpoint:
    """The door as the runtime reaches it through the tap: the browser WebSocket's path on a tap port that passes
    the runtime's own header on, and that header."""
    port = urlsplit(await tap.endpoint(label, passes=(HEADER,))).port
    return remote.endpoint(f"ws://127.0.0.1:{port}{urlsplit(remote.door).path}")
