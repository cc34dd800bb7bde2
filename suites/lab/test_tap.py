"""The CDP tap reports exactly the calls a scripted raw-CDP workload sends, per target, and 0 for the rest.

The workload keeps its own count of what it meant to send to which target (independent of the tap's session
tracking); the tests compare the two exactly. Negative controls show the checks fail when they should.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections import Counter

import aiohttp
import pytest

from fixtures_sites.server import FixtureServer
from lab.browser import launch
from lab.cdp import CDPClient, CDPError
from lab.tap import BROWSER, CDPTap, ChromiumGone
from lab.tap.proxy import answer_key
from lab.workspace import LabPage, Workspace
from suites.lab.conftest import Connect, Workload, browser_ws_url
from suites.proofs import assert_no_runtime_calls, runtime_commands

pytestmark = pytest.mark.req("lab:tap")


def untouched(tap: CDPTap, *pages: LabPage) -> None:
    """The isolation check later suites rely on: not one command reached these pages."""
    for page in pages:
        calls = tap.by_target().get(page.target_id, Counter())
        assert not calls, f"{page.name} was touched: {dict(calls)}"


def same_counts(tap: CDPTap, workload: Workload, label: str) -> None:
    assert tap.by_target(label=label) == workload.expected


@pytest.fixture
async def three_pages(workspace: Workspace, fixture_server: FixtureServer) -> tuple[LabPage, LabPage, LabPage]:
    url = fixture_server.url("/dom_form/")
    return (
        await workspace.open("A", url, workspace.column(0, 3)),
        await workspace.open("B", url, workspace.column(1, 3)),
        await workspace.open("C", url, workspace.column(2, 3)),
    )


async def test_tap_counts_exactly_what_a_flatten_workload_sends_to_each_target_and_nothing_on_others(
    tap: CDPTap, through_tap: Connect, three_pages: tuple[LabPage, LabPage, LabPage]
) -> None:
    a, b, c = three_pages
    w = await through_tap("workload")
    await w.send(BROWSER, "Target.getTargets")
    session_a = await w.attach(a)
    await w.send(a.target_id, "Runtime.enable", session=session_a)
    for _ in range(3):
        await w.send(a.target_id, "Runtime.evaluate", {"expression": "document.title"}, session=session_a)
    await w.send(a.target_id, "DOM.getDocument", {"depth": 2}, session=session_a)
    await w.send(a.target_id, "Accessibility.getFullAXTree", session=session_a)
    session_b = await w.attach(b)
    await w.send(b.target_id, "Page.getFrameTree", session=session_b)

    same_counts(tap, w, "workload")
    untouched(tap, c)
    assert tap.count(target=a.target_id, category="script") == 3


async def test_tap_attributes_auto_attached_sessions_to_their_targets(
    tap: CDPTap, through_tap: Connect, three_pages: tuple[LabPage, LabPage, LabPage]
) -> None:
    a, b, c = three_pages
    w = await through_tap("auto")
    client = w.client
    # Register before acting: one attachedToTarget event per existing page, B's among them.
    b_attached = client.wait_for_event(
        "Target.attachedToTarget", predicate=lambda p: p["targetInfo"]["targetId"] == b.target_id
    )
    auto = {"autoAttach": True, "waitForDebuggerOnStart": False, "flatten": True}
    await w.send(BROWSER, "Target.setAutoAttach", auto)
    session_b = (await b_attached)["sessionId"]
    await w.send(b.target_id, "Runtime.evaluate", {"expression": "1 + 1"}, session=session_b)
    await w.send(b.target_id, "Page.bringToFront", session=session_b)

    same_counts(tap, w, "auto")
    untouched(tap, a, c)
    assert tap.count(target=b.target_id, category="focus") == 1
    # Chromium told the client about C (an event about C) but the client never called C.
    assert tap.count(target=c.target_id, kind="event", method="Target.attachedToTarget") == 1


async def test_tap_keeps_attributing_a_detached_session_to_its_target(
    tap: CDPTap, through_tap: Connect, three_pages: tuple[LabPage, LabPage, LabPage]
) -> None:
    a, b, c = three_pages
    w = await through_tap("detach")
    session_a = await w.attach(a)
    await w.send(a.target_id, "Runtime.evaluate", {"expression": "1"}, session=session_a)
    await w.send(a.target_id, "Target.detachFromTarget", {"sessionId": session_a})
    with pytest.raises(CDPError):
        await w.send(a.target_id, "Runtime.evaluate", {"expression": "2"}, session=session_a)

    same_counts(tap, w, "detach")
    untouched(tap, b, c)
    tracker = tap.trackers[tap.connections("detach")[-1]]
    assert tracker.sessions[session_a].detached


async def test_tap_counts_page_endpoint_and_non_flatten_traffic_on_the_right_page(
    tap: CDPTap, three_pages: tuple[LabPage, LabPage, LabPage]
) -> None:
    a, b, c = three_pages
    endpoint = await tap.endpoint("page-endpoint")
    async with aiohttp.ClientSession() as http, http.get(endpoint + "/json/list") as response:
        listing = await response.json()
    page_url = next(t["webSocketDebuggerUrl"] for t in listing if t["id"] == a.target_id)
    assert page_url.startswith("ws://127.0.0.1:" + endpoint.rsplit(":", 1)[1])  # rewritten to the tap
    page_client = await CDPClient.connect(page_url)
    try:
        await page_client.send("Runtime.evaluate", {"expression": "location.href"})
        await page_client.send("DOM.getDocument")
    finally:
        await page_client.close()

    browser_client = await CDPClient.connect(await browser_ws_url(endpoint))
    try:
        session = (await browser_client.send("Target.attachToTarget", {"targetId": b.target_id, "flatten": False}))[
            "sessionId"
        ]
        inner = json.dumps({"id": 1, "method": "Runtime.evaluate", "params": {"expression": "1"}})
        answered = browser_client.wait_for_event("Target.receivedMessageFromTarget")
        await browser_client.send("Target.sendMessageToTarget", {"sessionId": session, "message": inner})
        assert json.loads((await answered)["message"])["id"] == 1
    finally:
        await browser_client.close()

    counts = tap.by_target(label="page-endpoint")
    assert counts[a.target_id] == Counter({"Runtime.evaluate": 1, "DOM.getDocument": 1})
    assert counts[b.target_id] == Counter({"Target.attachToTarget": 1, "Runtime.evaluate": 1})
    untouched(tap, c)


async def test_tap_records_a_renderer_crash_and_keeps_counting_the_other_pages(
    tap: CDPTap, through_tap: Connect, three_pages: tuple[LabPage, LabPage, LabPage]
) -> None:
    a, b, c = three_pages
    w = await through_tap("crash")
    client = w.client
    session_b = await w.attach(b)
    await w.send(b.target_id, "Page.enable", session=session_b)
    crashed = client.wait_for_event("Inspector.targetCrashed", session_id=session_b)
    w.count(b.target_id, "Page.crash")
    crash = asyncio.ensure_future(client.send("Page.crash", session_id=session_b))  # may never be answered
    await crashed
    crash.cancel()
    with contextlib.suppress(asyncio.CancelledError, CDPError):
        await crash
    session_a = await w.attach(a)
    await w.send(a.target_id, "Runtime.evaluate", {"expression": "1"}, session=session_a)

    same_counts(tap, w, "crash")
    untouched(tap, c)
    assert b.target_id in tap.trackers[tap.connections("crash")[-1]].crashed


async def test_tap_closes_a_client_that_sends_a_malformed_frame_and_logs_why(
    tap: CDPTap, through_tap: Connect, three_pages: tuple[LabPage, LabPage, LabPage]
) -> None:
    healthy = (await through_tap("healthy")).client
    url = await browser_ws_url(await tap.endpoint("malformed"))
    async with aiohttp.ClientSession() as http, http.ws_connect(url) as ws:
        await ws.send_str("this is not JSON")
        closing = await ws.receive(timeout=5)
        assert closing.type in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSED)
        assert ws.close_code == aiohttp.WSCloseCode.UNSUPPORTED_DATA
    [incident] = tap.incidents
    assert (incident.label, incident.kind) == ("malformed", "malformed_frame")
    assert "not JSON" in incident.detail
    # Only the HTTP discovery call; the malformed frame was not forwarded.
    assert tap.by_target(label="malformed") == {BROWSER: Counter({"HTTP /json/version": 1})}
    assert (await healthy.send("Browser.getVersion"))["product"].startswith(("HeadlessChrome", "Chrome"))


async def test_a_chromium_death_closes_tap_clients_and_keeps_the_counts() -> None:
    chromium = await launch()
    cdp_tap = await CDPTap(chromium.http_endpoint).start()
    client = await CDPClient.connect(await browser_ws_url(await cdp_tap.endpoint("doomed")))
    try:
        await client.send("Browser.getVersion")
        await client.send("Target.getTargets")
        chromium.kill()
        await asyncio.wait_for(client.closed.wait(), 10)
        with pytest.raises(ChromiumGone, match=r"Browser.getVersion"):
            cdp_tap.check_browser()
        assert cdp_tap.by_target(label="doomed") == {
            BROWSER: Counter({"HTTP /json/version": 1, "Browser.getVersion": 1, "Target.getTargets": 1})
        }
    finally:
        await client.close()
        await cdp_tap.close()
        await chromium.close()


@pytest.mark.negative_control
async def test_isolation_check_fails_when_the_workload_touches_b_once(
    tap: CDPTap, through_tap: Connect, three_pages: tuple[LabPage, LabPage, LabPage]
) -> None:
    a, b, c = three_pages
    w = await through_tap("stray")
    session_a = await w.attach(a)
    await w.send(a.target_id, "Runtime.evaluate", {"expression": "1"}, session=session_a)
    await w.send(b.target_id, "Target.getTargetInfo", {"targetId": b.target_id})  # the one stray call
    untouched(tap, c)
    with pytest.raises(AssertionError, match="B was touched"):
        untouched(tap, b)


@pytest.mark.negative_control
async def test_exact_agreement_fails_when_one_call_is_missing_from_either_count(
    tap: CDPTap, through_tap: Connect, three_pages: tuple[LabPage, LabPage, LabPage]
) -> None:
    a, _, _ = three_pages
    w = await through_tap("off-by-one")
    session_a = await w.attach(a)
    await w.client.send("Runtime.evaluate", {"expression": "1"}, session_id=session_a)  # sent, not counted
    with pytest.raises(AssertionError):
        same_counts(tap, w, "off-by-one")


async def test_a_watched_needle_is_found_in_answers_events_and_json_list_with_where_it_was_seen(
    tap: CDPTap, through_tap: Connect, three_pages: tuple[LabPage, LabPage, LabPage]
) -> None:
    _, b, _ = three_pages
    tap.watch(b.target_id, "never-sent-needle")
    w = await through_tap("watcher")
    await w.send(BROWSER, "Target.getTargets")
    async with aiohttp.ClientSession() as http, http.get(await tap.endpoint("watcher") + "/json/list") as response:
        assert b.target_id in await response.text()
    seen = {(s.direction, s.kind, s.method) for s in tap.sightings(b.target_id)}
    assert ("received", "answer", "Target.getTargets") in seen
    assert ("received", "http", "HTTP /json/list") in seen
    assert tap.sightings("never-sent-needle") == []
    assert tap.count(label="watcher", category="discovery") == 2  # getTargets and /json/list, not page commands
    assert tap.unknown_sessions() == []
    tap.clear()
    await w.send(BROWSER, "Target.getTargets")
    assert tap.sightings() == []  # clear() forgets the needles too


async def test_a_port_with_its_own_upstream_forwards_there_and_records_under_its_label(
    tap: CDPTap, three_pages: tuple[LabPage, LabPage, LabPage]
) -> None:
    a, _, _ = three_pages
    outer = await CDPTap("http://127.0.0.1:9").start()
    try:
        endpoint = await outer.endpoint("child", upstream=await tap.endpoint("inner"))
        client = await CDPClient.connect(await browser_ws_url(endpoint))
        try:
            await client.send("Target.getTargetInfo", {"targetId": a.target_id})
        finally:
            await client.close()
        assert outer.count(label="child", target=a.target_id, method="Target.getTargetInfo") == 1
        assert tap.count(label="inner", target=a.target_id, method="Target.getTargetInfo") == 1
    finally:
        await outer.close()


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ('{"id":3,"result":{}}', (None, 3)),
        ('{"id":12,"result":{"nodes":[]},"sessionId":"4F2A"}', ("4F2A", 12)),
        ('{"id":5,"error":{"code":-32000,"message":"No node"},"sessionId":"AB"}', ("AB", 5)),
        ('{"id":8,"result":{"sessionId":"NEW"}}', (None, 8)),  # an attach's answer: the session is its result
        ('{"id":7,"result":{"result":{"type":"string","value":",\\"sessionId\\":\\"Z\\"}"}}}', (None, 7)),
        ('{"method":"Page.loadEventFired","params":{"timestamp":1},"sessionId":"AB"}', None),
        ('{"id": 3, "result": {}}', None),  # not as Chromium writes it: parsed whole
        ('{"result":{},"id":3}', None),
    ],
)
def test_an_answer_is_keyed_by_its_head_and_tail_as_chromium_writes_it_and_anything_else_is_not(
    text: str, key: tuple[str | None, int] | None
) -> None:
    assert json.loads(text)  # every case is JSON
    assert answer_key(text) == key


def test_a_no_cdp_window_discounts_an_earlier_calls_late_handle_release_and_nothing_else() -> None:
    """`runtime_commands` (what every no-CDP check reads) leaves out only `Runtime.releaseObject`, which Playwright
    sends unawaited after an act's answer; any other command on the runtime's label still counts."""
    tap = CDPTap("http://127.0.0.1:9")
    tap._record("command", 1, "runtime", "T", "S", "Runtime.releaseObject")
    assert runtime_commands(tap) == []
    assert_no_runtime_calls(tap)
    tap._record("command", 1, "runtime", "T", "S", "Runtime.evaluate")
    tap._record("event", 1, "runtime", "T", "S", "Runtime.consoleAPICalled")
    tap._record("command", 2, "lab", "T", None, "Target.getTargets")
    assert runtime_commands(tap) == ["Runtime.evaluate"]
    assert runtime_commands(tap, since=2) == []
    with pytest.raises(AssertionError, match="1 CDP commands reached Chromium"):
        assert_no_runtime_calls(tap)
