"""Who may reach the MCP server over HTTP.

- `computer-use serve --transport http` on anything but the SDK's loopback names refuses to start — exit code 2, a
  clear error, nothing listening — unless the operator opted in (`--allow-remote`) and configured a bearer token:
  the SDK's DNS-rebinding protection is off there and the server authenticates nobody.
- With a bearer token configured, on any address, every HTTP request without `Authorization: Bearer <the token>`
  gets 401 before the MCP layer sees it, and the token never shows on the server's command line. A real
  streamable-HTTP MCP client is refused without the token or with a wrong one, and lists the tool with the right
  one.

The served app is the real CLI in a child process. The negative control serves the same app in-process behind a
bearer check broken on purpose (a subclass that lets everyone in): the same check must catch it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import socket
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import httpx2
import pytest
import uvicorn
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from lab.tap import CDPTap
from runtime.assembly import Runtime
from runtime.transports.mcp.http import TOKEN_ENV, BearerAuth
from suites.protocol.test_protocol import until_serving

ROOT = Path(__file__).resolve().parents[2]
SERVE = [sys.executable, "-m", "runtime.cli", "serve", "--transport", "http"]
WAIT = 30.0
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "bearer-check", "version": "1"},
    },
}


def free_port(host: str) -> int:
    with socket.socket() as probe:
        probe.bind((host, 0))
        return probe.getsockname()[1]


def env(tmp_path: Path, **extra: str) -> dict[str, str]:
    base = {k: v for k, v in os.environ.items() if k != TOKEN_ENV}
    return {**base, "PYTHONPATH": str(ROOT), "TMPDIR": str(tmp_path), **extra}


async def refused_connection(host: str, port: int) -> bool:
    try:
        _, writer = await asyncio.wait_for(asyncio.open_connection(host, port), WAIT)
    except ConnectionRefusedError:
        return True
    writer.close()
    await writer.wait_closed()
    return False


# -- refusing to start ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("host", "allow", "token_source", "says"),
    [
        ("0.0.0.0", False, None, "needs --allow-remote and a bearer token"),
        ("0.0.0.0", True, None, "needs a bearer token"),
        ("0.0.0.0", False, "file", "needs --allow-remote"),
        ("0.0.0.0", False, "env", "needs --allow-remote"),
        ("127.0.0.2", False, None, "is not loopback"),  # loopback, but not where the SDK checks Host and Origin
        ("127.0.0.1", False, "short", "at least 16 characters"),
    ],
)
@pytest.mark.req("transport:remote-opt-in")
async def test_serving_http_off_loopback_without_opt_in_and_token_exits_2_and_listens_nowhere(
    tmp_path: Path, host: str, allow: bool, token_source: str | None, says: str
) -> None:
    port = free_port("127.0.0.1")
    token = "short" if token_source == "short" else secrets.token_urlsafe(24)
    args = ["--host", host, "--port", str(port), "--cdp-endpoint", "http://127.0.0.1:9"]  # never reached
    extra: dict[str, str] = {}
    if allow:
        args.append("--allow-remote")
    if token_source in ("file", "short"):
        (tmp_path / "token").write_text(token)
        args += ["--bearer-token-file", str(tmp_path / "token")]
    elif token_source == "env":
        extra[TOKEN_ENV] = token
    process = await asyncio.create_subprocess_exec(
        *SERVE, *args, env=env(tmp_path, **extra), cwd=str(ROOT), stderr=asyncio.subprocess.PIPE
    )
    _, err = await asyncio.wait_for(process.communicate(), WAIT)
    assert process.returncode == 2, err.decode()
    assert says in err.decode()
    assert await refused_connection("127.0.0.1", port)


# -- the bearer check ------------------------------------------------------------------------------------------------


async def check_bearer_required(url: str, token: str) -> None:
    """No token, a wrong token or a wrong scheme: 401 for raw requests and a refused MCP client. The right token:
    a working `tools/list`."""
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    async with httpx2.AsyncClient(timeout=WAIT) as http:
        for authorization in (None, "Bearer wrong-" + token, "Basic " + token, "Bearer"):
            sent = headers if authorization is None else {**headers, "Authorization": authorization}
            answer = await http.post(url, json=INITIALIZE, headers=sent)
            assert answer.status_code == 401, f"{authorization!r}: {answer.status_code} {answer.text[:200]}"
            assert answer.headers["www-authenticate"].startswith("Bearer")
        answer = await http.get(url, headers=headers)  # the SSE stream too
        assert answer.status_code == 401, f"GET: {answer.status_code}"
    for authorization in (None, "Bearer wrong-" + token):
        tools, statuses = await asyncio.wait_for(list_tools(url, authorization), WAIT)
        assert tools is None, f"{authorization!r}: the MCP client listed {tools}"
        assert statuses == [401], f"{authorization!r}: the MCP client got {statuses}"
    tools, statuses = await asyncio.wait_for(list_tools(url, f"Bearer {token}"), WAIT)
    assert tools == ["computer_use"], statuses


async def list_tools(url: str, authorization: str | None) -> tuple[list[str] | None, list[int]]:
    """A real MCP client's `tools/list` (None if the connection was refused) and the HTTP statuses it received."""
    statuses: list[int] = []

    async def record(response: httpx2.Response) -> None:
        statuses.append(response.status_code)

    tools = None
    headers = {"Authorization": authorization} if authorization else None
    try:
        async with httpx2.AsyncClient(headers=headers, timeout=WAIT) as http:
            http.event_hooks["response"].append(record)
            async with Client(streamable_http_client(url, http_client=http), mode="legacy") as client:
                tools = [tool.name for tool in (await client.list_tools()).tools]
    except* MCPError:  # how the SDK reports an HTTP error answer to initialize
        pass
    return tools, statuses


