"""Only the backend the runtime hands a gateway's URL to can reach that gateway; a web page never can.

Every gateway URL carries a per-gateway secret; a request without it is refused 404, one carrying an `Origin` header
(a web page's) 403, each recorded in `gateway.refusals` and never forwarded (the tap sees nothing). The live proof
opens real runtime sessions on two Pages, one of them a hostile page (`/port_scan/`) that knows every gateway's
port, Chromium's own debugging port, the browser's id and both Pages' target ids — everything but the secrets —
and tries every endpoint from page script: 0 handshakes accepted, 0 answers read, 0 attacker-ledger hits, one
gateway refusal per attempt on a gateway port, 0 CDP commands reaching Chromium during the attack. Its negative
control runs the same attack against gateways that skip the admission check (`OpenAdmission`, injected into the
real runtime), which the same check must catch.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlencode, urlsplit

import aiohttp
import allure
import pytest

from fixtures_sites.ledger import LedgerRow
from fixtures_sites.server import FixtureServer
from lab import browser as lab_browser
from lab.browser import Chromium
from lab.cdp import CDPClient
from lab.tap import BROWSER, CDPTap, Record
from lab.workspace import LabPage
from runtime import browser as runtime_browser
from runtime.gateway import RefusedCommand, ScopedGateway
from suites.harness import Agent, Desk
from suites.security.conftest import HTTP_TIMEOUT, GatewayWatch, OpenAdmission, raw_client

SCAN_TIMEOUT = 180.0
"""Bound on the whole scan. A refused attempt ends at once, but Chromium delays a page's WebSocket handshakes after
failed ones (up to seconds each), and each attempt is bounded by 20 s in the page."""
SUCCESS = ("accepted", "read")


async def http_status(method: str, url: str, origin: str | None = None) -> int:
    headers = {"Origin": origin} if origin is not None else {}
    async with aiohttp.ClientSession(timeout=HTTP_TIMEOUT) as http, http.request(method, url, headers=headers) as r:
        await r.read()
        return r.status


async def handshake_status(url: str, origin: str | None = None) -> int:
    """101 if the WebSocket handshake was accepted, else the HTTP status that refused it."""
    headers = {"Origin": origin} if origin is not None else {}
    async with aiohttp.ClientSession(timeout=HTTP_TIMEOUT) as http:
        try:
            async with http.ws_connect(url, headers=headers):
                return 101
        except aiohttp.WSServerHandshakeError as refused:
            return refused.status


def parts_of(gateway: ScopedGateway) -> tuple[str, str]:
    """(`127.0.0.1:PORT`, secret) of a started gateway."""
    url = urlsplit(gateway.url)
    return url.netloc, url.path.strip("/")


def startup_only(tap: CDPTap, gateways: int) -> None:
    """What the tap saw of the gateways is their own start-up (one discovery each) and nothing else."""
    calls = Counter({"HTTP /json/version": gateways, "Target.setDiscoverTargets": gateways})
    assert tap.by_target(label="gateway") == {BROWSER: calls}


async def page_targets(lab_cdp: CDPClient) -> set[str]:
    infos = (await lab_cdp.send("Target.getTargets"))["targetInfos"]
    return {info["targetId"] for info in infos if info["type"] == "page"}


# -- the admission check, on a gateway of its own ------------------------------------------------------------------


@pytest.mark.req("gateway:secret-url", "gateway:discovery-only-bound")
async def test_every_url_a_gateway_hands_out_carries_its_own_unguessable_secret_and_works(
    tap: CDPTap, bound: LabPage, gateway: ScopedGateway, clients: list[CDPClient]
) -> None:
    netloc, secret = parts_of(gateway)
    assert len(secret) >= 43  # secrets.token_urlsafe(32): 256 random bits
    second = ScopedGateway(await tap.endpoint("gateway"), bound.target_id)
    await second.start()
    try:
        assert parts_of(second)[1] != secret
    finally:
        await second.close()

    async with aiohttp.ClientSession(timeout=HTTP_TIMEOUT) as http:
        async with http.get(gateway.url + "/json/version") as answer:
            version = await answer.json()
        async with http.get(gateway.url + "/json/list") as answer:
            listing = await answer.json()
    assert version["webSocketDebuggerUrl"].startswith(f"ws://{netloc}/{secret}/devtools/browser/")
    assert [t["webSocketDebuggerUrl"] for t in listing] == [f"ws://{netloc}/{secret}/devtools/page/{bound.target_id}"]

    browser_level = await raw_client(gateway.url)  # what runtime.cdp and both npm clients do with the URL
    page_level = await CDPClient.connect(listing[0]["webSocketDebuggerUrl"])
    clients.extend([browser_level, page_level])
    assert [t["targetId"] for t in (await browser_level.send("Target.getTargets"))["targetInfos"]] == [bound.target_id]
    path = await page_level.send("Runtime.evaluate", {"expression": "location.pathname", "returnByValue": True})
    assert path["result"]["value"] == "/dom_form/"
    assert gateway.refusals == []


@pytest.mark.req("gateway:secret-url")
async def test_a_request_without_the_gateways_secret_is_refused_404_recorded_and_never_forwarded(
    tap: CDPTap, bound: LabPage, gateway: ScopedGateway
) -> None:
    netloc, secret = parts_of(gateway)
    other = ScopedGateway(await tap.endpoint("gateway"), bound.target_id)
    await other.start()
    try:
        other_secret = parts_of(other)[1]
        requests = [
            ("GET", f"http://{netloc}/json/version"),
            ("GET", f"http://{netloc}/json/list"),
            ("GET", f"http://{netloc}/json"),
            ("PUT", f"http://{netloc}/json/new?about:blank"),
            ("GET", f"http://{netloc}/{other_secret}/json/version"),  # another session's secret
            ("GET", f"http://{netloc}/{secret[:-1]}/json/version"),
            ("GET", f"http://{netloc}/{secret}x/json/version"),
            ("GET", f"http://{netloc}/{secret.upper()}/json/version"),
        ]
        handshakes = [
            f"ws://{netloc}/devtools/browser/{bound.target_id}",
            f"ws://{netloc}/devtools/page/{bound.target_id}",
            f"ws://{netloc}/{other_secret}/devtools/page/{bound.target_id}",
        ]
        assert [await http_status(method, url) for method, url in requests] == [404] * len(requests)
        assert [await handshake_status(url) for url in handshakes] == [404] * len(handshakes)

        assert len(gateway.refusals) == len(requests) + len(handshakes)
        assert {(r.conn, r.reason) for r in gateway.refusals} == {(0, "no or wrong gateway secret in the path")}
        assert not any(secret in r.method for r in gateway.refusals)
        assert other.refusals == []
        startup_only(tap, gateways=2)
    finally:
        await other.close()


@pytest.mark.req("gateway:secret-url")
async def test_a_request_carrying_an_origin_header_is_refused_403_even_with_the_secret_on_http_and_websocket(
    tap: CDPTap, bound: LabPage, gateway: ScopedGateway, fixture_server: FixtureServer
) -> None:
    netloc, secret = parts_of(gateway)
    origins = [fixture_server.prefix, fixture_server.cross_origin, "null", f"http://{netloc}"]
    for origin in origins:
        assert await http_status("GET", f"{gateway.url}/json/version", origin) == 403
        assert await http_status("GET", f"{gateway.url}/json/list", origin) == 403
        assert await http_status("GET", f"http://{netloc}/json/version", origin) == 403  # no secret: same answer
        assert await handshake_status(f"ws://{netloc}/{secret}/devtools/browser/x", origin) == 403
        assert await handshake_status(f"ws://{netloc}/{secret}/devtools/page/{bound.target_id}", origin) == 403

    assert len(gateway.refusals) == 5 * len(origins)
    assert all(r.conn == 0 and "Origin" in r.reason and "web page" in r.reason for r in gateway.refusals)
    assert not any(secret in f"{r.method} {r.reason}" for r in gateway.refusals)
    assert Counter(r.method for r in gateway.refusals)["HTTP GET /<secret>/json/version"] == len(origins)
    startup_only(tap, gateways=1)


@pytest.mark.req("gateway:secret-url", "gateway:close")
async def test_after_close_the_gateways_port_accepts_no_connection(gateway: ScopedGateway) -> None:
    port = urlsplit(gateway.url).port
    _, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.close()
    await writer.wait_closed()

    await gateway.close()
    with pytest.raises(ConnectionRefusedError):
        await asyncio.open_connection("127.0.0.1", port)


@pytest.mark.req("gateway:page-script-refused")
def test_neither_chromium_launcher_lets_web_origins_onto_chromiums_own_endpoint(chromium: Chromium) -> None:
    for flags in (lab_browser.FLAGS, runtime_browser.FLAGS):
        assert not [flag for flag in flags if "remote-allow-origins" in flag]
    running = Path(f"/proc/{chromium.process.pid}/cmdline").read_bytes().split(b"\0")
    assert not [arg for arg in running if b"remote-allow-origins" in arg]


# -- the live attack: a hostile page while real sessions are open on it and on another Page -----------------------


@dataclass
class Attack:
    """What a scan from page script did, from the page's side and from the gateways', the tap's and the ledger's."""

    ports: dict[str, int]
    """"gateway of A", "gateway of B", "Chromium" → port."""
    attempts: list[dict[str, str]]
    hits: list[LedgerRow]
    refusals: dict[str, list[RefusedCommand]]
    """gateway name → the refusals it recorded during the scan."""
    commands: list[Record]
    """CDP commands the tap saw from the runtime's side (gateways included) during the scan."""
    pages_before: set[str]
    pages_after: set[str]
    outcomes: dict[str, Counter[str]] = field(default_factory=dict)

    def tried(self, name: str) -> list[dict[str, str]]:
        return [a for a in self.attempts if a["port"] == str(self.ports[name])]


