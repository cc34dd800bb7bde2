"""`computer-use connect` against another local user: it authenticates the app before it sends anything, and it
reaches the app's MCP server over the app's private Unix socket, which no other uid can use.

The attacker is a real second uid: a process run as `nobody` through `setpriv` (these suites run as root). It plants
a listening socket where connect looks for the app's (in a config dir it could have written to), or connects to
the app's MCP socket. connect itself runs as a child process under the SDK's stdio client, as a third-party client
launches it; its broken variants (`suites/host/connect_variant.py`) are the negative controls.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import socket
import stat
import sys
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.types import Implementation
from uvicorn.protocols.http.auto import AutoHTTPProtocol

from fixtures_sites.server import FixtureServer
from host.app import HostParts
from host.pairing import mcp_socket_path, socket_path
from host.serving import MCPListeners
from runtime.transports.mcp.http import ASGIApp, Receive, Scope, Send
from suites.host.conftest import StartApp
from suites.host.test_connect import ROOT, asking, grant, leaf_exceptions, open_fixture, result_of

NOBODY = 65534
AS_NOBODY = ("setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "/usr/bin/python3", "-c")
ATTACKER_LIMIT = 20.0
"""How long the attacker's process may take to come up or to answer on a loaded machine."""
CLIENT_NAME = "Planted-Socket-Canary"
CONNECT = ("host.connect", "--config-dir")
"""connect as a client launches it (the checkout's module in place of the `computer-use connect` script)."""

PLANTED = """
import json, os, socket, sys, threading
path, make_dir = sys.argv[1], sys.argv[2] == "mkdir"
if make_dir:
    os.mkdir(os.path.dirname(path), 0o755)
server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
server.bind(path)
server.listen(8)
print(json.dumps({"ready": True}), flush=True)

def serve(conn):
    conn.sendall(b'{"type": "paired", "mcp_url": "http://127.0.0.1:9/mcp", "pairing": "planted"}\\n')
    for line in conn.makefile("rb"):
        print(json.dumps({"got": line.decode(errors="replace")}), flush=True)
        conn.sendall(b'{"ok": true, "token": "planted", "tool_call": "planted"}\\n')

while True:
    conn, _ = server.accept()
    print(json.dumps({"accepted": True}), flush=True)
    threading.Thread(target=serve, args=(conn,), daemon=True).start()
"""
"""A socket of the attacker's that plays the app's pairing protocol and records every line it is sent."""

MCP_PROBE = """
import json, socket, sys
path, host = sys.argv[1], sys.argv[2]
body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "nobody", "version": "1"}}})
request = (f"POST /mcp HTTP/1.1\\r\\nHost: {host}\\r\\nContent-Type: application/json\\r\\n"
           f"Accept: application/json, text/event-stream\\r\\nConnection: close\\r\\n"
           f"Content-Length: {len(body)}\\r\\n\\r\\n{body}")
sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
sock.settimeout(10)
try:
    sock.connect(path)
except OSError as exc:
    print(json.dumps({"connect": exc.strerror}))
    sys.exit()
answer = b""
try:
    sock.sendall(request.encode())
    while chunk := sock.recv(65536):
        answer += chunk
except OSError:
    pass
print(json.dumps({"connect": "ok", "answer": answer.decode(errors="replace")}))
"""
"""The attacker's MCP request on the app's MCP socket: what it could reach and what came back."""


@pytest.fixture
def reachable_dir() -> Iterator[Path]:
    """A fresh directory under /tmp that `nobody` may traverse (the suites' tmp_path is 0700 root's)."""
    base = Path(tempfile.mkdtemp(prefix="connect-boundary-"))
    base.chmod(0o711)
    try:
        yield base
    finally:
        shutil.rmtree(base, ignore_errors=True)


# -- connect authenticates the app ---------------------------------------------------------------------------------

PLANTINGS = (
    "a config dir another user owns",
    "a socket dir open to other users",
    "a listener of another uid",
    "a parent dir other users can write",
)
"""Where another user could have put a socket: the first two and the last leave its traces on the path (connect
refuses before it connects); in the third only the listener is another uid's (connect connects, checks the peer
and closes). The last looks like the user's own but sits below a directory anyone may rename things in."""


