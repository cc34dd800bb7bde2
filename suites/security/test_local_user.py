"""Another local user can neither read a session's gateway secret nor use the gateway with it.

A process's command line is public on a shared machine (`ps`, `/proc/<pid>/cmdline`); its environment is readable
by its own uid and root. The runtime hands each Node backend its gateway's URL (secret included) in a 0600 config
file inside the session's 0700 workdir, so nothing another uid can read carries it; and the gateway admits only
connections whose socket belongs to its own uid (`runtime.loopback`), so a leaked secret still opens nothing.

Each proof plays the other user live: with a real session observing a fixture Page, `nobody` (uid 65534, through
`setpriv`) runs `ps -eo args`, reads every `/proc/*/cmdline` and tries every `/proc/*/environ` and the config file;
then, handed the secret (a leak the test simulates), asks the gateway for `/json/list` and opens a WebSocket on the
bound Page. Negative controls: a backend whose flags put the URL on argv as before (`gateway_on_argv`, the sabotage
seam that swaps a backend) — `nobody` finds the secret in `ps`; and a gateway without the caller check (a
subclass set through the security suite's gateway seam) — `nobody` reads `/json/list` and evaluates in the Page.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import allure
import pytest
from aiohttp import web

from lab.processes import processes
from lab.tap import CDPTap
from runtime.computer_session import ComputerSession
from runtime.gateway import ScopedGateway
from runtime.gateway.admission import Admission
from runtime.loopback import TABLES, peer_uid
from suites.harness import Agent, Desk
from suites.security.conftest import HTTP_TIMEOUT, GatewayWatch

NOBODY = ("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups")
"""How a test becomes another local user: we run as root, `nobody` is uid 65534."""
PYTHON = "/usr/bin/python3"
"""The system interpreter (stdlib only): `nobody` can run it; the project's venv may sit under a private home."""
ATTACKER_TIMEOUT = 60.0
"""Bound on one run of the other user's script (a `ps` and a walk of /proc on a loaded machine)."""

LOOK = r"""
import json, os, select, subprocess, sys, time
cmdlines = {}
def sweep():
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    cmdlines.setdefault(pid, set()).add(f.read().decode("utf-8", "replace"))
            except OSError:
                pass
print("watching", flush=True)
end = time.monotonic() + float(sys.argv[1])
while time.monotonic() < end and not select.select([sys.stdin], [], [], 0.002)[0]:
    sweep()
sweep()
paths = sys.stdin.readline().split()
ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True, timeout=30).stdout
environs, denied = {}, 0
for pid in os.listdir("/proc"):
    if pid.isdigit():
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                environs[pid] = f.read().decode("utf-8", "replace")
        except OSError:
            denied += 1
files = {}
for path in paths:
    try:
        files[path] = open(path).read() if os.path.isfile(path) else " ".join(os.listdir(path))
    except OSError as e:
        files[path] = type(e).__name__
print(json.dumps({"uid": os.getuid(), "ps": ps, "cmdlines": {k: sorted(v) for k, v in cmdlines.items()},
                  "environs": environs, "environ_denied": denied, "files": files}))
"""
"""What another user sees: every command line, polled from before the session starts until it is live (a process
may change its command line once running: chrome-devtools-mcp sets `process.title`), then `ps`, every environment
it may read, and the paths it is given on stdin (the backend's config file and its folders)."""

