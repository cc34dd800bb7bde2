"""The flows every backend adapter has, run on each against real Chromium (parametrized by `backend`, see
`suites/conftest.py`; `@pytest.mark.backends(...)` where only some have the flow).

Each adapter sits behind the runtime's scoped gateway on a tap endpoint, so every CDP call it causes is counted on
the bound page. Writes are proven by the fixture server's ledger, never by what the upstream says. Where the
backends differ (ref syntax, what a read or a write costs in CDP calls, what each declares it refuses) the
difference is written in `EXPECTED`, one row per backend; the flow and its assertions are the same for all.

What is truly one backend's own stays in its own module: its parser, flags, error texts, process hygiene, and (for
open_claude_chrome) its Claude-in-Chrome tool contract.
"""

from __future__ import annotations

import asyncio
import re
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from backends.chrome_devtools_mcp import ALLOWLIST as CDM_ALLOWLIST
from backends.chrome_devtools_mcp import ChromeDevToolsMCPBackend
from backends.chrome_devtools_mcp.adapter import PAGE_ID
from backends.chrome_devtools_mcp.client import DevToolsClient
from backends.chrome_devtools_mcp.snapshot import UID, parse_snapshot
from backends.common.child import ChildClient, ToolRefused, group_alive
from backends.common.child_backend import ChildBackend
from backends.open_claude_chrome import OpenClaudeChromeBackend
from backends.open_claude_chrome.refs import REF as OCC_REF
from backends.playwright_mcp import ALLOWLIST as PW_ALLOWLIST
from backends.playwright_mcp import PlaywrightMCPBackend
from backends.playwright_mcp.client import PlaywrightClient
from backends.playwright_mcp.snapshot import REF as PW_REF
from backends.playwright_mcp.snapshot import parse_snapshot_answer
from fixtures_sites.server import FixtureServer
from lab.tap import BROWSER, CDPTap
from lab.tokens import count_text, image_size
from lab.workspace import LabPage, Workspace
from runtime.backend import Backend, BackendConfig, BackendError, Element, Snapshot
from runtime.models import Action
from suites.backends.conftest import BACKEND_CLASSES, MakeAdapter, by_name, figures, observation_of, page_calls
from suites.harness import BACKENDS
from suites.proofs import record_cost

PW, CDM, OCC = BACKENDS
CHILD_BACKENDS = (PW, CDM)
"""The backends that run an official MCP server as a child process (open_claude_chrome speaks CDP itself)."""

FOCUS_METHODS = ("Page.bringToFront", "Target.activateTarget", "Emulation.setFocusEmulationEnabled")
SCREENSHOT_METHODS = ("Page.captureScreenshot", "Page.startScreencast")


async def raw_browser_snapshot(adapter: Backend) -> tuple[str, Snapshot]:
    assert isinstance(adapter, PlaywrightMCPBackend)
    raw = "\n".join(c.text for c in (await adapter.client.call("browser_snapshot", {})).content)  # type: ignore[union-attr]
    return raw, parse_snapshot_answer(raw)


async def raw_take_snapshot(adapter: Backend) -> tuple[str, Snapshot]:
    assert isinstance(adapter, ChromeDevToolsMCPBackend)
    raw = await adapter.client.call("take_snapshot", {"pageId": PAGE_ID})  # type: ignore[union-attr]
    text = "\n".join(c.text for c in raw.content if c.type == "text")
    return text, parse_snapshot(raw.structured_content, text)


async def contract_back(adapter: Backend) -> str:
    assert isinstance(adapter, OpenClaudeChromeBackend)
    assert adapter.contract is not None
    return (await adapter.contract.navigate("back")).url


