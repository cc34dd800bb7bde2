"""The MCP protocol, for real: initialize, tools/list, tools/call and cancel, in-process and across the process
boundary (stdio and streamable HTTP), and a real third-party client (the MCP Inspector CLI).
"""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import socket
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
from mcp import Client, StdioServerParameters

from lab.tap import CDPTap
from runtime.models import ComputerUseResult
from runtime.transports.http_api import CONNECTION_HEADER, PATH
from suites.harness import Agent
from suites.proofs import assert_no_runtime_calls

ROOT = Path(__file__).resolve().parents[2]
SERVE = [sys.executable, "-m", "runtime.cli", "serve"]


def assert_only_computer_use(tools: list) -> None:
    names = [tool.name for tool in tools]
    assert names == ["computer_use"], f"tools/list shows {names}"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


async def until_serving(process: asyncio.subprocess.Process) -> None:
    """Return once `computer-use serve --transport http` says on stderr that uvicorn listens: an event, not a delay."""
    assert process.stderr is not None
    while line := await process.stderr.readline():
        if b"Uvicorn running" in line or b"Application startup complete" in line:
            return
    raise RuntimeError("computer-use serve exited before listening")


async def _no_token_call(client: Client) -> ComputerUseResult:
    raw = await client.call_tool("computer_use", {"command": "list_pages"})
    assert raw.is_error
    return ComputerUseResult.model_validate(raw.structured_content)


@pytest.mark.req("protocol:one-tool")
async def test_in_process_tools_list_shows_only_computer_use(agent: Agent) -> None:
    assert_only_computer_use((await agent.client.client.list_tools()).tools)


@pytest.mark.parametrize(
    ("arguments", "says"),
    [
        ({"command": "click"}, "command"),
        ({"command": "act", "computer_session_id": "cs_1", "frame_id": "f1"}, "act needs"),
        (
            {"command": "act", "computer_session_id": "cs_1", "frame_id": "f", "action": {"type": "click"}},
            "click needs ref",
        ),
        (  # an object sent as a JSON string (as some clients do) is read as the object it holds
            {"command": "act", "computer_session_id": "cs_1", "frame_id": "f", "action": '{"type": "click"}'},
            "click needs ref",
        ),
        ({"command": "act", "computer_session_id": "cs_1", "frame_id": "f", "action": "click"}, "valid dictionary"),
        ({"command": "verify", "computer_session_id": "cs_1", "assertion": {"type": "all_of", "of": []}}, "empty"),
        ({"command": "observe"}, "observe needs page"),
        ({"command": "observe", "page": "left", "offset": -1}, "offset"),
        ({"command": "list_pages", "surprise": 1}, "surprise"),
    ],
)
@pytest.mark.req("protocol:invalid-arguments", "reason:invalid_arguments")
async def test_invalid_arguments_get_invalid_arguments_with_a_hint_and_no_backend_call(
    agent: Agent, tap: CDPTap, arguments: dict, says: str
) -> None:
    tap.clear()
    raw = await agent.client.client.call_tool("computer_use", arguments)
    assert raw.is_error
    result = ComputerUseResult.model_validate(raw.structured_content)
    assert result.reason_code == "invalid_arguments", result
    assert says in result.message
    assert result.hint
    assert_no_runtime_calls(tap)


@pytest.fixture
async def served_endpoint(tap: CDPTap) -> str:
    return await tap.endpoint("runtime")


def _env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), "TMPDIR": str(tmp_path)}


@pytest.mark.req("protocol:stdio", "protocol:one-tool", "capability:missing")
async def test_over_stdio_a_client_lists_one_tool_and_gets_invalid_capability_without_a_token(
    served_endpoint: str, tmp_path: Path, tap: CDPTap
) -> None:
    params = StdioServerParameters(
        command=SERVE[0], args=[*SERVE[1:], "--cdp-endpoint", served_endpoint], env=_env(tmp_path), cwd=str(ROOT)
    )
    async with Client(params) as client:
        assert_only_computer_use((await client.list_tools()).tools)
        tap.clear()
        result = await _no_token_call(client)
    assert result.reason_code == "invalid_capability"
    assert "host" in (result.hint or "")
    assert_no_runtime_calls(tap)