async def scan_from_page_script(
    desk: Desk, agent: Agent, gateways: GatewayWatch, chromium: Chromium, lab_cdp: CDPClient, tap: CDPTap
) -> Attack:
    """Open sessions on A (the hostile page) and B, point A at every port, let its script scan, collect the record."""
    await desk.open("A", "/port_scan/", desk.workspace.column(0, 3))
    await desk.open("chat", "/chat/", desk.workspace.column(1, 3), chat=True)
    await desk.open("B", "/dom_form/", desk.workspace.column(2, 3))
    desk.authorize("A", "B")
    on_a = await agent.observe(page=desk.handle("A"))
    await agent.observe(page=desk.handle("B"))
    by_page = {g.target_id: g for g in gateways.started}
    named = {"gateway of A": by_page[desk.target("A")], "gateway of B": by_page[desk.target("B")]}
    ports = {name: gateways.port(g) for name, g in named.items()} | {"Chromium": chromium.port}
    query = urlencode(
        {
            "ports": ",".join(str(port) for port in ports.values()),
            "browser": chromium.ws_endpoint.rsplit("/", 1)[1],
            "pages": f"{desk.target('A')},{desk.target('B')}",
        }
    )
    moved = await agent.act(on_a, type="navigate", url=desk.server.url("/port_scan/?" + query))
    assert moved.status == "ok", moved

    refused_before = {name: len(g.refusals) for name, g in named.items()}
    seen_before = len(tap.records)
    pages_before = await page_targets(lab_cdp)
    report = desk.server.wait_for_request("/port_scan/report", timeout=SCAN_TIMEOUT)
    # The lab starts the scan (as a timer on a real site would) once the baseline is taken.
    assert await desk.workspace.evaluate(desk.labs["A"], "scan()") == "started"
    attempts = json.loads((await report).body)

    attack = Attack(
        ports=ports,
        attempts=attempts,
        hits=desk.server.ledger.attacker_hits(),
        refusals={name: g.refusals[refused_before[name] :] for name, g in named.items()},
        commands=[r for r in tap.records[seen_before:] if r.kind == "command" and r.label == "runtime"],
        pages_before=pages_before,
        pages_after=await page_targets(lab_cdp),
    )
    attack.outcomes = {name: Counter(a["outcome"] for a in attack.tried(name)) for name in ports}
    figures = {name: dict(counts) for name, counts in attack.outcomes.items()}
    allure.attach(json.dumps({"outcomes": figures, "attempts": attempts}, indent=2), "scan", "application/json")
    print(f"page-script scan outcomes per endpoint: {figures}")
    return attack


