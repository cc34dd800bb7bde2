"""`computer-use serve --launch` on SIGTERM (what `timeout`, systemd, containers and MCP clients send to stop a
server): it stops as on Ctrl-C, exits 0 and leaves nothing running — no process of its Chromium's group, no child of
its own, no profile directory.

The server runs as a child process over stdio (the default transport), driven by hand-written JSON-RPC lines: it
is ready once it answers `initialize`, and one `computer_use` call goes through it before the signal (a bare server
answers it `invalid_capability`: without a host sharing its context store nothing mints tokens, so no backend
session can start here; the backends' own clean-up is proven in `test_sessions.py`).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import signal
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from lab.processes import alive_in_group, command_line, processes

ROOT = Path(__file__).resolve().parents[2]
READY_LIMIT = 90.0
"""How long the server may take to launch its Chromium and answer `initialize` on a loaded machine."""
TRANSPORTS = ("stdio", "http")
STOP_LIMIT = 30.0
"""How long it may take to stop after SIGTERM (its Chromium gets 5 s to exit before it is killed)."""


def descendants(pid: int) -> list[int]:
    """Every live process below `pid` (children, their children, ...)."""
    table = processes()
    found, frontier = [], [pid]
    while frontier:
        parent = frontier.pop()
        for proc in table:
            if proc.ppid == parent and proc.state not in ("Z", "X"):
                found.append(proc.pid)
                frontier.append(proc.pid)
    return found


def leaf_exceptions(group: BaseExceptionGroup) -> list[BaseException]:
    found: list[BaseException] = []
    for exc in group.exceptions:
        found.extend(leaf_exceptions(exc) if isinstance(exc, BaseExceptionGroup) else [exc])
    return found


def present(path: Path) -> bool:
    return path.exists()


def alive(pids: list[int]) -> list[str]:
    return [command_line(pid)[:120] for pid in pids if command_line(pid)]


async def rpc(process: asyncio.subprocess.Process, message: dict[str, Any]) -> dict[str, Any] | None:
    """Send one JSON-RPC line; for a request, its answer (bounded)."""
    assert process.stdin is not None
    assert process.stdout is not None
    process.stdin.write(json.dumps(message).encode() + b"\n")
    await process.stdin.drain()
    if "id" not in message:
        return None
    try:
        line = await asyncio.wait_for(process.stdout.readline(), READY_LIMIT)
    except TimeoutError:
        raise AssertionError(f"serve did not answer {message['method']} within {READY_LIMIT:g}s") from None
    assert line, f"serve ended before answering {message['method']}"
    return json.loads(line)


async def started(module: str, transport: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable, "-m", module, "serve", "--launch", "--transport", transport, "--port", "0",
        env={**os.environ, "PYTHONPATH": str(ROOT)}, cwd=str(ROOT),
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip


async def call_over_stdio(process: asyncio.subprocess.Process) -> None:
    """Ready once it answers `initialize`; then one `computer_use` call."""
    client = {"name": "signals", "version": "1"}
    hello = await rpc(process, {
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": client},
    })  # fmt: skip
    assert hello is not None
    assert "result" in hello, hello
    await rpc(process, {"jsonrpc": "2.0", "method": "notifications/initialized"})
    called = await rpc(process, {
        "jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "computer_use", "arguments": {"command": "list_pages"}},
    })  # fmt: skip
    assert called is not None
    assert called["result"]["structuredContent"]["reason_code"] == "invalid_capability", called


async def http_url(process: asyncio.subprocess.Process) -> str:
    """The MCP URL, once uvicorn says it listens (on the port it chose: `--port 0`)."""
    assert process.stderr is not None
    seen: list[bytes] = []

    async def listening() -> str:
        while line := await process.stderr.readline():  # type: ignore[union-attr]
            seen.append(line)
            if match := re.search(rb"Uvicorn running on (http://127\.0\.0\.1:\d+)", line):
                return match.group(1).decode() + "/mcp"
        raise AssertionError(f"serve ended before it listened: {b''.join(seen)[-2000:]!r}")

    try:
        return await asyncio.wait_for(listening(), READY_LIMIT)
    except TimeoutError:
        raise AssertionError(f"serve did not listen within {READY_LIMIT:g}s") from None


async def sigterm_scenario(module: str, transport: str, leftovers: list[tuple[int, Path]]) -> None:
    """Start `serve --launch` (as `python -m <module> serve --launch --transport <transport>`), make one call (over
    HTTP, with the client's session and its event stream still open), send SIGTERM; it must exit 0 within
    `STOP_LIMIT` with its Chromium's group, its children and its profile gone. `leftovers` gets the Chromium group
    and profile, for the caller to clean up whatever the check found."""
    process = await started(module, transport)
    try:
        if transport == "stdio":
            await call_over_stdio(process)
            await stop_and_check(process, leftovers)
            _, err = await process.communicate()
            assert b"Traceback" not in err, err.decode(errors="replace")[-2000:]
        else:
            try:
                async with Client(await http_url(process), mode="legacy") as client:
                    raw = await client.call_tool("computer_use", {"command": "list_pages"})
                    assert raw.structured_content is not None
                    assert raw.structured_content["reason_code"] == "invalid_capability", raw
                    await stop_and_check(process, leftovers)
            except BaseExceptionGroup as group:  # the client's task group wraps what failed in the body: show that
                leaves = leaf_exceptions(group)
                if len(leaves) == 1:
                    raise leaves[0] from None
                raise
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


async def stop_and_check(process: asyncio.subprocess.Process, leftovers: list[tuple[int, Path]]) -> None:
    below = descendants(process.pid)
    chromium = [pid for pid in below if "--user-data-dir=" in command_line(pid)]
    assert chromium, f"no Chromium under serve: {alive(below)}"
    group = os.getpgid(chromium[0])
    flag = next(arg for arg in command_line(chromium[0]).split() if arg.startswith("--user-data-dir="))
    profile = Path(flag.split("=", 1)[1])
    leftovers.append((group, profile))
    assert present(profile), "the profile the check watches does not exist: the check proves nothing"
    assert alive_in_group(group), "the Chromium group the check watches is empty: the check proves nothing"

    process.send_signal(signal.SIGTERM)
    try:
        await asyncio.wait_for(process.wait(), STOP_LIMIT)
    except TimeoutError:
        raise AssertionError(f"serve did not exit within {STOP_LIMIT:g}s of SIGTERM") from None
    assert process.returncode == 0, f"serve exited with {process.returncode} on SIGTERM, not 0"
    assert not alive_in_group(group), f"its Chromium's group is still running: {alive_in_group(group)}"
    assert not alive(below), f"processes it started are still running: {alive(below)}"
    assert not present(profile), f"its Chromium profile {profile} is still there"


async def clean(leftovers: list[tuple[int, Path]]) -> None:
    for group, profile in leftovers:
        if alive_in_group(group):
            os.killpg(group, signal.SIGKILL)
        shutil.rmtree(profile, ignore_errors=True)


@pytest.mark.req("sessions:resources-end")
@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_serve_launch_exits_0_on_sigterm_and_leaves_no_chromium_child_or_profile(transport: str) -> None:
    leftovers: list[tuple[int, Path]] = []
    try:
        await sigterm_scenario("runtime.cli", transport, leftovers)
    finally:
        await clean(leftovers)


@pytest.mark.negative_control
@pytest.mark.req("sessions:resources-end")
@pytest.mark.parametrize("transport", TRANSPORTS)
async def test_the_sigterm_check_catches_a_serve_that_leaves_sigterm_to_the_default_action(transport: str) -> None:
    leftovers: list[tuple[int, Path]] = []
    try:
        with pytest.raises(AssertionError, match="exited with -15 on SIGTERM"):
            await sigterm_scenario("suites.reliability.serve_variant", transport, leftovers)
        assert leftovers, "the control never reached its signal"
        # What the default action leaves for certain is the profile: its Chromium may end by itself once serve's end
        # closes its pipe (under load, before this line), but nothing removes the folder serve made for it.
        assert present(leftovers[0][1]), "the default action left no profile: the control is off"
    finally:
        await clean(leftovers)