async def plant(config_dir: Path, how: str) -> asyncio.subprocess.Process:
    """Let `nobody` plant a listening socket at the app's socket path, the way `how` leaves room for it; returns
    the attacker's process once it listens."""
    path = socket_path(config_dir)
    os.mkdir(config_dir.parent)
    # 0777: anyone could rename `config` away and put a directory of their own in its place
    config_dir.parent.chmod(0o777 if how == PLANTINGS[3] else 0o755)
    if how == PLANTINGS[0]:
        os.mkdir(config_dir)
        os.chown(config_dir, NOBODY, NOBODY)  # e.g. a --config-dir under another user's home
    else:
        os.makedirs(path.parent)
        path.parent.chmod(0o777)  # a directory anyone may write to
    attacker = await asyncio.create_subprocess_exec(
        *AS_NOBODY, PLANTED, str(path), "mkdir" if how == PLANTINGS[0] else "",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert attacker.stdout is not None
    ready = await asyncio.wait_for(attacker.stdout.readline(), ATTACKER_LIMIT)
    assert json.loads(ready or b"{}").get("ready"), f"the attacker did not listen: {ready!r}"
    assert os.stat(path).st_uid == NOBODY, "the planted socket is not another user's: the check proves nothing"
    if how in (PLANTINGS[2], PLANTINGS[3]):
        # Only the listener is the attacker's: the path looks like the app's own (as root, the test can do that).
        os.chown(path, os.getuid(), os.getgid())
        path.chmod(0o600)
        path.parent.chmod(0o700)
    return attacker


def recorded(output: bytes) -> list[dict[str, Any]]:
    return [json.loads(line) for line in output.splitlines() if line.strip()]


@contextlib.asynccontextmanager
async def connect_client(config_dir: Path, errlog: Any, command: tuple[str, ...] = CONNECT) -> AsyncIterator[Client]:
    """A third-party client (the SDK's, over stdio) that launched connect (`python -m <command> <config dir>`);
    connect's stderr goes to `errlog`."""
    args = ["-m", *command, str(config_dir)]
    params = StdioServerParameters(
        command=sys.executable, args=args, env={**os.environ, "PYTHONPATH": str(ROOT)}, cwd=str(ROOT)
    )
    info = Implementation(name=CLIENT_NAME, version="1.0")
    try:
        async with Client(stdio_client(params, errlog=errlog), mode="legacy", client_info=info) as client:
            yield client
    except BaseExceptionGroup as group:
        leaves = leaf_exceptions(group)
        if len(leaves) == 1:
            raise leaves[0] from None
        raise


async def planted_scenario(config_dir: Path, tmp_path: Path, how: str, command: tuple[str, ...] = CONNECT) -> None:
    attacker = await plant(config_dir, how)
    errlog_path = tmp_path / "connect.stderr"
    try:
        with errlog_path.open("w") as errlog:
            async with connect_client(config_dir, errlog, command) as client:
                await client.list_tools()
                raw = await client.call_tool("computer_use", {"command": "list_pages"})
    finally:
        attacker.kill()
        out, _ = await attacker.communicate()
    seen = recorded(out)
    got = [entry["got"] for entry in seen if "got" in entry]
    assert not got, f"the planted socket got {got}"
    if how != PLANTINGS[2]:
        assert not any("accepted" in entry for entry in seen), "connect connected to a socket it could not trust"
    result = result_of(raw)
    assert raw.is_error, result
    assert result.reason_code == "invalid_capability", result
    assert result.message.startswith("not pairing: "), result.message
    assert "restart `computer-use app`" in (result.hint or ""), result.hint
    errors = errlog_path.read_text(encoding="utf-8").splitlines()
    assert len(errors) == 1, f"not one line on stderr: {errors}"
    assert errors[0].startswith("computer-use connect: not pairing: "), errors
    assert "restart `computer-use app`" in errors[0], errors


@pytest.mark.req("connect:socket")
@pytest.mark.parametrize("how", PLANTINGS)
async def test_connect_refuses_a_socket_another_uid_planted_and_sends_it_nothing(
    reachable_dir: Path, tmp_path: Path, how: str
) -> None:
    await planted_scenario(reachable_dir / "parent" / "config", tmp_path, how)


@pytest.mark.negative_control
@pytest.mark.req("connect:socket")
@pytest.mark.parametrize("how", PLANTINGS)
async def test_the_planted_socket_check_catches_a_connect_that_trusts_any_socket(
    reachable_dir: Path, tmp_path: Path, how: str
) -> None:
    with pytest.raises(AssertionError, match=f"the planted socket got .*{CLIENT_NAME}"):
        await planted_scenario(
            reachable_dir / "parent" / "config", tmp_path, how, ("suites.host.connect_variant", "trusts_any_socket")
        )


# -- connect talks MCP to the app over its private socket ----------------------------------------------------------


class CountingListeners(MCPListeners):
    """The app's MCP listeners with a record of every HTTP request they serve: (`tcp` or `unix`, path)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.requests: list[tuple[str, str]] = []

    def app(self) -> ASGIApp:
        app = super().app()

        async def counting(scope: Scope, receive: Receive, send: Send) -> None:
            if scope["type"] == "http":  # uvicorn gives a Unix socket's peer no address
                self.requests.append(("tcp" if scope.get("client") else "unix", scope["path"]))
            await app(scope, receive, send)

        return counting


COUNTING = HostParts(mcp=CountingListeners)


async def socket_scenario(
    start_app: StartApp, console_of: Any, fixture_server: FixtureServer, tmp_path: Path, command: tuple[str, ...]
) -> None:
    """A granted connect makes one tool call: it must reach the app's MCP app over the Unix socket, never TCP."""
    app = await start_app(COUNTING)
    assert isinstance(app.mcp, CountingListeners)
    console = await console_of(app)
    form = await open_fixture(console, fixture_server, "/dom_form/", "left", "Checkout")
    with (tmp_path / "connect.stderr").open("w") as errlog:
        async with connect_client(app.config_dir, errlog, command) as client:
            await client.list_tools()
            await grant(console, await asking(console), [form])
            before = len(app.mcp.requests)
            listed = result_of(await client.call_tool("computer_use", {"command": "list_pages"}))
            during = app.mcp.requests[before:]
    assert listed.status == "ok", listed
    over_tcp = [path for transport, path in during if transport == "tcp"]
    assert not over_tcp, f"connect's call went over TCP: {over_tcp}"
    assert ("unix", "/mcp") in during, f"the call never reached the MCP socket: the check proves nothing ({during})"


@pytest.mark.req("connect:socket", "connect:grant")
async def test_a_granted_connect_call_reaches_mcp_over_the_private_socket_and_nothing_over_tcp(
    start_app: StartApp, console_of: Any, fixture_server: FixtureServer, tmp_path: Path
) -> None:
    await socket_scenario(start_app, console_of, fixture_server, tmp_path, CONNECT)


@pytest.mark.negative_control
@pytest.mark.req("connect:socket")
async def test_the_socket_check_catches_a_connect_that_forwards_over_tcp(
    start_app: StartApp, console_of: Any, fixture_server: FixtureServer, tmp_path: Path
) -> None:
    with pytest.raises(AssertionError, match="connect's call went over TCP"):
        await socket_scenario(
            start_app, console_of, fixture_server, tmp_path, ("suites.host.connect_variant", "over_tcp")
        )


ADMITS_ANY_PEER = HostParts(mcp=CountingListeners, mcp_socket_protocol=AutoHTTPProtocol)
"""The MCP socket served by uvicorn's plain HTTP protocol: no peer-uid check."""


async def probe_as_nobody(path: Path, host: str) -> dict[str, str]:
    prober = await asyncio.create_subprocess_exec(
        *AS_NOBODY, MCP_PROBE, str(path), host, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await asyncio.wait_for(prober.communicate(), ATTACKER_LIMIT)
    assert prober.returncode == 0, err.decode(errors="replace")
    return json.loads(out)


def loosen(path: Path) -> None:
    """Open the socket and its directory to everyone, as if both outer layers had failed."""
    path.parent.chmod(0o711)
    path.chmod(0o666)


async def second_uid_scenario(start_app: StartApp, reachable_dir: Path, parts: HostParts) -> None:
    app = await start_app(parts, config_dir=reachable_dir / "config")
    assert isinstance(app.mcp, CountingListeners)
    path = mcp_socket_path(app.config_dir)
    assert stat.S_ISSOCK(os.stat(path).st_mode)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(path.parent).st_mode) == 0o700
    host = app.mcp_url.split("/")[2]
    shut = await probe_as_nobody(path, host)
    assert shut["connect"] == "Permission denied", f"a second uid reached the MCP socket: {shut}"

    loosen(path)
    before = len(app.mcp.requests)
    answered = await probe_as_nobody(path, host)
    assert answered["connect"] == "ok", (
        f"the probe could not reach the loosened socket: the check proves nothing {answered}"
    )
    assert answered["answer"] == "", f"a second uid got an answer on the MCP socket: {answered['answer'][:300]!r}"
    assert app.mcp.requests[before:] == [], "a second uid's request reached the MCP app"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as own:  # the owner still gets in
        own.connect(str(path))


@pytest.mark.req("connect:socket")
async def test_a_second_uid_cannot_use_the_mcp_socket_even_when_its_mode_is_opened(
    start_app: StartApp, reachable_dir: Path
) -> None:
    await second_uid_scenario(start_app, reachable_dir, COUNTING)


@pytest.mark.negative_control
@pytest.mark.req("connect:socket")
async def test_the_second_uid_check_catches_an_mcp_socket_without_the_peer_check(
    start_app: StartApp, reachable_dir: Path
) -> None:
    with pytest.raises(AssertionError, match="a second uid got an answer on the MCP socket"):
        await second_uid_scenario(start_app, reachable_dir, ADMITS_ANY_PEER)