USE = r"""
import base64, http.client, json, os, socket, struct, sys
from urllib.parse import urlsplit
http_url, ws_url = sys.stdin.read().split()
out = {"uid": os.getuid()}
u = urlsplit(http_url)
c = http.client.HTTPConnection(u.hostname, u.port, timeout=20)
c.request("GET", u.path + "/json/list")
r = c.getresponse()
out["list_status"], out["list_body"] = r.status, r.read().decode("utf-8", "replace")[:4000]
w = urlsplit(ws_url)
s = socket.create_connection((w.hostname, w.port), timeout=20)
key = base64.b64encode(os.urandom(16)).decode()
s.sendall((f"GET {w.path} HTTP/1.1\r\nHost: {w.netloc}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
           f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n").encode())
head = b""
while b"\r\n\r\n" not in head:
    chunk = s.recv(4096)
    if not chunk:
        break
    head += chunk
out["ws_status"] = int(head.split()[1]) if head else 0
if out["ws_status"] == 101:
    command = json.dumps({"id": 1, "method": "Runtime.evaluate",
                          "params": {"expression": "location.pathname", "returnByValue": True}}).encode()
    mask = os.urandom(4)
    s.sendall(bytes([0x81, 0x80 | 126]) + struct.pack(">H", len(command)) + mask
              + bytes(b ^ mask[i % 4] for i, b in enumerate(command)))
    data = head.split(b"\r\n\r\n", 1)[1]
    def need(n):
        global data
        while len(data) < n:
            chunk = s.recv(65536)
            if not chunk:
                raise EOFError
            data += chunk
    while True:
        need(2)
        size, start = data[1] & 0x7F, 2
        if size == 126:
            need(4)
            size, start = struct.unpack(">H", data[2:4])[0], 4
        elif size == 127:
            need(10)
            size, start = struct.unpack(">Q", data[2:10])[0], 10
        need(start + size)
        frame, data = data[start:start + size], data[start + size:]
        message = json.loads(frame)
        if message.get("id") == 1:
            out["evaluated"] = message.get("result", {}).get("result", {}).get("value")
            break
print(json.dumps(out))
"""
"""What another user does with a leaked gateway URL: `/json/list` by HTTP, then a WebSocket on the bound Page and
one `Runtime.evaluate` if the handshake is accepted."""


@dataclass
class Looked:
    """What `nobody` read while a session was live, and the session's own processes and secret to judge it by."""

    secret: str
    backend_pids: list[int]
    """The backend's child and every process under it (none for the in-process backend)."""
    uid: int
    ps: str
    cmdlines: dict[int, list[str]]
    """pid → every command line the process showed while `nobody` watched."""
    environs: dict[int, str]
    environ_denied: int
    files: dict[str, str]

    def showing_secret(self) -> list[int]:
        return sorted(pid for pid, lines in self.cmdlines.items() if any(self.secret in line for line in lines))

    def figures(self) -> dict[str, Any]:
        """The resolve note's figures: what another uid reads of this session, by source."""
        mine = [pid for pid in self.backend_pids if pid in self.cmdlines]
        return {
            "backend processes": len(self.backend_pids),
            "their command lines read": len(mine),
            "their command lines with the secret": sum(self.secret in " ".join(self.cmdlines[pid]) for pid in mine),
            "their environments read": sum(pid in self.environs for pid in self.backend_pids),
            "ps lines with the secret": sum(self.secret in line for line in self.ps.splitlines()),
            "processes whose command line showed the secret": len(self.showing_secret()),
            "processes watched": len(self.cmdlines),
            "environments read (any process)": len(self.environs),
            "environments refused": self.environ_denied,
            "environments with the secret": sum(self.secret in e for e in self.environs.values()),
            "the config file and its folders": {Path(p).name: v[:40] for p, v in self.files.items()},
        }


@dataclass
class Used:
    """What `nobody` got from the gateway with its secret, and what the gateway and the tap saw meanwhile."""

    answer: dict[str, Any]
    refusals: list[str]
    commands: Counter[str]


class AnyCaller(Admission):
    """The broken variant of the caller check: any local user's socket is admitted (the gateway before issue 29)."""

    def check_caller(self, request: web.Request) -> str | None:
        return None


async def as_nobody(script: str, *args: str, stdin: str = "") -> dict[str, Any]:
    """Run `script` with the system Python as uid 65534 (no groups, a bare environment); its JSON answer."""
    process = await start_as_nobody(script, *args)
    return await answer_of(process, stdin)