@dataclass(frozen=True)
class Expected:
    """One backend's row: what the shared flows expect of it where the backends differ."""

    ref: re.Pattern[str]
    """Every ref the backend hands out."""
    unknown_ref: tuple[str, str]
    """A ref in the backend's own syntax that names nothing, and the kind of error acting on it is."""
    selectors: tuple[str, ...]
    """Strings that are not refs (selectors, another syntax): each an element error, nothing sent."""
    snapshot_methods: frozenset[str]
    """The only CDP methods a (repeated) snapshot calls on the page."""
    snapshot_calls: Counter[str] | None
    """Exactly the calls a repeated snapshot makes, where that is fixed."""
    first_snapshot_calls: Counter[str] | None
    """Calls the very first snapshot makes, where it attaches nothing first."""
    type_calls: Counter[str]
    """Calls typing "Ada Lovelace" into a field makes (among others)."""
    click_calls: Counter[str]
    """Calls clicking a button makes (among others)."""
    dialog_text: str
    """What the error for an open JS dialog says."""
    dialog_refused_at_adapter: bool
    """An open dialog refuses every call before anything is sent (else the upstream says it)."""
    timeout_options: dict[str, float]
    """Adapter options that make a held navigation time out in about two seconds."""
    queues_behind_abandoned_call: bool = False
    """The upstream runs one tool at a time and does not abort an abandoned one: the next call waits for it."""
    back: Callable[[Backend], Awaitable[str]] | None = None
    """Going back in the page's history, where the backend can (returns the URL it lands on)."""
    free_scroll: bool = True
    """A scroll without a ref is performed (else refused: declared, `action:scroll-without-ref`)."""
    point_click_after_screenshot: bool = False
    """A point click is accepted only as the call right after a screenshot."""
    disabled_click_options: dict[str, float] = field(default_factory=dict)
    """Adapter options for clicking a disabled button (a shorter wait for "enabled")."""
    raw_snapshot: Callable[[Backend], Awaitable[tuple[str, Snapshot]]] | None = None
    """The upstream's own snapshot answer and its parse, where there is an upstream MCP server."""


EXPECTED = {
    PW: Expected(
        ref=PW_REF,
        unknown_ref=("e99999", "element"),
        selectors=("button", "text=Save and continue", "#shipping button", "e1 >> nth=0"),
        snapshot_methods=frozenset({"Runtime.callFunctionOn", "Runtime.evaluate"}),
        snapshot_calls=None,
        first_snapshot_calls=None,
        type_calls=Counter({"Input.insertText": 1}),
        click_calls=Counter({"Input.dispatchMouseEvent": 3}),  # move, down, up: one click
        dialog_text="modal state",  # the snapshot tool refuses while a modal is open
        dialog_refused_at_adapter=False,
        timeout_options={"call_timeout": 2.0},
        disabled_click_options={"action_timeout": 1.0},
        raw_snapshot=raw_browser_snapshot,
    ),
    CDM: Expected(
        ref=UID,
        unknown_ref=("1_99999", "element"),
        selectors=("button", "#shipping button", "1_3 >> nth=0", "e3", "1_3\n"),
        snapshot_methods=frozenset({"Accessibility.getFullAXTree"}),
        snapshot_calls=Counter({"Accessibility.getFullAXTree": 1}),
        first_snapshot_calls=None,
        type_calls=Counter({"Input.dispatchKeyEvent": 2 * len("Ada Lovelace")}),  # fill types short text key by key
        click_calls=Counter({"Input.dispatchMouseEvent": 3}),
        dialog_text="dialog is open (confirm: Pay",
        dialog_refused_at_adapter=False,
        # upstream: 1 s goto + 1 s post-action wait + up to 3 s quiet DOM
        timeout_options={"call_timeout": 2.0, "navigation_timeout": 1.0},
        queues_behind_abandoned_call=True,
        free_scroll=False,
        raw_snapshot=raw_take_snapshot,
    ),
    OCC: Expected(
        ref=OCC_REF,
        unknown_ref=("ref_99999", "stale"),  # not in the latest read: stale, like a ref of a replaced element
        selectors=("button", "#shipping button", "text=Save", "ref_1 >> nth=0"),
        snapshot_methods=frozenset({"DOMSnapshot.captureSnapshot", "Accessibility.getFullAXTree"}),
        # One read answers both contract calls: one DOM snapshot, one AX tree.
        snapshot_calls=Counter({"DOMSnapshot.captureSnapshot": 1, "Accessibility.getFullAXTree": 1}),
        first_snapshot_calls=Counter({"DOMSnapshot.captureSnapshot": 1, "Accessibility.getFullAXTree": 1}),
        type_calls=Counter({"Input.insertText": 1}),
        click_calls=Counter(
            {
                "Input.dispatchMouseEvent": 3,
                "Overlay.highlightRect": 1,  # the cursor, where it clicked
                "Runtime.callFunctionOn": 1,  # the ref re-check, in the same call as locating
            }
        ),
        dialog_text="dialog is open (confirm: Pay",
        dialog_refused_at_adapter=True,
        timeout_options={"navigation_timeout": 2.0, "settle_timeout": 0.5},
        back=contract_back,
        point_click_after_screenshot=True,
    ),
}


@pytest.fixture
def expected(backend: str) -> Expected:
    return EXPECTED[backend]


