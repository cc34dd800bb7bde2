"""ChromeDevToolsMCPBackend's own: uids across frames, what it refuses to type, its navigation answers, its child
process, its error texts and its snapshot parser (against the real, pinned chrome-devtools-mcp 1.11.0 behind the
runtime's scoped gateway, and on answers captured from real runs, `suites/backends/data/cdm_*.json`).

The flows every backend shares (snapshot, one write, failures, screenshot, scroll, the action mapping and the
allowlist) are in `test_backends.py`, parametrized by backend.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from backends.chrome_devtools_mcp import ALLOWLIST, ChromeDevToolsMCPBackend
from backends.chrome_devtools_mcp.adapter import PAGE_ID
from backends.chrome_devtools_mcp.client import group_alive
from backends.chrome_devtools_mcp.errors import classify, navigation_failure
from backends.chrome_devtools_mcp.snapshot import SnapshotTreeError, nodes_of, parse_snapshot
from fixtures_sites.server import FixtureServer
from lab.cdp import CDPClient
from lab.tap import BROWSER, CDPTap
from lab.workspace import LabPage
from runtime.backend import BackendError, Snapshot
from runtime.gateway import ScopedGateway
from runtime.gateway.relay import Relay
from runtime.models import Action
from suites.backends.conftest import MakeCDM, by_name, page_calls

pytestmark = pytest.mark.req(backend="chrome_devtools_mcp")

DATA = Path(__file__).parent / "data"


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


class NoInitRelay(Relay):
    """A relay that forwards lifecycle events as Chromium sends them (never the missing `init`)."""

    @staticmethod
    def lifecycle(client: object, message: object) -> None:
        return None


class NoInitGateway(ScopedGateway):
    """A deliberately broken gateway (negative control only): its relay is `NoInitRelay`."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs, relay=NoInitRelay)


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


@pytest.mark.req("action:type-multiline", "action:type-submit")
async def test_a_line_break_in_typed_text_is_refused_before_it_can_press_enter(
    devtools_backend: ChromeDevToolsMCPBackend, bound_page: LabPage, tap: CDPTap, fixture_server: FixtureServer
) -> None:
    name = by_name((await devtools_backend.snapshot()).elements, "textbox", "Full name")
    tap.clear()
    for text in ("Ada\nLovelace", "Ada\r", "\x00"):
        with pytest.raises(BackendError) as refused:
            await devtools_backend.act(Action(type="type", ref=name.ref, text=text), name)
        assert refused.value.kind == "unsupported"
    with pytest.raises(BackendError) as submit:
        await devtools_backend.act(Action(type="type", ref=name.ref, text="Ada", submit=True), name)
    assert submit.value.kind == "unsupported"  # the runtime composes type + Enter: `types_and_submits` is False
    assert not page_calls(tap, bound_page)
    assert fixture_server.ledger.writes() == []


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
    config = devtools_backend.config_path  # the gateway's URL: only in a file of ours, never on the command line
    assert (config.stat().st_mode & 0o777, config.parent.stat().st_mode & 0o777) == (0o600, 0o700)
    assert json.loads(config.read_text()) == {"browserUrl": devtools_backend.config.cdp_endpoint}
    await devtools_backend.snapshot()
    await devtools_backend.screenshot()
    await devtools_backend.close()

    assert not group_alive(pid)
    assert real_cache_state() == before  # no update check wrote ~/.cache/chrome-devtools-mcp/latest.json
    assert not (workdir / "home" / ".cache" / "chrome-devtools-mcp" / "latest.json").exists()
    written = sorted(str(p.relative_to(workdir)) for p in workdir.rglob("*") if p.is_file())
    assert written == ["chrome-devtools-mcp.stderr.log"]  # the config file went with the child
    browser = tap.by_target(label="backend").get(BROWSER, Counter())
    assert browser["Target.createTarget"] == 0
    assert browser["Target.closeTarget"] == 0


# -- unit: no browser ----------------------------------------------------------------------------------------------


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
        with pytest.raises(SnapshotTreeError):
            parse_snapshot(bad, "")