async def start_as_nobody(script: str, *args: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        *NOBODY, PYTHON, "-I", "-c", script, *args,
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}, cwd="/",
    )  # fmt: skip


async def answer_of(process: asyncio.subprocess.Process, stdin: str) -> dict[str, Any]:
    """Send `stdin`, then the JSON answer of the other user's script (bounded; a hang is a failure)."""
    try:
        out, err = await asyncio.wait_for(process.communicate(stdin.encode()), ATTACKER_TIMEOUT)
    except TimeoutError:
        process.kill()
        await process.wait()
        raise AssertionError(f"the other user's script hung: no answer within {ATTACKER_TIMEOUT:g}s") from None
    assert process.returncode == 0, f"the other user's script failed ({process.returncode}): {err.decode()[-2000:]}"
    return json.loads(out.splitlines()[-1])


def tree(root: int) -> list[int]:
    """`root` and every live process under it."""
    found, alive = [root], [p for p in processes() if p.state not in ("Z", "X")]
    for pid in found:
        found.extend(p.pid for p in alive if p.ppid == pid and p.pid not in found)
    return found


async def live_session(desk: Desk, agent: Agent, gateways: GatewayWatch) -> tuple[ComputerSession, ScopedGateway]:
    """A session observing `/dom_form/` on Page A, its backend started; the session and its gateway."""
    await desk.open("A", "/dom_form/", desk.workspace.column(0, 3))
    await desk.open("chat", "/chat/", desk.workspace.column(1, 3), chat=True)
    desk.authorize("A")
    seen = await agent.observe(page=desk.handle("A"))
    assert "Email" in seen.observation
    session = desk.runtime.service.sessions.live[seen.computer_session_id]
    [gateway] = [g for g in gateways.started if g is session.gateway]
    return session, gateway


def secret_of(gateway: ScopedGateway) -> str:
    return urlsplit(gateway.url).path.strip("/")


async def look_as_nobody(desk: Desk, agent: Agent, gateways: GatewayWatch) -> Looked:
    """As `nobody`, watch every command line while a session starts, then read everything a local user can: `ps`,
    /proc, the backend's config file and its folders."""
    watcher = await start_as_nobody(LOOK, str(ATTACKER_TIMEOUT / 2))
    try:
        assert watcher.stdout is not None
        ready = await asyncio.wait_for(watcher.stdout.readline(), ATTACKER_TIMEOUT)
        assert ready == b"watching\n", ready  # registered before the session starts: nothing it shows is missed
        session, gateway = await live_session(desk, agent, gateways)
    except BaseException:
        watcher.kill()
        await watcher.wait()
        raise
    pid = getattr(session.backend, "pid", None)
    pids = tree(pid) if pid is not None else []
    config = getattr(session.backend, "config_path", None)
    paths = [str(config), str(config.parent), str(session.workdir)] if config is not None else [str(session.workdir)]
    raw = await answer_of(watcher, " ".join(paths) + "\n")
    looked = Looked(
        secret=secret_of(gateway),
        backend_pids=pids,
        uid=raw["uid"],
        ps=raw["ps"],
        cmdlines={int(k): v for k, v in raw["cmdlines"].items()},
        environs={int(k): v for k, v in raw["environs"].items()},
        environ_denied=raw["environ_denied"],
        files=raw["files"],
    )
    figures = looked.figures()
    allure.attach(json.dumps(figures, indent=2), "what another uid read", "application/json")
    print(f"{session.backend_name}: what uid {looked.uid} read: {figures}")
    return looked


def assert_no_secret_readable(looked: Looked) -> None:
    """The release check: nothing another uid can read carries the session's gateway secret."""
    assert looked.uid == 65534
    assert looked.secret not in looked.ps, "the gateway secret is in `ps` output"
    on_cmdline = looked.showing_secret()
    assert on_cmdline == [], f"the gateway secret is on the command line of {on_cmdline}"
    in_environ = sorted(pid for pid, env in looked.environs.items() if looked.secret in env)
    assert in_environ == [], f"the gateway secret is in the environment of {in_environ}"
    leaked = sorted(path for path, content in looked.files.items() if looked.secret in content)
    assert leaked == [], f"the gateway secret is in files another uid reads: {leaked}"


