"""The scope room: a client behind the gateway sees exactly the bound page A, on raw CDP and on every backend.

Pages A, B and C are open; the gateway is bound to A and connects upstream through the tap, so `tap.by_target()`
counts every command that reached Chromium because of the gateway or a client behind it. The isolation check is
always the same: 0 commands on B and C. Its negative controls run the same check against a gateway whose scope
shows and forwards everything (`suites/sabotage.py`'s `NoScope`).
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from backends.open_claude_chrome import OpenClaudeChromeBackend
from fixtures_sites.server import FixtureServer
from lab.cdp import CDPClient, CDPError
from lab.tap import BROWSER, CDPTap
from lab.workspace import LabPage, Workspace
from runtime.backend import BackendConfig
from runtime.models import Action
from suites.gateway.conftest import (
    Gateways,
    Pages,
    attach,
    browser_client,
    get_json,
    gift_checked,
    mcp_child,
    tool_text,
    untouched,
)

NO_TELEMETRY = {"CHROME_DEVTOOLS_MCP_NO_USAGE_STATISTICS": "1", "CHROME_DEVTOOLS_MCP_NO_UPDATE_CHECKS": "1"}


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
