"""Third-party MCP clients through the user's grant: `computer-use connect` launched by a real MCP client (the Python
SDK's client over stdio), paired with the real app over its private socket, granted and revoked through the console.

The app runs in-process on the lab's Chromium behind the tap; the bridge is a child process (`python -m
host.connect`) with this checkout on its PYTHONPATH. "0 backend calls" is measured twice: the runtime's journal
(the call never reached the service) and the tap (no CDP command on any Page).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import stat
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, StdioServerParameters
from mcp.types import Implementation

from backends.common.child_backend import node_bin
from fixtures_sites.server import FixtureServer
from host.app import HostApp, HostParts
from host.connect import tool_list
from host.grants import GrantStore
from host.pairing import PairingServer, socket_path
from lab.tap import CDPTap
from runtime.models import ComputerUseResult
from suites.console_driver import ConsoleDriver
from suites.harness import ref_of
from suites.host.conftest import StartApp
from suites.host.test_app import tokens_in
from suites.proofs import assert_untouched

pytestmark = pytest.mark.starts_early

ROOT = Path(__file__).resolve().parents[2]
HOSTILE_NAME = '<img src=x onerror="window.__owned=1">Evil\u202e\nClient' + "x" * 200

WATCH_POSTS = """(() => {
    // The lab's record of every console request that came back: [path, status].
    window.__posts = [];
    const original = window.fetch;
    window.fetch = async (...args) => {
        const response = await original(...args);
        window.__posts.push([String(args[0]), response.status]);
        document.body.dataset.posts = String(window.__posts.length);  // a DOM change: the lab's waits see it
        return response;
    };
})()"""


def result_of(raw: Any) -> ComputerUseResult:
    return ComputerUseResult.model_validate(raw.structured_content)


@contextlib.asynccontextmanager
async def connected(app: HostApp, name: str = "Test Client") -> AsyncIterator[Client]:
    """A third-party client (the SDK's, over stdio) that launched `computer-use connect` for this app."""
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "host.connect", "--config-dir", str(app.config_dir)],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        cwd=str(ROOT),
    )
    try:
        async with Client(params, mode="legacy", client_info=Implementation(name=name, version="1.0")) as client:
            yield client
    except BaseExceptionGroup as group:  # the client's task group wraps what failed in the body: show that
        leaves = leaf_exceptions(group)
        if len(leaves) == 1:
            raise leaves[0] from None
        raise


def leaf_exceptions(group: BaseExceptionGroup) -> list[BaseException]:
    found: list[BaseException] = []
    for exc in group.exceptions:
        found.extend(leaf_exceptions(exc) if isinstance(exc, BaseExceptionGroup) else [exc])
    return found


async def open_fixture(console: ConsoleDriver, server: FixtureServer, path: str, placement: str, title: str) -> str:
    handle = await console.open_url(server.url(path), placement)
    selector = json.dumps(f'#pages li.page[data-page="{handle}"] .title')
    await console.until(f"document.querySelector({selector}).textContent.includes({json.dumps(title)})")
    return handle


async def asking(console: ConsoleDriver) -> str:
    """The id of the client whose request for access the console shows (waits for it)."""
    return await console.until(
        "[...document.querySelectorAll('#grants li.client[data-state=asking]')]"
        ".find(li => li.querySelector('.ask').textContent.endsWith('asks for browser access'))?.dataset.client"
    )


async def grant(
    console: ConsoleDriver, client: str, pages: list[str], bound: str = "revoke", minutes: int = 30
) -> None:
    """Tick these Pages in the client's request, choose the bound, press Grant; returns once the console shows it."""
    item = f'#grants li.client[data-client="{client}"]'
    for handle in pages:
        await console.tick(f'{item} input[data-page="{handle}"]')
    await console.choose(f"{item} select.bound", bound)
    if bound == "time":  # the minutes field shows only for a time limit
        await console.type(f"{item} input.minutes", str(minutes))
    await console.click(f"{item} button.grant")
    await console.until(f"document.querySelector({json.dumps(item)})?.dataset.state === 'granted'")


async def revoke(console: ConsoleDriver, client: str) -> None:
    """Press Revoke; returns once the console's POST came back 200 (not once the display changed)."""
    await console.evaluate("window.__posts = window.__posts.filter(p => p[0] !== 'api/revoke')")
    await console.click(f'#grants li.client[data-client="{client}"] button.revoke')
    await console.until("window.__posts.some(p => p[0] === 'api/revoke' && p[1] === 200)")