async def use_as_nobody(
    desk: Desk, agent: Agent, gateways: GatewayWatch, tap: CDPTap
) -> tuple[Used, ScopedGateway, ComputerSession]:
    """Open a session, leak its gateway URL to `nobody` and let it try `/json/list` and the bound Page's WebSocket."""
    session, gateway = await live_session(desk, agent, gateways)
    ws_url = f"ws://{urlsplit(gateway.url).netloc}/{secret_of(gateway)}/devtools/page/{session.target_id}"
    refused_before, seen_before = len(gateway.refusals), len(tap.records)
    answer = await as_nobody(USE, stdin=f"{gateway.url} {ws_url}")
    used = Used(
        answer=answer,
        refusals=[f"{r.method}: {r.reason}" for r in gateway.refusals[refused_before:]],
        commands=Counter(r.method for r in tap.records[seen_before:] if r.kind == "command" and r.label == "runtime"),
    )
    figures = {k: answer.get(k) for k in ("uid", "list_status", "ws_status", "evaluated")}
    figures["list_body"] = answer.get("list_body", "")[:200]
    allure.attach(json.dumps({**figures, "refusals": used.refusals}, indent=2), "the other uid", "application/json")
    print(f"{session.backend_name}: uid {answer['uid']} with the secret: {figures}; refusals {used.refusals}")
    return used, gateway, session


def assert_other_uid_refused(used: Used) -> None:
    """The release check: with the secret, another uid gets 403 on HTTP and WebSocket, recorded, nothing forwarded."""
    assert used.answer["uid"] == 65534
    assert (used.answer["list_status"], used.answer["ws_status"]) == (403, 403), f"another uid was admitted: {used}"
    assert "evaluated" not in used.answer
    assert len(used.refusals) == 2, used.refusals
    assert all("uid 65534" in refusal for refusal in used.refusals), used.refusals
    assert not used.commands, f"CDP calls reached Chromium for another uid: {dict(used.commands)}"


# -- the secret is nowhere another uid reads -----------------------------------------------------------------------


@pytest.mark.req("gateway:local-user")
async def test_a_second_uid_reads_no_gateway_secret_from_ps_cmdlines_or_environments_on_every_backend(
    desk: Desk, agent: Agent, gateways: GatewayWatch, backend: str
) -> None:
    looked = await look_as_nobody(desk, agent, gateways)
    assert_no_secret_readable(looked)
    if backend == "open_claude_chrome":  # in-process: no child, nothing handed over outside the runtime
        assert looked.backend_pids == []
        assert os.getpid() in looked.cmdlines
        return
    # The check is not vacuous: `nobody` read every command line of the backend's processes, none of their
    # environments, and the config file that carries the URL is out of its reach.
    assert looked.backend_pids
    assert set(looked.backend_pids) <= set(looked.cmdlines)
    assert not set(looked.backend_pids) & set(looked.environs)
    assert all(any(looked.cmdlines[pid]) for pid in looked.backend_pids)
    assert set(looked.files.values()) == {"PermissionError"}, looked.files


@pytest.mark.negative_control
@pytest.mark.backends("playwright_mcp", "chrome_devtools_mcp")
@pytest.mark.sabotage("gateway_on_argv")
@pytest.mark.req("gateway:local-user")
async def test_the_ps_check_catches_a_backend_whose_flags_carry_the_gateway_url(
    desk: Desk, agent: Agent, gateways: GatewayWatch, backend: str
) -> None:
    looked = await look_as_nobody(desk, agent, gateways)
    # chrome-devtools-mcp blanks its command line (`process.title`) once it runs; until then `ps` shows the URL.
    with pytest.raises(AssertionError, match=r"the gateway secret is (in `ps` output|on the command line of)"):
        assert_no_secret_readable(looked)
    assert set(looked.showing_secret()) & set(looked.backend_pids)


