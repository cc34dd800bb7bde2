"""The plain HTTP API (`POST /v1/computer_use`, `runtime.transports.http_api`) is the MCP tool by other means: the same
task run through MCP and through HTTP gives the same results, field by field, ids aside; so do the refusals.

Both run against one real server: the runtime's HTTP app (`runtime.transports.mcp.http.http_app`, what `computer-use
serve --transport http` and the app serve) under uvicorn on a free loopback port, bearer-protected, the MCP client
(`HostedClient` over the SDK's streamable HTTP client) on its /mcp and the HTTP client (`HttpClient`, aiohttp) on
its /v1/computer_use. Real Chromium, backends and fixture server. The MCP run acts on Page A, the HTTP run on its
twin B (the same form, the same size), so neither run sees what the other typed.

The negative control hands the same comparison an HTTP adapter that alters one field of every result.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass
from typing import Any

import aiohttp
import pytest
import uvicorn

from lab.tap import CDPTap
from runtime.assembly import Runtime
from runtime.capability.contexts import ProviderRequest
from runtime.capability.verifier import CALL_KEY, TOKEN_KEY
from runtime.commands.base import Outcome
from runtime.computer_session import PREFIX_CHARS
from runtime.transports.client import HostedClient, HttpClient
from runtime.transports.http_api import HttpApi
from runtime.transports.mcp.http import BearerAuth, bounded_config, http_app
from runtime.transports.mcp.server import TOOL
from suites.harness import Desk, ref_of
from suites.proofs import assert_no_runtime_calls
from suites.reliability.conftest import CALL_LIMIT, within
from suites.security.test_tokens_transports import BEARER, Line

IDS = frozenset({"computer_session_id", "frame_id", "elapsed_ms"})
"""What differs between two runs by design: minted ids and timings."""
NONCE = re.compile(r"nonce=[0-9A-Za-z_-]+")
REF = re.compile(rf"(?m)^((?:[~+] )?)[a-z]{{{PREFIX_CHARS}}}(\d+) ")
"""A ref: the frame's random prefix (an id, masked) and the element's position (compared)."""

Call = Callable[..., Awaitable[dict[str, Any]]]


# -- serving ------------------------------------------------------------------------------------------------------


@dataclass
class Served:
    base: str
    api: HttpApi


@contextlib.asynccontextmanager
async def serving(
    runtime: Runtime, variant: type[HttpApi] | None = None, bearer: str | None = BEARER
) -> AsyncIterator[Served]:
    """The runtime's HTTP app, behind `bearer` (None: none, as the app serves it), under uvicorn on a free loopback
    port. `variant` (a subclass of
    `HttpApi` overriding one rule) replaces the HTTP adapter's class in the live app: a negative control's broken
    part. The socket listens before uvicorn starts, so a client may connect at once."""
    listening = socket.socket()
    listening.bind(("127.0.0.1", 0))
    listening.listen()
    port = listening.getsockname()[1]
    app = http_app(runtime.server, "127.0.0.1", bearer)
    api = app.app if isinstance(app, BearerAuth) else app
    assert isinstance(api, HttpApi), api
    if variant is not None:
        assert issubclass(variant, HttpApi)
        api.__class__ = variant
    server = uvicorn.Server(bounded_config(app, log_level="warning", timeout_graceful_shutdown=5, lifespan="on"))
    task = asyncio.create_task(server.serve(sockets=[listening]))
    try:
        yield Served(f"http://127.0.0.1:{port}", api)
    finally:
        server.should_exit = True
        await within(task, CALL_LIMIT, "the HTTP server's end")
        listening.close()


@pytest.fixture
async def http_session() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=CALL_LIMIT)) as session:
        yield session


@dataclass
class Both:
    """One server, one client of each kind, on the same port."""

    served: Served
    mcp: HostedClient
    http: HttpClient


@contextlib.asynccontextmanager
async def both(desk: Desk, session: aiohttp.ClientSession, variant: type[HttpApi] | None = None) -> AsyncIterator[Both]:
    async with AsyncExitStack() as stack:
        served = await stack.enter_async_context(serving(desk.runtime, variant))
        line = Line("streamable_http", desk.runtime, stack, served.base + "/mcp")
        yield Both(served, HostedClient(await line.client()), HttpClient(session, served.base, BEARER))


@pytest.fixture
async def twins(desk: Desk) -> Desk:
    """A and its twin B (the same form, the same size), both left of the chat, both authorized."""
    await desk.open("A", "/dom_form/", desk.workspace.column(0, 3))
    await desk.open("B", "/dom_form/", desk.workspace.column(1, 3))
    await desk.open("chat", "/chat/", desk.workspace.column(2, 3), chat=True)
    desk.authorize("A", "B")
    return desk


# -- the two ways in ----------------------------------------------------------------------------------------------


def through_mcp(desk: Desk, client: HostedClient) -> Call:
    async def call(**arguments: Any) -> dict[str, Any]:
        raw = await within(client.call(await desk.request(), **arguments), CALL_LIMIT)
        assert raw.structured_content is not None, raw
        return raw.structured_content

    return call


def through_http(desk: Desk, client: HttpClient) -> Call:
    async def call(**arguments: Any) -> dict[str, Any]:
        return await within(client.call(await desk.request(), **arguments), CALL_LIMIT)

    return call


async def scripted_task(call: Call, page: str) -> list[dict[str, Any]]:
    """list_pages, observe the form, type a name into it, verify the name is there: every result, in order."""
    listed = await call(command="list_pages")
    seen = await call(command="observe", page=page)
    assert seen.get("status") == "ok", seen
    name = ref_of(seen["observation"], '"Full name"')
    session = seen["computer_session_id"]
    typed = await call(
        command="act",
        computer_session_id=session,
        frame_id=seen["frame_id"],
        action={"type": "type", "ref": name, "text": "Ada Lovelace"},
    )
    assertion = {"type": "element_state", "role": "textbox", "name": "Full name", "state": "value"}
    checked = await call(
        command="verify", computer_session_id=session, assertion={**assertion, "expected": "Ada Lovelace"}
    )
    wrong = await call(
        command="verify", computer_session_id=session, assertion={**assertion, "expected": "Grace Hopper"}
    )
    return [listed, seen, typed, checked, wrong]


def canonical(value: Any, handles: dict[str, str]) -> Any:
    """`value` with the ids and timings left out, and the ids inside text masked: the Page handles, each frame's
    nonce and its refs' prefix."""
    if isinstance(value, dict):
        return {key: canonical(item, handles) for key, item in value.items() if key not in IDS}
    if isinstance(value, list):
        return [canonical(item, handles) for item in value]
    if isinstance(value, str):
        for handle, role in handles.items():
            value = value.replace(handle, role)
        return REF.sub(r"\1ref\2 ", NONCE.sub("nonce=…", value))
    return value