def journal_length(app: HostApp) -> int:
    return len(app.runtime.service.journal)


def assert_refused_before_the_runtime(app: HostApp, tap: CDPTap, raw: Any, journal: int, pages: dict[str, str]) -> None:
    result = result_of(raw)
    assert raw.is_error, f"the call was not refused: {result}"
    assert result.reason_code == "invalid_capability", f"the call was not refused with invalid_capability: {result}"
    assert "console" in (result.hint or ""), f"the hint does not send the user to the console: {result.hint}"
    assert journal_length(app) == journal, "the refused call reached the runtime"
    assert_untouched(tap, pages)


async def grant_scenario(
    start_app: StartApp, console_of: Any, fixture_server: FixtureServer, tap: CDPTap, parts: HostParts | None = None
) -> None:
    """The whole path: ask, refused before a grant, granted one Page, refused elsewhere, revoked."""
    app = await start_app(parts)
    console = await console_of(app)
    await console.evaluate(WATCH_POSTS)
    form = await open_fixture(console, fixture_server, "/dom_form/", "left", "Checkout")
    other = await open_fixture(console, fixture_server, "/catalogue/", "right", "")
    pages = {"the form": app.runtime.registry.get(form).cdp_target_id}
    elsewhere = {
        "the other Page": app.runtime.registry.get(other).cdp_target_id,
        "the chat Page": app.chat_page.cdp_target_id,  # type: ignore[union-attr]
    }
    async with connected(app) as client:
        listed = (await client.list_tools()).tools
        assert [(t.name, t.input_schema) for t in listed] == [(t.name, t.input_schema) for t in await tool_list()]
        who = await asking(console)
        assert await console.text(f'#grants li[data-client="{who}"] .ask') == "Test Client asks for browser access"
        assert str(socket_path(app.config_dir)) in await console.text("#grants-socket")

        tap.clear()
        journal = journal_length(app)
        raw = await client.call_tool("computer_use", {"command": "list_pages"})
        assert_refused_before_the_runtime(app, tap, raw, journal, {**pages, **elsewhere})

        await grant(console, who, [form])
        tap.clear()
        answers: list[Any] = []

        async def use(arguments: dict[str, Any]) -> ComputerUseResult:
            answers.append(await client.call_tool("computer_use", arguments))
            return result_of(answers[-1])

        listed_pages = await use({"command": "list_pages"})
        assert listed_pages.status == "ok", listed_pages
        assert [page.handle for page in listed_pages.pages or []] == [form], "the client sees Pages it was not granted"

        seen = await use({"command": "observe", "page": form})
        assert seen.status == "ok", seen
        acted = await use(
            {
                "command": "act",
                "computer_session_id": seen.computer_session_id,
                "frame_id": seen.frame_id,
                "action": {"type": "type", "ref": ref_of(seen, "textbox", "Full name"), "text": "Ada"},
            }
        )
        assert acted.status == "ok", acted
        refused = await use({"command": "observe", "page": other})
        assert refused.status == "failed", refused
        assert refused.reason_code == "invalid_capability", refused
        assert_untouched(tap, elsewhere)
        assert tap.by_target().get(pages["the form"]), "the granted Page was never reached: the check proves nothing"

        leaked = tokens_in([raw.structured_content for raw in answers], app.runtime.host.store.secret)
        assert leaked == [], f"a capability token reached the third-party client: {leaked}"

        await revoke(console, who)
        # The revoke closes the client's session on the form (its gateway lets the Page go, a detach) after its POST
        # has answered: counted from there, the close would pass for a touch by the refused call.
        await asyncio.wait_for(app.runtime.service.sessions.settle(), SETTLE_TIMEOUT)
        tap.clear()
        journal = journal_length(app)
        raw = await client.call_tool("computer_use", {"command": "list_pages"})
        assert_refused_before_the_runtime(app, tap, raw, journal, {**pages, **elsewhere})
        await console.until(f"document.querySelector('#grants li[data-client=\"{who}\"]').dataset.state === 'asking'")