# -- with the secret, another uid is refused before anything reaches Chromium -------------------------------------


@pytest.mark.req("gateway:local-user")
async def test_a_second_uid_holding_the_secret_is_refused_on_http_and_websocket_before_any_upstream_call(
    desk: Desk, agent: Agent, gateways: GatewayWatch, tap: CDPTap, backend: str
) -> None:
    used, gateway, session = await use_as_nobody(desk, agent, gateways, tap)
    assert_other_uid_refused(used)
    # The session's own backend, on the same gateway, still works and is never refused admission.
    refused = len(gateway.refusals)
    seen = await agent.observe(page=desk.handle("A"))
    assert seen.computer_session_id == session.id
    assert "Email" in seen.observation
    assert [r for r in gateway.refusals[refused:] if r.conn == 0] == []


@pytest.mark.negative_control
@pytest.mark.req("gateway:local-user")
async def test_the_caller_check_catches_a_gateway_that_admits_any_local_user(
    desk: Desk, agent: Agent, gateways: GatewayWatch, tap: CDPTap, backend: str
) -> None:
    gateways.admission = AnyCaller
    used, _, session = await use_as_nobody(desk, agent, gateways, tap)
    with pytest.raises(AssertionError, match="another uid was admitted"):
        assert_other_uid_refused(used)
    assert used.answer["list_status"] == 200
    assert [t["id"] for t in json.loads(used.answer["list_body"])] == [session.target_id]
    assert used.answer["ws_status"] == 101
    assert used.answer["evaluated"] == "/dom_form/"
    assert used.commands["Runtime.evaluate"] >= 1


# -- the same uid, from a web page's request or under a wrong name --------------------------------------------------