@pytest.fixture
async def http_server(served_endpoint: str, tmp_path: Path) -> AsyncIterator[str]:
    port = _free_port()
    process = await asyncio.create_subprocess_exec(
        *SERVE,
        "--transport",
        "http",
        "--port",
        str(port),
        "--cdp-endpoint",
        served_endpoint,
        env=_env(tmp_path),
        cwd=str(ROOT),
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    assert process.stderr is not None
    try:
        await asyncio.wait_for(until_serving(process), 30)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        await asyncio.wait_for(process.wait(), 10)


@pytest.mark.req("protocol:http", "protocol:one-tool", "capability:missing")
async def test_over_streamable_http_a_client_lists_one_tool_and_gets_invalid_capability_without_a_token(
    http_server: str, tap: CDPTap
) -> None:
    async with Client(http_server) as client:
        assert_only_computer_use((await client.list_tools()).tools)
        tap.clear()
        result = await _no_token_call(client)
    assert result.reason_code == "invalid_capability"
    assert_no_runtime_calls(tap)


@pytest.mark.req("http:same-port", "http:token-required", "capability:missing")
async def test_computer_use_serve_over_http_answers_the_plain_http_api_on_its_mcp_port(
    http_server: str, tap: CDPTap
) -> None:
    api = http_server.removesuffix("/mcp") + PATH
    async with Client(http_server) as client:
        assert_only_computer_use((await client.list_tools()).tools)
        tap.clear()
        mcp = await _no_token_call(client)
    headers = {CONNECTION_HEADER: secrets.token_urlsafe(24)}
    async with (
        aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as session,
        session.post(api, json={"command": "list_pages"}, headers=headers) as response,
    ):
        status, body = response.status, await response.json()
    assert status == 200, (status, body)
    assert body == mcp.model_dump(mode="json", exclude_none=True, exclude_defaults=True) | {
        "elapsed_ms": body.get("elapsed_ms")
    }, (body, mcp)
    assert body["reason_code"] == "invalid_capability", body
    assert_no_runtime_calls(tap)


async def _inspector(*args: str, tmp_path: Path, endpoint: str, exit_code: int = 0) -> dict:
    """Run the Inspector CLI against `computer-use serve` over stdio; return the JSON result it wrote."""
    inspector = ROOT / "backends" / "node_modules" / ".bin" / "mcp-inspector"
    output = tmp_path / "inspector-result.json"
    process = await asyncio.create_subprocess_exec(
        str(inspector),
        "--cli",
        "--format",
        "json",
        "--output",
        str(output),
        *SERVE,
        "--cdp-endpoint",
        endpoint,
        *args,
        env={**_env(tmp_path), "HOME": str(tmp_path)},
        cwd=str(ROOT),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    _, err = await asyncio.wait_for(process.communicate(), 90)
    assert process.returncode == exit_code, err.decode()[-2000:]
    return json.loads(output.read_text())


@pytest.mark.req("protocol:third-party-client", "protocol:one-tool")
async def test_the_mcp_inspector_cli_lists_exactly_one_tool_and_gets_a_structured_invalid_capability(
    served_endpoint: str, tmp_path: Path
) -> None:
    listed = await _inspector("--method", "tools/list", tmp_path=tmp_path, endpoint=served_endpoint)
    assert [tool["name"] for tool in listed["tools"]] == ["computer_use"]
    called = await _inspector(
        "--method",
        "tools/call",
        "--tool-name",
        "computer_use",
        "--tool-arg",
        "command=list_pages",
        tmp_path=tmp_path,
        endpoint=served_endpoint,
        exit_code=5,  # 5: the Inspector's "tool returned isError"
    )
    assert called["isError"] is True
    assert called["structuredContent"]["reason_code"] == "invalid_capability"
    assert called["structuredContent"]["hint"]


@pytest.mark.negative_control
@pytest.mark.sabotage("expose_upstream_tools")
@pytest.mark.req("protocol:one-tool")
async def test_the_one_tool_check_catches_a_runtime_that_exposes_an_upstream_tool(agent: Agent) -> None:
    with pytest.raises(AssertionError, match="tools/list shows"):
        assert_only_computer_use((await agent.client.client.list_tools()).tools)
