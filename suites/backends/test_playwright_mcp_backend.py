"""PlaywrightMCPBackend's own: its child process, its error texts and its snapshot parser (against the real, pinned
@playwright/mcp 0.0.83, and on answers captured from real runs, `suites/backends/data/`).

The flows every backend shares (snapshot, one write, failures, screenshot, scroll, the action mapping and the
allowlist) are in `test_backends.py`, parametrized by backend.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections import Counter
from pathlib import Path

import pytest

from backends.playwright_mcp import ALLOWLIST, PlaywrightMCPBackend
from backends.playwright_mcp.adapter import SHORT_ROOTS, SOCKETS_DIR_MAX, short_temp_root
from backends.playwright_mcp.client import group_alive
from backends.playwright_mcp.errors import classify
from backends.playwright_mcp.snapshot import REF, parse_aria, parse_snapshot_answer
from lab.tap import BROWSER, CDPTap
from lab.workspace import LabPage, Workspace
from runtime.backend import BackendConfig
from suites.backends.conftest import by_name

pytestmark = pytest.mark.req(backend="playwright_mcp")

DATA = Path(__file__).parent / "data"


def exists(path: Path) -> bool:
    return path.exists()


def proc_environ_and_cwd(pid: int) -> tuple[dict[str, str], Path]:
    raw = Path(f"/proc/{pid}/environ").read_bytes().decode()
    return dict(item.split("=", 1) for item in raw.split("\0") if "=" in item), Path(f"/proc/{pid}/cwd").resolve()


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
        config = playwright_backend.config_path  # the gateway's URL: only in a file of ours, never on the command line
        assert (config.stat().st_mode & 0o777, config.parent.stat().st_mode & 0o777) == (0o600, 0o700)
        assert json.loads(config.read_text()) == {"browser": {"cdpEndpoint": playwright_backend.config.cdp_endpoint}}
        await playwright_backend.snapshot()
        await playwright_backend.screenshot()
    finally:
        await playwright_backend.close()
    assert not group_alive(pid)
    assert not config.exists()
    assert sockets.is_relative_to(workdir) or not exists(sockets)
    assert not (Path.cwd() / ".playwright-mcp").exists()
    assert any((workdir / "cache").rglob("*")), "the upstream's registry file belongs in the private cache"
    assert tap.by_target(label="backend").get(BROWSER, Counter())["Target.createTarget"] == 0


# -- unit: no browser ----------------------------------------------------------------------------------------------


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


@pytest.mark.req("adapter:child-hygiene")
def test_a_deep_tmpdir_gives_the_upstreams_sockets_a_short_system_temp_root(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    deep = tmp_path / ("d" * 90)  # deeper than a unix socket path allows, as a test runner's temp dir can be
    deep.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(deep))
    root = short_temp_root()
    assert len(os.fsencode(root)) + len("/cu-pw-12345678") <= SOCKETS_DIR_MAX, root
    assert root in SHORT_ROOTS
    monkeypatch.setattr(tempfile, "tempdir", "/tmp")
    assert short_temp_root() == "/tmp"  # a short $TMPDIR is kept