def still_running(adapter: Backend) -> bool:
    """A child-process backend: its child's process group is alive; open_claude_chrome: its session is intact."""
    if isinstance(adapter, ChildBackend):
        return adapter.pid is not None and group_alive(adapter.pid)
    assert isinstance(adapter, OpenClaudeChromeBackend)
    return adapter.session is not None and adapter.session.lost is None


# -- observation ---------------------------------------------------------------------------------------------------


@pytest.mark.req("adapter:snapshot", "adapter:parser")
async def test_snapshot_of_the_form_lists_its_controls_with_roles_names_state_and_its_text_main_content_first(
    adapter: Backend, expected: Expected, bound_page: LabPage, tap: CDPTap
) -> None:
    snapshot = await adapter.snapshot()

    assert snapshot.url == bound_page.url
    assert snapshot.title.startswith("Checkout · Shipping details")
    elements = snapshot.elements
    assert by_name(elements, "textbox", "Full name").value is None
    assert by_name(elements, "combobox", "Country").value == "Choose a country…"
    assert by_name(elements, "checkbox", "This is a gift").checked is False
    assert by_name(elements, "radio", "Standard (3–5 days)").checked is True
    assert by_name(elements, "radio", "Express (next day)").checked is False
    assert not by_name(elements, "button", "Save and continue").disabled
    assert [e.role for e in elements].count("textbox") == 4
    assert not [e for e in elements if e.role == "option"]  # a select's options are text
    assert all(expected.ref.fullmatch(e.ref) for e in elements)
    assert len({e.ref for e in elements}) == len(elements)
    order = [e.name for e in elements]
    assert order.index("Full name") < order.index("Country") < order.index("Save and continue")
    lines = snapshot.text.splitlines()
    assert lines[0] == "# Shipping details"  # the main landmark first
    assert "Delivery speed" in snapshot.text
    assert "Full name" not in lines  # a label next to its own control is not repeated
    assert "Japan" in snapshot.text  # the select's options are readable
    assert lines[-1] == "Need help? Call 0800 000 000 ·"  # the footer after the main content
    assert "/catalogue/" not in snapshot.text  # link URLs are noise, not text
    assert snapshot.upstream_chars > len("".join(observation_of(snapshot)))
    assert tap.count(label="backend", category="screenshot") == 0
    calls = page_calls(tap, bound_page)
    for method, count in (expected.first_snapshot_calls or Counter()).items():
        assert calls[method] == count, method


@pytest.mark.req("adapter:one-write")
async def test_type_select_and_click_make_exactly_one_write_with_the_typed_values_and_no_screenshot(
    adapter: Backend, backend: str, expected: Expected, bound_page: LabPage, tap: CDPTap, fixture_server: FixtureServer
) -> None:
    calls: dict[str, Counter[str]] = {}
    snapshot = await adapter.snapshot()  # the first call also attaches an upstream to the page
    calls["first snapshot (attach)"] = page_calls(tap, bound_page)
    tap.clear()
    snapshot = await adapter.snapshot()
    calls["snapshot"] = page_calls(tap, bound_page)
    name = by_name(snapshot.elements, "textbox", "Full name")
    country = by_name(snapshot.elements, "combobox", "Country")
    gift = by_name(snapshot.elements, "checkbox", "This is a gift")
    submit = by_name(snapshot.elements, "button", "Save and continue")

    submitted = fixture_server.wait_for_request("/dom_form/submit")  # registered before acting
    for label, action, element in (
        ("type", Action(type="type", ref=name.ref, text="Ada Lovelace"), name),
        ("select", Action(type="select", ref=country.ref, values=["Japan"]), country),
        ("click checkbox", Action(type="click", ref=gift.ref), gift),
        ("click submit", Action(type="click", ref=submit.ref), submit),
    ):
        tap.clear()
        await adapter.act(action, element)
        calls[label] = page_calls(tap, bound_page)
    form = (await submitted).form()

    assert form["full_name"] == "Ada Lovelace"
    assert form["country"] == "jp"
    assert form["gift"] == "yes"
    assert len(fixture_server.ledger.writes("/dom_form/submit")) == 1
    tap.clear()
    after = await adapter.snapshot()
    calls["snapshot after submit"] = page_calls(tap, bound_page)
    assert after.url == fixture_server.url("/dom_form/submit")
    assert "Order details saved" in after.text
    assert len(fixture_server.ledger.writes("/dom_form/submit")) == 1
    figures(f"{backend} CDP calls on the page per flow", calls)
    # Ordinary DOM flows: no pixels leave the page, nothing is focused or raised (the gateway absorbs focus
    # emulation at attach).
    for flow, counter in calls.items():
        assert not any(m in counter for m in SCREENSHOT_METHODS), flow
        assert not any(m in counter for m in FOCUS_METHODS), flow
    assert tap.count(label="backend", category="focus") == 0
    assert calls["snapshot"]
    assert set(calls["snapshot"]) <= expected.snapshot_methods
    if expected.snapshot_calls is not None:
        assert calls["snapshot"] == expected.snapshot_calls
    for flow, wanted in (("type", expected.type_calls), ("click submit", expected.click_calls)):
        for method, count in wanted.items():
            assert calls[flow][method] == count, (flow, method)
    assert not any(m.startswith("Input.") for m in calls["select"])
    assert tap.by_target(label="backend").get(BROWSER, Counter())["Target.createTarget"] == 0