@pytest.mark.req("connect:grant", "connect:revoke", "connect:isolation")
async def test_a_third_party_client_acts_only_on_the_granted_page_and_loses_access_on_revoke(
    start_app: StartApp, console_of: Any, fixture_server: FixtureServer, tap: CDPTap
) -> None:
    await grant_scenario(start_app, console_of, fixture_server, tap)


class IgnoresRevocation(GrantStore):
    """The console's Revoke answers OK, and the grant goes on minting."""

    def revoke(self, pairing_id: str) -> None:
        self._pairing(pairing_id)


@pytest.mark.negative_control
@pytest.mark.req("connect:revoke")
async def test_the_revoke_check_catches_a_grant_store_that_ignores_revocation(
    start_app: StartApp, console_of: Any, fixture_server: FixtureServer, tap: CDPTap
) -> None:
    with pytest.raises(AssertionError, match="the call was not refused"):
        await grant_scenario(start_app, console_of, fixture_server, tap, HostParts(grants=IgnoresRevocation))


class GrantsEveryPage(GrantStore):
    """Whatever the person ticked, the grant names every open Page."""

    def grant(self, pairing_id: str, pages: list[str], bound: str, minutes: float | None = None) -> Any:
        everything = [p.registry_page_id for p in self.registry.pages() if self._grantable(p.registry_page_id)]
        return super().grant(pairing_id, everything, bound, minutes)


@pytest.mark.negative_control
@pytest.mark.req("connect:isolation")
async def test_the_isolation_check_catches_a_grant_that_covers_every_page(
    start_app: StartApp, console_of: Any, fixture_server: FixtureServer, tap: CDPTap
) -> None:
    with pytest.raises(AssertionError, match="not granted"):
        await grant_scenario(start_app, console_of, fixture_server, tap, HostParts(grants=GrantsEveryPage))


@pytest.mark.req("connect:grant")
async def test_a_time_limited_grant_ends_when_its_time_is_up(
    start_app: StartApp, console_of: Any, fixture_server: FixtureServer, tap: CDPTap
) -> None:
    app = await start_app()
    console = await console_of(app)
    form = await open_fixture(console, fixture_server, "/dom_form/", "left", "Checkout")
    async with connected(app) as client:
        await client.list_tools()
        who = await asking(console)
        await grant(console, who, [form], bound="time", minutes=5)
        assert result_of(await client.call_tool("computer_use", {"command": "list_pages"})).status == "ok"
        started = app.grants.clock()
        app.grants.clock = lambda: started + 5 * 60  # the time limit is reached
        tap.clear()
        journal = journal_length(app)
        raw = await client.call_tool("computer_use", {"command": "list_pages"})
        assert_refused_before_the_runtime(
            app, tap, raw, journal, {"the form": app.runtime.registry.get(form).cdp_target_id}
        )
        assert "time limit" in result_of(raw).message
        await console.until(f"document.querySelector('#grants li[data-client=\"{who}\"]').dataset.state === 'asking'")


@pytest.mark.req("connect:grant")
async def test_a_page_bound_grant_ends_when_its_page_changes(
    start_app: StartApp, console_of: Any, fixture_server: FixtureServer, tap: CDPTap
) -> None:
    app = await start_app()
    console = await console_of(app)
    form = await open_fixture(console, fixture_server, "/dom_form/", "left", "Checkout")
    async with connected(app) as client:
        await client.list_tools()
        who = await asking(console)
        await grant(console, who, [form], bound="page")
        assert result_of(await client.call_tool("computer_use", {"command": "list_pages"})).status == "ok"
        app.runtime.registry.hide(form)  # the Page moves out of view: its revision changes
        await console.until(f"document.querySelector('#grants li[data-client=\"{who}\"]').dataset.state === 'asking'")
        raw = await client.call_tool("computer_use", {"command": "list_pages"})
        assert result_of(raw).reason_code == "invalid_capability"
        assert "changed" in result_of(raw).message


@pytest.mark.req("connect:console")
async def test_the_client_name_is_shown_clipped_and_as_text_only(
    start_app: StartApp, console_of: Any, fixture_server: FixtureServer
) -> None:
    app = await start_app()
    console = await console_of(app)
    async with connected(app, name=HOSTILE_NAME) as client:
        await client.list_tools()
        who = await asking(console)
        shown = await console.text(f'#grants li[data-client="{who}"] .ask')
        assert shown.startswith('<img src=x onerror="window.__owned=1">Evil'), shown
        assert len(shown) <= 60 + len(" asks for browser access")
        assert "\n" not in shown
        assert "\u202e" not in shown
        assert await console.evaluate("document.querySelectorAll('#grants img').length") == 0
        assert await console.evaluate("window.__owned === undefined")


