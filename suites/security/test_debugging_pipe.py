"""No TCP debugging port where the runtime launches the browser (issue 29).

A Chromium with `--remote-debugging-port` answers `/json/list` (every Page's URL, the console's secret URL among
them) to any local user, and its WebSocket drives the whole browser. `PrivateChromium` (what `computer-use app`
and `computer-use serve --launch` start) runs Chromium with `--remote-debugging-pipe`, and
`runtime.pipe.PipeBroker` serves that pipe to the runtime's own clients on a Unix socket in a 0700 directory,
closing any peer of another uid before reading a byte.

The attacker is a second uid (`nobody`, through `setpriv`) while a Page with a secret in its URL is open: it tries
the broker's socket and `GET /json/list` on every TCP port Chromium's process group listens on (found as root from
`/proc/net/tcp{,6}` and the group's fds; every loopback port would also hit other tests' gateways, whose refusal
counts are proofs of their own). `computer-use serve --launch` and `computer-use app` are also run as a user runs
them: no port, and the app's console URL unread by the second uid. Negative controls: `PORT_TOO` (the launcher's
`debugging` flags with the TCP port it had before) and `AnyUidBroker` (a broker whose peer check admits anyone),
caught by the same checks.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import secrets
import shutil
import signal
import sys
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from fixtures_sites.server import FixtureServer
from lab.cdp import CDPError
from runtime.assembly import Runtime
from runtime.browser import PIPE_ONLY, PrivateChromium
from runtime.cdp import CDPConnection
from runtime.gateway import GatewayEvent, ScopedGateway
from runtime.models import ComputerUseResult
from runtime.pipe import PipeBroker, http_session
from runtime.service import Settings
from runtime.transports.client import HostedClient
from suites.harness import client_in_task, ref_of
from suites.security.conftest import GatewayWatch, raw_client

ROOT = Path(__file__).resolve().parents[2]
NOBODY = ("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups")
ATTACK_TIMEOUT = 60.0
LOAD_TIMEOUT = 30.0

ATTACK = r"""
import json, socket, sys, urllib.request
path, marker, *ports = sys.argv[1:]
seen = {"socket": "", "socket_listed": False, "listed_on": []}
try:
    with socket.socket(socket.AF_UNIX) as s:
        s.settimeout(10)
        s.connect(path)
        s.sendall(b"GET /json/list HTTP/1.0\r\nHost: chromium.invalid\r\n\r\n")
        answer = b""
        while chunk := s.recv(1 << 16):
            answer += chunk
    seen["socket"] = "answered" if answer else "closed unanswered"
    seen["socket_listed"] = marker in answer.decode(errors="replace")
except OSError as exc:
    seen["socket"] = type(exc).__name__
for port in ports:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10) as answer:
            if marker in answer.read().decode(errors="replace"):
                seen["listed_on"].append(int(port))
    except OSError:
        pass
print(json.dumps(seen))
"""
"""What the second uid runs: the broker's socket, then `/json/list` on each port given; a JSON line of what it got."""


PORT_TOO = (*PIPE_ONLY, "--remote-debugging-address=127.0.0.1", "--remote-debugging-port=0")
"""The negative control's `debugging` flags: the pipe, and the TCP port the launcher opened before issue 29."""


class AnyUidBroker(PipeBroker):
    """The negative control's broker: its peer check admits every uid."""

    def admits(self, uid: int | None) -> bool:
        return True


@dataclass
class Exposure:
    """What another uid can get from a launched Chromium."""

    ports: list[int]
    """TCP ports in LISTEN state held by Chromium's process group (root's view, from /proc)."""
    socket: str
    """What a connection to the broker's socket got: an OSError's name, "closed unanswered" or "answered"."""
    socket_listed: bool
    """The socket's answer carried the secret Page's URL."""
    listed_on: list[int]
    """Ports whose `/json/list`, read by the second uid, carried the secret Page's URL."""


