"""The scoped CDP gateway shows a client exactly the bound page A: proven with the tap, on raw CDP and both MCPs.

Pages A, B and C are open; the gateway is bound to A and connects upstream through the tap, so `tap.by_target()`
counts every command that reached Chromium because of the gateway or a client behind it. The isolation check is
always the same: 0 commands on B and C. Its negative controls run the same check against a sabotaged gateway.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from collections import Counter
from collections.abc import Awaitable, Callable
from pathlib import Path

import aiohttp
import pytest

from backends.open_claude_chrome import OpenClaudeChromeBackend
from fixtures_sites.server import FixtureServer
from lab.browser import launch
from lab.cdp import CDPClient, CDPError
from lab.tap import BROWSER, CDPTap
from lab.workspace import LabPage, Workspace
from runtime.backend import BackendConfig
from runtime.gateway import GatewayError, ScopedGateway
from runtime.models import Action
from suites.gateway.conftest import (
    EventRecorder,
    Gateways,
    browser_client,
    get_json,
    mcp_child,
    tool_text,
    untouched,
)

Pages = tuple[LabPage, LabPage, LabPage]
NO_TELEMETRY = {"CHROME_DEVTOOLS_MCP_NO_USAGE_STATISTICS": "1", "CHROME_DEVTOOLS_MCP_NO_UPDATE_CHECKS": "1"}


async def attach(client: CDPClient, page: LabPage) -> str:
    return (await client.send("Target.attachToTarget", {"targetId": page.target_id, "flatten": True}))["sessionId"]


async def gift_checked(workspace: Workspace, page: LabPage) -> bool:
    return await workspace.evaluate(page, "document.getElementById('gift').checked")


# -- raw CDP ---------------------------------------------------------------------------------------------------


@pytest.mark.req("gateway:discovery-only-bound")
async def test_http_discovery_lists_only_the_bound_page_and_points_every_url_at_the_gateway(
    tap: CDPTap, make_gateway: Gateways, three_pages: Pages
) -> None:
    a, b, c = three_pages
    gateway = await make_gateway(a)
    base = gateway.url.removeprefix("http://")  # 127.0.0.1:PORT/<secret>

    for path in ("/json/list", "/json", "/json/list/"):
        status, listing = await get_json(gateway.url, path)
        assert status == 200
        assert [t["id"] for t in listing] == [a.target_id]
        assert listing[0]["webSocketDebuggerUrl"] == f"ws://{base}/devtools/page/{a.target_id}"
    status, version = await get_json(gateway.url, "/json/version/")
    assert status == 200
    assert version["webSocketDebuggerUrl"].startswith(f"ws://{base}/devtools/browser/")

    for method, path in (
        ("PUT", "/json/new?about:blank"),
        ("GET", f"/json/activate/{a.target_id}"),
        ("GET", f"/json/close/{b.target_id}"),
    ):
        status, body = await get_json(gateway.url, path, method)
        assert status == 403
        assert "computer_use gateway" in body
    assert (await get_json(gateway.url, "/json/protocol"))[0] == 404
    assert [r.method for r in gateway.refusals] == ["HTTP /json/new", "HTTP /json/activate", "HTTP /json/close"]
    untouched(tap, a, b, c)


@pytest.mark.req("gateway:discovery-only-bound")
async def test_a_raw_client_sees_only_the_bound_page_and_can_attach_and_evaluate_on_it(
    tap: CDPTap, make_gateway: Gateways, three_pages: Pages, clients: list[CDPClient]
) -> None:
    a, b, c = three_pages
    gateway = await make_gateway(a)
    client = await browser_client(gateway.url)
    clients.append(client)

    targets = (await client.send("Target.getTargets"))["targetInfos"]
    assert [t["targetId"] for t in targets] == [a.target_id]
    await client.send("Target.setDiscoverTargets", {"discover": True})
    # Chromium announces every existing target before answering; the gateway kept only A's announcement.
    assert client.targets_in_events() == {a.target_id}
    session = await attach(client, a)
    title = await client.send("Runtime.evaluate", {"expression": "document.title", "returnByValue": True}, session)
    assert title["result"]["value"].startswith("Checkout")
    assert (await client.send("Target.getTargetInfo", {"targetId": a.target_id}))["targetInfo"]["type"] == "page"
    assert "targetInfo" in await client.send("Target.getTargetInfo")  # no targetId: the browser's own info

    untouched(tap, b, c)
    assert tap.count(target=a.target_id, method="Runtime.evaluate") == 1
    assert not gateway.refusals


@pytest.mark.req("gateway:refuses-other-targets")
async def test_a_raw_client_is_refused_other_targets_new_pages_cookies_and_browser_control_and_b_c_stay_untouched(
    tap: CDPTap, make_gateway: Gateways, three_pages: Pages, clients: list[CDPClient]
) -> None:
    a, b, c = three_pages
    gateway = await make_gateway(a)
    client = await browser_client(gateway.url)
    clients.append(client)
    session = await attach(client, a)
    refused = [
        ("Target.createTarget", {"url": "about:blank"}, None),
        ("Target.attachToTarget", {"targetId": b.target_id, "flatten": True}, None),
        ("Target.getTargetInfo", {"targetId": c.target_id}, None),
        ("Target.closeTarget", {"targetId": b.target_id}, None),
        ("Target.activateTarget", {"targetId": a.target_id}, None),
        ("Target.attachToBrowserTarget", {}, None),
        ("Target.attachToTarget", {"targetId": a.target_id, "flatten": False}, None),
        ("Network.getAllCookies", {}, session),
        ("Storage.getCookies", {}, None),
        ("Storage.getCookies", {}, session),
        ("Network.getCookies", {"urls": ["https://example.com/"]}, session),
        ("Browser.close", {}, None),
        ("Browser.setWindowBounds", {"windowId": 1, "bounds": {"left": 0}}, None),
        ("Browser.getWindowForTarget", {"targetId": b.target_id}, None),
        ("Browser.grantPermissions", {"permissions": ["geolocation"]}, None),
        ("SystemInfo.getProcessInfo", {}, None),
        ("Tracing.start", {}, None),
        ("Runtime.evaluate", {"expression": "1"}, "made-up-session-id"),
    ]
    for method, params, on_session in refused:
        with pytest.raises(CDPError, match=f"computer_use gateway: {re.escape(method)} is not allowed"):
            await client.send(method, params, on_session)
    assert [r.method for r in gateway.refusals] == [method for method, _, _ in refused]

    # Still usable afterwards, on the page only.
    value = await client.send("Runtime.evaluate", {"expression": "6 * 7", "returnByValue": True}, session)
    assert value["result"]["value"] == 42
    untouched(tap, b, c)
    assert tap.by_target(label="gateway")[BROWSER]["Target.createTarget"] == 0


@pytest.mark.req("gateway:auto-attach")
async def test_browser_level_auto_attach_becomes_one_attach_to_the_bound_page(
    tap: CDPTap, make_gateway: Gateways, three_pages: Pages, clients: list[CDPClient]
) -> None:
    a, b, c = three_pages
    gateway = await make_gateway(a)
    client = await browser_client(gateway.url)
    clients.append(client)

    auto = {"autoAttach": True, "waitForDebuggerOnStart": True, "flatten": True}
    assert await client.send("Target.setAutoAttach", auto) == {}
    # Chromium's own attachedToTarget for A arrived before the answer; none for B or C, none synthesized.
    attached = [e["params"] for e in client.events if e["method"] == "Target.attachedToTarget"]
    assert [p["targetInfo"]["targetId"] for p in attached] == [a.target_id]
    session = attached[0]["sessionId"]
    await client.send("Runtime.runIfWaitingForDebugger", session_id=session)
    assert await client.send("Target.setAutoAttach", auto) == {}  # idempotent, like Chromium's
    assert len([e for e in client.events if e["method"] == "Target.attachedToTarget"]) == 1

    assert tap.by_target(label="gateway")[a.target_id]["Target.attachToTarget"] == 1
    assert tap.count(label="gateway", target=BROWSER, method="Target.setAutoAttach") == 0
    untouched(tap, b, c)


@pytest.mark.req("gateway:iframe-sessions")
async def test_session_level_auto_attach_on_the_bound_page_reaches_its_cross_origin_iframe(
    tap: CDPTap,
    make_gateway: Gateways,
    three_pages: Pages,
    workspace: Workspace,
    fixture_server: FixtureServer,
    clients: list[CDPClient],
) -> None:
    _, b, c = three_pages
    framed = await workspace.open("framed", fixture_server.url("/frames/"), workspace.column(0, 3))
    gateway = await make_gateway(framed)
    client = await browser_client(gateway.url)
    clients.append(client)
    session = await attach(client, framed)

    iframe_attached = client.wait_for_event(
        "Target.attachedToTarget", session, lambda p: p["targetInfo"]["type"] == "iframe"
    )
    auto = {"autoAttach": True, "waitForDebuggerOnStart": False, "flatten": True}
    await client.send("Target.setAutoAttach", auto, session)
    iframe = await iframe_attached
    where = await client.send(
        "Runtime.evaluate", {"expression": "location.pathname", "returnByValue": True}, iframe["sessionId"]
    )
    assert where["result"]["value"] == "/frames/inner"
    listed = {t["targetId"] for t in (await client.send("Target.getTargets"))["targetInfos"]}
    assert listed == {framed.target_id, iframe["targetInfo"]["targetId"]}

    assert tap.count(target=iframe["targetInfo"]["targetId"], method="Runtime.evaluate") == 1
    assert not gateway.refusals
    untouched(tap, b, c)


@pytest.mark.req("gateway:absorbs-focus")
async def test_download_behaviour_and_focus_methods_are_absorbed_and_never_reach_chromium(
    tap: CDPTap, make_gateway: Gateways, three_pages: Pages, clients: list[CDPClient]
) -> None:
    a, b, c = three_pages
    gateway = await make_gateway(a)
    client = await browser_client(gateway.url)
    clients.append(client)
    session = await attach(client, a)

    assert await client.send("Browser.setDownloadBehavior", {"behavior": "deny"}) == {}
    assert await client.send("Page.bringToFront", session_id=session) == {}
    assert await client.send("Emulation.setFocusEmulationEnabled", {"enabled": True}, session) == {}

    assert [(x.method, x.session_id) for x in gateway.absorbed] == [
        ("Browser.setDownloadBehavior", None),
        ("Page.bringToFront", session),
        ("Emulation.setFocusEmulationEnabled", session),
    ]
    assert tap.count(target=a.target_id, category="focus") == 0
    assert tap.count(method="Browser.setDownloadBehavior") == 0
    untouched(tap, b, c)


@pytest.mark.req("gateway:page-endpoint")
async def test_the_page_endpoint_serves_only_the_bound_page(
    tap: CDPTap, make_gateway: Gateways, three_pages: Pages, clients: list[CDPClient]
) -> None:
    a, b, c = three_pages
    gateway = await make_gateway(a)
    [listed] = (await get_json(gateway.url, "/json/list"))[1]
    page_client = await CDPClient.connect(listed["webSocketDebuggerUrl"])
    clients.append(page_client)
    href = await page_client.send("Runtime.evaluate", {"expression": "location.pathname", "returnByValue": True})
    assert href["result"]["value"] == "/dom_form/"
    with pytest.raises(CDPError, match=r"computer_use gateway: Target\.createTarget"):
        await page_client.send("Target.createTarget", {"url": "about:blank"})
    with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
        clients.append(await CDPClient.connect(listed["webSocketDebuggerUrl"].replace(a.target_id, b.target_id)))
    assert refused.value.status == 403

    assert tap.count(target=a.target_id, method="Runtime.evaluate") == 1
    untouched(tap, b, c)


@pytest.mark.req("gateway:page-endpoint")
async def test_answers_reach_the_client_under_its_own_ids_whole_whether_the_gateway_reads_them_or_not(
    tap: CDPTap, make_gateway: Gateways, three_pages: Pages
) -> None:
    """Answers the gateway does not read pass unparsed with only the id replaced; ids far from the gateway's own
    upstream ids (which count from 1) show the replacement, and a megabyte of tricky text shows nothing else moved."""
    a, b, c = three_pages
    gateway = await make_gateway(a)
    [listed] = (await get_json(gateway.url, "/json/list"))[1]
    text = '"id":1,"result":' + '\u00e9\\"x' * 250_000
    commands = {
        9001: ("Runtime.evaluate", {"expression": json.dumps(text), "returnByValue": True}),
        9002: ("Runtime.callFunctionOn", {"objectId": "no-such-object", "functionDeclaration": "function () {}"}),
        9003: ("Page.getFrameTree", {}),  # an answer the gateway reads (the bound page's document)
    }
    async with aiohttp.ClientSession() as http, http.ws_connect(listed["webSocketDebuggerUrl"], max_msg_size=0) as ws:
        for command_id, (method, params) in commands.items():
            await ws.send_str(json.dumps({"id": command_id, "method": method, "params": params}))
        answers = {}
        while len(answers) < len(commands):
            message = json.loads((await ws.receive(timeout=10)).data)
            answers[message["id"]] = message
    assert sorted(answers) == sorted(commands)
    assert answers[9001]["result"]["result"]["value"] == text
    assert "error" in answers[9002]
    assert answers[9003]["result"]["frameTree"]["frame"]["url"].endswith("/dom_form/")
    untouched(tap, b, c)


@pytest.mark.req("gateway:malformed-frame")
async def test_a_malformed_frame_closes_only_that_client_with_a_reason(
    tap: CDPTap, make_gateway: Gateways, three_pages: Pages, clients: list[CDPClient]
) -> None:
    a, b, c = three_pages
    gateway = await make_gateway(a)
    healthy = await browser_client(gateway.url)
    clients.append(healthy)
    version = (await get_json(gateway.url, "/json/version"))[1]
    async with aiohttp.ClientSession() as http, http.ws_connect(version["webSocketDebuggerUrl"]) as ws:
        await ws.send_str('{"method": "Runtime.evaluate"}')
        closing = await ws.receive(timeout=5)
        assert closing.type in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSED)
        assert ws.close_code == aiohttp.WSCloseCode.UNSUPPORTED_DATA
    [refusal] = gateway.refusals
    assert (refusal.method, refusal.reason) == ("(malformed frame)", "a command needs an integer id")
    assert (await healthy.send("Browser.getVersion"))["product"]
    untouched(tap, a, b, c)


@pytest.mark.req("gateway:quiet")
async def test_the_gateway_on_its_own_makes_one_browser_level_discovery_call_and_nothing_on_any_page(
    tap: CDPTap, make_gateway: Gateways, three_pages: Pages
) -> None:
    a, _, _ = three_pages
    await make_gateway(a)
    assert tap.by_target(label="gateway") == {
        BROWSER: Counter({"HTTP /json/version": 1, "Target.setDiscoverTargets": 1})
    }


@pytest.mark.req("gateway:close")
async def test_closing_the_gateway_closes_every_client_connection(
    tap: CDPTap, make_gateway: Gateways, three_pages: Pages, clients: list[CDPClient]
) -> None:
    a, _, _ = three_pages
    gateway = await make_gateway(a)
    browser_level = await browser_client(gateway.url)
    [listed] = (await get_json(gateway.url, "/json/list"))[1]
    page_level = await CDPClient.connect(listed["webSocketDebuggerUrl"])
    clients.extend([browser_level, page_level])
    await attach(browser_level, a)

    await gateway.close()
    await asyncio.wait_for(browser_level.closed.wait(), 5)
    await asyncio.wait_for(page_level.closed.wait(), 5)
    with pytest.raises(aiohttp.ClientError):
        await get_json(gateway.url, "/json/version")


@pytest.mark.req("gateway:missing-target")
async def test_a_gateway_for_a_target_that_does_not_exist_refuses_to_start(
    tap: CDPTap, recorder: EventRecorder
) -> None:
    gateway = ScopedGateway(await tap.endpoint("gateway"), "0" * 32, on_event=recorder)
    with pytest.raises(GatewayError, match="no target"):
        await gateway.start()


# -- the real MCP backends -----------------------------------------------------------------------------------------


@pytest.mark.req("gateway:upstream-scoped", backend="playwright_mcp")
async def test_playwright_mcp_snapshots_and_clicks_the_bound_page_and_never_touches_the_others(
    tap: CDPTap, make_gateway: Gateways, three_pages: Pages, workspace: Workspace
) -> None:
    a, b, c = three_pages
    gateway = await make_gateway(a)
    async with mcp_child("playwright-mcp", "--cdp-endpoint", gateway.url) as mcp:
        snapshot = tool_text(await mcp.call_tool("browser_snapshot", {}))
        assert "Shipping details" in snapshot
        ref = re.search(r'checkbox "This is a gift" \[ref=(\w+)\]', snapshot)
        assert ref, snapshot
        tool_text(await mcp.call_tool("browser_click", {"element": "This is a gift", "target": ref.group(1)}))

    assert await gift_checked(workspace, a)
    assert not await gift_checked(workspace, b)
    untouched(tap, b, c)
    assert tap.count(target=a.target_id, category="input") > 0
    assert not gateway.refusals, gateway.refusals


@pytest.mark.req("gateway:iframe-sessions", "gateway:upstream-scoped", backend="playwright_mcp")
async def test_playwright_mcp_sees_the_cross_origin_iframe_of_the_bound_page(
    tap: CDPTap,
    make_gateway: Gateways,
    three_pages: Pages,
    workspace: Workspace,
    fixture_server: FixtureServer,
) -> None:
    _, b, c = three_pages
    framed = await workspace.open("framed", fixture_server.url("/frames/"), workspace.column(0, 3))
    gateway = await make_gateway(framed)
    async with mcp_child("playwright-mcp", "--cdp-endpoint", gateway.url) as mcp:
        snapshot = tool_text(await mcp.call_tool("browser_snapshot", {}))
    assert "Help with an order" in snapshot
    assert "Chat with Northwind support" in snapshot  # inside the cross-origin iframe
    untouched(tap, b, c)
    assert not gateway.refusals, gateway.refusals


@pytest.mark.req("gateway:upstream-scoped", "gateway:absorbs-focus", backend="chrome_devtools_mcp")
async def test_chrome_devtools_mcp_snapshots_and_clicks_the_bound_page_without_focus_calls_or_other_pages(
    tap: CDPTap, make_gateway: Gateways, three_pages: Pages, workspace: Workspace
) -> None:
    a, b, c = three_pages
    gateway = await make_gateway(a)
    args = ("--browserUrl", gateway.url, "--no-usage-statistics", "--no-performance-crux")
    async with mcp_child("chrome-devtools-mcp", *args, env=NO_TELEMETRY) as mcp:
        listing = tool_text(await mcp.call_tool("list_pages", {}))
        pages = re.findall(r"^(\d+): .*\((\S+)\)", listing, re.MULTILINE)
        assert len(pages) == 1, listing  # the one page it can see is A
        page_id = int(pages[0][0])
        snapshot = tool_text(await mcp.call_tool("take_snapshot", {"pageId": page_id}))
        uid = re.search(r'uid=(\S+) checkbox "This is a gift"', snapshot)
        assert uid, snapshot
        tool_text(await mcp.call_tool("click", {"pageId": page_id, "uid": uid.group(1)}))

    assert await gift_checked(workspace, a)
    untouched(tap, b, c)
    assert tap.count(target=a.target_id, category="focus") == 0
    assert tap.count(target=a.target_id, category="input") > 0
    assert "Emulation.setFocusEmulationEnabled" in {x.method for x in gateway.absorbed}
    # chrome-devtools-mcp asks for the DevTools target of A; refusing it is tolerated, and is all it was refused.
    assert {r.method for r in gateway.refusals} <= {"Target.getDevToolsTarget"}


@pytest.mark.req("gateway:upstream-scoped", "gateway:iframe-sessions", backend="open_claude_chrome")
async def test_open_claude_chrome_reads_and_clicks_the_bound_page_and_its_iframe_and_never_touches_the_others(
    tap: CDPTap,
    make_gateway: Gateways,
    three_pages: Pages,
    workspace: Workspace,
    fixture_server: FixtureServer,
    tmp_path: Path,
) -> None:
    a, b, c = three_pages
    framed = await workspace.open("framed", fixture_server.url("/frames/"), workspace.column(0, 3))

    async def through_gateway(page: LabPage, work: Callable[[OpenClaudeChromeBackend], Awaitable[None]]) -> None:
        gateway = await make_gateway(page)
        claude_backend = OpenClaudeChromeBackend(BackendConfig(cdp_endpoint=gateway.url, workdir=tmp_path))
        await claude_backend.start()
        try:
            await work(claude_backend)
        finally:
            await claude_backend.close()
        assert not gateway.refusals, gateway.refusals
        assert not gateway.absorbed, gateway.absorbed  # it never even asks for focus

    async def check_the_gift(claude_backend: OpenClaudeChromeBackend) -> None:
        snapshot = await claude_backend.snapshot()
        gift = next(e for e in snapshot.elements if e.role == "checkbox" and e.name == "This is a gift")
        await claude_backend.act(Action(type="click", ref=gift.ref), gift)

    async def read_the_chat_frame(claude_backend: OpenClaudeChromeBackend) -> None:
        snapshot = (
            await claude_backend.snapshot()
        )  # the cross-origin iframe is an out-of-process child session of the page
        assert "Chat with Northwind support" in snapshot.text, snapshot.text
        assert any(e.role == "combobox" and e.name == "Department" for e in snapshot.elements), snapshot.elements

    await through_gateway(a, check_the_gift)
    await through_gateway(framed, read_the_chat_frame)
    assert await gift_checked(workspace, a)
    assert not await gift_checked(workspace, b)
    untouched(tap, b, c)
    assert tap.count(target=a.target_id, category="input") > 0


# -- what the runtime must hear about ------------------------------------------------------------------------------


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


# -- negative controls ---------------------------------------------------------------------------------------------


@pytest.mark.negative_control
@pytest.mark.req("gateway:refuses-other-targets")
async def test_isolation_check_catches_a_gateway_without_target_filtering_used_by_a_raw_client(
    tap: CDPTap, make_gateway: Gateways, three_pages: Pages, clients: list[CDPClient]
) -> None:
    a, b, c = three_pages
    gateway = await make_gateway(a, unscoped=True)
    client = await browser_client(gateway.url)
    clients.append(client)
    assert {t["targetId"] for t in (await client.send("Target.getTargets"))["targetInfos"]} >= {
        a.target_id,
        b.target_id,
        c.target_id,
    }
    session_b = await attach(client, b)
    await client.send("Runtime.evaluate", {"expression": "1"}, session_b)
    untouched(tap, c)
    with pytest.raises(AssertionError, match="B was touched"):
        untouched(tap, b)


@pytest.mark.negative_control
@pytest.mark.req("gateway:upstream-scoped", backend="playwright_mcp")
async def test_isolation_check_catches_playwright_mcp_behind_a_gateway_without_target_filtering(
    tap: CDPTap, make_gateway: Gateways, three_pages: Pages
) -> None:
    a, b, _ = three_pages
    gateway = await make_gateway(a, unscoped=True)
    async with mcp_child("playwright-mcp", "--cdp-endpoint", gateway.url) as mcp:
        tool_text(await mcp.call_tool("browser_snapshot", {}))
    with pytest.raises(AssertionError, match="B was touched"):
        untouched(tap, b)
