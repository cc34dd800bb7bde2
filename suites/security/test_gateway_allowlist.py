"""The gateway's allowlists hold on the real runtime: what no backend needs is refused, what each backend needs passes.

A raw CDP client on a live session's gateway (the URL with its secret: the worst case of a backend gone rogue, e.g.
an upstream tool that runs arbitrary code) sends the methods issue 9 names — navigation to file:, chrome:,
devtools:, javascript:, data: and about: URLs, file uploads, download redirection, cookie reads, closing the bound
Page, main-world new-document scripts — and more: each is refused by the gateway, recorded, and never reaches
Chromium. Its negative control injects a permissive policy table into the real runtime, which the same check must
catch. Normal work on every backend (the parity tasks) is never refused, apart from one refusal chrome-devtools-mcp
asks for and tolerates, and forwards only what `allowlist.py` (and docs/security.md) declares for that backend.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest

from fixtures_sites.server import FixtureServer
from lab.cdp import CDPClient, CDPError
from lab.tap import CDPTap
from lab.workspace import Workspace
from runtime.gateway import ScopedGateway
from runtime.gateway.allowlist import ABSORBED, BROWSER_LEVEL_ALLOWED, PAGE_ALLOWED, WHY_REFUSED
from suites.harness import BACKENDS, Agent, Desk
from suites.parity.tasks import TASKS, run_task
from suites.security.conftest import GatewayWatch, attach, permissive, raw_client

DOC = Path(__file__).resolve().parents[2] / "docs" / "security.md"

TOLERATED = {"chrome_devtools_mcp": {("browser", "Target.getDevToolsTarget")}}
"""Refusals a backend asks for in normal work and takes as an answer: chrome-devtools-mcp asks, for every page it
finds, whether it is a DevTools window; refused, it treats the page as an ordinary one."""

NORMAL_WORK = ("dom_form", "frames", "canvas", "popup", "stall")
"""Parity tasks: type, select, click, submit, an iframe, a screenshot and a point click, a popup, a navigation, a
timed-out act."""

OWNED = "<title>owned</title>"


def refused_cases(target: str) -> list[tuple[str, str, dict[str, object]]]:
    """(level, method, params) the gateway must refuse: issue 9's list first, closing the bound Page last."""
    return [
        ("page", "Page.navigate", {"url": "file:///etc/passwd"}),
        ("page", "Page.navigate", {"url": "FILE:///etc/hostname"}),
        ("page", "Page.navigate", {"url": "chrome://version/"}),
        ("page", "Page.navigate", {"url": "devtools://devtools/bundled/inspector.html"}),
        ("page", "Page.navigate", {"url": "javascript:document.title='owned'"}),
        ("page", "Page.navigate", {"url": "data:text/html," + OWNED}),
        ("page", "Page.navigate", {"url": "about:blank"}),
        ("page", "Page.navigate", {"url": "view-source:http://127.0.0.1/"}),
        ("page", "Page.navigate", {"url": "/dom_form/"}),
        ("page", "DOM.setFileInputFiles", {"files": ["/etc/passwd"], "nodeId": 1}),
        ("page", "Page.setDownloadBehavior", {"behavior": "allow", "downloadPath": "/tmp"}),
        ("page", "Network.getCookies", {}),
        ("page", "Network.getCookies", {"urls": ["http://localhost/"]}),
        ("page", "Network.getAllCookies", {}),
        ("page", "Storage.getCookies", {}),
        ("page", "Page.addScriptToEvaluateOnNewDocument", {"source": "document.title = 'owned'"}),
        ("page", "Page.addScriptToEvaluateOnNewDocument", {"source": "document.title = 'owned'", "worldName": ""}),
        ("page", "Runtime.addBinding", {"name": "owned"}),
        ("page", "Debugger.setPauseOnExceptions", {"state": "all"}),
        ("page", "Page.printToPDF", {}),
        ("page", "Emulation.setUserAgentOverride", {"userAgent": "owned"}),
        ("page", "Network.loadNetworkResource", {"url": "file:///etc/passwd", "options": {}}),
        ("page", "Fetch.enable", {}),
        ("browser", "Target.createTarget", {"url": "about:blank"}),
        ("browser", "Browser.getBrowserCommandLine", {}),
        ("browser", "Storage.getCookies", {}),
        ("page", "Target.closeTarget", {"targetId": target}),
        ("browser", "Target.closeTarget", {"targetId": target}),
    ]


NEVER_SENT = (
    "DOM.setFileInputFiles",
    "Page.setDownloadBehavior",
    "Browser.setDownloadBehavior",
    "Network.getCookies",
    "Network.getAllCookies",
    "Storage.getCookies",
    "Page.printToPDF",
    "Emulation.setUserAgentOverride",
    "Network.loadNetworkResource",
    "Fetch.enable",
    "Target.createTarget",
    "Browser.getBrowserCommandLine",
    "Target.closeTarget",
)
"""Refused methods no backend sends either: the tap must count 0 of them from the runtime's side."""


async def unrefused(client: CDPClient, session: str, gateway: ScopedGateway, target: str) -> list[str]:
    """Send every refused case through the gateway; return those it did not refuse (whatever Chromium then did)."""
    missed = []
    for level, method, params in refused_cases(target):
        before = len(gateway.refusals)
        try:
            await client.send(method, params, session if level == "page" else None)
        except CDPError as error:
            named = str(error).startswith(f"computer_use gateway: {method} is not allowed")
            if named and len(gateway.refusals) == before + 1 and gateway.refusals[-1].method == method:
                continue
        missed.append(f"{level} {method} {params}")
    return missed