@contextlib.asynccontextmanager
async def cli_server(tmp_path: Path, cdp_endpoint: str, host: str, *args: str, **extra: str) -> AsyncIterator[str]:
    """`computer-use serve --transport http` in a child process; yields its MCP URL once uvicorn says it listens."""
    port = free_port(host)
    process = await asyncio.create_subprocess_exec(
        *SERVE, "--host", host, "--port", str(port), "--cdp-endpoint", cdp_endpoint, *args,
        env=env(tmp_path, **extra), cwd=str(ROOT), stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert process.stderr is not None
    try:
        await asyncio.wait_for(until_serving(process), WAIT)
        cmdline = await asyncio.to_thread(Path(f"/proc/{process.pid}/cmdline").read_bytes)
        yield f"http://{host}:{port}/mcp", cmdline.decode(errors="replace")
    finally:
        process.terminate()
        await asyncio.wait_for(process.wait(), WAIT)


@pytest.mark.parametrize(
    ("host", "source"),
    [("127.0.0.1", "file"), ("127.0.0.2", "env")],  # 127.0.0.2: off the SDK's loopback names, so opted in
)
@pytest.mark.req("transport:bearer", "protocol:http", "protocol:one-tool")
async def test_with_a_bearer_token_every_request_without_it_gets_401_and_the_right_one_lists_the_tool(
    tmp_path: Path, tap: CDPTap, host: str, source: str
) -> None:
    token = secrets.token_urlsafe(32)
    if source == "file":
        (tmp_path / "token").write_text(token + "\n")
        args, extra = ["--bearer-token-file", str(tmp_path / "token")], {}
    else:
        args, extra = ["--allow-remote"], {TOKEN_ENV: token}
    async with cli_server(tmp_path, await tap.endpoint("runtime"), host, *args, **extra) as (url, cmdline):
        assert token not in cmdline  # `ps` shows every user the command line
        await check_bearer_required(url, token)


class LetsEveryoneIn(BearerAuth):
    """Broken on purpose: any request is authorized."""

    def authorized(self, headers: list[tuple[bytes, bytes]]) -> bool:
        return True


@contextlib.asynccontextmanager
async def in_process(app: object) -> AsyncIterator[str]:
    """Serve an ASGI app with uvicorn on a socket bound before serving starts, so a client may connect at once."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))  # type: ignore[arg-type]
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}/mcp"
    finally:
        server.should_exit = True
        await asyncio.wait_for(task, WAIT)
        sock.close()


@pytest.mark.negative_control
@pytest.mark.req("transport:bearer")
async def test_the_bearer_check_catches_a_middleware_that_lets_everyone_in(tap: CDPTap) -> None:
    token = secrets.token_urlsafe(32)
    rt = await Runtime.connect(await tap.endpoint("runtime"))
    try:
        app = LetsEveryoneIn(rt.server.streamable_http_app(host="127.0.0.1"), token)
        async with in_process(app) as url:
            with pytest.raises(AssertionError, match="401"):
                await check_bearer_required(url, token)
    finally:
        await rt.close()