@pytest.mark.parametrize("bound_page", ["/catalogue/"], indirect=True)
@pytest.mark.req("adapter:compact-snapshot")
async def test_catalogue_snapshot_parses_hundreds_of_elements_in_far_fewer_tokens(
    adapter: Backend, backend: str, expected: Expected, bound_page: LabPage, tap: CDPTap
) -> None:
    snapshot = await adapter.snapshot()
    calls = page_calls(tap, bound_page)

    assert snapshot.url == bound_page.url
    roles = Counter(e.role for e in snapshot.elements)
    assert len(snapshot.elements) > 900
    assert roles["button"] >= 300  # an "Add to cart" (or disabled "Out of stock") per product
    assert len([e for e in snapshot.elements if e.name == "Out of stock" and e.disabled]) >= 1
    assert len({e.ref for e in snapshot.elements}) == len(snapshot.elements)
    assert tap.count(label="backend", category="screenshot") == 0
    assert tap.by_target(label="backend").get(BROWSER, Counter())["Target.createTarget"] == 0
    pages = observation_of(snapshot)
    table = {
        "rendered observation": Counter(
            tokens=sum(map(count_text, pages)), pages=len(pages), elements=len(snapshot.elements)
        ),
        "upstream": Counter(chars=snapshot.upstream_chars),
        "calls": calls,
    }
    if expected.raw_snapshot is not None:  # an upstream MCP server: its own answer, side by side
        raw, parsed = await expected.raw_snapshot(adapter)
        assert abs(snapshot.upstream_chars - len(raw)) < 100  # same page, same answer modulo nothing
        raw_tokens, ours = count_text(raw), sum(map(count_text, observation_of(parsed)))
        table["raw upstream answer vs our observation (o200k tokens)"] = Counter(raw=raw_tokens, ours=ours)
        record_cost(f"observe-raw-catalogue-{backend}", {"raw_tokens": raw_tokens, "normalized_tokens": ours})
        assert ours * 4 < raw_tokens
    figures(f"{backend} catalogue snapshot (o200k tokens, CDP calls)", table)


# -- failures ------------------------------------------------------------------------------------------------------


@pytest.mark.req("adapter:refs-only")
async def test_an_unknown_ref_is_refused_and_a_selector_is_an_element_error_that_never_reaches_the_upstream(
    adapter: Backend, expected: Expected, bound_page: LabPage, tap: CDPTap, fixture_server: FixtureServer
) -> None:
    await adapter.snapshot()
    unknown_ref, kind = expected.unknown_ref
    with pytest.raises(BackendError) as unknown:
        await adapter.act(Action(type="click", ref=unknown_ref), None)
    assert unknown.value.kind == kind

    tap.clear()
    for selector in expected.selectors:
        with pytest.raises(BackendError) as refused:
            await adapter.act(Action(type="click", ref=selector), None)
        assert refused.value.kind == "element"
    assert not page_calls(tap, bound_page)
    assert fixture_server.ledger.writes() == []


@pytest.mark.parametrize("bound_page", ["/catalogue/"], indirect=True)
@pytest.mark.req("adapter:element-errors")
async def test_clicking_a_disabled_button_is_an_element_error_not_a_timeout(
    make_adapter: MakeAdapter, expected: Expected, fixture_server: FixtureServer
) -> None:
    adapter = await make_adapter(**expected.disabled_click_options)
    disabled = next(e for e in (await adapter.snapshot()).elements if e.disabled and e.role == "button")
    with pytest.raises(BackendError) as error:  # an upstream's locator may wait its timeout for "enabled"
        await adapter.act(Action(type="click", ref=disabled.ref), disabled)
    assert error.value.kind == "element"
    assert fixture_server.ledger.writes() == []