@pytest.mark.req("connect:socket")
async def test_the_pairing_socket_is_private_and_gives_no_token_without_a_grant(start_app: StartApp) -> None:
    app = await start_app()
    path = socket_path(app.config_dir)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_ISSOCK(path.stat().st_mode)
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700

    reader, writer = await asyncio.open_unix_connection(str(path))
    try:
        hello = json.loads(await asyncio.wait_for(reader.readline(), 10))
        assert hello["type"] == "paired"
        assert hello["mcp_url"] == app.mcp_url
        for request in ({"op": "token"}, {"op": "client", "name": "Sneaky"}, {"op": "token"}):
            writer.write(json.dumps(request).encode() + b"\n")
            answer = json.loads(await asyncio.wait_for(reader.readline(), 10))
            assert "token" not in answer, f"a token without a grant: {request} -> {answer}"
        assert answer["ok"] is False
        assert "console" in answer["hint"]
    finally:
        writer.close()


class ServesAnotherUser(PairingServer):
    owner_uid = os.getuid() + 1


@pytest.mark.req("connect:socket")
async def test_a_peer_of_another_uid_is_closed_before_any_answer(start_app: StartApp) -> None:
    # The peer-uid check, seen from the other side: an app that serves only uid+1 treats this test as a stranger.
    app = await start_app(HostParts(pairing=ServesAnotherUser))
    reader, writer = await asyncio.open_unix_connection(str(socket_path(app.config_dir)))
    try:
        assert await asyncio.wait_for(reader.read(), 10) == b"", "a stranger got an answer"
    finally:
        writer.close()
    assert not app.grants.pairings


SETTLE_TIMEOUT = 30.0
"""Seconds the sessions a revoke ended may take to close (a backend child and its gateway)."""
INSPECTOR_TIMEOUT = 120.0
LOAD_CALLS = 60
LOAD_RATE = 2
"""The Inspector's load mode calls the tool LOAD_CALLS times at LOAD_RATE per second on one connection: the window
in which the person grants access (its pacing is the client's own; the test waits for events, never a clock). The
grant must land inside those 30 s; on a loaded two-core machine it takes a few."""


def client_config(app: HostApp, path: Path) -> Path:
    """The `mcpServers` entry docs/clients.md gives for Cursor and the MCP Inspector, with this checkout's Python in
    place of the `computer-use` console script (which runs the installed package) and the app's config dir."""
    config = {
        "mcpServers": {
            "computer-use": {
                "command": sys.executable,
                "args": ["-m", "host.connect", "--config-dir", str(app.config_dir)],
                "env": {"PYTHONPATH": str(ROOT)},
            }
        }
    }
    path.write_text(json.dumps(config, indent=2), encoding="utf-8")
    return path


