"""The console is the chat, never a Page, and it answers only the console window the app opened: played as a granted
client whose Page navigates to the console, as a person pasting the console's URL into "Open a URL", as a process
(this test's, and a second uid's) that learned the console's secret URL, as a hostile Page flooding URL changes, and
as a local process pairing under a borrowed name. Each has a negative control that restores the old behaviour through
a subclass seam and is caught by the same check.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from fixtures_sites.server import FixtureServer
from host.app import CONSOLE_NOT_A_PAGE, HostApp, HostParts
from host.server import COOKIE, ConsoleServer, EventLog
from lab.cdp import CDPClient
from lab.tap import CDPTap
from runtime.commands.base import RESERVED_AFTER, RESERVED_HINT
from runtime.gateway.allowlist import static_verdict
from suites.console_driver import ConsoleDriver
from suites.host.conftest import StartApp, until_event
from suites.host.test_connect import asking, connected, grant, open_fixture, result_of

pytestmark = pytest.mark.req("app:console-auth")

API_ROUTES = ("api/message", "api/decide", "api/settings", "api/access", "api/open", "api/refresh", "api/grant")
API_ROUTES += ("api/revoke", "api/deny", "api/new_chat")
CONSOLE_TEXT = "Clients pair over"
"""Words only the console's page shows (its MCP clients panel): a result or frame holding them read the console."""
NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
FLOOD = 150
"""URL changes of the hostile Page, one every 20 ms (3 s; Chromium refuses more than 200 in 10 s)."""


async def page_script(lab_cdp: CDPClient, target: str, expression: str) -> Any:
    """Run `expression` as the Page's own script would (the lab's session on the Page, never through the tap)."""
    session = (await lab_cdp.send("Target.attachToTarget", {"targetId": target, "flatten": True}))["sessionId"]
    try:
        answer = await lab_cdp.send(
            "Runtime.evaluate", {"expression": expression, "returnByValue": True}, session_id=session
        )
        return answer["result"].get("value")
    finally:
        await lab_cdp.send("Target.detachFromTarget", {"sessionId": session})


def shown_pages(app: HostApp) -> list[str]:
    """The handles the console's latest Pages list offers to tick or grant."""
    latest = [json.loads(raw) for raw in app.events.events if json.loads(raw)["type"] == "pages"][-1]
    return [page["handle"] for page in latest["pages"]]


async def browser_navigates(lab_cdp: CDPClient, target: str, url: str) -> None:
    """Load `url` in the Page as the address bar would (the lab's own session, never through the tap)."""
    session = (await lab_cdp.send("Target.attachToTarget", {"targetId": target, "flatten": True}))["sessionId"]
    try:
        await lab_cdp.send("Page.navigate", {"url": url}, session_id=session)
    finally:
        await lab_cdp.send("Target.detachFromTarget", {"sessionId": session})


# -- a granted client whose Page navigates to the console ------------------------------------------------------------


class ReservesNothing(ConsoleServer):
    """Broken on purpose: reserves no origin, so the console's URL opens as a Page and a Page on it stays usable."""

    def reserved_origins(self) -> list[str]:
        return []


CONSOLE_AS_PAGE = HostParts(console=ReservesNothing)


