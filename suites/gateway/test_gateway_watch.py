"""The watch room: the gateway's own discovery connection, quiet on every page, and what the runtime must hear
about the bound page (a popup, a crash, its end, the browser's loss) that the client behind the scope never sees.

Pages A, B and C are open; the gateway is bound to A and connects upstream through the tap, so `tap.by_target()`
counts every command that reached Chromium because of the gateway or a client behind it. The isolation check is
always the same: 0 commands on B and C.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter

import pytest

from lab.browser import launch
from lab.cdp import CDPClient, CDPError
from lab.tap import BROWSER, CDPTap
from lab.workspace import Workspace
from runtime.gateway import GatewayError, ScopedGateway
from suites.gateway.conftest import (
    EventRecorder,
    Gateways,
    Pages,
    attach,
    browser_client,
    get_json,
    untouched,
)


@pytest.mark.req("gateway:quiet")
async def test_the_gateway_on_its_own_makes_one_browser_level_discovery_call_and_nothing_on_any_page(
    tap: CDPTap, make_gateway: Gateways, three_pages: Pages
) -> None:
    a, _, _ = three_pages
    await make_gateway(a)
    assert tap.by_target(label="gateway") == {
        BROWSER: Counter({"HTTP /json/version": 1, "Target.setDiscoverTargets": 1})
    }


@pytest.mark.req("gateway:missing-target")
async def test_a_gateway_for_a_target_that_does_not_exist_refuses_to_start(
    tap: CDPTap, recorder: EventRecorder
) -> None:
    gateway = ScopedGateway(await tap.endpoint("gateway"), "0" * 32, on_event=recorder)
    with pytest.raises(GatewayError, match="no target"):
        await gateway.start()


@pytest.mark.req("gateway:events")
async def test_a_popup_opened_by_the_bound_page_is_reported_to_the_runtime_and_invisible_to_the_client(
    tap: CDPTap,
    make_gateway: Gateways,
    recorder: EventRecorder,
    three_pages: Pages,
    lab_cdp: CDPClient,
    clients: list[CDPClient],
) -> None:
    a, b, c = three_pages
    gateway = await make_gateway(a)
    client = await browser_client(gateway.url)
    clients.append(client)
    await client.send("Target.setDiscoverTargets", {"discover": True})
    await client.send("Target.setAutoAttach", {"autoAttach": True, "waitForDebuggerOnStart": False, "flatten": True})

    popup_reported = recorder.wait("popup")
    # The lab's own hands open it, with a user gesture so the popup blocker lets it through.
    session = await attach(lab_cdp, a)
    opened = await lab_cdp.send(
        "Runtime.evaluate",
        {"expression": "!!window.open('/popup/child', 'sub', 'width=400,height=400')", "userGesture": True},
        session,
    )
    assert opened["result"]["value"] is True
    popup = await popup_reported
    try:
        assert popup.detail == f"opened by {a.target_id}"
        # Chromium told the client's connection about the popup before this answer; the gateway dropped it.
        assert [t["targetId"] for t in (await client.send("Target.getTargets"))["targetInfos"]] == [a.target_id]
        assert popup.target_id not in client.targets_in_events()
        with pytest.raises(CDPError, match="computer_use gateway"):
            await client.send("Target.attachToTarget", {"targetId": popup.target_id, "flatten": True})
        assert tap.by_target().get(popup.target_id) is None
        untouched(tap, b, c)
    finally:
        await lab_cdp.send("Target.closeTarget", {"targetId": popup.target_id})


@pytest.mark.req("gateway:events")
async def test_a_crash_of_the_bound_page_is_reported_and_forwarded_to_its_client(
    tap: CDPTap,
    make_gateway: Gateways,
    recorder: EventRecorder,
    three_pages: Pages,
    lab_cdp: CDPClient,
    clients: list[CDPClient],
) -> None:
    a, b, c = three_pages
    gateway = await make_gateway(a)
    client = await browser_client(gateway.url)
    clients.append(client)
    await attach(client, a)
    await client.send("Target.setDiscoverTargets", {"discover": True})

    crash_reported = recorder.wait("crashed")
    client_told = client.wait_for_event("Target.targetCrashed", None, lambda p: p["targetId"] == a.target_id)
    hands_session = await attach(lab_cdp, a)
    crash = asyncio.ensure_future(lab_cdp.send("Page.crash", session_id=hands_session))  # never answered
    try:
        assert (await crash_reported).target_id == a.target_id
        await client_told
    finally:
        crash.cancel()
        with contextlib.suppress(asyncio.CancelledError, CDPError):
            await crash
    assert [e.kind for e in gateway.events] == ["crashed"]
    untouched(tap, b, c)


@pytest.mark.req("gateway:events")
async def test_closing_the_bound_page_is_reported_as_destroyed(
    tap: CDPTap,
    make_gateway: Gateways,
    recorder: EventRecorder,
    three_pages: Pages,
    workspace: Workspace,
    clients: list[CDPClient],
) -> None:
    a, b, c = three_pages
    gateway = await make_gateway(a)
    client = await browser_client(gateway.url)
    clients.append(client)
    session = await attach(client, a)

    destroyed = recorder.wait("destroyed")
    detached = client.wait_for_event("Target.detachedFromTarget", predicate=lambda p: p["sessionId"] == session)
    await workspace.close(a)
    assert (await destroyed).target_id == a.target_id
    await detached
    with pytest.raises(CDPError) as late:
        await client.send("Runtime.evaluate", {"expression": "1"}, session)
    assert "computer_use gateway" not in str(late.value)  # Chromium's own error, not ours
    assert {e.kind for e in gateway.events} == {"destroyed", "detached"}
    untouched(tap, b, c)


@pytest.mark.req("gateway:events")
async def test_losing_the_browser_is_reported_and_closes_the_clients(recorder: EventRecorder) -> None:
    chromium = await launch()
    try:
        async with ScopedGateway(
            chromium.http_endpoint, await _first_page(chromium.http_endpoint), on_event=recorder
        ) as gw:
            client = await browser_client(gw.url)
            try:
                lost = recorder.wait("upstream_lost")
                chromium.kill()
                await lost
                await asyncio.wait_for(client.closed.wait(), 10)
            finally:
                await client.close()
    finally:
        await chromium.close()


async def _first_page(endpoint: str) -> str:
    listing = (await get_json(endpoint, "/json/list"))[1]
    return next(t["id"] for t in listing if t["type"] == "page")
