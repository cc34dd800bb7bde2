"""The runtime on a remote browser: Chromium on a second host (a network namespace of this machine), reached only
through a farm's front door that wants a header and serves no `/json` (`suites/remote/farm.py`).

The runtime connects to the door's browser WebSocket with its header; so does every session's scoped gateway, while
each backend sees only its local gateway (which serves it `/json`, built from the browser WebSocket). Through it, on
every backend: the isolation canaries (0 bytes of B, the chat or another window on the backend's side or in a
result; 0 commands on them) and the `dom_form` parity task (its declared outcome signature, the Page's relation
computed from the remote browser's window geometry). A wrong or missing header is refused at the door and is one
line naming the status and the flags to fix it, from the runtime, a gateway and the CLI. Negative controls: a
gateway that forwards everything is caught by the same canary check; the door refuses a runtime that drops its
header. The namespace, the veth pair and Chromium are removed whatever happens; without root or `ip`, every test
here skips with the reason.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from fixtures_sites.server import FixtureServer
from lab import netns
from lab.cdp import CDPClient
from lab.netns import RemoteHost
from lab.tap import CDPTap
from lab.workspace import Workspace
from runtime.assembly import Runtime
from runtime.gateway import GatewayError, ScopedGateway
from runtime.service import Settings
from runtime.startup import BrowserUnreachable
from suites.harness import Desk
from suites.isolation.test_canaries import (
    OTHERS,
    ForwardEverything,
    RecordingAgent,
    TappedGateway,
    assert_confined,
    assert_no_canary_bytes_on_the_child_side,
    canary_desk,
    report_discovery,
)
from suites.isolation.test_isolation import observe_act_verify_on_a
from suites.parity.expected import EXPECTED, assert_declared_outcomes
from suites.parity.tasks import TASKS, run_task
from suites.proofs import assert_untouched
from suites.remote.conftest import through_tap
from suites.remote.farm import HEADER, ROOT, Farm

CLI_TIMEOUT = 60.0


@pytest.fixture
def gateway_class() -> type[TappedGateway]:
    return TappedGateway


@pytest.fixture
async def runtime(
    tap: CDPTap, child: CDPTap, backend: str, gateway_class: type[TappedGateway], remote: Farm
) -> AsyncIterator[Runtime]:
    """The real runtime on the remote browser: through the tap to the door, with its header; each session's gateway
    behind the child tap, its upstream the same door with the same header."""

    def make(*args: Any, **kwargs: Any) -> ScopedGateway:
        return gateway_class(child, *args, **kwargs)

    rt = await Runtime.connect(await through_tap(tap, remote), settings=Settings(backend=backend), gateway_factory=make)
    yield rt
    await rt.close()


# -- through the door ----------------------------------------------------------------------------------------------


@pytest.mark.req(
    "remote:isolation",
    "isolation:canary-child-bytes",
    "isolation:canary-result-bytes",
    "isolation:b-untouched",
    "isolation:chat-untouched",
    "isolation:other-window-untouched",
)
async def test_on_a_remote_browser_no_byte_of_b_the_chat_or_another_window_reaches_a_backend_or_a_result(
    desk: Desk,
    other_window: Workspace,
    agent: RecordingAgent,
    tap: CDPTap,
    child: CDPTap,
) -> None:
    canaries = await canary_desk(desk, other_window, "/dom_form/", tap, child)
    await observe_act_verify_on_a(agent)  # the relation "left" is read from the remote browser's windows
    assert_confined(tap, child, agent, desk, canaries)
    assert_untouched(tap, {name: desk.target(name) for name in OTHERS})


@pytest.mark.req("remote:parity-task", "parity:dom_form")
async def test_on_a_remote_browser_the_dom_form_task_gives_its_declared_outcome_signature(
    backend: str,
    request: pytest.FixtureRequest,
    tap: CDPTap,
    workspace: Workspace,
    fixture_server: FixtureServer,
    remote: Farm,
) -> None:
    signature = await run_task(
        TASKS["dom_form"],
        backend,
        tap=tap,
        workspace=workspace,
        server=fixture_server,
        test_id=request.node.nodeid,
        endpoint=await through_tap(tap, remote),
    )
    assert_declared_outcomes("dom_form", [signature], EXPECTED["dom_form"])
    assert signature.writes, "the task's write never reached the fixture server across the network"


@pytest.mark.req("remote:door-only")
async def test_the_remote_browser_is_reached_only_through_its_door_which_serves_no_json(
    remote: Farm, fixture_server: FixtureServer, lab_cdp: CDPClient
) -> None:
    door = remote.door.replace("ws://", "http://").split("/devtools/")[0]
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as http:
        for path in ("/json/version", "/json/list"):
            async with http.get(door + path, headers=remote.headers) as answer:
                assert answer.status == 404, path
        with pytest.raises(aiohttp.ClientConnectionError):  # its debugging port is on the namespace's loopback
            await http.get(f"http://{remote.host.address}:{remote.chromium.port}/json/version")
    # Pages load across the veth pair: the fixture server sees the namespace's address.
    loaded = fixture_server.wait_for_request("/canary/")
    target = (await lab_cdp.send("Target.createTarget", {"url": fixture_server.url("/canary/?c=door")}))["targetId"]
    try:
        assert (await loaded).peer == remote.host.address
    finally:
        await lab_cdp.send("Target.closeTarget", {"targetId": target})


PAGE_TRIES_THE_DOOR = """(async door => {
  const socket = await new Promise(done => {
    const ws = new WebSocket(door);
    ws.onopen = () => { ws.close(); done('open'); };
    ws.onerror = () => done('refused');
    setTimeout(() => done('no answer'), 5000);
  });
  let fetched;
  try {
    const answer = await fetch(door.replace('ws://', 'http://'), {headers: {HEADER: 'Bearer SECRET'}});
    fetched = 'status ' + answer.status;
  } catch (error) { fetched = 'refused'; }
  return [socket, fetched];
})"""
"""A page script's two ways to the door: a WebSocket (a page cannot add a header to it) and a fetch that carries the
right header (the browser sends an Origin, and a preflight first)."""


@pytest.mark.req("remote:door-only")
async def test_a_page_script_in_the_farms_browser_is_refused_by_the_door_even_knowing_its_header(
    remote: Farm, fixture_server: FixtureServer, lab_cdp: CDPClient
) -> None:
    target = (await lab_cdp.send("Target.createTarget", {"url": "about:blank"}))["targetId"]
    try:
        session = (await lab_cdp.send("Target.attachToTarget", {"targetId": target, "flatten": True}))["sessionId"]
        await lab_cdp.send("Page.enable", session_id=session)
        loaded = lab_cdp.wait_for_event("Page.loadEventFired", session)  # registered before the navigation
        await lab_cdp.send("Page.navigate", {"url": fixture_server.url("/canary/?c=page-at-door")}, session_id=session)
        await loaded
        script = PAGE_TRIES_THE_DOOR.replace("HEADER", HEADER).replace("SECRET", remote.secret)
        tried = await lab_cdp.send(
            "Runtime.evaluate",
            {"expression": f"({script})({json.dumps(remote.door)})", "awaitPromise": True, "returnByValue": True},
            session_id=session,
        )
        socket, fetched = tried["result"]["value"]
        assert socket == "refused", tried
        assert fetched in ("refused", "status 403"), tried  # its preflight refused, or the door's Origin rule
    finally:
        await lab_cdp.send("Target.closeTarget", {"targetId": target})
    # The Origin rule decides alone: the right header, the right path, and an Origin as a page's request has.
    door = remote.door.replace("ws://", "http://")
    page_like = {**remote.headers, "Origin": fixture_server.url("/")}
    async with (
        aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as http,
        http.get(door, headers=page_like) as answer,
    ):
        assert answer.status == 403


# -- a wrong or missing header ---------------------------------------------------------------------------------------


def assert_one_line_refusal(text: str, remote: Farm) -> None:
    assert "\n" not in text.strip(), text
    assert "refused the connection with HTTP 401" in text, text
    assert "--cdp-header" in text, text
    assert remote.secret not in text, "a header's value was written out"
    assert "Bearer" not in text, "a header's value was written out"


@pytest.mark.req("remote:header-refused")
async def test_a_wrong_or_missing_header_is_one_line_naming_the_status_from_the_runtime_and_a_gateway(
    remote: Farm, lab_cdp: CDPClient
) -> None:
    page = next(t for t in (await lab_cdp.send("Target.getTargets"))["targetInfos"] if t["type"] == "page")
    for headers in ({}, {HEADER: "Bearer wrong"}):
        with pytest.raises(BrowserUnreachable) as refused:
            await Runtime.connect(remote.endpoint(headers=headers))
        assert_one_line_refusal(str(refused.value), remote)
        gateway = ScopedGateway(remote.endpoint(headers=headers), page["targetId"])
        with pytest.raises(GatewayError) as failed:
            await gateway.start()
        assert_one_line_refusal(str(failed.value), remote)


@pytest.mark.req("remote:header-refused")
async def test_serve_with_a_wrong_header_from_a_file_stops_naming_the_refusal_and_never_the_secret(
    remote: Farm, tmp_path: Path
) -> None:
    headers = tmp_path / "headers"
    headers.write_text(f"# the farm's key\n{HEADER}: Bearer not-{remote.secret}\n", encoding="utf-8")
    os.chmod(headers, 0o600)
    command = (sys.executable, "-m", "runtime.cli", "serve", "--cdp-endpoint", remote.door, "--cdp-headers-file")
    done = await asyncio.to_thread(
        subprocess.run,
        (*command, str(headers)),
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=CLI_TIMEOUT,
    )
    assert done.returncode != 0
    assert "refused the connection with HTTP 401" in done.stderr.strip().splitlines()[-1], done.stderr
    assert remote.secret not in done.stderr + done.stdout


# -- negative controls -------------------------------------------------------------------------------------------


@pytest.mark.negative_control
@pytest.mark.parametrize("gateway_class", [ForwardEverything])
@pytest.mark.req("remote:isolation", "isolation:canary-child-bytes")
async def test_the_remote_canary_check_catches_a_gateway_that_forwards_everything(
    desk: Desk,
    other_window: Workspace,
    agent: RecordingAgent,
    tap: CDPTap,
    child: CDPTap,
    backend: str,
) -> None:
    canaries = await canary_desk(desk, other_window, "/dom_form/", tap, child)
    seen = await agent.call(command="observe", page="left")
    assert seen.status == ("failed" if backend == "open_claude_chrome" else "ok"), seen
    report_discovery(tap, child, desk, canaries)
    with pytest.raises(AssertionError, match="other Pages' bytes reached a backend child"):
        assert_no_canary_bytes_on_the_child_side(child, canaries)


@pytest.mark.negative_control
@pytest.mark.req("remote:header-refused")
async def test_the_door_check_catches_a_client_that_drops_its_header_behind_the_tap(remote: Farm, tap: CDPTap) -> None:
    """The tap passes on only what its client sent, so what the door admitted in the proofs above was the runtime's
    and its gateways' own header: a client without one, on the same tap port, is turned away."""
    client = await CDPClient.connect((await through_tap(tap, remote)).url)
    try:
        await asyncio.wait_for(client.closed.wait(), CLI_TIMEOUT)
    finally:
        await client.close()
    [refused] = tap.incidents
    assert (refused.kind, "401" in refused.detail) == ("upstream_refused", True), refused


