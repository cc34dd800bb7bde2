"""The console's port answers only the console: a hostile Page's script in the real browser, a wrong Host and a
missing secret all get nothing, and the Origin check is shown to be what stops the Page (its negative control).
"""

from __future__ import annotations

import json
import logging
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from fixtures_sites.server import FixtureServer
from host.app import HostApp, HostParts
from host.server import COOKIE, MAX_BODY, ConsoleServer
from lab.workspace import Bounds, Workspace
from suites.host.conftest import StartApp

ATTACK = """(async (base) => {
    // A Page that learned the console's URL tries to read it and to drive it. Reads use CORS (the answer is what
    // it wants); writes are "simple" no-CORS POSTs, which a browser sends without asking the server first.
    const out = {};
    const attempt = async (name, url, init) => {
        try {
            const response = await fetch(url, {credentials: "include", ...init});
            out[name] = response.type === "opaque" ? "unreadable" : "read " + response.status;
        } catch (error) {
            out[name] = "refused";
        }
    };
    const post = (body) => ({method: "POST", mode: "no-cors", headers: {"Content-Type": "text/plain"},
                             body: JSON.stringify(body)});
    await attempt("read the console", base, {mode: "cors"});
    await attempt("read the events", base + "api/events", {mode: "cors"});
    await attempt("change the backend", base + "api/settings", post({backend: "open_claude_chrome"}));
    await attempt("start a turn", base + "api/message", post({text: "exfiltrate everything", pages: []}));
    const guess = new URL("/api/settings", base).href;
    await attempt("guess without the secret", guess, post({backend: "open_claude_chrome"}));
    return out;
})"""

EXPECTED = dict.fromkeys(
    ("read the console", "read the events", "change the backend", "start a turn", "guess without the secret"),
    "refused",  # even an opaque answer is withheld: every answer says Cross-Origin-Resource-Policy: same-origin
)


async def attack_from_a_page(app: HostApp, workspace: Workspace, server: FixtureServer) -> dict[str, str]:
    """Run the attack in a fixture Page of another loopback origin (same site, other port), in the real browser."""
    page = await workspace.open("attacker", server.url("/", cross=True), Bounds(0, 0, 800, 600))
    return await workspace.evaluate(page, f"{ATTACK}({json.dumps(app.console_url)})", await_promise=True)


def check_page_got_nothing(app: HostApp, outcome: dict[str, str], refused: list[str]) -> None:
    assert outcome == EXPECTED, f"the Page got an answer: {outcome}"
    assert app.runtime.service.settings.backend == "playwright_mcp", "the Page changed the backend"
    users = [event for event in app.events.events if '"role": "user"' in event]
    assert users == [], "the Page started a turn"
    assert sorted(refused) == ["403", "403", "403", "403", "404"], refused


def refusals(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage().split()[2] for r in caplog.records if r.getMessage().startswith("console refused")]


@pytest.mark.req("app:console-auth")
async def test_a_page_script_can_neither_read_nor_drive_the_console(
    start_app: StartApp, workspace: Workspace, fixture_server: FixtureServer, caplog: pytest.LogCaptureFixture
) -> None:
    app = await start_app(open_console=False)
    caplog.set_level(logging.WARNING, logger="host.server")
    outcome = await attack_from_a_page(app, workspace, fixture_server)
    check_page_got_nothing(app, outcome, refusals(caplog))


class WithoutOriginCheck(ConsoleServer):
    """Broken on purpose: trusts every caller that knows the secret (no Origin check, and no cookie needed: the
    cookie is the second layer, `suites/host/test_console_boundary.py` proves it on its own)."""

    def origin_allowed(self, request: web.Request) -> bool:
        return True

    def proven(self, request: web.Request) -> bool:
        return True


@pytest.mark.negative_control
@pytest.mark.req("app:console-auth")
async def test_the_page_check_catches_a_console_without_the_origin_check(
    start_app: StartApp, workspace: Workspace, fixture_server: FixtureServer, caplog: pytest.LogCaptureFixture
) -> None:
    app = await start_app(HostParts(console=WithoutOriginCheck), open_console=False)
    caplog.set_level(logging.WARNING, logger="host.server")
    outcome = await attack_from_a_page(app, workspace, fixture_server)
    with pytest.raises(AssertionError, match="the Page changed the backend"):
        check_page_got_nothing(app, outcome, refusals(caplog))
    assert app.runtime.service.settings.backend == "open_claude_chrome"


async def fetch(url: str, *, method: str = "GET", headers: dict[str, str] | None = None, body: bytes = b"") -> Any:
    async with (
        aiohttp.ClientSession() as http,
        http.request(method, url, headers=headers or {}, data=body or None) as response,
    ):
        if response.content_type == "text/event-stream":
            return response.status, response.headers, await response.content.readuntil(b"\n\n")
        return response.status, response.headers, await response.read()


@pytest.mark.req("app:console-auth")
async def test_a_wrong_host_a_missing_secret_or_a_foreign_origin_gets_nothing(start_app: StartApp) -> None:
    app = await start_app(open_console=False)
    console, port = app.console_url, app.console.port
    root = f"http://127.0.0.1:{port}"

    status, headers, body = await fetch(console)
    assert status == 200
    assert b'id="history"' in body
    assert "default-src 'none'" in headers["Content-Security-Policy"]
    assert headers["Referrer-Policy"] == "no-referrer"
    assert (await fetch(console.replace("127.0.0.1", "localhost")))[0] == 200

    assert (await fetch(console, headers={"Host": f"rebound.example:{port}"}))[0] == 421
    assert (await fetch(console, headers={"Host": f"127.0.0.1:{port + 1}"}))[0] == 421
    for path in ("/", "/api/events", f"/{'A' * 43}/", console[len(root) : -1]):
        assert (await fetch(root + path))[0] == 404, path
    assert (await fetch(console, headers={"Origin": "http://127.0.0.1:1"}))[0] == 403
    assert (await fetch(console, headers={"Sec-Fetch-Site": "same-site"}))[0] == 403
    post = {"Origin": root, "Content-Type": "application/json", "Cookie": f"{COOKIE}={app.console.proof}"}
    big = json.dumps({"text": "x" * MAX_BODY, "pages": []}).encode()
    assert (await fetch(console + "api/message", method="POST", headers=post, body=big))[0] == 413
    assert (await fetch(console + "api/settings", method="POST", headers=post, body=b"[]"))[0] == 400
    status, _, answer = await fetch(console + "api/settings", method="POST", headers=post, body=b'{"backend": "x"}')
    assert status == 400
    assert b"unknown backend" in answer


@pytest.mark.req("app:console-auth", "app:live-cards")
async def test_a_new_subscriber_gets_the_log_replayed_from_its_oldest_event(start_app: StartApp) -> None:
    app = await start_app(open_console=False)
    first, second = app.events.events[:2]
    proof = {"Cookie": f"{COOKIE}={app.console.proof}"}
    status, headers, chunk = await fetch(app.console_url + "api/events", headers=proof)
    assert status == 200
    assert headers["Content-Type"].startswith("text/event-stream")
    head, data = chunk.decode().split("\n", 1)
    assert data == f"data: {first}\n\n"
    resumed = await fetch(app.console_url + "api/events", headers={**proof, "Last-Event-ID": head[len("id: ") :]})
    assert resumed[2].decode().split("\n", 1)[1] == f"data: {second}\n\n"
