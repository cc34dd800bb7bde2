"""Every line a client writes to `computer-use serve` over stdio gets an answer, and the connection goes on.

The SDK's own stdio transport (mcp 2.3) drops a line it cannot parse without a word: not JSON, JSON that is no
JSON-RPC message, a string with a lone-surrogate escape (`"\\ud800"`, valid JSON that pydantic-core refuses). The
client then waits for its own timeout. `runtime.transports.mcp.stdio` answers each (a JSON-RPC error, or the call's
envelope with U+FFFD for the surrogate), skips a line over its size limit without holding it, and keeps serving.

Each test writes one bad line to a real `computer-use serve` child over OS pipes (one child for the module, so
every later test also proves the connection survived the earlier lines), then a valid call, and reads answers in
order. The negative control runs the same checks against the child with the SDK's transport put back (the module
attribute the CLI serves with, monkeypatched in the child): they must catch the dropped lines.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from lab.tap import CDPTap
from runtime.models import ComputerUseResult
from runtime.reasons import ReasonCode
from runtime.transports.mcp.server import TOOL
from runtime.transports.mcp.stdio import MAX_LINE_BYTES
from suites.proofs import assert_no_runtime_calls

pytestmark = pytest.mark.req("protocol:stdio-every-line-answered")

ROOT = Path(__file__).resolve().parents[2]
SERVE = [sys.executable, "-m", "runtime.cli", "serve"]
SDK_SERVE = [
    sys.executable,
    "-c",
    "import sys, runtime.cli as cli; cli.run_stdio = lambda server: server.run_stdio_async(); "
    "sys.exit(cli.main(sys.argv[1:]))",
    "serve",
]
"""The broken variant: the same CLI, serving on the SDK's stdio transport (what it did before)."""
LIMIT = 30.0
"""Seconds any one read or write on the pipes may take."""
HUGE = 30 * 2**20

PARSE_ERROR, INVALID_REQUEST = -32700, -32600


def call(ident: int, arguments: str, meta: str = "") -> bytes:
    params = f'{{"name":"{TOOL}","arguments":{arguments}{meta}}}'
    return f'{{"jsonrpc":"2.0","id":{ident},"method":"tools/call","params":{params}}}'.encode()


@dataclass
class Child:
    """`computer-use serve` over two OS pipes, spoken to in raw lines."""

    process: asyncio.subprocess.Process
    next_id: int = 1

    def ident(self) -> int:
        self.next_id += 1
        return self.next_id

    async def send(self, line: bytes) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(line + b"\n")
        await asyncio.wait_for(self.process.stdin.drain(), LIMIT)

    async def answer(self) -> dict[str, Any]:
        """The next answer (notifications skipped)."""
        assert self.process.stdout is not None
        while True:
            line = await asyncio.wait_for(self.process.stdout.readline(), LIMIT)
            assert line, f"the server closed stdout (exit status {self.process.returncode})"
            message = json.loads(line)
            if "id" in message:
                return message

    async def bad_then_good(self, bad: bytes, bad_id: int | None) -> dict[str, Any]:
        """Write `bad`, then a valid call; return the answer to `bad`, which must come before the valid call's.

        The valid call is the same kind of work as `bad` (or less), so its answer arriving first means `bad` was
        dropped: an event, not a wait for a timeout. The valid call must be answered too (the connection goes on).
        """
        good_id = self.ident()
        await self.send(bad)
        await self.send(call(good_id, '{"command":"observe","page":"u"}'))
        first = await self.answer()
        assert first["id"] != good_id, "no answer to the bad line before the next request's: it was dropped"
        assert first["id"] == bad_id, f"an answer to {first['id']!r}, expected {bad_id!r}: {first!r:.300}"
        then = await self.answer()
        assert then["id"] == good_id, f"an answer to {then['id']!r}, expected {good_id}"
        envelope(then)
        return first


def envelope(answer: dict[str, Any]) -> ComputerUseResult:
    """The call's one envelope: a runtime reason code (a bare server has no host, so never a success)."""
    assert "result" in answer, f"a JSON-RPC error instead of an envelope: {answer!r:.300}"
    result = ComputerUseResult.model_validate(answer["result"]["structuredContent"])
    assert result.reason_code in (ReasonCode.invalid_capability, ReasonCode.invalid_arguments), result
    return result


def error(answer: dict[str, Any], code: int) -> str:
    assert "error" in answer, f"not a JSON-RPC error: {answer!r:.300}"
    assert answer["error"]["code"] == code, answer
    return answer["error"]["message"]