@pytest.mark.parametrize("bound_page", ["/sensitive/"], indirect=True)
@pytest.mark.req("adapter:dialog-never-answered")
async def test_a_javascript_dialog_is_never_answered_and_blocks_the_next_observation_as_an_error(
    adapter: Backend, expected: Expected, fixture_server: FixtureServer, tap: CDPTap
) -> None:
    pay = by_name((await adapter.snapshot()).elements, "button", "Pay now")
    await adapter.act(Action(type="click", ref=pay.ref), pay)  # the click happened; its confirm() is now open

    tap.clear()
    calls: list[Awaitable[Any]] = [adapter.snapshot()]
    if expected.dialog_refused_at_adapter:
        calls += [adapter.screenshot(), adapter.act(Action(type="click", ref=pay.ref), pay)]
    for call in calls:
        with pytest.raises(BackendError) as blocked:
            await call
        assert blocked.value.kind == "dialog"
        assert expected.dialog_text in str(blocked.value)
    if expected.dialog_refused_at_adapter:
        assert tap.by_target(label="backend") == {}  # nothing was sent, so nothing answered it
    assert fixture_server.ledger.writes() == []  # nobody said OK (no backend may call a dialog-handling tool)


@pytest.mark.req("adapter:target-lost")
async def test_after_the_page_closes_every_call_is_target_lost_and_stops_at_the_adapter(
    adapter: Backend, bound_page: LabPage, workspace: Workspace, tap: CDPTap
) -> None:
    first = await adapter.snapshot()
    await workspace.close(bound_page)

    with pytest.raises(BackendError) as lost:
        await adapter.snapshot()
    assert lost.value.kind == "target_lost"
    tap.clear()
    submit = by_name(first.elements, "button", "Save and continue")
    for call in (
        adapter.act(Action(type="click", ref=submit.ref), submit),
        adapter.screenshot(),
        adapter.act(Action(type="navigate", url="http://localhost:1/"), None),
    ):
        with pytest.raises(BackendError) as again:
            await call
        assert again.value.kind == "target_lost"
    assert tap.by_target(label="backend") == {}  # sticky: nothing more went upstream


@pytest.mark.req("adapter:timeout", "action:navigate")
async def test_a_navigation_past_its_timeout_is_a_timeout_and_the_backend_stays_usable(
    make_adapter: MakeAdapter, expected: Expected, bound_page: LabPage, fixture_server: FixtureServer
) -> None:
    adapter = await make_adapter(**expected.timeout_options)
    stall = fixture_server.stall("/stall/slow-page")  # registered before acting
    with pytest.raises(BackendError) as error:
        await adapter.act(Action(type="navigate", url=fixture_server.url("/stall/slow-page")), None)
    assert error.value.kind == "timeout"
    assert stall.holding
    assert still_running(adapter)

    if expected.queues_behind_abandoned_call:
        adapter.client.call_timeout = 15.0  # type: ignore[attr-defined]
    # The abandoned navigation is still pending (the page keeps waiting for the held answer); a new one supersedes
    # it. (Released instead, it would commit and interrupt whatever navigation came next.)
    await adapter.act(Action(type="navigate", url=fixture_server.url("/home/")), None)
    assert (await adapter.snapshot()).url == fixture_server.url("/home/")
    assert stall.holding
    if expected.back is not None:
        assert await expected.back(adapter) == bound_page.url


@pytest.mark.req("adapter:cancel")
async def test_a_cancelled_call_propagates_and_leaves_the_backend_running_and_consistent(
    adapter: Backend, fixture_server: FixtureServer
) -> None:
    # A navigation the server holds is cancelled once its request has arrived; the cancellation reaches the caller
    # (no answer is invented), and the next navigation and read work on the same backend. The held request is then
    # answered 204, which ends the abandoned navigation without a document of its own (so it cannot interrupt the
    # next one): chrome-devtools-mcp runs one tool call at a time, and its abandoned navigation would otherwise hold
    # the next call until its own navigation timeout (about 25 s), which proves nothing more.
    stall = fixture_server.stall("/stall/slow-page")  # registered before acting
    call = asyncio.ensure_future(adapter.act(Action(type="navigate", url=fixture_server.url("/stall/slow-page")), None))
    try:
        await stall.started()
    finally:
        call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    assert stall.holding
    stall.release(204, text="", content_type="text/html")

    await adapter.act(Action(type="navigate", url=fixture_server.url("/dom_form/")), None)
    snapshot = await adapter.snapshot()
    assert snapshot.url == fixture_server.url("/dom_form/")
    assert any(e.role == "button" and e.name == "Save and continue" for e in snapshot.elements), snapshot.elements
    assert still_running(adapter)