async def navigate_to_the_console(
    app: HostApp, console: ConsoleDriver, fixture_server: FixtureServer, lab_cdp: CDPClient, tap: CDPTap, backend: str
) -> tuple[str, list[Any], dict[str, Any]]:
    """A client granted a fixture Page observes it; the Page's script then sends it to the console's URL; the client
    calls every command on it. Returns the Page's handle, every answer after the navigation, and the grants before."""
    form = await open_fixture(console, fixture_server, "/dom_form/", "left", "Checkout")
    target = app.runtime.registry.get(form).cdp_target_id
    async with connected(app) as client:
        await client.list_tools()  # the bridge pairs on its client's first request
        who = await asking(console)
        await grant(console, who, [form])
        seen = result_of(await client.call_tool("computer_use", {"command": "observe", "page": form}))
        assert seen.status == "ok", seen
        assert seen.backend == backend
        granted = {p.id: (p.client, p.grant and list(p.grant.pages)) for p in app.grants.pairings.values()}
        tap.watch(CONSOLE_TEXT)
        mark = app.events.next_id
        # The client itself tries to take its Page to the console (a browser-initiated load: the console answers).
        navigated = await client.call_tool(
            "computer_use",
            {
                "command": "act",
                "computer_session_id": seen.computer_session_id,
                "frame_id": seen.frame_id,
                "action": {"type": "navigate", "url": app.console_url},
            },
        )

        # Then it navigates to an address on its Page's own site that redirects to the console: the Page gets there
        # during the act, and the check after the command withholds the answer.
        async def to_the_console(request: web.Request) -> web.StreamResponse:
            raise web.HTTPFound(app.console_url)

        fixture_server.set_route("/next/", to_the_console, method="GET")
        redirected = await client.call_tool(
            "computer_use",
            {
                "command": "act",
                "computer_session_id": seen.computer_session_id,
                "frame_id": seen.frame_id,
                "action": {"type": "navigate", "url": fixture_server.url("/next/")},
            },
        )
        # Then the person types the console's URL into the Page (a browser-initiated load: the console answers).
        await browser_navigates(lab_cdp, target, app.console_url)
        await until_event(app, mark, lambda e: e["type"] == "pages" and on_the_console(app, form, e["pages"]))
        calls = [
            {"command": "list_pages"},
            {"command": "observe", "page": form},
            {"command": "observe", "page": "left"},
            {"command": "observe", "computer_session_id": seen.computer_session_id},
            {
                "command": "act",
                "computer_session_id": seen.computer_session_id,
                "frame_id": seen.frame_id,
                "action": {"type": "scroll", "direction": "down"},
            },
            {
                "command": "verify",
                "computer_session_id": seen.computer_session_id,
                "assertion": {"type": "text_present", "text": "MCP clients"},
            },
        ]
        answers = [navigated, redirected]
        for arguments in calls:
            answers.append(await client.call_tool("computer_use", arguments))
    return form, answers, granted


def on_the_console(app: HostApp, form: str, pages: list[dict[str, Any]]) -> bool:
    """The Pages list says the Page is on the console: it is gone from it, or (a broken host) it shows its URL."""
    url = next((page["url"] for page in pages if page["handle"] == form), None)
    return url is None or url.startswith(app.console.origin)


def check_console_unreachable(app: HostApp, tap: CDPTap, form: str, answers: list[Any]) -> None:
    """The navigation is refused, list_pages does not list the Page, every other command is page_access_disabled
    with a hint that works, and neither the client nor any CDP frame of the runtime's got anything of the console."""
    listed = result_of(answers[2])
    assert listed.status == "ok", listed
    assert form not in [page.handle for page in listed.pages or []], "list_pages lists a Page showing the console"
    for number, raw in enumerate(answers):
        result = result_of(raw)
        if number == 2:
            continue
        assert result.status == "failed", f"a call on the console was served: {result}"
        if number == 4:  # "left": the Page Context has no Page left of the chat while it shows the console
            assert result.reason_code == "ambiguous_page", result
            continue
        assert result.reason_code == "page_access_disabled", result
        assert result.hint == RESERVED_HINT
    assert RESERVED_AFTER in result_of(answers[1]).message, "the redirect was not caught after the act"
    text = json.dumps([raw.structured_content for raw in answers])
    assert app.console.secret not in text, "the client read the console's secret URL"
    assert CONSOLE_TEXT not in text, "the client read the console"
    assert tap.sightings(CONSOLE_TEXT, label="runtime") == [], "the runtime or a backend read the console's page"
    assert form not in shown_pages(app), "the console offers a Page showing the console to tick or grant"


async def test_a_granted_page_that_navigates_to_the_console_is_refused_on_every_command_and_reads_nothing(
    start_app: StartApp,
    console_of: Any,
    fixture_server: FixtureServer,
    lab_cdp: CDPClient,
    tap: CDPTap,
    backend: str,
) -> None:
    app = await start_app(backend=backend)
    console = await console_of(app)
    form, answers, granted = await navigate_to_the_console(app, console, fixture_server, lab_cdp, tap, backend)
    check_console_unreachable(app, tap, form, answers)
    after = {p.id: (p.client, p.grant and list(p.grant.pages)) for p in app.grants.pairings.values()}
    assert set(after) <= set(granted), "a client was granted through the console"


