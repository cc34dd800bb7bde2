"""The gateway's upstream as a browser farm hands it out: only the browser WebSocket, behind a door that wants a
header (`lab.front_door`, here on this host, in front of the tap), no `/json` at all.

The gateway connects with the header, builds `/json/version` and `/json/list` for its client from the browser
WebSocket, and shows the client the bound page A alone; B and C stay untouched (the tap counts every command).
"""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator

import pytest

from lab.cdp import CDPClient
from lab.front_door import FrontDoor
from lab.tap import CDPTap
from runtime.endpoint import BrowserEndpoint
from runtime.gateway import GatewayError, ScopedGateway
from suites.gateway.conftest import Pages, attach, browser_client, get_json, untouched
from suites.lab.conftest import browser_ws_url

pytestmark = pytest.mark.req("remote:websocket-upstream")


@pytest.fixture
async def door(tap: CDPTap) -> AsyncIterator[FrontDoor]:
    """A door on 127.0.0.1 wanting `Authorization: Bearer <fresh secret>`, in front of the tap's "gateway" port."""
    front = FrontDoor(await browser_ws_url(await tap.endpoint("gateway")), ("Authorization", secrets.token_hex(8)))
    await front.start("127.0.0.1")
    yield front
    await front.close()


async def test_a_gateway_on_a_browser_websocket_with_a_header_and_no_json_shows_its_client_the_bound_page_alone(
    tap: CDPTap, door: FrontDoor, three_pages: Pages, clients: list[CDPClient]
) -> None:
    a, b, c = three_pages
    assert (await get_json(door.url.replace("ws://", "http://").split("/devtools/")[0], "/json/version"))[0] == 404
    async with ScopedGateway(BrowserEndpoint(door.url, (door.header,)), a.target_id) as gateway:
        status, version = await get_json(gateway.url, "/json/version")
        assert status == 200
        assert version["Browser"].startswith(("Chrome/", "HeadlessChrome/"))
        assert version["webSocketDebuggerUrl"].startswith(f"ws://{gateway.url.removeprefix('http://')}/devtools/")
        status, listing = await get_json(gateway.url, "/json/list")
        assert (status, [t["id"] for t in listing]) == (200, [a.target_id])
        client = await browser_client(gateway.url)
        clients.append(client)
        targets = (await client.send("Target.getTargets"))["targetInfos"]
        assert [t["targetId"] for t in targets] == [a.target_id]
        session = await attach(client, a)
        answer = await client.send(
            "Runtime.evaluate", {"expression": "location.pathname", "returnByValue": True}, session
        )
        assert answer["result"]["value"] == "/dom_form/"
    assert door.turned == []
    assert door.relayed >= 2  # the gateway's watch and its client, each on a connection of its own
    assert tap.count(target=a.target_id, method="Runtime.evaluate") == 1
    untouched(tap, b, c)


async def test_a_gateway_without_the_doors_header_refuses_to_start_and_the_door_says_why(
    door: FrontDoor, three_pages: Pages
) -> None:
    a, _, _ = three_pages
    gateway = ScopedGateway(door.url, a.target_id)
    with pytest.raises(GatewayError, match="refused the connection with HTTP 401"):
        await gateway.start()
    assert [t.reason for t in door.turned] == ["no Authorization header"]