# -- screenshot, point click, scroll -------------------------------------------------------------------------------


@pytest.mark.req("adapter:one-screenshot")
async def test_screenshot_is_exactly_one_capture_of_the_viewport(
    adapter: Backend, bound_page: LabPage, tap: CDPTap, workspace: Workspace
) -> None:
    await adapter.snapshot()
    tap.clear()
    png = await adapter.screenshot()

    assert tap.count(label="backend", method="Page.captureScreenshot") == 1
    assert tap.count(label="backend", category="screenshot") == 1
    assert png.startswith(b"\x89PNG\r\n\x1a\n")
    viewport = await workspace.evaluate(bound_page, "[innerWidth, innerHeight]")
    assert list(image_size(png)) == viewport


SCROLLED = "window.__scrolled = new Promise(r => addEventListener('scroll', () => r(scrollY), {once: true})); 1"


@pytest.mark.parametrize("bound_page", ["/catalogue/"], indirect=True)
@pytest.mark.req("adapter:point-click", "adapter:scroll-to-ref", "action:scroll-without-ref")
async def test_point_click_wheel_scroll_and_scroll_to_a_ref_reach_the_page_or_are_declared_refusals(
    adapter: Backend, expected: Expected, bound_page: LabPage, workspace: Workspace, tap: CDPTap
) -> None:
    snapshot = await adapter.snapshot()
    box = await workspace.evaluate(
        bound_page,
        "(() => { const r = document.querySelector('input[type=checkbox]').getBoundingClientRect();"
        " return [r.x + r.width / 2, r.y + r.height / 2]; })()",
    )
    if expected.point_click_after_screenshot:
        await adapter.screenshot()
    await adapter.act(Action(type="click", x=box[0], y=box[1]), None)
    assert await workspace.evaluate(bound_page, "document.querySelector('input[type=checkbox]').checked") is True

    tap.clear()
    free_scrolls = (Action(type="scroll", direction="down"), Action(type="scroll", x=5, y=5, direction="down"))
    if expected.free_scroll:
        await workspace.evaluate(bound_page, SCROLLED)  # registered before acting
        await adapter.act(free_scrolls[0], None)
        assert await workspace.evaluate(bound_page, "window.__scrolled", await_promise=True) > 0
    else:
        for free in free_scrolls:
            with pytest.raises(BackendError) as refused:
                await adapter.act(free, None)
            assert refused.value.kind == "unsupported"
        assert not page_calls(tap, bound_page)

    footer_link = [e for e in snapshot.elements if e.role == "link"][-1]
    await workspace.evaluate(bound_page, SCROLLED)  # registered before acting
    await adapter.act(Action(type="scroll", ref=footer_link.ref, direction="down"), footer_link)
    await workspace.evaluate(bound_page, "window.__scrolled", await_promise=True)
    bottom = "document.documentElement.scrollHeight - innerHeight - scrollY"
    assert await workspace.evaluate(bound_page, bottom) < 2000  # near the footer of a ~40,000 px page
    assert tap.count(label="backend", category=("screenshot", "focus")) == 0


# -- unit: no browser ----------------------------------------------------------------------------------------------


CHILD_CLIENTS: dict[str, tuple[Callable[..., ChildClient], frozenset[str], str, tuple[str, ...]]] = {
    PW: (
        PlaywrightClient,
        PW_ALLOWLIST,
        "browser_snapshot",
        (
            "browser_run_code_unsafe",
            "browser_evaluate",
            "browser_tabs",
            "browser_close",
            "browser_file_upload",
            "browser_network_requests",
            "browser_console_messages",
            "browser_handle_dialog",
            "some_webmcp_tool",
        ),
    ),
    CDM: (
        DevToolsClient,
        CDM_ALLOWLIST,
        "take_snapshot",
        (
            "list_pages",
            "select_page",
            "new_page",
            "close_page",
            "type_text",
            "fill_form",
            "drag",
            "upload_file",
            "handle_dialog",
            "wait_for",
            "evaluate_script",
            "lighthouse_audit",
            "screencast_start",
            "get_console_message",
            "get_css_styles",
            "resize_page",
            "emulate",
            "get_network_request",
            "execute_webmcp_tool",
            "execute_3p_developer_tool",
        ),
    ),
}
"""Per child-process backend: its client, its allowlist, a listed tool, and tools it must never call."""


