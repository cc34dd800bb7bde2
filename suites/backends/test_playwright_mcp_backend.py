"""PlaywrightMCPBackend against real Chromium and the real, pinned @playwright/mcp 0.0.83.

The backend is connected straight to a tap endpoint (no scoped gateway yet) with exactly one page open, so every
CDP call it causes is counted on that page. Writes are proven by the fixture server's ledger, never by what the
upstream says. Unit tests at the end need no browser: the allowlist, the action mapping and the snapshot parser
(on answers captured from real runs, `suites/backends/data/`).
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import allure
import pytest

from backends.playwright_mcp import ALLOWLIST, PlaywrightMCPBackend, ToolRefused
from backends.playwright_mcp.client import PlaywrightClient, group_alive
from backends.playwright_mcp.errors import classify
from backends.playwright_mcp.snapshot import REF, parse_aria, parse_snapshot_answer
from fixtures_sites.server import FixtureServer
from lab.tap import BROWSER, CDPTap
from lab.tokens import count_text, image_size
from lab.workspace import LabPage, Workspace
from runtime.backend import BackendConfig, BackendError, Element
from runtime.models import Action
from suites.backends.conftest import MakeBackend, cancel_a_held_navigation_then_navigate_again, observation_of
from suites.proofs import record_cost

pytestmark = pytest.mark.req(backend="playwright_mcp")

DATA = Path(__file__).parent / "data"


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


def exists(path: Path) -> bool:
    return path.exists()


def proc_environ_and_cwd(pid: int) -> tuple[dict[str, str], Path]:
    raw = Path(f"/proc/{pid}/environ").read_bytes().decode()
    return dict(item.split("=", 1) for item in raw.split("\0") if "=" in item), Path(f"/proc/{pid}/cwd").resolve()


# -- observation ---------------------------------------------------------------------------------------------------


@pytest.mark.req("adapter:snapshot")
async def test_snapshot_of_the_form_lists_its_controls_with_roles_names_state_and_its_text(
    playwright_backend: PlaywrightMCPBackend, bound_page: LabPage, tap: CDPTap
) -> None:
    snapshot = await playwright_backend.snapshot()

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
    assert all(REF.fullmatch(e.ref) for e in elements)
    assert len({e.ref for e in elements}) == len(elements)
    # Document order: the name field comes before the submit button.
    order = [e.name for e in elements]
    assert order.index("Full name") < order.index("Country") < order.index("Save and continue")
    assert "# Shipping details" in snapshot.text
    assert "Delivery speed" in snapshot.text
    assert "Japan" in snapshot.text  # the select's options are readable
    assert "/catalogue/" not in snapshot.text  # link URLs are noise, not text
    assert snapshot.upstream_chars > len("".join(observation_of(snapshot)))
    assert tap.count(label="backend", category="screenshot") == 0


@pytest.mark.req("adapter:one-write")
async def test_type_select_and_click_make_exactly_one_write_with_the_typed_values_and_no_screenshot(
    playwright_backend: PlaywrightMCPBackend, bound_page: LabPage, tap: CDPTap, fixture_server: FixtureServer
) -> None:
    calls: dict[str, Counter[str]] = {}
    snapshot = await playwright_backend.snapshot()  # the first call also attaches Playwright to the page
    calls["first snapshot (attach)"] = page_calls(tap, bound_page)
    tap.clear()
    snapshot = await playwright_backend.snapshot()
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
        await playwright_backend.act(action, element)
        calls[label] = page_calls(tap, bound_page)
    form = (await submitted).form()

    assert form["full_name"] == "Ada Lovelace"
    assert form["country"] == "jp"
    assert len(fixture_server.ledger.writes("/dom_form/submit")) == 1
    tap.clear()
    after = await playwright_backend.snapshot()
    calls["snapshot after submit"] = page_calls(tap, bound_page)
    assert after.url == fixture_server.url("/dom_form/submit")
    assert "Order details saved" in after.text
    assert len(fixture_server.ledger.writes("/dom_form/submit")) == 1
    figures("playwright_mcp CDP calls on the page per flow", calls)
    # Ordinary DOM flows: no pixels leave the page, nothing is focused, only the click and type send input.
    for flow, counter in calls.items():
        assert not any(m in counter for m in ("Page.captureScreenshot", "Page.startScreencast")), flow
        assert "Page.bringToFront" not in counter, flow
        assert "Emulation.setFocusEmulationEnabled" not in counter, flow
    assert calls["snapshot"]
    assert set(calls["snapshot"]) <= {"Runtime.callFunctionOn", "Runtime.evaluate"}
    assert calls["click"]["Input.dispatchMouseEvent"] == 3  # move, down, up: one click
    assert calls["type"]["Input.insertText"] == 1
    assert not any(m.startswith("Input.") for m in calls["select"])


@pytest.mark.req("adapter:compact-snapshot")
async def test_catalogue_snapshot_parses_hundreds_of_elements_in_far_fewer_tokens(
    playwright_backend: PlaywrightMCPBackend, fixture_server: FixtureServer
) -> None:
    await playwright_backend.act(Action(type="navigate", url=fixture_server.url("/catalogue/")), None)
    snapshot = await playwright_backend.snapshot()
    raw = "\n".join(c.text for c in (await playwright_backend.client.call("browser_snapshot", {})).content)  # type: ignore[union-attr]

    assert snapshot.url == fixture_server.url("/catalogue/")
    roles = Counter(e.role for e in snapshot.elements)
    assert len(snapshot.elements) > 900
    assert roles["button"] >= 300  # an "Add to cart" (or disabled "Out of stock") per product
    assert len([e for e in snapshot.elements if e.name == "Out of stock" and e.disabled]) >= 1
    assert abs(snapshot.upstream_chars - len(raw)) < 100  # same page, same answer modulo nothing
    raw_tokens, ours = count_text(raw), sum(map(count_text, observation_of(parse_snapshot_answer(raw))))
    figures(
        "catalogue snapshot tokens (o200k)",
        {"raw browser_snapshot": Counter(t=raw_tokens), "our observation": Counter(t=ours)},
    )
    record_cost("observe-raw-catalogue-playwright_mcp", {"raw_tokens": raw_tokens, "normalized_tokens": ours})
    assert ours * 4 < raw_tokens


# -- failures ------------------------------------------------------------------------------------------------------


@pytest.mark.req("adapter:refs-only")
async def test_a_stale_or_unknown_ref_is_an_element_error_and_a_selector_never_reaches_the_upstream(
    playwright_backend: PlaywrightMCPBackend, bound_page: LabPage, tap: CDPTap, fixture_server: FixtureServer
) -> None:
    await playwright_backend.snapshot()
    with pytest.raises(BackendError) as unknown:
        await playwright_backend.act(Action(type="click", ref="e99999"), None)
    assert unknown.value.kind == "element"

    tap.clear()
    for selector in ("button", "text=Save and continue", "#shipping button", "e1 >> nth=0"):
        with pytest.raises(BackendError) as refused:
            await playwright_backend.act(Action(type="click", ref=selector), None)
        assert refused.value.kind == "element"
    assert not page_calls(tap, bound_page)
    assert fixture_server.ledger.writes() == []


@pytest.mark.parametrize("bound_page", ["/catalogue/"], indirect=True)
@pytest.mark.req("adapter:element-errors")
async def test_clicking_a_disabled_button_is_an_element_error_not_a_timeout(
    bound_page: LabPage, make_backend: MakeBackend, fixture_server: FixtureServer
) -> None:
    playwright_backend = await make_backend(action_timeout=1.0)
    disabled = next(e for e in (await playwright_backend.snapshot()).elements if e.disabled and e.role == "button")
    with pytest.raises(BackendError) as error:
        await playwright_backend.act(Action(type="click", ref=disabled.ref), disabled)
    assert error.value.kind == "element"
    assert fixture_server.ledger.writes() == []


@pytest.mark.parametrize("bound_page", ["/sensitive/"], indirect=True)
@pytest.mark.req("adapter:dialog-never-answered")
async def test_a_javascript_dialog_is_never_answered_and_blocks_the_next_observation_as_an_error(
    playwright_backend: PlaywrightMCPBackend, fixture_server: FixtureServer
) -> None:
    pay = by_name((await playwright_backend.snapshot()).elements, "button", "Pay now")
    await playwright_backend.act(
        Action(type="click", ref=pay.ref), pay
    )  # the click happened; its confirm() is now open

    with pytest.raises(BackendError) as blocked:  # the snapshot tool refuses while a modal is open
        await playwright_backend.snapshot()
    assert blocked.value.kind == "dialog"
    assert "modal state" in str(blocked.value)
    assert fixture_server.ledger.writes() == []  # nobody said OK (browser_handle_dialog is not allowlisted)


@pytest.mark.req("adapter:target-lost")
async def test_after_the_page_closes_every_call_is_target_lost_and_stops_at_the_adapter(
    playwright_backend: PlaywrightMCPBackend, bound_page: LabPage, workspace: Workspace, tap: CDPTap
) -> None:
    first = await playwright_backend.snapshot()
    await workspace.close(bound_page)

    with pytest.raises(BackendError) as lost:
        await playwright_backend.snapshot()
    assert lost.value.kind == "target_lost"
    tap.clear()
    submit = by_name(first.elements, "button", "Save and continue")
    with pytest.raises(BackendError) as again:
        await playwright_backend.act(Action(type="click", ref=submit.ref), submit)
    assert again.value.kind == "target_lost"
    with pytest.raises(BackendError) as shot:
        await playwright_backend.screenshot()
    assert shot.value.kind == "target_lost"
    assert tap.by_target(label="backend") == {}  # sticky: nothing more went upstream


@pytest.mark.req("adapter:timeout")
async def test_an_upstream_call_past_its_timeout_is_a_timeout_and_the_child_stays_usable(
    bound_page: LabPage, make_backend: MakeBackend, fixture_server: FixtureServer
) -> None:
    playwright_backend = await make_backend(call_timeout=2.0)
    stall = fixture_server.stall("/stall/slow-page")  # registered before acting
    with pytest.raises(BackendError) as error:
        await playwright_backend.act(Action(type="navigate", url=fixture_server.url("/stall/slow-page")), None)
    assert error.value.kind == "timeout"
    assert stall.holding
    assert playwright_backend.pid is not None
    assert group_alive(playwright_backend.pid)

    # The abandoned navigation is still pending upstream (the page keeps waiting for the held answer); a new one
    # supersedes it. (Released instead, it would commit and interrupt whatever navigation came next.)
    await playwright_backend.act(Action(type="navigate", url=fixture_server.url("/dom_form/")), None)
    assert (await playwright_backend.snapshot()).url == fixture_server.url("/dom_form/")
    assert stall.holding


@pytest.mark.req("adapter:cancel")
async def test_a_cancelled_call_propagates_and_leaves_the_child_running_and_consistent(
    playwright_backend: PlaywrightMCPBackend, bound_page: LabPage, fixture_server: FixtureServer
) -> None:
    await cancel_a_held_navigation_then_navigate_again(playwright_backend, fixture_server)
    assert playwright_backend.pid is not None
    assert group_alive(playwright_backend.pid)


# -- screenshot ----------------------------------------------------------------------------------------------------


@pytest.mark.req("adapter:one-screenshot")
async def test_screenshot_is_exactly_one_capture_of_the_viewport(
    playwright_backend: PlaywrightMCPBackend, bound_page: LabPage, tap: CDPTap, workspace: Workspace
) -> None:
    await playwright_backend.snapshot()
    tap.clear()
    png = await playwright_backend.screenshot()

    assert tap.count(label="backend", method="Page.captureScreenshot") == 1
    assert tap.count(label="backend", category="screenshot") == 1
    assert png.startswith(b"\x89PNG\r\n\x1a\n")
    viewport = await workspace.evaluate(bound_page, "[innerWidth, innerHeight]")
    assert list(image_size(png)) == viewport


# -- process hygiene -----------------------------------------------------------------------------------------------


@pytest.mark.req("adapter:child-hygiene")
async def test_the_child_runs_in_the_workdir_and_close_leaves_no_process_behind(
    bound_page: LabPage, tap: CDPTap, tmp_path: Path
) -> None:
    workdir = tmp_path / "private"
    playwright_backend = PlaywrightMCPBackend(
        BackendConfig(cdp_endpoint=await tap.endpoint("backend"), workdir=workdir)
    )
    await playwright_backend.start()
    try:
        pid = playwright_backend.pid
        assert pid is not None
        assert group_alive(pid)
        assert playwright_backend.client.tools >= ALLOWLIST  # type: ignore[union-attr]
        environ, cwd = proc_environ_and_cwd(pid)
        for key in ("HOME", "TMPDIR", "XDG_CACHE_HOME"):
            assert Path(environ[key]).is_relative_to(workdir), key
        assert cwd == workdir.resolve()
        sockets = Path(environ["PWTEST_SOCKETS_DIR"])  # short enough for a unix socket path, private
        assert sockets.is_relative_to(workdir) or sockets.name.startswith("cu-pw-")
        await playwright_backend.snapshot()
        await playwright_backend.screenshot()
    finally:
        await playwright_backend.close()
    assert not group_alive(pid)
    assert sockets.is_relative_to(workdir) or not exists(sockets)
    assert not (Path.cwd() / ".playwright-mcp").exists()
    assert any((workdir / "cache").rglob("*")), "the upstream's registry file belongs in the private cache"
    assert tap.by_target(label="backend").get(BROWSER, Counter())["Target.createTarget"] == 0


# -- unit: no browser ----------------------------------------------------------------------------------------------


@pytest.mark.req("adapter:allowlist")
async def test_the_call_site_refuses_every_tool_outside_the_allowlist_before_sending_anything(tmp_path: Path) -> None:
    client = PlaywrightClient(
        Path("/nonexistent/playwright-mcp"),
        [],
        cwd=tmp_path,
        env={},
        marker="unused",
        call_timeout=1.0,
        start_timeout=1.0,
        stderr_path=tmp_path / "stderr.log",
    )  # never started: a refusal cannot depend on the child
    for name in (
        "browser_run_code_unsafe",
        "browser_evaluate",
        "browser_tabs",
        "browser_close",
        "browser_file_upload",
        "browser_network_requests",
        "browser_console_messages",
        "browser_handle_dialog",
        "some_webmcp_tool",
    ):
        assert name not in ALLOWLIST
        with pytest.raises(ToolRefused) as refused:
            await client.call(name, {})
        assert refused.value.tool == name
    with pytest.raises(BackendError, match="not running"):
        await client.call("browser_snapshot", {})


@pytest.mark.req("adapter:one-upstream-call")
def test_every_canonical_action_maps_to_exactly_one_allowlisted_tool(tmp_path: Path) -> None:
    backend = PlaywrightMCPBackend(BackendConfig(cdp_endpoint="http://127.0.0.1:9", workdir=tmp_path))
    button = Element(ref="f1e3", role="button", name="Send")
    cases = {
        "browser_click": (Action(type="click", ref="e3"), None),
        "browser_mouse_click_xy": (Action(type="click", x=10, y=20), None),
        "browser_type": (Action(type="type", ref="e4", text="hi", submit=True), None),
        "browser_press_key": (Action(type="press", key="Enter"), None),
        "browser_select_option": (Action(type="select", ref="e5", values=["jp"]), None),
        "browser_navigate": (Action(type="navigate", url="http://localhost/"), None),
        "browser_mouse_wheel": (Action(type="scroll", direction="down"), None),
        "browser_hover": (Action(type="scroll", ref="f1e3", direction="down"), button),
    }
    for tool, (action, element) in cases.items():
        name, _arguments = backend.upstream_call(action, element)
        assert (name, name in ALLOWLIST) == (tool, True)
    assert backend.upstream_call(Action(type="click", ref="e3"), button) == ("browser_click", {"target": "f1e3"})
    assert backend.upstream_call(Action(type="scroll", direction="up"), None)[1] == {"deltaX": 0, "deltaY": -600}
    for unsupported in (Action(type="press", ref="e3", key="Enter"), Action(type="scroll", x=1, y=2, direction="up")):
        with pytest.raises(BackendError) as error:
            backend.upstream_call(unsupported, None)
        assert error.value.kind == "upstream"


@pytest.mark.req("adapter:error-kinds")
def test_upstream_error_texts_map_to_their_kinds() -> None:
    assert classify("### Error\nError: browserBackend.callTool: Target page, context or browser has been closed") == (
        "target_lost"
    )
    assert (
        classify(
            "Error: Protocol error (Target.createTarget): computer_use gateway: Target.createTarget is not "
            "allowed (opens a page the session is not bound to)"
        )
        == "target_lost"
    )
    assert classify("Error: Ref e99 not found in the current page snapshot. Try capturing new snapshot.") == "element"
    assert (
        classify(
            "TimeoutError: locator.click: Timeout 1000ms exceeded.\nCall log:\n  - waiting for "
            "locator('aria-ref=e196')\n    - element is not enabled\n  - retrying click action"
        )
        == "element"
    )
    assert (
        classify(
            "TimeoutError: page.goto: Timeout 20000ms exceeded.\nCall log:\n  - navigating to "
            '"http://x/", waiting until "domcontentloaded"'
        )
        == "timeout"
    )
    assert classify('Error: Tool "browser_snapshot" does not handle the modal state.') == "dialog"
    assert classify("Error: net::ERR_UNSAFE_PORT at http://127.0.0.1:1/") == "upstream"


@pytest.mark.req("adapter:parser")
def test_the_parser_reads_a_captured_form_snapshot_exactly() -> None:
    text = (DATA / "dom_form_snapshot.md").read_text(encoding="utf-8")
    snapshot = parse_snapshot_answer(text)

    assert snapshot.url.endswith("/dom_form/")
    assert snapshot.title == "Checkout · Shipping details — Northwind Outfitters"
    assert snapshot.upstream_chars == len(text)
    assert [(e.ref, e.role, e.name, e.value, e.checked, e.disabled) for e in snapshot.elements] == [
        ("e4", "link", "Northwind Outfitters", None, None, False),
        ("e5", "link", "Shop", None, None, False),
        ("e6", "link", "Help", None, None, False),
        ("e18", "textbox", "Full name", 'Ada "Countess" Lovelace: #1', None, False),
        ("e20", "textbox", "Email", None, None, False),
        ("e24", "textbox", "Street address", None, None, False),
        ("e26", "combobox", "Country", "Japan", None, False),
        ("e29", "radio", "Standard (3–5 days)", None, True, False),
        ("e30", "radio", "Express (next day)", None, False, False),
        ("e33", "checkbox", "This is a gift", None, True, False),
        ("e35", "textbox", "Delivery notes", None, None, False),
        ("e36", "button", "Save and continue", None, None, False),
        ("e38", "link", "Privacy", None, None, False),
        ("e39", "link", "Terms", None, None, False),
    ]
    assert by_name(snapshot.elements, "textbox", "Full name").level == 4
    lines = snapshot.text.splitlines()
    assert lines[0] == "# Shipping details"
    assert "Full name" not in lines  # a label next to its own control is not repeated as text
    assert "Need help? Call 0800 000 000 ·" in lines
    assert not any(line.startswith(("/url", "- ")) for line in lines)


@pytest.mark.req("adapter:parser", "adapter:unique-refs", "frames:iframe-refs")
def test_the_parser_keeps_iframe_refs_usable() -> None:
    snapshot = parse_snapshot_answer((DATA / "frames_snapshot.md").read_text(encoding="utf-8"))
    inner = by_name(snapshot.elements, "button", "Send")
    assert inner.ref.startswith("f1e")
    assert REF.fullmatch(inner.ref)
    assert by_name(snapshot.elements, "combobox", "Department").value == "Orders & delivery"
    assert by_name(snapshot.elements, "button", "Look up order").ref.startswith("e")
    assert "# Chat with Northwind support" in snapshot.text


@pytest.mark.req("adapter:parser")
def test_the_parser_handles_yaml_quoting_and_hidden_or_unreferenced_nodes() -> None:
    roots = parse_aria(
        "\n".join(
            [
                "- list [ref=e1]:",
                "  - 'option \"Price: low to high\" [selected] [ref=e2]'",
                '  - \'button "It\'\'s: here" [pressed] [ref=e3]\': "value: \\"q\\" \\x41"',
                "  - link [aria-hidden] [ref=e4] [cursor=pointer]:",
                "    - /url: http://example/",
                "  - heading [level=3] [ref=e5]:",
                '    - link "Product" [ref=e6] [cursor=pointer]',
                '  - checkbox "Mixed" [checked=mixed] [disabled] [ref=e7]',
                '  - option "No ref"',
            ]
        )
    )
    (listing,) = roots
    option, button, hidden, _, _, _ = listing.children[:6]
    assert (option.name, option.attrs) == ("Price: low to high", {"selected": "", "ref": "e2"})
    assert (button.name, button.text) == ("It's: here", 'value: "q" A')
    assert hidden.props == {"url": "http://example/"}
    from backends.playwright_mcp.snapshot import normalize

    snapshot = normalize("u", "t", roots)
    assert [(e.ref, e.role, e.checked, e.disabled) for e in snapshot.elements] == [
        ("e2", "option", None, False),
        ("e3", "button", True, False),
        ("e6", "link", None, False),
        ("e7", "checkbox", None, True),
    ]
    assert "### Product" in snapshot.text.splitlines()


@pytest.mark.req("adapter:parser")
def test_a_link_whose_only_content_is_an_image_is_named_by_the_image() -> None:
    from backends.playwright_mcp.snapshot import normalize

    roots = parse_aria(
        "\n".join(
            [
                "- link [ref=e1] [cursor=pointer]:",
                "  - /url: /p/1",
                '  - img "Blue jacket, size M"',
                "- link [ref=e2] [cursor=pointer]:",
                "  - /url: /p/2",
                '  - img "Red scarf"',
                '- link "Named" [ref=e3]:',
                '  - img "ignored, the link has its own name"',
                "- textbox [ref=e4]",
            ]
        )
    )
    names = [(e.role, e.name) for e in normalize("u", "t", roots).elements]
    assert names == [("link", "Blue jacket, size M"), ("link", "Red scarf"), ("link", "Named"), ("textbox", "")]


@pytest.mark.parametrize("bound_page", ["/dom_form/"], indirect=True)
@pytest.mark.req("adapter:snapshot")
async def test_image_only_links_on_a_live_page_are_named_by_their_images(
    playwright_backend: PlaywrightMCPBackend, bound_page: LabPage, workspace: Workspace
) -> None:
    # @playwright/mcp 0.0.83 lists `<a><img alt="…"></a>` as a bare `link` over `img "…"` (measured: both names
    # came out empty before the normalizer took the name from content).
    await workspace.evaluate(
        bound_page,
        "document.body.innerHTML = ['Blue jacket', 'Red scarf'].map((alt) => "
        '`<a href="/dom_form/"><img alt="${alt}" src="data:,"></a>`).join(\'\'); 1',
    )
    snapshot = await playwright_backend.snapshot()
    assert [(e.role, e.name) for e in snapshot.elements] == [("link", "Blue jacket"), ("link", "Red scarf")]


@pytest.mark.parametrize("bound_page", ["/catalogue/"], indirect=True)
@pytest.mark.req("adapter:point-click", "adapter:scroll-to-ref")
async def test_point_click_wheel_scroll_and_scroll_to_a_ref_reach_the_page(
    playwright_backend: PlaywrightMCPBackend, bound_page: LabPage, workspace: Workspace
) -> None:
    snapshot = await playwright_backend.snapshot()
    box = await workspace.evaluate(
        bound_page,
        "(() => { const r = document.querySelector('input[type=checkbox]').getBoundingClientRect();"
        " return [r.x + r.width / 2, r.y + r.height / 2]; })()",
    )
    await playwright_backend.act(Action(type="click", x=box[0], y=box[1]), None)
    assert await workspace.evaluate(bound_page, "document.querySelector('input[type=checkbox]').checked") is True

    scrolled = "window.__scrolled = new Promise(r => addEventListener('scroll', () => r(scrollY), {once: true})); 1"
    await workspace.evaluate(bound_page, scrolled)  # registered before acting
    await playwright_backend.act(Action(type="scroll", direction="down"), None)
    assert await workspace.evaluate(bound_page, "window.__scrolled", await_promise=True) > 0

    footer_link = [e for e in snapshot.elements if e.role == "link"][-1]
    await workspace.evaluate(bound_page, scrolled)
    await playwright_backend.act(Action(type="scroll", ref=footer_link.ref, direction="down"), footer_link)
    await workspace.evaluate(bound_page, "window.__scrolled", await_promise=True)
    bottom = "document.documentElement.scrollHeight - innerHeight - scrollY"
    assert await workspace.evaluate(bound_page, bottom) < 2000  # near the footer of a ~40,000 px page