@pytest.mark.negative_control
async def test_the_navigation_check_catches_a_host_that_lets_the_console_be_a_page(
    start_app: StartApp,
    console_of: Any,
    fixture_server: FixtureServer,
    lab_cdp: CDPClient,
    tap: CDPTap,
    backend: str,
) -> None:
    app = await start_app(CONSOLE_AS_PAGE, backend=backend)
    console = await console_of(app)
    form, answers, _ = await navigate_to_the_console(app, console, fixture_server, lab_cdp, tap, backend)
    with pytest.raises(AssertionError, match=r"list_pages lists a Page showing the console|was served"):
        check_console_unreachable(app, tap, form, answers)
    print("broken host:", [(r.status, r.reason_code) for r in map(result_of, answers)])
    assert CONSOLE_TEXT in json.dumps([raw.structured_content for raw in answers]), (
        "the broken host's client read nothing"
    )


# -- "Open a URL" with the console's own URL -------------------------------------------------------------------------


async def open_through_the_console(console: ConsoleDriver, url: str) -> tuple[int, str]:
    """The console's own "Open" request (its script's fetch, so its cookie and headers), with this URL."""
    return await console.evaluate(
        f"""fetch('api/open', {{method: 'POST', headers: {{'Content-Type': 'application/json'}},
            body: JSON.stringify({{url: {json.dumps(url)}, placement: 'right'}})}})
            .then(async (r) => [r.status, (await r.json()).error || ''])"""
    )


def console_spellings(app: HostApp) -> list[str]:
    port = app.console.port
    return [
        app.console_url,
        f"http://127.0.0.1:{port}/",
        f"http://localhost:{port}/anything",
        f"http://LOCALHOST:{port}/{app.console.secret}/",
        f"http://127.1:{port}/{app.console.secret}/",
        f"http://2130706433:{port}/",
    ]


@pytest.mark.req("app:pages")
async def test_opening_the_consoles_own_url_as_a_page_is_refused_by_every_spelling(
    start_app: StartApp, console_of: Any
) -> None:
    app = await start_app()
    console = await console_of(app)
    before = len(app.runtime.registry.pages())
    for url in console_spellings(app):
        assert await open_through_the_console(console, url) == [400, CONSOLE_NOT_A_PAGE], url
    assert len(app.runtime.registry.pages()) == before, "a Page was opened on the console's origin"
    assert (await open_through_the_console(console, "ftp://example.invalid/"))[0] == 400


@pytest.mark.req("app:pages")
@pytest.mark.negative_control
async def test_the_open_url_check_catches_a_host_that_opens_the_console_as_a_page(
    start_app: StartApp, console_of: Any
) -> None:
    app = await start_app(CONSOLE_AS_PAGE)
    console = await console_of(app)
    status, _ = await open_through_the_console(console, console_spellings(app)[1])
    assert status == 200, "the broken host refused the console's URL: the check proves nothing"


# -- a process that knows the secret URL but is not the console ------------------------------------------------------


async def plain(url: str, method: str, headers: dict[str, str], cookie: str | None = None) -> int:
    """One request from a process that is not a browser: any headers it likes, the cookie only if told."""
    if cookie is not None:
        headers = {**headers, "Cookie": f"{COOKIE}={cookie}"}
    async with (
        aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as http,
        http.request(method, url, headers=headers, data=b"{}" if method == "POST" else None) as response,
    ):
        return response.status


FORGED = (
    {},
    {"Origin": "{origin}"},
    {"Sec-Fetch-Site": "same-origin"},
    {"Sec-Fetch-Site": "none", "Origin": "{origin}"},
)
"""Headers a non-browser client may send: none, or the console's own, forged."""


async def statuses_without_the_cookie(app: HostApp, cookie: str | None = None) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for forged in FORGED:
        headers = {name: value.format(origin=app.console.origin) for name, value in forged.items()}
        key = json.dumps(forged)
        out[key] = [await plain(app.console_url + "api/events", "GET", headers, cookie)]
        for route in API_ROUTES:
            out[key].append(await plain(app.console_url + route, "POST", headers, cookie))
    return out