@pytest.mark.backends(*CHILD_BACKENDS)
@pytest.mark.req("adapter:allowlist")
async def test_the_call_site_refuses_every_tool_outside_the_allowlist_before_sending_anything(
    backend: str, tmp_path: Path
) -> None:
    client_class, allowlist, listed, never = CHILD_CLIENTS[backend]
    client = client_class(
        Path("/nonexistent/upstream-mcp"),
        [],
        cwd=tmp_path,
        env={},
        marker="unused",
        call_timeout=1.0,
        start_timeout=1.0,
        stderr_path=tmp_path / "stderr.log",
    )  # never started: a refusal cannot depend on the child
    for name in never:
        assert name not in allowlist
        with pytest.raises(ToolRefused) as refused:
            await client.call(name, {})
        assert refused.value.tool == name
    assert listed in allowlist
    with pytest.raises(BackendError, match="not running"):
        await client.call(listed, {})


UpstreamCall = tuple[str, dict[str, Any]]


@dataclass(frozen=True)
class Mapping:
    """How one backend maps canonical Actions to its upstream's calls (no browser: the mapping alone)."""

    tools: list[tuple[Action, Element | None, str, dict[str, Any]]]
    """Each Action (and the element it acts on) → the one tool it calls, and arguments that call carries."""
    exact: list[tuple[Action, Element | None, UpstreamCall]]
    """Calls known to the letter."""
    refused: dict[str, list[tuple[Action, Element | None]]]
    """Error kind → Actions the backend declares it refuses, before anything is sent."""
    allowlist: frozenset[str] | None = None
    """Every tool called is in it (an upstream MCP server's allowlist)."""
    never_in_arguments: tuple[str, ...] = ()
    """Arguments the mapping never sets (the adapter adds them to every call)."""


SEND = Element(ref="f1e3", role="button", name="Send")
CDM_SEND = Element(ref="4_12", role="button", name="Send")
COUNTRY = Element(ref="1_24", role="combobox", name="Country")
GIFT = Element(ref="1_36", role="checkbox", name="Gift")
FULL_NAME = Element(ref="ref_4", role="textbox", name="Full name")
HOME = "http://localhost/"

MAPPINGS = {
    PW: Mapping(
        tools=[
            (Action(type="click", ref="e3"), None, "browser_click", {}),
            (Action(type="click", x=10, y=20), None, "browser_mouse_click_xy", {}),
            (Action(type="type", ref="e4", text="hi", submit=True), None, "browser_type", {}),
            (Action(type="press", key="Enter"), None, "browser_press_key", {}),
            (Action(type="select", ref="e5", values=["jp"]), None, "browser_select_option", {}),
            (Action(type="navigate", url=HOME), None, "browser_navigate", {}),
            (Action(type="scroll", direction="down"), None, "browser_mouse_wheel", {}),
            (Action(type="scroll", ref="f1e3", direction="down"), SEND, "browser_hover", {}),
        ],
        exact=[
            (Action(type="click", ref="e3"), SEND, ("browser_click", {"target": "f1e3"})),
            (Action(type="scroll", direction="up"), None, ("browser_mouse_wheel", {"deltaX": 0, "deltaY": -600})),
        ],
        refused={
            "unsupported": [
                (Action(type="press", ref="e3", key="Enter"), None),
                (Action(type="scroll", x=1, y=2, direction="up"), None),
            ]
        },
        allowlist=PW_ALLOWLIST,
    ),
    CDM: Mapping(
        tools=[
            (Action(type="click", ref="1_3"), None, "click", {}),
            (Action(type="click", x=10, y=20), None, "click_at", {}),
            (Action(type="type", ref="1_4", text="hi"), None, "fill", {}),
            (Action(type="press", key="Enter"), None, "press_key", {}),
            (Action(type="navigate", url=HOME), None, "navigate_page", {}),
            (Action(type="scroll", ref="4_12", direction="down"), CDM_SEND, "hover", {}),
        ],
        exact=[
            (Action(type="click", ref="1_3"), CDM_SEND, ("click", {"uid": "4_12"})),
            (Action(type="select", ref="1_24", values=["Japan"]), COUNTRY, ("fill", {"uid": "1_24", "value": "Japan"})),
            (
                Action(type="navigate", url=HOME),
                None,
                ("navigate_page", {"type": "url", "url": HOME, "timeout": 12000, "handleBeforeUnload": "accept"}),
            ),
        ],
        refused={
            "unsupported": [
                (Action(type="press", ref="1_3", key="Enter"), None),
                (Action(type="scroll", direction="up"), None),
                (Action(type="scroll", x=1, y=2, direction="up"), None),
                (Action(type="type", ref="1_4", text="hi", submit=True), None),
                (Action(type="type", ref="1_4", text="two\nlines"), None),
                (Action(type="type", ref="1_36", text="true"), GIFT),
                (Action(type="select", ref="1_36", values=["true"]), GIFT),
                (Action(type="select", ref="1_24", values=["Japan", "France"]), COUNTRY),
            ],
            "element": [
                (Action(type="click", ref="e3"), None),
            ],
        },
        allowlist=CDM_ALLOWLIST,
        never_in_arguments=("pageId",),
    ),
    OCC: Mapping(
        tools=[
            (Action(type="click", ref="ref_3"), None, "computer", {"action": "left_click"}),
            (Action(type="click", x=10, y=20), None, "computer", {"action": "left_click"}),
            (Action(type="type", ref="ref_4", text="hi"), FULL_NAME, "form_input", {}),
            (Action(type="press", key="Enter"), None, "computer", {"action": "key"}),
            (Action(type="select", ref="ref_5", values=["jp"]), None, "form_input", {}),
            (Action(type="navigate", url=HOME), None, "navigate", {}),
            (Action(type="scroll", direction="down"), None, "computer", {"action": "scroll"}),
            (Action(type="scroll", x=5, y=6, direction="up"), None, "computer", {"action": "scroll"}),
            (Action(type="scroll", ref="ref_9", direction="down"), None, "computer", {"action": "hover"}),
        ],
        exact=[
            (
                Action(type="click", x=10, y=20),
                None,
                ("computer", {"action": "left_click", "coordinate": (10.0, 20.0)}),
            ),
            (Action(type="type", ref="ref_4", text="hi"), FULL_NAME, ("form_input", {"ref": "ref_4", "value": "hi"})),
        ],
        refused={
            "unsupported": [
                (Action(type="type", ref="ref_4", text="hi", submit=True), None),
                (Action(type="press", ref="ref_4", key="Enter"), None),
                (Action(type="select", ref="ref_5", values=["a", "b"]), None),
            ],
            "element": [
                (Action(type="click", ref="#submit"), None),
            ],
        },
    ),
}