@pytest.mark.req("gateway:local-user", "gateway:secret-url")
async def test_a_request_with_sec_fetch_site_or_a_wrong_host_is_refused_even_from_the_gateways_own_uid(
    desk: Desk, agent: Agent, gateways: GatewayWatch, tap: CDPTap, backend: str
) -> None:
    session, gateway = await live_session(desk, agent, gateways)
    netloc, secret = urlsplit(gateway.url).netloc, secret_of(gateway)
    port = urlsplit(gateway.url).port
    ws_url = f"ws://{netloc}/{secret}/devtools/page/{session.target_id}"
    web_page = {"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "no-cors", "Sec-Fetch-Dest": "empty"}
    tries: list[tuple[str, dict[str, str], int]] = [
        ("list", {"Sec-Fetch-Site": "same-origin"}, 403),
        ("list", web_page, 403),
        ("list", {"Sec-Fetch-Dest": "document"}, 403),
        ("ws", {"Sec-Fetch-Site": "same-site"}, 403),
        ("list", {"Host": f"localhost:{port}"}, 421),
        ("list", {"Host": f"attacker.example:{port}"}, 421),
        ("list", {"Host": "127.0.0.1"}, 421),
        ("ws", {"Host": f"rebound.example:{port}"}, 421),
    ]
    refused_before, seen_before = len(gateway.refusals), len(tap.records)
    statuses = []
    async with aiohttp.ClientSession(timeout=HTTP_TIMEOUT) as http:
        for kind, headers, _ in tries:
            if kind == "list":
                async with http.get(gateway.url + "/json/list", headers=headers) as answer:
                    statuses.append(answer.status)
            else:
                try:
                    async with http.ws_connect(ws_url, headers=headers):
                        statuses.append(101)
                except aiohttp.WSServerHandshakeError as refused:
                    statuses.append(refused.status)
    assert statuses == [status for _, _, status in tries]
    refusals = gateway.refusals[refused_before:]
    assert [("Host" in r.reason, "Sec-Fetch" in r.reason) for r in refusals] == [
        (status == 421, status == 403) for _, _, status in tries
    ]
    assert not any(secret in f"{r.method} {r.reason}" for r in refusals)
    commands = Counter(r.method for r in tap.records[seen_before:] if r.kind == "command" and r.label == "runtime")
    assert not commands, f"refused requests reached Chromium: {dict(commands)}"

    # What a CDP client sends is admitted: Node's fetch() adds `Sec-Fetch-Mode: cors` (chrome-devtools-mcp's
    # discovery), nothing else; the bound Page is listed.
    async with (
        aiohttp.ClientSession(timeout=HTTP_TIMEOUT) as http,
        http.get(gateway.url + "/json/list", headers={"Sec-Fetch-Mode": "cors"}) as answer,
    ):
        assert answer.status == 200
        assert [t["id"] for t in await answer.json()] == [session.target_id]


# -- the helper the caller check rests on --------------------------------------------------------------------------


@pytest.mark.req("gateway:local-user")
def test_the_peer_uid_helper_names_the_owner_of_a_loopback_peer_and_refuses_to_guess(tmp_path: Path) -> None:
    for family, host in ((socket.AF_INET, "127.0.0.1"), (socket.AF_INET6, "::1")):
        with (
            socket.create_server((host, 0), family=family) as server,
            socket.create_connection(server.getsockname()[:2], timeout=10),
        ):
            accepted, peer = server.accept()
            with accepted:
                assert peer_uid(peer, accepted.getsockname()) == os.geteuid()  # netlink's answer
                assert peer_uid(peer, accepted.getsockname(), tables=TABLES) == os.geteuid()  # /proc's
                assert peer_uid(accepted.getsockname(), peer) == os.geteuid()  # the other end: ours too
                assert peer_uid(peer, accepted.getsockname(), tables=(tmp_path / "none",)) is None
    with socket.create_server(("127.0.0.1", 0)) as server:
        server.settimeout(ATTACKER_TIMEOUT)
        port = server.getsockname()[1]
        script = f"import socket; s = socket.create_connection(('127.0.0.1', {port})); s.recv(1)"
        other = subprocess.Popen([*NOBODY, PYTHON, "-I", "-c", script], env={"PATH": "/usr/bin:/bin"}, cwd="/")
        try:
            accepted, peer = server.accept()
            with accepted:
                assert peer_uid(peer, accepted.getsockname()) == 65534
                assert peer_uid(peer, accepted.getsockname(), tables=TABLES) == 65534
                # A dual-stack client's IPv4-mapped address is the same peer.
                assert peer_uid(("::ffff:127.0.0.1", peer[1]), accepted.getsockname()) == 65534
        finally:
            other.wait(timeout=ATTACKER_TIMEOUT)
        # Closed first by the client, its socket waits in TIME_WAIT, which the kernel lists as uid 0: unknown.
        with socket.create_connection(("127.0.0.1", port), timeout=10):
            accepted, peer = server.accept()
        with accepted:
            assert accepted.recv(1) == b""
        assert peer_uid(peer, ("127.0.0.1", port)) is None
        assert peer_uid(peer, ("127.0.0.1", port), tables=TABLES) is None
        assert peer_uid(("127.0.0.1", 1), ("127.0.0.1", port)) is None
    # The table's format: a TIME_WAIT line is never an answer; a peer off loopback is on another machine.
    table = tmp_path / "tcp"
    header = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
    line = "   0: 0100007F:C350 0100007F:1F90 {st} 00000000:00000000 00:00000000 00000000  {uid}        0 {inode}\n"
    table.write_text(header + line.format(st="06", uid=0, inode=0))
    assert peer_uid(("127.0.0.1", 50000), ("127.0.0.1", 8080), tables=(table,)) is None
    table.write_text(header + line.format(st="01", uid=1000, inode=4242))
    assert peer_uid(("127.0.0.1", 50000), ("127.0.0.1", 8080), tables=(table,)) == 1000
    assert peer_uid(("10.1.2.3", 50000), ("127.0.0.1", 8080), tables=(table,)) is None