@pytest.mark.req("connect:inspector", "connect:grant", "connect:isolation")
async def test_the_mcp_inspector_cli_lists_the_tool_and_its_calls_work_from_the_grant_on(
    start_app: StartApp, console_of: Any, fixture_server: FixtureServer, tap: CDPTap, tmp_path: Path
) -> None:
    inspector = node_bin() / "mcp-inspector"
    app = await start_app()
    console = await console_of(app)
    form = await open_fixture(console, fixture_server, "/dom_form/", "left", "Checkout")
    other = await open_fixture(console, fixture_server, "/catalogue/", "right", "")
    config = client_config(app, tmp_path / "mcp.json")
    env = {**os.environ, "HOME": str(tmp_path), "TMPDIR": str(tmp_path)}
    base = [str(inspector), "--cli", "--config", str(config), "--server", "computer-use", "--format", "json"]

    listed = tmp_path / "listed.json"
    process = await asyncio.create_subprocess_exec(
        *base, "--output", str(listed), "--method", "tools/list",
        env=env, cwd=str(tmp_path), stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    _, err = await asyncio.wait_for(process.communicate(), INSPECTOR_TIMEOUT)
    assert process.returncode == 0, err.decode()[-2000:]
    tools = json.loads(listed.read_text(encoding="utf-8"))["tools"]
    assert [tool["name"] for tool in tools] == ["computer_use"]

    tap.clear()
    journal = journal_length(app)
    process = await asyncio.create_subprocess_exec(  # the load summary comes on stdout (it takes no --output)
        str(inspector), "--cli", "--config", str(config), "--server", "computer-use",
        "--method", "tools/call", "--tool-name", "computer_use", "--tool-arg", "command=list_pages",
        "--load", "--load-requests", str(LOAD_CALLS), "--load-rate", str(LOAD_RATE), "--load-concurrency", "1",
        env=env, cwd=str(tmp_path), stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        who = await asking(console)
        await grant(console, who, [form])
        out, err = await asyncio.wait_for(process.communicate(), INSPECTOR_TIMEOUT)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    assert process.returncode == 0, err.decode()[-2000:]
    summary = json.loads(out)
    assert summary["requests"] == LOAD_CALLS, summary
    assert summary["ok"] >= 1, f"no call worked after the grant: {summary}"
    reached = list(app.runtime.service.journal)[journal:]
    assert [record.code for record in reached] == ["ok"] * summary["ok"], "a refused call reached the runtime"
    assert summary["toolErrors"] == LOAD_CALLS - summary["ok"]
    assert_untouched(tap, {"the other Page": app.runtime.registry.get(other).cdp_target_id})


@pytest.mark.req("connect:socket")
async def test_a_second_app_on_the_same_config_dir_leaves_the_first_apps_socket_alone(start_app: StartApp) -> None:
    first = await start_app()
    second = await start_app()
    assert first.pairing is not None
    assert second.pairing is None
    notices = [json.loads(event) for event in second.events.events]
    assert any("cannot connect" in event.get("text", "") for event in notices if event["type"] == "notice")
    reader, writer = await asyncio.open_unix_connection(str(socket_path(first.config_dir)))
    try:
        hello = json.loads(await asyncio.wait_for(reader.readline(), 10))
    finally:
        writer.close()
    assert hello["mcp_url"] == first.mcp_url, "the second app took the first one's clients"


@pytest.mark.req("connect:socket")
async def test_a_socket_left_by_an_app_that_died_is_replaced(start_app: StartApp, tmp_path: Path) -> None:
    path = socket_path(tmp_path / "config")
    path.parent.mkdir(parents=True, mode=0o755)  # too open: the app tightens it
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as dead:
        dead.bind(str(path))  # bound, never listening, closed: what a killed app leaves behind
    app = await start_app()
    assert app.pairing is not None
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


@pytest.mark.req("connect:grant")
async def test_connect_pairs_anew_with_a_restarted_app_and_works_after_its_grant(
    start_app: StartApp, console_of: Any, fixture_server: FixtureServer
) -> None:
    first = await start_app()
    async with connected(first) as client:
        await client.list_tools()
        await asking(await console_of(first))
        await first.close()  # the app stops; the client and its connect go on

        second = await start_app()
        console = await console_of(second)
        form = await open_fixture(console, fixture_server, "/dom_form/", "left", "Checkout")
        raw = await client.call_tool("computer_use", {"command": "list_pages"})
        assert result_of(raw).reason_code == "invalid_capability", "a grant carried over to another app run"
        await grant(console, await asking(console), [form])
        listed = result_of(await client.call_tool("computer_use", {"command": "list_pages"}))
        assert [page.handle for page in listed.pages or []] == [form], listed


@pytest.mark.req("connect:console", "connect:revoke")
async def test_a_denied_client_leaves_the_console_and_is_refused_while_it_runs(
    start_app: StartApp, console_of: Any
) -> None:
    app = await start_app()
    console = await console_of(app)
    async with connected(app) as client:
        await client.list_tools()
        who = await asking(console)
        await console.click(f'#grants li.client[data-client="{who}"] button.deny')
        await console.until(f"!document.querySelector('#grants li.client[data-client=\"{who}\"]')")
        journal = journal_length(app)
        raw = await client.call_tool("computer_use", {"command": "list_pages"})
        assert result_of(raw).reason_code == "invalid_capability"
        assert "denied" in result_of(raw).message
        assert journal_length(app) == journal, "the denied client's call reached the runtime"