async def live_session_gateway(desk: Desk, agent: Agent, gateways: GatewayWatch) -> ScopedGateway:
    await desk.open("A", "/dom_form/", desk.workspace.column(0, 3))
    await desk.open("chat", "/chat/", desk.workspace.column(1, 3), chat=True)
    desk.authorize("A")
    await agent.observe(page=desk.handle("A"))
    [gateway] = [g for g in gateways.started if g.target_id == desk.target("A")]
    return gateway


@pytest.mark.req("gateway:page-allowlist", "gateway:refuses-other-targets")
async def test_every_method_no_backend_needs_is_refused_by_a_live_sessions_gateway_and_never_reaches_chromium(
    desk: Desk, agent: Agent, gateways: GatewayWatch, tap: CDPTap, clients: list[CDPClient]
) -> None:
    gateway = await live_session_gateway(desk, agent, gateways)
    client = await raw_client(gateway.url)
    clients.append(client)
    session = await attach(client, desk.target("A"))

    assert await unrefused(client, session, gateway, desk.target("A")) == []
    assert await client.send("Browser.setDownloadBehavior", {"behavior": "allow", "downloadPath": "/tmp"}) == {}
    assert [(a.method, a.session_id) for a in gateway.absorbed][-1] == ("Browser.setDownloadBehavior", None)

    assert {m: tap.count(label="runtime", method=m) for m in NEVER_SENT} == dict.fromkeys(NEVER_SENT, 0)
    where = await desk.workspace.evaluate(desk.labs["A"], "[location.href, document.title]")
    assert where == [desk.server.url("/dom_form/"), "Checkout · Shipping details — Northwind Outfitters"]
    # The gateway still serves the session: the refusals ended nothing.
    seen = await agent.observe(page=desk.handle("A"))
    assert seen.status == "ok"


@pytest.mark.negative_control
@pytest.mark.req("gateway:page-allowlist")
async def test_the_refusal_check_catches_a_gateway_running_a_permissive_policy(
    desk: Desk, agent: Agent, gateways: GatewayWatch, clients: list[CDPClient]
) -> None:
    gateways.policy = permissive
    gateway = await live_session_gateway(desk, agent, gateways)
    client = await raw_client(gateway.url)
    clients.append(client)
    session = await attach(client, desk.target("A"))

    missed = await unrefused(client, session, gateway, desk.target("A"))
    assert len(missed) == len(refused_cases(desk.target("A")))
    assert gateway.refusals == []


@pytest.mark.req("gateway:page-allowlist", "gateway:upstream-scoped")
async def test_normal_work_on_a_backend_is_never_refused_and_uses_only_what_the_allowlists_declare_for_it(
    backend: str,
    gateways: GatewayWatch,
    tap: CDPTap,
    workspace: Workspace,
    fixture_server: FixtureServer,
    request: pytest.FixtureRequest,
) -> None:
    for name in NORMAL_WORK:
        await run_task(
            TASKS[name], backend, tap=tap, workspace=workspace, server=fixture_server, test_id=request.node.nodeid
        )
    assert gateways.started, "no session was opened"
    refused = Counter((("browser" if r.session_id is None else "page"), r.method) for g in gateways.started
                      for r in g.refusals)  # fmt: skip
    assert set(refused) <= TOLERATED.get(backend, set()), f"{backend} was refused normal work: {dict(refused)}"

    used = Counter[tuple[str, str]]()
    for g in gateways.started:
        used.update(g.forwarded)
    print(f"{backend} through its gateways: {sorted(used.items())}")
    declared = {("browser", m) for m, a in BROWSER_LEVEL_ALLOWED.items() if backend in a.backends} | {
        ("page", m) for m, a in PAGE_ALLOWED.items() if backend in a.backends
    }
    assert set(used) <= declared, f"{backend} used what allowlist.py does not declare for it: {set(used) - declared}"
    assert used[("page", "Input.dispatchMouseEvent")] > 0  # the work really went through the gateways


# -- the published table ---------------------------------------------------------------------------------------


def published_rows() -> dict[tuple[str, str], tuple[set[str], str]]:
    """(level, method) → (backends marked, verdict) from docs/security.md's gateway table."""
    section = DOC.read_text(encoding="utf-8").split("## The scoped gateway", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) == len(BACKENDS) + 4 and (match := re.fullmatch(r"`([\w.]+)`", cells[0])):
            marked = {b for b, cell in zip(BACKENDS, cells[2 : 2 + len(BACKENDS)], strict=True) if cell == "✓"}
            rows[cells[1], match[1]] = (marked, cells[2 + len(BACKENDS)])
    return rows


@pytest.mark.req("gateway:page-allowlist")
def test_docs_security_md_publishes_exactly_the_gateways_tables_per_backend() -> None:
    rows = published_rows()
    expected: dict[tuple[str, str], tuple[set[str], str]] = {}
    for level, table in (("browser", BROWSER_LEVEL_ALLOWED), ("page", PAGE_ALLOWED)):
        for method, allowed in table.items():
            expected[level, method] = (set(allowed.backends), "forwarded")
    for method, allowed in ABSORBED.items():
        expected["any", method] = (set(allowed.backends), "absorbed")
    tolerated = {(level, method): name for name, refusals in TOLERATED.items() for level, method in refusals}
    for (level, method), name in tolerated.items():
        expected[level, method] = ({name}, "refused")
    for method in set(WHY_REFUSED) - {method for _, method in tolerated}:
        expected["any", method] = (set(), "refused")
    verdicts = {key: (marked, verdict.split(":")[0].split(" ")[0]) for key, (marked, verdict) in rows.items()}
    assert verdicts == expected