def assert_the_attack_failed(attack: Attack) -> None:
    """The release check: nothing the page tried reached a page through any endpoint."""
    assert all(attack.tried(name) for name in attack.ports), "the scan did not run"
    succeeded = [f"{a['kind']} {a['port']}{a['path']}: {a['data'][:120]}" for a in attack.attempts
                 if a["outcome"] in SUCCESS]  # fmt: skip
    assert succeeded == [], f"page script reached a CDP endpoint: {succeeded}"
    assert attack.hits == [], f"{len(attack.hits)} attacker-ledger hits"
    for name, refusals in attack.refusals.items():
        assert len(refusals) == len(attack.tried(name)), f"{name}: {len(attack.tried(name))} tries, {refusals}"
        assert all(r.conn == 0 for r in refusals), f"{name} let a client connect: {refusals}"
    reached = Counter(f"{r.target} {r.method}" for r in attack.commands)
    assert not reached, f"CDP commands reached Chromium during the scan: {dict(reached)}"
    assert attack.pages_after == attack.pages_before


@pytest.mark.req("gateway:page-script-refused", "isolation:b-untouched")
async def test_a_page_script_knowing_every_port_and_id_reaches_no_gateway_and_not_chromium_while_sessions_are_open(
    desk: Desk, agent: Agent, gateways: GatewayWatch, chromium: Chromium, lab_cdp: CDPClient, tap: CDPTap
) -> None:
    attack = await scan_from_page_script(desk, agent, gateways, chromium, lab_cdp, tap)
    assert_the_attack_failed(attack)
    assert set(attack.outcomes["Chromium"]) <= {"refused", "unreadable"}


@pytest.mark.negative_control
@pytest.mark.req("gateway:page-script-refused")
async def test_the_attack_check_catches_gateways_that_skip_their_secret_and_origin_checks(
    desk: Desk, agent: Agent, gateways: GatewayWatch, chromium: Chromium, lab_cdp: CDPClient, tap: CDPTap
) -> None:
    gateways.admission = OpenAdmission
    attack = await scan_from_page_script(desk, agent, gateways, chromium, lab_cdp, tap)
    with pytest.raises(AssertionError, match="page script reached a CDP endpoint"):
        assert_the_attack_failed(attack)
    accepted = [a for a in attack.attempts if a["outcome"] == "accepted"]
    assert {a["port"] for a in accepted} == {str(attack.ports["gateway of A"]), str(attack.ports["gateway of B"])}
    assert len(attack.hits) == len([a for a in attack.attempts if a["outcome"] in SUCCESS])
    assert {r.method for r in attack.commands} >= {"Target.getTargets", "Runtime.evaluate"}