async def start(command: list[str], endpoint: str, tmp_path: Path) -> AsyncIterator[Child]:
    log = (tmp_path / "serve.stderr").open("wb")
    process = await asyncio.create_subprocess_exec(
        *command,
        "--cdp-endpoint",
        endpoint,
        env={**os.environ, "PYTHONPATH": str(ROOT), "TMPDIR": str(tmp_path)},
        cwd=str(ROOT),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=log,
    )
    child = Child(process)
    try:
        hello = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "garbage", "version": "0"}}
        await child.send(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": hello}).encode())
        assert "result" in await child.answer()
        await child.send(b'{"jsonrpc":"2.0","method":"notifications/initialized"}')
        yield child
    finally:
        if process.returncode is None:
            # End of input first: the SDK's transport (the broken variant) reads stdin in a thread that no signal
            # interrupts, and serve now waits for its transport to stop on SIGTERM.
            assert process.stdin is not None
            process.stdin.close()
            process.terminate()
        await asyncio.wait_for(process.wait(), LIMIT)
        log.close()


@pytest.fixture(scope="module")
async def child(tap: CDPTap, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Child]:
    """One child for every test here: each bad line is followed by more calls on the same connection."""
    async for served in start(SERVE, await tap.endpoint("runtime"), tmp_path_factory.mktemp("serve")):
        yield served


async def test_a_call_with_a_lone_surrogate_escape_gets_its_envelope_with_the_surrogate_replaced(
    child: Child, tap: CDPTap
) -> None:
    tap.clear()
    ident = child.ident()
    answer = await child.bad_then_good(call(ident, '{"command":"observe","page":"\\ud800"}'), ident)
    envelope(answer)
    assert_no_runtime_calls(tap)


async def test_a_lone_surrogate_in_a_key_and_in_meta_is_read_as_u_fffd_and_answered(child: Child) -> None:
    ident = child.ident()
    line = call(ident, '{"command":"list_pages","\\udc00":1}', ',"_meta":{"page_context_token":"\\ud83d"}')
    result = envelope(await child.bad_then_good(line, ident))
    assert result.reason_code == ReasonCode.invalid_arguments, result
    assert "\ufffd" in result.message, f"the unknown key is not quoted as U+FFFD: {result.message!r}"


async def test_invalid_utf8_in_a_call_is_read_as_u_fffd_and_answered(child: Child) -> None:
    ident = child.ident()
    line = call(ident, '{"command":"observe","page":"PAGE"}').replace(b"PAGE", b"\xff\xfe")
    envelope(await child.bad_then_good(line, ident))


async def test_a_line_that_is_not_json_gets_a_parse_error_and_the_next_call_is_answered(child: Child) -> None:
    answer = await child.bad_then_good(b"this is not JSON {", None)
    assert "not JSON" in error(answer, PARSE_ERROR)


@pytest.mark.parametrize(
    ("line", "answered_id"),
    [(b"[1,2,3]", None), (b'"hello"', None), (b'{"jsonrpc":"2.0","id":4242,"method":42}', 4242)],
    ids=["a list", "a string", "a request whose method is a number"],
)
async def test_json_that_is_no_json_rpc_message_gets_invalid_request_with_its_id_when_it_has_one(
    child: Child, line: bytes, answered_id: int | None
) -> None:
    error(await child.bad_then_good(line, answered_id), INVALID_REQUEST)


async def test_a_30_mb_line_gets_invalid_request_without_being_read_whole_and_the_next_call_is_answered(
    child: Child,
) -> None:
    assert HUGE > MAX_LINE_BYTES
    pad = b"x" * HUGE
    line = b'{"jsonrpc":"2.0","id":7777,"method":"ping","params":{"pad":"' + pad + b'"}}'
    assert "longer than" in error(await child.bad_then_good(line, None), INVALID_REQUEST)


async def test_a_line_just_under_the_limit_is_read_and_answered(child: Child) -> None:
    ident = child.ident()
    pad = "x" * (MAX_LINE_BYTES - 200)
    line = call(ident, f'{{"command":"list_pages","pad":"{pad}"}}')
    assert len(line) <= MAX_LINE_BYTES
    result = envelope(await child.bad_then_good(line, ident))
    assert result.reason_code in (ReasonCode.invalid_arguments, ReasonCode.invalid_capability)


# -- negative control: the SDK's own transport drops these lines ------------------------------------------------


@pytest.fixture(scope="module")
async def sdk_child(tap: CDPTap, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Child]:
    async for served in start(SDK_SERVE, await tap.endpoint("runtime"), tmp_path_factory.mktemp("sdk-serve")):
        yield served


@pytest.mark.negative_control
@pytest.mark.parametrize(
    "case", ["lone surrogate escape", "not JSON", "no JSON-RPC message"], ids=lambda case: case.replace(" ", "-")
)
async def test_the_checks_catch_a_stdio_transport_that_drops_unreadable_lines(sdk_child: Child, case: str) -> None:
    ident = sdk_child.ident()
    bad = {
        "lone surrogate escape": (call(ident, '{"command":"observe","page":"\\ud800"}'), ident),
        "not JSON": (b"this is not JSON {", None),
        "no JSON-RPC message": (b"[1,2,3]", None),
    }[case]
    with pytest.raises(AssertionError, match="it was dropped"):
        await sdk_child.bad_then_good(*bad)
