"""ChromeDevToolsMCPBackend against real Chromium and the real, pinned chrome-devtools-mcp 1.11.0.

The backend sits behind the runtime's scoped gateway (as it always does in the runtime), on a tap endpoint, so every
CDP call it causes is counted on the bound page. Writes are proven by the fixture server's ledger, never by what the
upstream says. Unit tests at the end need no browser: the allowlist, the action mapping, the error texts and the
snapshot parser (on answers captured from real runs, `suites/backends/data/cdm_*.json`).
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import allure
import pytest

from backends.chrome_devtools_mcp import ALLOWLIST, ChromeDevToolsMCPBackend, ToolRefused
from backends.chrome_devtools_mcp.adapter import PAGE_ID
from backends.chrome_devtools_mcp.client import DevToolsClient, group_alive
from backends.chrome_devtools_mcp.errors import classify, navigation_failure
from backends.chrome_devtools_mcp.snapshot import UID, SnapshotFormatError, nodes_of, parse_snapshot
from fixtures_sites.server import FixtureServer
from lab.cdp import CDPClient
from lab.tap import BROWSER, CDPTap
from lab.tokens import count_text, image_size
from lab.workspace import LabPage, Workspace
from runtime.backend import BackendConfig, BackendError, Element, Snapshot
from runtime.gateway import ScopedGateway
from runtime.models import Action
from suites.backends.conftest import MakeCDM, cancel_a_held_navigation_then_navigate_again, observation_of
from suites.proofs import record_cost

pytestmark = pytest.mark.req(backend="chrome_devtools_mcp")

DATA = Path(__file__).parent / "data"
PAGE_TOOLS_NEVER_CALLED = ("list_pages", "select_page", "new_page", "close_page")


def by_name(elements: tuple[Element, ...], role: str, name: str) -> Element:
    found = [e for e in elements if e.role == role and e.name == name]
    assert len(found) == 1, f"expected one {role} {name!r}, got {found}"
    return found[0]


def page_calls(tap: CDPTap, page: LabPage) -> Counter[str]:
    return tap.by_target(label="backend").get(page.target_id, Counter())


def figures(name: str, calls: dict[str, Counter[str]]) -> None:
    table = {flow: {"total": sum(c.values()), **dict(c)} for flow, c in calls.items()}
    allure.attach(json.dumps(table, indent=2), name, allure.attachment_type.JSON)
    print(f"{name}: {json.dumps({flow: sum(c.values()) for flow, c in calls.items()})}")


def captured(name: str) -> tuple[dict, str]:
    answer = json.loads((DATA / name).read_text(encoding="utf-8"))
    return answer["structuredContent"], answer["text"]


def real_cache_state() -> list[tuple[str, int]] | None:
    """What the update checker would touch in the real HOME: ~/.cache/chrome-devtools-mcp (names, mtimes)."""
    cache = Path.home() / ".cache" / "chrome-devtools-mcp"
    if not cache.exists():
        return None
    return sorted((str(p), p.stat().st_mtime_ns) for p in cache.rglob("*"))


def proc_environ_and_cwd(pid: int) -> tuple[dict[str, str], Path]:
    raw = Path(f"/proc/{pid}/environ").read_bytes().decode()
    return dict(item.split("=", 1) for item in raw.split("\0") if "=" in item), Path(f"/proc/{pid}/cwd").resolve()


# -- observation ---------------------------------------------------------------------------------------------------


@pytest.mark.req("adapter:snapshot")
async def test_snapshot_of_the_form_lists_its_controls_with_roles_names_state_and_its_text(
    devtools_backend: ChromeDevToolsMCPBackend, bound_page: LabPage, tap: CDPTap
) -> None:
    snapshot = await devtools_backend.snapshot()

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
    assert not [e for e in elements if e.role == "option"]  # a select's options are text, as on the default backend
    assert all(UID.fullmatch(e.ref) for e in elements)
    assert len({e.ref for e in elements}) == len(elements)
    order = [e.name for e in elements]
    assert order.index("Full name") < order.index("Country") < order.index("Save and continue")
    assert "# Shipping details" in snapshot.text
    assert "Delivery speed" in snapshot.text
    assert "Japan" in snapshot.text  # the select's options are readable
    assert "/catalogue/" not in snapshot.text  # link URLs are noise, not text
    assert "Full name" not in snapshot.text.splitlines()  # a label next to its own control is not repeated
    assert snapshot.upstream_chars > len("".join(observation_of(snapshot)))
    assert tap.count(label="backend", category="screenshot") == 0


@pytest.mark.req("adapter:one-write")
async def test_type_select_and_click_make_exactly_one_write_with_the_typed_values_and_no_screenshot(
    devtools_backend: ChromeDevToolsMCPBackend, bound_page: LabPage, tap: CDPTap, fixture_server: FixtureServer
) -> None:
    calls: dict[str, Counter[str]] = {}
    snapshot = await devtools_backend.snapshot()  # the first call also attaches the upstream to the page
    calls["first snapshot (attach)"] = page_calls(tap, bound_page)
    tap.clear()
    snapshot = await devtools_backend.snapshot()
    calls["snapshot"] = page_calls(tap, bound_page)
    name = by_name(snapshot.elements, "textbox", "Full name")
    country = by_name(snapshot.elements, "combobox", "Country")
    submit = by_name(snapshot.elements, "button", "Save and continue")

    submitted = fixture_server.wait_for_request("/dom_form/submit")  # registered before acting
    for label, action, element in (
        ("type", Action(type="type", ref=name.ref, text="Ada Lovelace"), name),
        ("select", Action(type="select", ref=country.ref, values=["Japan"]), country),
        ("click", Action(type="click", ref=submit.ref), submit),
    ):
        tap.clear()
        await devtools_backend.act(action, element)
        calls[label] = page_calls(tap, bound_page)
    form = (await submitted).form()

    assert form["full_name"] == "Ada Lovelace"
    assert form["country"] == "jp"
    assert len(fixture_server.ledger.writes("/dom_form/submit")) == 1
    tap.clear()
    after = await devtools_backend.snapshot()
    calls["snapshot after submit"] = page_calls(tap, bound_page)
    assert after.url == fixture_server.url("/dom_form/submit")
    assert "Order details saved" in after.text
    assert len(fixture_server.ledger.writes("/dom_form/submit")) == 1
    figures("chrome_devtools_mcp CDP calls on the page per flow", calls)
    # Ordinary DOM flows: no pixels leave the page, nothing is focused or raised.
    for flow, counter in calls.items():
        assert not any(m in counter for m in ("Page.captureScreenshot", "Page.startScreencast")), flow
        assert "Page.bringToFront" not in counter, flow
        assert "Emulation.setFocusEmulationEnabled" not in counter, flow  # the gateway absorbs it at attach
    assert calls["snapshot"] == Counter({"Accessibility.getFullAXTree": 1})
    assert calls["click"]["Input.dispatchMouseEvent"] == 3  # move, down, up: one click
    assert calls["type"]["Input.dispatchKeyEvent"] == 2 * len("Ada Lovelace")  # fill types short text key by key
    assert not any(m.startswith("Input.") for m in calls["select"])
    assert tap.by_target(label="backend").get(BROWSER, Counter())["Target.createTarget"] == 0


@pytest.mark.parametrize("bound_page", ["/catalogue/"], indirect=True)
@pytest.mark.req("adapter:compact-snapshot")
async def test_catalogue_snapshot_parses_hundreds_of_elements_in_far_fewer_tokens(
    devtools_backend: ChromeDevToolsMCPBackend, bound_page: LabPage
) -> None:
    snapshot = await devtools_backend.snapshot()
    raw = await devtools_backend.client.call("take_snapshot", {"pageId": PAGE_ID})  # type: ignore[union-attr]
    raw_text = "\n".join(c.text for c in raw.content if c.type == "text")

    roles = Counter(e.role for e in snapshot.elements)
    assert len(snapshot.elements) > 900
    assert roles["button"] >= 300  # an "Add to cart" (or disabled "Out of stock") per product
    assert len([e for e in snapshot.elements if e.name == "Out of stock" and e.disabled]) >= 1
    assert abs(snapshot.upstream_chars - len(raw_text)) < 100  # same page, same answer modulo nothing
    raw_tokens = count_text(raw_text)
    ours = sum(map(count_text, observation_of(parse_snapshot(raw.structured_content, raw_text))))
    figures(
        "catalogue snapshot tokens (o200k)",
        {"raw take_snapshot text": Counter(t=raw_tokens), "our observation": Counter(t=ours)},
    )
    record_cost("observe-raw-catalogue-chrome_devtools_mcp", {"raw_tokens": raw_tokens, "normalized_tokens": ours})
    assert ours * 4 < raw_tokens


async def uids_of_the_frames_page(devtools_backend: ChromeDevToolsMCPBackend) -> tuple[Counter[str], Snapshot]:
    raw = await devtools_backend.client.call("take_snapshot", {"pageId": PAGE_ID})  # type: ignore[union-attr]
    uids = Counter(node["id"] for node in nodes_of(raw.structured_content["snapshot"]))  # type: ignore[index]
    return uids, parse_snapshot(raw.structured_content, "")


@pytest.mark.parametrize("bound_page", ["/frames/"], indirect=True)
@pytest.mark.req("adapter:unique-refs", "frames:iframe-refs")
async def test_every_control_of_a_page_and_its_cross_site_iframe_gets_a_uid_of_its_own(
    devtools_backend: ChromeDevToolsMCPBackend,
) -> None:
    uids, snapshot = await uids_of_the_frames_page(devtools_backend)

    assert [uid for uid, n in uids.items() if n > 1] == []
    assert "(not addressable)" not in snapshot.text
    for role, name in (("textbox", "Order number"), ("checkbox", "Text me delivery updates"), ("button", "Send")):
        assert by_name(snapshot.elements, role, name).ref
    assert "Chat with Northwind support" in snapshot.text  # the cross-site iframe is read


async def lifecycle_as_a_late_client_sees_it(
    gateway_class: type[ScopedGateway], tap: CDPTap, page: LabPage
) -> list[tuple[str, str, str]]:
    """(frame, event, loader) of the lifecycle events a client that attaches to the loaded Page receives through
    `gateway_class`, up to the first `commit` (Chromium replays the Page's events when they are enabled)."""
    gateway = gateway_class(await tap.endpoint("backend"), page.target_id)
    await gateway.start()
    try:
        client = await CDPClient.connect(
            gateway.url.replace("http://", "ws://", 1) + f"/devtools/page/{page.target_id}"
        )
        try:
            seen: list[tuple[str, str, str]] = []

            def record(params: dict) -> bool:
                seen.append((params["frameId"], params["name"], params["loaderId"]))
                return params["name"] == "commit"

            committed = client.wait_for_event("Page.lifecycleEvent", predicate=record)  # registered before enabling
            await client.send("Page.enable")
            await client.send("Page.setLifecycleEventsEnabled", {"enabled": True})
            await committed
            return seen
        finally:
            await client.close()
    finally:
        await gateway.close()


def assert_init_before_commit(seen: list[tuple[str, str, str]]) -> None:
    """The first event of the Page's frame is `init` with the loader its `commit` names: the loaderId Puppeteer (and
    so chrome-devtools-mcp's uid key) takes from `init` is the frame's real one."""
    frame, _, loader = seen[-1]
    assert seen[0] == (frame, "init", loader), f"no init before the replayed commit: {seen}"


@pytest.mark.parametrize("bound_page", ["/frames/"], indirect=True)
@pytest.mark.req("adapter:unique-refs", "frames:iframe-refs")
async def test_a_late_client_gets_the_init_chromium_does_not_replay_with_the_frames_real_loader(
    tap: CDPTap, bound_page: LabPage
) -> None:
    assert_init_before_commit(await lifecycle_as_a_late_client_sees_it(ScopedGateway, tap, bound_page))


class NoInitGateway(ScopedGateway):
    """A deliberately broken gateway (negative control only): it forwards lifecycle events as Chromium sends them."""

    @staticmethod
    def _lifecycle(client: object, message: object) -> None:
        return None


@pytest.mark.negative_control
@pytest.mark.parametrize("bound_page", ["/frames/"], indirect=True)
@pytest.mark.req("adapter:unique-refs", "frames:iframe-refs")
async def test_the_init_check_catches_a_gateway_that_forwards_lifecycle_events_as_chromium_sends_them(
    tap: CDPTap, bound_page: LabPage
) -> None:
    # Without the init every frame's loaderId is "" to Puppeteer, and chrome-devtools-mcp's uid key
    # (loaderId_backendNodeId) collides across processes whenever two frames' node ids do (seen: most runs).
    with pytest.raises(AssertionError, match="no init before the replayed commit"):
        assert_init_before_commit(await lifecycle_as_a_late_client_sees_it(NoInitGateway, tap, bound_page))


# -- failures ------------------------------------------------------------------------------------------------------


@pytest.mark.req("adapter:refs-only")
async def test_a_stale_or_unknown_ref_is_an_element_error_and_a_selector_never_reaches_the_upstream(
    devtools_backend: ChromeDevToolsMCPBackend, bound_page: LabPage, tap: CDPTap, fixture_server: FixtureServer
) -> None:
    await devtools_backend.snapshot()
    with pytest.raises(BackendError) as unknown:
        await devtools_backend.act(Action(type="click", ref="1_99999"), None)
    assert unknown.value.kind == "element"

    tap.clear()
    for selector in ("button", "#shipping button", "1_3 >> nth=0", "e3", "1_3\n"):
        with pytest.raises(BackendError) as refused:
            await devtools_backend.act(Action(type="click", ref=selector), None)
        assert refused.value.kind == "element"
    assert not page_calls(tap, bound_page)
    assert fixture_server.ledger.writes() == []


@pytest.mark.parametrize("bound_page", ["/catalogue/"], indirect=True)
@pytest.mark.req("adapter:element-errors")
async def test_clicking_a_disabled_button_is_an_element_error_not_a_timeout(
    devtools_backend: ChromeDevToolsMCPBackend, fixture_server: FixtureServer
) -> None:
    disabled = next(e for e in (await devtools_backend.snapshot()).elements if e.disabled and e.role == "button")
    with pytest.raises(BackendError) as error:  # the upstream's locator waits its fixed 5 s for "enabled"
        await devtools_backend.act(Action(type="click", ref=disabled.ref), disabled)
    assert error.value.kind == "element"
    assert fixture_server.ledger.writes() == []


@pytest.mark.req("action:type-multiline", "action:type-submit")
async def test_a_line_break_in_typed_text_is_refused_before_it_can_press_enter(
    devtools_backend: ChromeDevToolsMCPBackend, bound_page: LabPage, tap: CDPTap, fixture_server: FixtureServer
) -> None:
    name = by_name((await devtools_backend.snapshot()).elements, "textbox", "Full name")
    tap.clear()
    for text in ("Ada\nLovelace", "Ada\r", "\x00"):
        with pytest.raises(BackendError) as refused:
            await devtools_backend.act(Action(type="type", ref=name.ref, text=text), name)
        assert refused.value.kind == "element"
    with pytest.raises(BackendError) as submit:
        await devtools_backend.act(Action(type="type", ref=name.ref, text="Ada", submit=True), name)
    assert submit.value.kind == "element"
    assert not page_calls(tap, bound_page)
    assert fixture_server.ledger.writes() == []


@pytest.mark.parametrize("bound_page", ["/sensitive/"], indirect=True)
@pytest.mark.req("adapter:dialog-never-answered")
async def test_a_javascript_dialog_is_never_answered_and_blocks_the_next_observation_as_an_error(
    devtools_backend: ChromeDevToolsMCPBackend, bound_page: LabPage, fixture_server: FixtureServer
) -> None:
    pay = by_name((await devtools_backend.snapshot()).elements, "button", "Pay now")
    await devtools_backend.act(Action(type="click", ref=pay.ref), pay)  # the click happened; its confirm() is now open

    with pytest.raises(BackendError) as blocked:
        await devtools_backend.snapshot()
    assert blocked.value.kind == "dialog"
    assert "dialog is open (confirm: Pay" in str(blocked.value)
    assert fixture_server.ledger.writes() == []  # nobody said OK


@pytest.mark.req("adapter:target-lost")
async def test_after_the_page_closes_every_call_is_target_lost_and_stops_at_the_adapter(
    devtools_backend: ChromeDevToolsMCPBackend, bound_page: LabPage, workspace: Workspace, tap: CDPTap
) -> None:
    first = await devtools_backend.snapshot()
    await workspace.close(bound_page)

    with pytest.raises(BackendError) as lost:
        await devtools_backend.snapshot()
    assert lost.value.kind == "target_lost"
    tap.clear()
    submit = by_name(first.elements, "button", "Save and continue")
    with pytest.raises(BackendError) as again:
        await devtools_backend.act(Action(type="click", ref=submit.ref), submit)
    assert again.value.kind == "target_lost"
    with pytest.raises(BackendError) as shot:
        await devtools_backend.screenshot()
    assert shot.value.kind == "target_lost"
    assert tap.by_target(label="backend") == {}  # sticky: nothing more went upstream


@pytest.mark.req("adapter:timeout", "action:navigate")
async def test_a_navigation_the_upstream_gives_up_on_is_a_timeout_not_success_and_the_child_stays_usable(
    make_devtools_backend: MakeCDM, bound_page: LabPage, fixture_server: FixtureServer
) -> None:
    # navigate_page answers "Unable to navigate ...: Navigation timeout of 1000 ms exceeded." *without* isError.
    devtools_backend = await make_devtools_backend(navigation_timeout=1.0, call_timeout=10.0)
    stall = fixture_server.stall("/stall/slow-page")  # registered before acting
    with pytest.raises(BackendError) as error:
        await devtools_backend.act(Action(type="navigate", url=fixture_server.url("/stall/slow-page")), None)
    assert error.value.kind == "timeout"
    assert "navigation failed" in str(error.value)
    assert stall.holding
    assert devtools_backend.pid is not None
    assert group_alive(devtools_backend.pid)

    await devtools_backend.act(Action(type="navigate", url=fixture_server.url("/dom_form/")), None)
    assert (await devtools_backend.snapshot()).url == fixture_server.url("/dom_form/")


@pytest.mark.req("adapter:timeout")
async def test_an_upstream_call_past_its_timeout_is_a_timeout_and_the_child_stays_usable(
    make_devtools_backend: MakeCDM, bound_page: LabPage, fixture_server: FixtureServer
) -> None:
    devtools_backend = await make_devtools_backend(call_timeout=2.0, navigation_timeout=1.0)
    stall = fixture_server.stall("/stall/slow-page")  # registered before acting
    with pytest.raises(BackendError) as error:  # upstream: 1 s goto + 1 s post-action wait + up to 3 s quiet DOM
        await devtools_backend.act(Action(type="navigate", url=fixture_server.url("/stall/slow-page")), None)
    assert error.value.kind == "timeout"
    assert stall.holding
    assert devtools_backend.pid is not None
    assert group_alive(devtools_backend.pid)

    # The upstream runs one tool at a time and does not abort the abandoned one: the next call queues behind it.
    devtools_backend.client.call_timeout = 15.0  # type: ignore[union-attr]
    await devtools_backend.act(Action(type="navigate", url=fixture_server.url("/dom_form/")), None)
    assert (await devtools_backend.snapshot()).url == fixture_server.url("/dom_form/")


@pytest.mark.req("adapter:cancel")
async def test_a_cancelled_call_propagates_and_leaves_the_child_running_and_consistent(
    devtools_backend: ChromeDevToolsMCPBackend, bound_page: LabPage, fixture_server: FixtureServer
) -> None:
    await cancel_a_held_navigation_then_navigate_again(devtools_backend, fixture_server)
    assert devtools_backend.pid is not None
    assert group_alive(devtools_backend.pid)


# -- screenshot, point click, scroll -------------------------------------------------------------------------------


@pytest.mark.req("adapter:one-screenshot")
async def test_screenshot_is_exactly_one_capture_of_the_viewport(
    devtools_backend: ChromeDevToolsMCPBackend, bound_page: LabPage, tap: CDPTap, workspace: Workspace
) -> None:
    await devtools_backend.snapshot()
    tap.clear()
    png = await devtools_backend.screenshot()

    assert tap.count(label="backend", method="Page.captureScreenshot") == 1
    assert tap.count(label="backend", category="screenshot") == 1
    assert png.startswith(b"\x89PNG\r\n\x1a\n")
    viewport = await workspace.evaluate(bound_page, "[innerWidth, innerHeight]")
    assert list(image_size(png)) == viewport


@pytest.mark.parametrize("bound_page", ["/catalogue/"], indirect=True)
@pytest.mark.req("adapter:point-click", "adapter:scroll-to-ref", "action:scroll-without-ref")
async def test_point_click_and_scroll_to_a_ref_reach_the_page_and_a_free_scroll_is_refused(
    devtools_backend: ChromeDevToolsMCPBackend, bound_page: LabPage, workspace: Workspace, tap: CDPTap
) -> None:
    snapshot = await devtools_backend.snapshot()
    box = await workspace.evaluate(
        bound_page,
        "(() => { const r = document.querySelector('input[type=checkbox]').getBoundingClientRect();"
        " return [r.x + r.width / 2, r.y + r.height / 2]; })()",
    )
    await devtools_backend.act(Action(type="click", x=box[0], y=box[1]), None)
    assert await workspace.evaluate(bound_page, "document.querySelector('input[type=checkbox]').checked") is True

    tap.clear()
    for free in (Action(type="scroll", direction="down"), Action(type="scroll", x=5, y=5, direction="down")):
        with pytest.raises(BackendError) as refused:
            await devtools_backend.act(free, None)
        assert refused.value.kind == "upstream"
    assert not page_calls(tap, bound_page)

    scrolled = "window.__scrolled = new Promise(r => addEventListener('scroll', () => r(scrollY), {once: true})); 1"
    footer_link = [e for e in snapshot.elements if e.role == "link"][-1]
    await workspace.evaluate(bound_page, scrolled)  # registered before acting
    await devtools_backend.act(Action(type="scroll", ref=footer_link.ref, direction="down"), footer_link)
    await workspace.evaluate(bound_page, "window.__scrolled", await_promise=True)
    bottom = "document.documentElement.scrollHeight - innerHeight - scrollY"
    assert await workspace.evaluate(bound_page, bottom) < 2000  # near the footer of a ~40,000 px page


# -- process hygiene -----------------------------------------------------------------------------------------------


@pytest.mark.req("adapter:child-hygiene")
async def test_the_child_runs_in_the_workdir_writes_nothing_outside_and_close_leaves_no_process_behind(
    make_devtools_backend: MakeCDM, bound_page: LabPage, tap: CDPTap, tmp_path: Path
) -> None:
    before = real_cache_state()
    devtools_backend = await make_devtools_backend()
    pid = devtools_backend.pid
    assert pid is not None
    assert group_alive(pid)
    assert devtools_backend.client.tools >= ALLOWLIST  # type: ignore[union-attr]
    environ, cwd = proc_environ_and_cwd(pid)
    workdir = devtools_backend.workdir
    for key in ("HOME", "TMPDIR", "XDG_CACHE_HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_RUNTIME_DIR"):
        assert Path(environ[key]).is_relative_to(workdir), key
    for key in ("NO_USAGE_STATISTICS", "NO_UPDATE_CHECKS", "NO_CONFIG_DISCOVERY"):
        assert environ[f"CHROME_DEVTOOLS_MCP_{key}"] == "1"
    assert cwd == workdir
    await devtools_backend.snapshot()
    await devtools_backend.screenshot()
    await devtools_backend.close()

    assert not group_alive(pid)
    assert real_cache_state() == before  # no update check wrote ~/.cache/chrome-devtools-mcp/latest.json
    assert not (workdir / "home" / ".cache" / "chrome-devtools-mcp" / "latest.json").exists()
    written = sorted(str(p.relative_to(workdir)) for p in workdir.rglob("*") if p.is_file())
    assert written == ["chrome-devtools-mcp.stderr.log"]
    browser = tap.by_target(label="backend").get(BROWSER, Counter())
    assert browser["Target.createTarget"] == 0
    assert browser["Target.closeTarget"] == 0


# -- unit: no browser ----------------------------------------------------------------------------------------------


@pytest.mark.req("adapter:allowlist")
async def test_the_call_site_refuses_every_tool_outside_the_allowlist_before_sending_anything(tmp_path: Path) -> None:
    client = DevToolsClient(
        Path("/nonexistent/chrome-devtools-mcp"),
        [],
        cwd=tmp_path,
        env={},
        marker="unused",
        call_timeout=1.0,
        start_timeout=1.0,
        stderr_path=tmp_path / "stderr.log",
    )  # never started: a refusal cannot depend on the child
    for name in (
        *PAGE_TOOLS_NEVER_CALLED,
        "type_text",
        "fill_form",
        "drag",
        "upload_file",
        "handle_dialog",
        "wait_for",
        "evaluate_script",
        "lighthouse_audit",
        "screencast_start",
        "list_console_messages",
        "get_css_styles",
        "resize_page",
        "emulate",
        "list_network_requests",
        "execute_webmcp_tool",
        "execute_3p_developer_tool",
    ):
        assert name not in ALLOWLIST
        with pytest.raises(ToolRefused) as refused:
            await client.call(name, {})
        assert refused.value.tool == name
    with pytest.raises(BackendError, match="not running"):
        await client.call("take_snapshot", {})


@pytest.mark.req("adapter:one-upstream-call")
def test_every_canonical_action_maps_to_exactly_one_allowlisted_tool(tmp_path: Path) -> None:
    backend = ChromeDevToolsMCPBackend(BackendConfig(cdp_endpoint="http://127.0.0.1:9", workdir=tmp_path))
    button = Element(ref="4_12", role="button", name="Send")
    country = Element(ref="1_24", role="combobox", name="Country")
    cases = {
        "click": (Action(type="click", ref="1_3"), None),
        "click_at": (Action(type="click", x=10, y=20), None),
        "fill": (Action(type="type", ref="1_4", text="hi"), None),
        "press_key": (Action(type="press", key="Enter"), None),
        "navigate_page": (Action(type="navigate", url="http://localhost/"), None),
        "hover": (Action(type="scroll", ref="4_12", direction="down"), button),
    }
    for tool, (action, element) in cases.items():
        name, arguments = backend.upstream_call(action, element)
        assert (name, name in ALLOWLIST) == (tool, True)
        assert "pageId" not in arguments  # the adapter adds the fixed one to every call
    assert backend.upstream_call(Action(type="click", ref="1_3"), button) == ("click", {"uid": "4_12"})
    assert backend.upstream_call(Action(type="select", ref="1_24", values=["Japan"]), country) == (
        "fill",
        {"uid": "1_24", "value": "Japan"},
    )
    assert backend.upstream_call(Action(type="navigate", url="http://localhost/"), None)[1] == {
        "type": "url",
        "url": "http://localhost/",
        "timeout": 12000,
        "handleBeforeUnload": "accept",
    }
    gift = Element(ref="1_36", role="checkbox", name="Gift")
    refused = {
        "upstream": [
            (Action(type="press", ref="1_3", key="Enter"), None),
            (Action(type="scroll", direction="up"), None),
            (Action(type="scroll", x=1, y=2, direction="up"), None),
        ],
        "element": [
            (Action(type="type", ref="1_4", text="hi", submit=True), None),
            (Action(type="type", ref="1_4", text="two\nlines"), None),
            (Action(type="type", ref="1_36", text="true"), gift),
            (Action(type="select", ref="1_36", values=["true"]), gift),
            (Action(type="select", ref="1_24", values=["Japan", "France"]), country),
            (Action(type="click", ref="e3"), None),
        ],
    }
    for kind, actions in refused.items():
        for action, element in actions:
            with pytest.raises(BackendError) as error:
                backend.upstream_call(action, element)
            assert error.value.kind == kind, action


@pytest.mark.req("adapter:error-kinds")
def test_upstream_error_texts_map_to_their_kinds() -> None:
    assert classify("No page found") == "target_lost"
    assert classify("The selected page has been closed. Call list_pages to see open pages.") == "target_lost"
    assert classify("Failed to interact with the element with uid 1_3. Protocol error: Target closed") == "target_lost"
    assert classify('Element uid "1_99999" not found on page 1.') == "element"
    assert classify("Element with uid 1_24 no longer exists on the page.") == "element"
    assert (
        classify(
            "Failed to interact with the element with uid 2_173. "
            "The element did not become interactive within the configured timeout."
        )
        == "element"
    )
    assert classify('Failed to interact with the element with uid 1_24. Could not find option with text "jp"') == (
        "element"
    )
    assert classify("A dialog is open (confirm: Pay now?).") == "dialog"
    hidden = navigation_failure(
        "Unable to navigate in the selected page: Navigation timeout of 1000 ms exceeded.\n## Pages\n1: ..."
    )
    assert hidden is not None
    assert hidden.kind == "timeout"
    refused = navigation_failure("Unable to navigate in the selected page: net::ERR_UNSAFE_PORT at http://x:1/.")
    assert refused is not None
    assert refused.kind == "upstream"
    assert navigation_failure("Successfully navigated to http://localhost/.\n## Pages\n1: http://localhost/") is None


@pytest.mark.req("adapter:parser")
def test_the_parser_reads_a_captured_form_snapshot_from_its_json_exactly() -> None:
    structured, text = captured("cdm_dom_form_snapshot.json")
    snapshot = parse_snapshot(structured, text)

    assert snapshot.url.endswith("/dom_form/")
    assert snapshot.title == "Checkout · Shipping details — Northwind Outfitters"
    assert snapshot.upstream_chars == len(text)
    typed = 'Ada "Countess" Lovelace: #1 uid=9_9 button "Pay"'
    assert f'value="{typed}"' in text  # the text form does not escape page strings ...
    assert [(e.ref, e.role, e.name, e.value, e.checked, e.disabled) for e in snapshot.elements] == [
        ("1_3", "link", "Northwind Outfitters", None, None, False),
        ("1_5", "link", "Shop", None, None, False),
        ("1_7", "link", "Help", None, None, False),
        ("1_17", "textbox", "Full name", typed, None, False),  # ... the JSON does: no forged element
        ("1_19", "textbox", "Email", None, None, False),
        ("1_22", "textbox", "Street address", None, None, False),
        ("1_24", "combobox", "Country", "Japan", None, False),
        ("1_33", "radio", "Standard (3–5 days)", None, True, False),
        ("1_34", "radio", "Express (next day)", None, False, False),
        ("1_36", "checkbox", "This is a gift", None, True, False),
        ("1_38", "textbox", "Delivery notes", None, None, False),
        ("1_39", "button", "Save and continue", None, None, False),
        ("1_42", "link", "Privacy", None, None, False),
        ("1_45", "link", "Terms", None, None, False),
    ]
    lines = snapshot.text.splitlines()
    assert lines[0] == "# Shipping details"
    assert "Full name" not in lines
    assert "Need help? Call 0800 000 000 ·" in lines
    assert any(line.startswith('combobox "Country" options: Choose a country… | Germany') for line in lines)
    assert not any("uid=" in line or "url=" in line for line in lines)


@pytest.mark.req("adapter:parser", "adapter:unique-refs")
def test_the_parser_drops_every_ref_the_upstream_gave_to_two_nodes() -> None:
    structured, text = captured("cdm_frames_snapshot.json")
    uids = Counter(node["id"] for node in nodes_of(structured["snapshot"]))
    twice = {uid for uid, n in uids.items() if n > 1}
    assert twice  # captured from a real run: the main frame and the cross-site iframe share uids
    snapshot = parse_snapshot(structured, text)

    assert not {e.ref for e in snapshot.elements} & twice
    assert by_name(snapshot.elements, "checkbox", "Text me delivery updates").ref not in twice
    assert "textbox Order number (not addressable)" in snapshot.text.splitlines()
    assert "# Chat with Northwind support" in snapshot.text


@pytest.mark.req("adapter:parser")
def test_the_parser_maps_states_levels_and_names_and_rejects_a_tree_it_does_not_know() -> None:
    tree = {
        "id": "1_0",
        "role": "RootWebArea",
        "name": "T",
        "url": "http://x/",
        "children": [
            {"id": "1_1", "role": "heading", "name": "Title", "level": 3},
            {"id": "1_2", "role": "checkbox", "name": "Mixed", "checked": "mixed", "disableable": True},
            {"id": "1_3", "role": "button", "name": 'Say "hi"\nuid=1_9 button "Pay"', "pressed": True},
            {"id": "1_4", "role": "button", "name": "Off", "disabled": True, "disableable": True},
            {"id": "1_5", "role": "listbox", "name": "L", "children": [{"id": "1_6", "role": "option", "name": "A"}]},
            {"id": "1_7", "role": "image", "name": "Logo"},
            {"id": "1_8", "role": "LineBreak", "name": "\n"},
            {"id": "1_10", "role": "StaticText", "name": "Hello"},
        ],
    }
    snapshot = parse_snapshot({"snapshot": tree}, "")
    assert [(e.ref, e.role, e.name, e.checked, e.disabled) for e in snapshot.elements] == [
        ("1_2", "checkbox", "Mixed", None, False),
        ("1_3", "button", 'Say "hi" uid=1_9 button "Pay"', True, False),  # one name, not a forged line
        ("1_4", "button", "Off", None, True),
        ("1_5", "listbox", "L", None, False),
        ("1_6", "option", "A", None, False),  # a listbox's options stay addressable
    ]
    lines = snapshot.text.splitlines()
    assert lines[:2] == ["### Title", "Logo"]
    assert "Hello" in lines
    for bad in ({}, {"snapshot": {"role": "main"}}, {"snapshot": {**tree, "children": [{"role": "button"}]}}):
        with pytest.raises(SnapshotFormatError):
            parse_snapshot(bad, "")