def processes(field: int, value: int) -> list[int]:
    """The live processes whose `/proc/<pid>/stat` field after the name is `value`: 1 its parent, 2 its group."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        with contextlib.suppress(FileNotFoundError, ProcessLookupError):  # a process that ended while it was read
            fields = (proc / "stat").read_text().rsplit(")", 1)[1].split()
            if int(fields[field]) == value and fields[0] not in ("Z", "X"):
                found.append(int(proc.name))
    return found


def listening_ports(pgid: int) -> list[int]:
    """The TCP ports in LISTEN state whose socket a process of group `pgid` holds."""
    listening: dict[int, int] = {}
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for row in Path(table).read_text().splitlines()[1:]:
            fields = row.split()
            if fields[3] == "0A":  # TCP_LISTEN
                listening[int(fields[9])] = int(fields[1].rsplit(":", 1)[1], 16)
    members = processes(2, pgid)
    assert len(members) > 1, f"Chromium's process group {pgid} is {members}: the check would prove nothing"
    held: set[int] = set()
    for pid in members:
        with contextlib.suppress(FileNotFoundError, ProcessLookupError):
            for fd in Path(f"/proc/{pid}/fd").iterdir():
                with contextlib.suppress(FileNotFoundError):
                    link = os.readlink(fd)
                    if link.startswith("socket:["):
                        held.add(int(link[8:-1]))
    return sorted({listening[inode] for inode in held if inode in listening})


def arguments_of(pid: int) -> list[bytes]:
    return Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")


def chromium_child(pid: int) -> int:
    """The one Chromium `pid` launched (the launcher's shell execs into it)."""
    (chromium,) = [child for child in processes(1, pid) if Path(f"/proc/{child}/exe").resolve().name == "chromium"]
    return chromium


def launch_dirs(tmp: Path) -> list[Path]:
    """The profiles and socket directories launches made under `tmp` (their $TMPDIR)."""
    return sorted(tmp.glob("computer-use-*"))


async def as_nobody(*command: str) -> str:
    process = await asyncio.create_subprocess_exec(
        *NOBODY, *command, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, cwd="/"
    )
    out, err = await asyncio.wait_for(process.communicate(), ATTACK_TIMEOUT)
    assert process.returncode == 0, err.decode()
    return out.decode()


async def open_secret_page(endpoint: str, fixture_server: FixtureServer) -> str:
    """Open a Page whose URL carries a secret (as the console's does) and wait until it has loaded; its URL."""
    url = fixture_server.url(f"/dom_form/?secret={secrets.token_urlsafe(16)}")
    loaded = await open_loaded(endpoint, [url])
    assert loaded
    return url


async def open_loaded(endpoint: str, urls: list[str], left: int = 0) -> list[tuple[str, int]]:
    """Open each URL in a window of its own, side by side from `left`, on a connection of the test's own (the
    user's hands); wait until each has its title. (target id, window id) of each."""
    hands = await CDPConnection.connect(endpoint)
    loop = asyncio.get_running_loop()
    titled: dict[str, tuple[str, asyncio.Future[None]]] = {}

    def on_event(method: str, params: dict[str, Any], session: str | None) -> None:
        info = params.get("targetInfo") or {}
        url, waiting = titled.get(info.get("targetId", ""), ("", None))
        if method != "Target.targetInfoChanged" or waiting is None or waiting.done():
            return
        if info.get("url") == url and info.get("title") not in ("", url):  # the URL stands in until a title comes
            waiting.set_result(None)

    hands.listen(on_event)
    try:
        await hands.send("Target.setDiscoverTargets", {"discover": True})
        opened = []
        for index, url in enumerate(urls):
            bounds = {"left": left + 800 * index, "top": 0, "width": 800, "height": 700}
            target = (await hands.send("Target.createTarget", {"url": "about:blank", "newWindow": True, **bounds}))[
                "targetId"
            ]
            titled[target] = url, loop.create_future()  # registered before the navigation that fulfils it
            window = (await hands.send("Browser.getWindowForTarget", {"targetId": target}))["windowId"]
            await hands.send("Browser.setWindowBounds", {"windowId": window, "bounds": bounds})
            session = (await hands.send("Target.attachToTarget", {"targetId": target, "flatten": True}))["sessionId"]
            await hands.send("Page.navigate", {"url": url}, session)
            opened.append((target, window))
        await asyncio.wait_for(asyncio.gather(*(waiting for _, waiting in titled.values())), LOAD_TIMEOUT)
        return opened
    finally:
        await hands.close()


Launch = Callable[[], Awaitable[PrivateChromium]]
"""How a check launches Chromium: `PrivateChromium.launch`, or the same with a negative control's seams."""


async def exposure(launch: Launch, fixture_server: FixtureServer, *, reachable: bool) -> Exposure:
    """Launch as the app and `serve --launch` do, open a secret Page, and let the second uid try everything.
    `reachable`: open the socket's directory and the socket to everyone first, so only the peer check stands."""
    chromium = await launch()
    try:
        secret = await open_secret_page(chromium.endpoint, fixture_server)
        assert b"--remote-debugging-pipe" in arguments_of(chromium.process.pid)
        if reachable:
            chromium.broker.path.parent.chmod(0o711)
            chromium.broker.path.chmod(0o666)
        ports = listening_ports(chromium.process.pid)
        seen = json.loads(
            await as_nobody(sys.executable, "-I", "-c", ATTACK, str(chromium.broker.path), secret, *map(str, ports))
        )
        return Exposure(ports, seen["socket"], seen["socket_listed"], seen["listed_on"])
    finally:
        await chromium.close()


# -- (a) no port, and nothing another uid can open -----------------------------------------------------------------


@pytest.mark.req("browser:debugging-pipe")
async def test_a_launched_chromium_listens_on_no_tcp_port_and_a_second_uid_reaches_neither_its_socket_nor_a_list(
    fixture_server: FixtureServer,
) -> None:
    seen = await exposure(PrivateChromium.launch, fixture_server, reachable=False)
    assert seen.ports == [], f"Chromium listens on TCP ports {seen.ports}"
    assert seen.socket == "PermissionError", seen  # the 0700 directory: nobody can even reach the socket
    assert not seen.socket_listed
    assert seen.listed_on == []


@pytest.mark.negative_control
@pytest.mark.req("browser:debugging-pipe")
async def test_the_port_check_catches_a_launcher_that_still_opens_a_debugging_port(
    fixture_server: FixtureServer,
) -> None:
    seen = await exposure(partial(PrivateChromium.launch, debugging=PORT_TOO), fixture_server, reachable=False)
    assert len(seen.ports) == 1, seen
    assert seen.listed_on == seen.ports, "the second uid read the secret Page's URL from /json/list"


@pytest.mark.req("browser:debugging-pipe")
async def test_a_second_uid_that_can_reach_the_brokers_socket_is_closed_before_it_reads_anything(
    fixture_server: FixtureServer,
) -> None:
    seen = await exposure(PrivateChromium.launch, fixture_server, reachable=True)
    assert seen.socket in ("closed unanswered", "ConnectionResetError", "BrokenPipeError"), seen
    assert not seen.socket_listed
    assert seen.ports == []


@pytest.mark.negative_control
@pytest.mark.req("browser:debugging-pipe")
async def test_the_socket_check_catches_a_broker_that_admits_every_uid(fixture_server: FixtureServer) -> None:
    seen = await exposure(partial(PrivateChromium.launch, broker=AnyUidBroker), fixture_server, reachable=True)
    assert seen.socket == "answered", seen
    assert seen.socket_listed, "the second uid read the secret Page's URL from the broker"


# -- the broker: each connection a CDP session of its own, as each connection to a port is ----------------------


class Raw:
    """A CDP connection to the broker spoken frame by frame: what a client sends, exactly what it gets back."""

    def __init__(self, http: aiohttp.ClientSession, ws: aiohttp.ClientWebSocketResponse) -> None:
        self.http, self.ws, self.ids = http, ws, 0
        self.events: list[dict[str, Any]] = []

    @classmethod
    async def open(cls, chromium: PrivateChromium, path: str) -> Raw:
        http = http_session(chromium.endpoint, aiohttp.ClientTimeout(total=30))
        return cls(http, await http.ws_connect(f"ws://chromium.invalid{path}", max_msg_size=0))

    async def send(self, method: str, params: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
        """The whole answer to one command (events that come first are kept in `events`)."""
        self.ids += 1
        await self.ws.send_json({"id": self.ids, "method": method, "params": params or {}, **extra})
        async with asyncio.timeout(30):
            while True:
                message = json.loads((await self.ws.receive()).data)
                if message.get("id") == self.ids:
                    return message
                self.events.append(message)

    async def until(self, method: str, check: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
        """The first event `method` (kept or still to come) whose params pass `check`, bounded."""
        async with asyncio.timeout(30):
            while True:
                for event in self.events:
                    if event.get("method") == method and check(event["params"]):
                        return event
                self.events.append(json.loads((await self.ws.receive()).data))

    async def close(self) -> None:
        await self.ws.close()
        await self.http.close()


@pytest.mark.req("browser:debugging-pipe")
async def test_each_broker_connection_is_a_cdp_session_of_its_own_and_cannot_use_another_connections_session(
    piped: PrivateChromium, fixture_server: FixtureServer
) -> None:
    ((target, _),) = await open_loaded(piped.endpoint, [fixture_server.url("/dom_form/")])
    async with http_session(piped.endpoint) as http, http.get("http://chromium.invalid/json/version") as answer:
        browser_path = (await answer.json())["webSocketDebuggerUrl"].removeprefix("ws://chromium.invalid")
    a, b = await Raw.open(piped, browser_path), await Raw.open(piped, browser_path)
    page = await Raw.open(piped, f"/devtools/page/{target}")
    try:
        # Discovery is per connection: A's subscription shows B nothing.
        assert "result" in await a.send("Target.setDiscoverTargets", {"discover": True})
        assert target in [
            e["params"]["targetInfo"]["targetId"] for e in a.events if e["method"] == "Target.targetCreated"
        ]
        attached = await a.send("Target.attachToTarget", {"targetId": target, "flatten": True})
        session = attached["result"]["sessionId"]
        assert "sessionId" not in attached  # A's own root session is never shown to it
        evaluated = await a.send("Runtime.evaluate", {"expression": "window.mark = 'A'"}, sessionId=session)
        assert evaluated["sessionId"] == session
        assert evaluated["result"]["result"]["value"] == "A"

        # B names A's session: Chromium's own answer for a session it does not know, and nothing reaches the Page.
        refused = await b.send("Runtime.evaluate", {"expression": "window.mark = 'B'"}, sessionId=session)
        assert refused == {"id": b.ids, "error": {"code": -32001, "message": "Session with given id not found."}}
        assert b.events == []

        # A page connection: the page is its root session, as on a port.
        read = await page.send("Runtime.evaluate", {"expression": "window.mark"})
        assert read == {"id": page.ids, "result": {"result": {"type": "string", "value": "A"}}}

        # A and the page connection leave: their sessions go with them, and the Page is attached to nobody.
        await b.send("Target.setDiscoverTargets", {"discover": True})
        await page.close()
        await a.close()
        await b.until(
            "Target.targetInfoChanged",
            lambda params: params["targetInfo"]["targetId"] == target and not params["targetInfo"]["attached"],
        )
    finally:
        for client in (a, b, page):
            if not client.ws.closed:
                await client.close()


# -- (b) the runtime works on it, on every backend, with its gateways scoped ---------------------------------------


@pytest.fixture
async def piped() -> AsyncIterator[PrivateChromium]:
    chromium = await PrivateChromium.launch()
    yield chromium
    await chromium.close()


async def call(client: HostedClient, request: Any, **arguments: Any) -> ComputerUseResult:
    raw = await client.call(request, **arguments)
    return ComputerUseResult.model_validate(raw.structured_content)


@pytest.mark.req("browser:debugging-pipe", "gateway:discovery-only-bound", "gateway:refuses-other-targets")
async def test_a_runtime_on_a_pipe_launched_chromium_lists_observes_and_acts_with_its_gateway_scoped(
    backend: str, piped: PrivateChromium, fixture_server: FixtureServer, gateways: GatewayWatch
) -> None:
    (a, a_window), (chat, chat_window), (b, b_window) = await open_loaded(
        piped.endpoint, [fixture_server.url(path) for path in ("/dom_form/", "/chat/", "/dom_form/")]
    )
    runtime = await Runtime.connect(piped.endpoint, settings=Settings(backend=backend))
    try:
        page_a = await runtime.registry.register(a, a_window)
        await runtime.registry.register(chat, chat_window, is_chat=True)
        await runtime.registry.register(b, b_window)
        async with client_in_task(runtime.server) as mcp:
            client = HostedClient(mcp)
            request = await runtime.host.start_turn([page_a.registry_page_id]).provider_request()
            listed = await call(client, request, command="list_pages")
            assert [p.relation for p in listed.pages or []] == ["left"], listed
            seen = await call(client, request, command="observe", page="left")
            assert seen.status == "ok", seen
            typed = await call(
                client,
                request,
                command="act",
                computer_session_id=seen.computer_session_id,
                frame_id=seen.frame_id,
                action={"type": "type", "ref": ref_of(seen.observation, '"Full name"'), "text": "Ada Lovelace"},
            )
            assert typed.status == "ok", typed

            gateway = gateways.started[-1]
            assert gateway.target_id == a
            raw = await raw_client(gateway.url)
            try:
                targets = (await raw.send("Target.getTargets"))["targetInfos"]
                assert [t["targetId"] for t in targets] == [a]
                with pytest.raises(CDPError, match="gateway"):
                    await raw.send("Target.attachToTarget", {"targetId": b, "flatten": True})
            finally:
                await raw.close()
            assert gateway.refusals[-1].method == "Target.attachToTarget"
            assert gateway.lost is None
    finally:
        await runtime.close()


# -- closing: together, and Chromium's death reported as on a port --------------------------------------------------


@pytest.mark.req("browser:debugging-pipe", "gateway:events")
async def test_chromium_dying_is_upstream_lost_to_a_gateway_and_closing_leaves_no_profile_or_socket(
    fixture_server: FixtureServer,
) -> None:
    chromium = await PrivateChromium.launch()
    try:
        ((target, _),) = await open_loaded(chromium.endpoint, [fixture_server.url("/dom_form/")])
        cdp = await CDPConnection.connect(chromium.endpoint)
        lost: asyncio.Future[GatewayEvent] = asyncio.get_running_loop().create_future()

        def on_event(event: GatewayEvent) -> None:
            if event.kind == "upstream_lost" and not lost.done():
                lost.set_result(event)

        gateway = ScopedGateway(chromium.endpoint, target, on_event=on_event)
        await gateway.start()
        try:
            os.killpg(chromium.process.pid, signal.SIGKILL)
            assert (await asyncio.wait_for(lost, 30)).target_id == target
            assert gateway.lost is not None
            assert gateway.lost.startswith("upstream_lost")
            await asyncio.wait_for(cdp.closed.wait(), 30)
            assert not chromium.broker.path.exists(), "the broker still listens for a browser that is gone"
        finally:
            await gateway.close()
            await cdp.close()
    finally:
        await chromium.close()
    assert not chromium.profile.exists()
    assert not chromium.broker.path.parent.exists()


# -- (c) `computer-use serve --launch`, as a user runs it ------------------------------------------------------------


@contextlib.asynccontextmanager
async def command(*arguments: str) -> AsyncIterator[tuple[asyncio.subprocess.Process, Path]]:
    """`computer-use <arguments>` as a user runs it (`{tmp}` in an argument: its $TMPDIR), and its $TMPDIR: a short
    one of its own (Chromium's singleton socket and the broker's must fit a Unix socket path). Killed, if still
    running, and its $TMPDIR removed after."""
    tmp = Path(tempfile.mkdtemp(prefix="cu-pipe-"))
    process = await asyncio.create_subprocess_exec(
        str(ROOT / ".venv" / "bin" / "computer-use"),
        *(argument.format(tmp=tmp) for argument in arguments),
        env={**os.environ, "PYTHONPATH": str(ROOT), "TMPDIR": str(tmp)},
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        start_new_session=True,
    )
    try:
        yield process, tmp
    finally:
        if process.returncode is None:
            os.killpg(process.pid, signal.SIGKILL)
            await process.wait()
        shutil.rmtree(tmp, ignore_errors=True)


def piped_chromium_of(process: asyncio.subprocess.Process, tmp: Path) -> int:
    """The Chromium `process` launched: on the pipe, with no port flag, listening on no port; its profile and
    socket directory under `tmp`."""
    chromium = chromium_child(process.pid)
    arguments = arguments_of(chromium)
    assert b"--remote-debugging-pipe" in arguments
    assert not [a for a in arguments if a.startswith(b"--remote-debugging-port")]
    assert listening_ports(chromium) == []
    assert len(launch_dirs(tmp)) == 2  # the profile and the socket's directory
    return chromium


@pytest.mark.req("browser:debugging-pipe")
async def test_serve_launch_runs_its_chromium_with_no_listening_port_and_leaves_nothing_behind() -> None:
    async with command("serve", "--launch") as (process, tmp):
        assert process.stdin is not None
        assert process.stdout is not None
        assert process.stderr is not None
        hello = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "pipe", "version": "0"}}
        process.stdin.write(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": hello}).encode())
        process.stdin.write(b"\n")
        await process.stdin.drain()
        line = await asyncio.wait_for(process.stdout.readline(), 60)  # answered once the runtime is up
        assert line, (await asyncio.wait_for(process.stderr.read(), 60)).decode()[-2000:]
        assert "result" in json.loads(line), line
        chromium = piped_chromium_of(process, tmp)

        process.stdin.close()  # the MCP client goes: serve ends
        assert await asyncio.wait_for(process.wait(), 60) == 0
        assert processes(2, chromium) == [], "Chromium's processes outlived serve"
        assert launch_dirs(tmp) == [], "a profile or socket directory was left behind"


@pytest.mark.req("browser:debugging-pipe", "app:launch")
async def test_the_apps_chromium_shows_a_second_uid_no_port_and_no_socket_so_not_the_consoles_url() -> None:
    # Its settings and pairing socket in a config dir of its own, never the user's.
    async with command("app", "--headless", "--port", "0", "--config-dir", "{tmp}/config") as (process, tmp):
        assert process.stdout is not None
        lines = [(await asyncio.wait_for(process.stdout.readline(), 60)).decode() for _ in range(2)]
        assert lines[1].startswith("Console: "), lines
        console_url = lines[1].removeprefix("Console: ").strip()
        chromium = piped_chromium_of(process, tmp)
        (sockets,) = [directory for directory in launch_dirs(tmp) if directory.name.startswith("computer-use-cdp-")]
        seen = json.loads(await as_nobody(sys.executable, "-I", "-c", ATTACK, str(sockets / "cdp.sock"), console_url))
        assert seen == {"socket": "PermissionError", "socket_listed": False, "listed_on": []}

        process.send_signal(signal.SIGINT)
        assert await asyncio.wait_for(process.wait(), 60) == 0
        assert processes(2, chromium) == [], "Chromium's processes outlived the app"
        assert launch_dirs(tmp) == [], "a profile or socket directory was left behind"