# -- the namespace itself ------------------------------------------------------------------------------------------


@pytest.mark.req("remote:skip-reason")
def test_without_root_or_ip_the_remote_proofs_skip_with_the_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(netns.os, "geteuid", lambda: 1000)
    assert netns.unavailable() == "network namespaces need root (ip netns add); run the lab as root"
    monkeypatch.setattr(netns.os, "geteuid", lambda: 0)
    monkeypatch.setattr(netns.shutil, "which", lambda name: None)
    assert netns.unavailable() == "no `ip` (iproute2) on this machine"


def namespaces() -> str:
    return subprocess.run(("ip", "netns", "list"), capture_output=True, text=True, check=True).stdout


def link_exists(name: str) -> bool:
    return subprocess.run(("ip", "link", "show", name), capture_output=True).returncode == 0


@pytest.mark.req("remote:cleanup")
async def test_closing_a_namespace_ends_its_processes_and_removes_it_with_its_veth_pair() -> None:
    if (reason := netns.unavailable()) is not None:
        pytest.skip(reason)
    host = await RemoteHost.create()
    try:
        await host.start("/bin/sh", "-c", "echo up; exec sleep 600", ready="up")
        assert host.name in namespaces()
        assert link_exists(host.host_if)
    finally:
        await host.close()
    assert host.processes[0].returncode is not None
    assert host.name not in namespaces()
    assert not link_exists(host.host_if)


@pytest.mark.req("remote:cleanup")
def test_a_namespace_left_by_a_run_that_died_is_removed_with_its_processes() -> None:
    if (reason := netns.unavailable()) is not None:
        pytest.skip(reason)
    gone = next(pid for pid in range(4_000_000, 4_194_304) if not os.path.exists(f"/proc/{pid}"))
    left = f"{netns.PREFIX}{gone}-254"
    subprocess.run(("ip", "netns", "add", left), check=True)
    sleeper = subprocess.Popen(
        ("ip", "netns", "exec", left, "/bin/sh", "-c", "echo up; exec sleep 600"), stdout=subprocess.PIPE, text=True
    )
    try:
        assert sleeper.stdout is not None
        assert sleeper.stdout.readline() == "up\n"  # inside the namespace before it is found
        netns.remove_stale()  # another lab process's create() may get there first: either way it is gone
        assert sleeper.wait(timeout=10) != 0
    finally:
        sleeper.kill()
        subprocess.run(("ip", "netns", "del", left), capture_output=True)
    assert left not in namespaces()