def assert_same(mcp: list[dict[str, Any]], http: list[dict[str, Any]], handles: dict[str, str]) -> None:
    """Field by field: every difference named (step, field, both values)."""
    assert len(mcp) == len(http), f"{len(mcp)} MCP results, {len(http)} HTTP results"
    differences = []
    for step, (left, right) in enumerate(zip(mcp, http, strict=True)):
        a, b = canonical(left, handles), canonical(right, handles)
        for key in sorted(set(a) | set(b)):
            if a.get(key, "<absent>") != b.get(key, "<absent>"):
                differences.append(
                    f"step {step} {key}: MCP {a.get(key, '<absent>')!r} / HTTP {b.get(key, '<absent>')!r}"
                )
    assert not differences, "the MCP and HTTP results differ:\n" + "\n".join(differences)


async def run_both(desk: Desk, pair: Both) -> None:
    handles = {desk.handle("A"): "<the page>", desk.handle("B"): "<the page>"}
    mcp = await scripted_task(through_mcp(desk, pair.mcp), desk.handle("A"))
    http = await scripted_task(through_http(desk, pair.http), desk.handle("B"))
    assert [r.get("status") for r in mcp] == ["ok", "ok", "ok", "ok", "failed"], mcp
    assert mcp[3].get("verified") is True, mcp
    assert mcp[4].get("reason_code") == "verification_failed", mcp
    assert_same(mcp, http, handles)


# -- the proofs ---------------------------------------------------------------------------------------------------

INVALID = (
    {"command": "observe"},
    {"command": "jump"},
    {"command": "list_pages", "bogus": 1, "other": 2},
    {"command": "act", "computer_session_id": "s1"},
    {"command": "observe", "page": "x" * 500},
    {"command": "list_pages", "offset": -1},
    {"command": "act", "computer_session_id": "s1", "frame_id": "f1", "action": {"type": "teleport"}},
)
"""Malformed arguments of several kinds: a missing field, an unknown command, unknown keys, an act without its
frame, an oversized id, a negative offset, an unknown action type."""