def upstream_call(backend: str, workdir: Path) -> Callable[[Action, Element | None], UpstreamCall]:
    """The backend's mapping of one Action to its one upstream call, on an adapter that is never started."""
    adapter = BACKEND_CLASSES[backend](BackendConfig(cdp_endpoint="http://127.0.0.1:9", workdir=workdir))
    return adapter.contract_call if isinstance(adapter, OpenClaudeChromeBackend) else adapter.upstream_call  # type: ignore[attr-defined]


TYPED_FIELD = {PW: "e4", CDM: "1_4", OCC: "ref_4"}


@pytest.mark.req("action:type-submit", "adapter:one-upstream-call")
def test_a_backend_declares_it_types_and_submits_exactly_when_one_upstream_call_does_both(
    backend: str, tmp_path: Path
) -> None:
    """The runtime composes type + Enter only where the backend says it cannot: a backend that declared the
    capability wrongly would get `submit` it drops (or refuses) or have the runtime press a second Enter."""
    action = Action(type="type", ref=TYPED_FIELD[backend], text="hi", submit=True)
    call = upstream_call(backend, tmp_path)
    if BACKEND_CLASSES[backend].types_and_submits:
        name, sent = call(action, None)
        assert sent.get("submit") is True, (name, sent)
        return
    with pytest.raises(BackendError) as refused:
        call(action, FULL_NAME if backend == OCC else None)
    assert refused.value.kind == "unsupported"


@pytest.mark.req("adapter:one-upstream-call", "adapter:allowlist")
def test_every_canonical_action_maps_to_exactly_one_allowlisted_tool_or_a_declared_refusal(
    backend: str, tmp_path: Path
) -> None:
    mapping, call = MAPPINGS[backend], upstream_call(backend, tmp_path)
    for action, element, tool, arguments in mapping.tools:
        name, sent = call(action, element)
        assert name == tool, action
        assert mapping.allowlist is None or name in mapping.allowlist, action
        assert arguments.items() <= sent.items(), (action, sent)
        assert not set(mapping.never_in_arguments) & set(sent), (action, sent)
    for action, element, exact in mapping.exact:
        assert call(action, element) == exact
    for kind, actions in mapping.refused.items():
        for action, element in actions:
            with pytest.raises(BackendError) as error:
                call(action, element)
            assert error.value.kind == kind, action
            if kind == "unsupported":  # what to send instead, in the adapter's words: the agent reads it
                assert error.value.advice, action