def as_nobody(url: str) -> list[int]:
    """The same requests from a second uid (`nobody`) with curl: header-less, then with the console's Origin."""
    statuses = []
    for extra in ([], ["-H", f"Origin: {url.split('/', 3)[0]}//{url.split('/', 3)[2]}"]):
        for route, method in [("api/events", "GET"), *[(r, "POST") for r in API_ROUTES]]:
            command = [*NOBODY, "curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "-m", "10", "-X", method]
            command += [*extra, *(["-d", "{}"] if method == "POST" else []), url + route]
            done = subprocess.run(command, capture_output=True, text=True, timeout=30, check=False)
            statuses.append(int(done.stdout or 0))
    return statuses


def check_refused_everywhere(local: dict[str, list[int]], nobody: list[int]) -> None:
    for headers, codes in local.items():
        assert codes == [403] * len(codes), f"a request with the secret and {headers} but no cookie got {codes}"
    assert nobody == [403] * len(nobody), f"a second uid with the secret got {nobody}"


class HeaderlessTrusted(ConsoleServer):
    """Broken on purpose (the old rule): a request with neither Origin nor Sec-Fetch-Site needs no cookie."""

    def proven(self, request: web.Request) -> bool:
        headerless = "Origin" not in request.headers and "Sec-Fetch-Site" not in request.headers
        return headerless or super().proven(request)


async def test_a_process_with_the_secret_url_but_no_console_cookie_is_refused_on_every_api_route(
    start_app: StartApp, console_of: Any
) -> None:
    app = await start_app()
    await console_of(app)  # the real console works: its event stream is live (it carries the cookie)
    local, nobody = await statuses_without_the_cookie(app), await asyncio.to_thread(as_nobody, app.console_url)
    check_refused_everywhere(local, nobody)
    wrong = await statuses_without_the_cookie(app, cookie="x" * len(app.console.proof))
    assert all(codes == [403] * len(codes) for codes in wrong.values()), wrong
    assert await plain(app.console_url + "api/refresh", "POST", {}, app.console.proof) == 200, "the proof is refused"
    # Cookie reads are nothing a backend's gateway forwards, at page or browser level.
    for method in ("Network.getCookies", "Network.getAllCookies", "Storage.getCookies"):
        for browser_level in (False, True):
            assert static_verdict(method, {}, browser_level).action == "refuse", method


@pytest.mark.negative_control
async def test_the_secret_url_check_catches_a_console_that_trusts_header_less_requests(start_app: StartApp) -> None:
    app = await start_app(HostParts(console=HeaderlessTrusted), open_console=False)
    local, nobody = await statuses_without_the_cookie(app), await asyncio.to_thread(as_nobody, app.console_url)
    with pytest.raises(AssertionError, match=r"no cookie got|second uid"):
        check_refused_everywhere(local, nobody)
    assert local["{}"][API_ROUTES.index("api/refresh") + 1] == 200


# -- a hostile Page flooding URL changes ---------------------------------------------------------------------------


class UnboundedLog(EventLog):
    """Broken on purpose (the old log): every event kept, none replaced."""

    max_events = sys.maxsize
    max_bytes = sys.maxsize

    def publish(self, event: dict[str, Any]) -> None:
        self._entries.append((self.next_id, "", json.dumps(event, ensure_ascii=False)))
        self.next_id += 1
        self.bytes += len(self._entries[-1][2].encode())
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()


async def replayed(app: HostApp) -> list[dict[str, Any]]:
    """What a console load is replayed: the event stream read (with the console's cookie) up to the newest event."""
    last = app.events.next_id - 1
    events = []
    headers = {"Cookie": f"{COOKIE}={app.console.proof}"}
    async with (
        aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as http,
        http.get(app.console_url + "api/events", headers=headers) as response,
    ):
        while True:
            chunk = (await response.content.readuntil(b"\n\n")).decode()
            index, data = chunk.split("\n", 1)
            events.append(json.loads(data.removeprefix("data: ")))
            if int(index.removeprefix("id: ")) >= last:
                return events


async def flood(app: HostApp, console: ConsoleDriver, fixture_server: FixtureServer, lab_cdp: CDPClient) -> int:
    """A Page rewrites its URL every 20 ms, FLOOD times; returns the log's bytes before the flood."""
    handle = await open_fixture(console, fixture_server, "/dom_form/", "left", "Checkout")
    target = app.runtime.registry.get(handle).cdp_target_id
    before = app.events.bytes
    mark = app.events.next_id
    await page_script(
        lab_cdp,
        target,
        f"""(() => {{ let n = 0; const timer = setInterval(() => {{
            history.replaceState(null, '', '?n=' + n + '&pad=' + 'x'.repeat(200)); n += 1;
            if (n === {FLOOD}) clearInterval(timer); }}, 20); }})()""",
    )
    last = f"?n={FLOOD - 1}&"
    await until_event(app, mark, lambda e: e["type"] == "pages" and any(last in p["url"] for p in e["pages"]))
    return before


def check_bounded(app: HostApp, before: int, replay: list[dict[str, Any]]) -> None:
    pages_events = [e for e in replay if e["type"] == "pages"]
    assert len(pages_events) == 1, f"a console load replays {len(pages_events)} Pages lists, not the current one"
    assert app.events.bytes - before < 4096, f"the log grew {app.events.bytes - before} bytes during the flood"
    assert len(app.events.events) <= app.events.max_events
    assert app.events.bytes <= app.events.max_bytes


@pytest.mark.req("app:live-cards")
async def test_a_page_flooding_url_changes_leaves_one_pages_event_and_a_bounded_log(
    start_app: StartApp, console_of: Any, fixture_server: FixtureServer, lab_cdp: CDPClient
) -> None:
    app = await start_app()
    console = await console_of(app)
    before = await flood(app, console, fixture_server, lab_cdp)
    replay = await replayed(app)
    check_bounded(app, before, replay)
    assert replay[-1]["type"] == "pages" or any(e["type"] == "pages" for e in replay)
    print(f"event log after {FLOOD} URL changes: {len(app.events.events)} events, {app.events.bytes} bytes")


@pytest.mark.req("app:live-cards")
@pytest.mark.negative_control
async def test_the_flood_check_catches_an_unbounded_event_log(
    start_app: StartApp, console_of: Any, fixture_server: FixtureServer, lab_cdp: CDPClient
) -> None:
    app = await start_app(HostParts(event_log=UnboundedLog))
    console = await console_of(app)
    before = await flood(app, console, fixture_server, lab_cdp)
    with pytest.raises(AssertionError, match="Pages lists"):
        check_bounded(app, before, await replayed(app))
    print(f"unbounded log after {FLOOD} URL changes: {len(app.events.events)} events, {app.events.bytes - before} B")


@pytest.mark.req("app:live-cards")
def test_the_ring_keeps_the_current_state_and_the_newest_cards_within_its_bound() -> None:
    log = EventLog()
    log.publish({"type": "settings", "backend": "playwright_mcp"})
    log.publish({"type": "turn", "state": "running"})
    for n in range(3 * log.max_events):
        log.publish({"type": "card", "call_id": f"call-{n}", "status": "ok", "summary": "x" * 600})
        log.publish({"type": "pages", "pages": [{"handle": "page-1", "url": f"http://a.test/?n={n}"}]})
    kinds = [json.loads(raw)["type"] for raw in log.events]
    assert len(kinds) <= log.max_events
    assert log.bytes <= log.max_bytes
    assert kinds.count("settings") == kinds.count("turn") == kinds.count("pages") == 1, "the current state was lost"
    cards = [json.loads(raw)["call_id"] for raw in log.events if '"card"' in raw]
    assert cards[-1] == f"call-{3 * log.max_events - 1}", "the newest card was not kept"
    assert len(cards) > 1000, "the cards did not fill the bound"


# -- who asks -------------------------------------------------------------------------------------------------------


def connect_child(config_dir: Path) -> int:
    """The pid of this test's `computer-use connect` child for that config dir (from /proc, not from the app)."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            parent = int((entry / "stat").read_text().rpartition(")")[2].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if parent == os.getpid() and b"host.connect" in argv and str(config_dir).encode() in argv:
            return int(entry.name)
    raise AssertionError("no computer-use connect child found")


@pytest.mark.req("connect:console")
async def test_the_access_request_shows_the_real_pid_and_executable_beside_the_claimed_name(
    start_app: StartApp, console_of: Any
) -> None:
    app = await start_app()
    console = await console_of(app)
    async with connected(app, name="Cursor") as client:
        await client.list_tools()  # the bridge pairs on its client's first request
        who = await asking(console)
        pid = connect_child(app.config_dir)
        shown = await console.text(f'#grants li[data-client="{who}"] .process')
        expected = (
            f"Process: pid {pid}, {os.readlink(f'/proc/{pid}/exe')}, "
            f"started by pid {os.getpid()}, {os.readlink('/proc/self/exe')}"
        )
        assert await console.text(f'#grants li[data-client="{who}"] .ask') == "Cursor asks for browser access"
    assert shown == expected