async def error_cases(
    desk: Desk, pair: Both, request: ProviderRequest
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Each refusal through MCP and through HTTP: every invalid argument set, no token, a replayed token (its first
    use a list_pages, which reads only the Page Context)."""
    mcp: list[dict[str, Any]] = []
    http: list[dict[str, Any]] = []

    async def raw_mcp(token: tuple[str, str] | None, arguments: dict[str, Any]) -> dict[str, Any]:
        meta = {TOKEN_KEY: token[1], CALL_KEY: token[0]} if token else None
        raw = await within(pair.mcp.client.call_tool(TOOL, arguments, meta=meta), CALL_LIMIT)
        assert raw.structured_content is not None, raw
        return raw.structured_content

    async def raw_http(token: tuple[str, str] | None, arguments: dict[str, Any]) -> dict[str, Any]:
        minted = {"token": token[1], "tool_call": token[0]} if token else {}
        status, body = await within(pair.http.post(arguments, **minted), CALL_LIMIT)
        assert status == 200, (status, body)
        return body  # type: ignore[no-any-return]

    for way, results, client in ((raw_mcp, mcp, pair.mcp), (raw_http, http, pair.http)):
        for arguments in INVALID:
            results.append(await way(request.mint(client.connection), arguments))
        results.append(await way(None, {"command": "observe", "page": desk.handle("A")}))
        used = request.mint(client.connection)
        first = await way(used, {"command": "list_pages"})
        assert first.get("status") == "ok", first
        results.append(await way(used, {"command": "observe", "page": desk.handle("A")}))
    return mcp, http


@pytest.mark.req("http:symmetric", "action:type", "verify:element-state")
async def test_the_same_task_through_mcp_and_through_http_gives_the_same_results_ids_aside(
    twins: Desk, http_session: aiohttp.ClientSession
) -> None:
    async with both(twins, http_session) as pair:
        await run_both(twins, pair)


@pytest.mark.before_any_backend
@pytest.mark.req("http:errors-symmetric", "reason:invalid_arguments", "reason:invalid_capability")
async def test_invalid_arguments_a_missing_token_and_a_replayed_token_get_the_same_envelope_through_both(
    twins: Desk, http_session: aiohttp.ClientSession, tap: CDPTap
) -> None:
    async with both(twins, http_session) as pair:
        request = await twins.request()  # the host's snapshot reads the Pages; nothing after it may
        tap.clear()
        mcp, http = await error_cases(twins, pair, request)
    codes = [r.get("reason_code") for r in mcp]
    assert codes == ["invalid_arguments"] * len(INVALID) + ["invalid_capability"] * 2, mcp
    assert all(r.get("hint") for r in mcp), mcp
    assert "missing" in mcp[-2]["message"], mcp
    assert "already used" in mcp[-1]["message"], mcp
    assert_same(mcp, http, {})
    assert_no_runtime_calls(tap)


# -- negative controls --------------------------------------------------------------------------------------------


class RewordsMessages(HttpApi):
    """Broken: the HTTP adapter rewrites one field of every envelope (here the message)."""

    def body_of(self, outcome: Outcome) -> dict[str, Any]:
        data = super().body_of(outcome)
        data["message"] = data.get("message", "") + " (via HTTP)"
        return data


class DropsHints(HttpApi):
    """Broken: the HTTP adapter leaves a field out (the hint of a failure)."""

    def body_of(self, outcome: Outcome) -> dict[str, Any]:
        data = super().body_of(outcome)
        data.pop("hint", None)
        return data


@pytest.mark.negative_control
@pytest.mark.req("http:symmetric")
async def test_the_symmetry_comparison_catches_an_http_adapter_that_alters_a_result_field(
    twins: Desk, http_session: aiohttp.ClientSession
) -> None:
    async with both(twins, http_session, RewordsMessages) as pair:
        with pytest.raises(
            AssertionError,
            match=r"differ:\n\s*step 0 message: MCP '2 authorized Page\(s\).' / HTTP '2 .*\(via HTTP\)'",
        ):
            await run_both(twins, pair)


@pytest.mark.before_any_backend
@pytest.mark.negative_control
@pytest.mark.req("http:errors-symmetric")
async def test_the_error_comparison_catches_an_http_adapter_that_drops_the_hint(
    twins: Desk, http_session: aiohttp.ClientSession
) -> None:
    async with both(twins, http_session, DropsHints) as pair:
        mcp, http = await error_cases(twins, pair, await twins.request())
    with pytest.raises(AssertionError, match=r"step 0 hint: MCP '.+' / HTTP '<absent>'"):
        assert_same(mcp, http, {})
