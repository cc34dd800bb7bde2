"""Who may reach `POST /v1/computer_use` (`runtime.transports.http_api`): every web page is hostile, and its script can
reach every loopback port.

The live runtime's HTTP app (the same one `computer-use serve --transport http` and the app serve) runs under
uvicorn on a free loopback port, bearer-protected, with real Chromium, backends and fixture server behind it. Each
refusal is checked where it matters: the status and JSON body the client gets, the service's journal (no call
reached the service) and the tap (0 CDP commands from the runtime or a backend). A leaked, valid token is handed to
the attacker throughout, so a refusal cannot be the token's doing.

The negative controls run the same checks against an HTTP adapter that skips one rule (a subclass in this file
put into the live app) or a runtime whose verifier or service skips one (`suites/sabotage.py`, the token variants
of `suites/security/test_tokens_transports.py`): each check must fail there.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

import runtime.transports.http_api as http_api
from lab.tap import CDPTap
from runtime.capability.token import CapabilityError
from runtime.capability.verifier import CALL_KEY, TOKEN_KEY, CapabilityVerifier, NamedConnection
from runtime.transports.client import HttpClient
from runtime.transports.http_api import CONNECTION_HEADER, PATH, HttpApi
from runtime.transports.mcp.server import TOOL
from suites.harness import Desk
from suites.proofs import assert_no_runtime_calls
from suites.protocol.test_http_api import Both, Served, both, serving
from suites.reliability.conftest import CALL_LIMIT, within
from suites.security.test_tokens_transports import BEARER, IgnoresConnection, inject

Headers = dict[str, str]
LIMIT = 64 * 1024
"""The documented body cap (docs/http.md)."""


@pytest.fixture
async def http_session() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=CALL_LIMIT)) as session:
        yield session


@pytest.fixture
async def served(desk: Desk) -> AsyncIterator[Served]:
    async with serving(desk.runtime) as live:
        yield live


@pytest.fixture
async def one_form(desk: Desk) -> Desk:
    """Page A (a form) left of the chat, authorized."""
    await desk.open("A", "/dom_form/", desk.workspace.column(0, 2))
    await desk.open("chat", "/chat/", desk.workspace.column(1, 2), chat=True)
    desk.authorize("A")
    return desk


def observe_a(desk: Desk) -> dict[str, Any]:
    return {"command": "observe", "page": desk.handle("A")}


async def raw(
    session: aiohttp.ClientSession, method: str, url: str, headers: Headers, data: bytes | None = None
) -> tuple[int, Any, Headers]:
    """One request exactly as given; the status, the JSON body (None if none) and the headers of the answer."""
    async with session.request(method, url, headers=headers, data=data) as response:
        text = await response.text()
        body = json.loads(text) if text else None
        return response.status, body, dict(response.headers)


def journal(desk: Desk) -> int:
    return len(desk.runtime.service.journal)


def assert_nothing_reached(desk: Desk, before: int, tap: CDPTap) -> None:
    """No call reached the service (its journal records every call it saw), and no CDP command reached Chromium."""
    assert journal(desk) == before, f"{journal(desk) - before} call(s) reached the service"
    assert_no_runtime_calls(tap)


# -- the checks ---------------------------------------------------------------------------------------------------

ORIGINS = ("http://attacker.example", "null", "http://127.0.0.1:18100", "http://localhost")
"""Any Origin, a loopback one and the opaque `null` of a sandboxed frame included."""


async def check_origin_refused(desk: Desk, client: HttpClient, tap: CDPTap) -> None:
    """A request carrying `Origin`, with a leaked valid token and everything else right: 403, nothing reached."""
    request = await desk.request()
    tap.clear()
    before = journal(desk)
    for origin in ORIGINS:
        call, token = request.mint(client.connection)
        status, body = await within(
            client.post(observe_a(desk), token=token, tool_call=call, extra={"Origin": origin}), CALL_LIMIT
        )
        assert status == 403, f"Origin {origin!r} answered {status}: {body}"
        assert body == {"error": "origin_refused", "message": body.get("message")}, body
    assert_nothing_reached(desk, before, tap)


async def check_no_token(desk: Desk, client: HttpClient, tap: CDPTap) -> None:
    """No token (with and without a tool call id): invalid_capability saying so, nothing reached a backend."""
    await desk.request()
    tap.clear()
    for tool_call in (None, "some-call"):
        status, body = await within(client.post(observe_a(desk), tool_call=tool_call), CALL_LIMIT)
        refused = status == 200 and body.get("reason_code") == "invalid_capability"
        assert refused, f"no token: expected invalid_capability, got {status} {body}"
        assert "missing" in body["message"], body
        assert body.get("hint"), body
    assert_no_runtime_calls(tap)


async def check_other_connection(desk: Desk, owner: HttpClient, thief: HttpClient, tap: CDPTap) -> None:
    """A token minted for the owner's connection id, presented first under another id: refused, and void for the
    owner too; the owner's next token works."""
    request = await desk.request()
    call, token = request.mint(owner.connection)
    tap.clear()
    _, crossed = await within(thief.post(observe_a(desk), token=token, tool_call=call), CALL_LIMIT)
    refused = crossed.get("reason_code") == "invalid_capability" and "another connection id" in crossed["message"]
    assert refused, f"another connection id: expected invalid_capability, got {crossed}"
    _, after = await within(owner.post(observe_a(desk), token=token, tool_call=call), CALL_LIMIT)
    assert after.get("reason_code") == "invalid_capability", f"the token stayed usable for its owner: {after}"
    assert_no_runtime_calls(tap)
    fresh = await within(owner.call(request, command="list_pages"), CALL_LIMIT)
    assert fresh.get("status") == "ok", fresh


async def check_request_limits(desk: Desk, served: Served, session: aiohttp.ClientSession, tap: CDPTap) -> None:
    """Each malformed request, with a leaked valid token: its status and JSON error, nothing reached."""
    request = await desk.request()
    url = served.base + PATH
    call, token = request.mint("conn-unused")
    auth = {"Authorization": f"Bearer {BEARER}"}
    good = {**auth, "Content-Type": "application/json", CONNECTION_HEADER: "c" * 24}
    good |= {http_api.TOKEN_HEADER: token, http_api.CALL_HEADER: call}
    body = json.dumps(observe_a(desk)).encode()
    padded = json.dumps({**observe_a(desk), "pad": "x" * LIMIT}).encode()
    cases: list[tuple[str, str, str, Headers, bytes | None, int, str]] = [
        ("GET", "get", PATH, good, None, 405, "method_not_allowed"),
        ("PUT", "put", PATH, good, body, 405, "method_not_allowed"),
        ("OPTIONS", "a preflight without Origin", PATH, good, None, 405, "method_not_allowed"),
        ("POST", "text/plain", PATH, {**good, "Content-Type": "text/plain"}, body, 415, "unsupported_media_type"),
        ("POST", "a form", PATH, {**good, "Content-Type": "application/x-www-form-urlencoded"}, body, 415, ""),
        ("POST", "no content type", PATH, {k: v for k, v in good.items() if k != "Content-Type"}, body, 415, ""),
        ("POST", "over 64 KiB", PATH, good, padded, 413, "body_too_large"),
        ("POST", "a foreign Host", PATH, {**good, "Host": "attacker.example:18100"}, body, 421, "invalid_host"),
        ("POST", "a rebinding Host", PATH, {**good, "Host": "127.0.0.1.nip.io"}, body, 421, "invalid_host"),
        ("POST", "no bearer", PATH, {k: v for k, v in good.items() if k != "Authorization"}, body, 401, ""),
        ("POST", "another path", "/v1/other", good, body, 404, "not_found"),
    ]
    tap.clear()
    before = journal(desk)
    for method, case, path, headers, data, status, error in cases:
        got, answer, _ = await within(raw(session, method, served.base + path, headers, data), CALL_LIMIT)
        assert got == status, f"{case}: expected {status}, got {got} {answer}"
        assert isinstance(answer, dict), f"{case}: no JSON error body: {answer!r}"
        assert not error or answer.get("error") == error, f"{case}: {answer}"
    for case, data in (("not JSON", b"{nope"), ("not UTF-8", b'{"command": "\xff"}'), ("a JSON array", b"[1]")):
        got, answer, _ = await within(raw(session, "POST", url, good, data), CALL_LIMIT)
        malformed = got == 400 and answer.get("reason_code") == "invalid_arguments" and answer.get("hint")
        assert malformed, f"{case}: expected 400 invalid_arguments with a hint, got {got} {answer}"
    assert_nothing_reached(desk, before, tap)


async def check_streamed_body_capped(desk: Desk, served: Served, session: aiohttp.ClientSession) -> None:
    """A body sent in chunks without a Content-Length is cut off at the cap too."""
    headers = {"Authorization": f"Bearer {BEARER}", "Content-Type": "application/json", CONNECTION_HEADER: "c" * 24}

    async def chunks() -> AsyncIterator[bytes]:
        yield b'{"command": "list_pages", "pad": "'
        for _ in range(8):
            yield b"x" * (LIMIT // 4)
        yield b'"}'

    before = journal(desk)
    async with session.post(served.base + PATH, headers=headers, data=chunks()) as response:
        status = response.status
    assert status == 413, f"a streamed body over the cap answered {status}"
    assert journal(desk) == before


async def check_connections_bounded(desk: Desk, served: Served, session: aiohttp.ClientSession) -> None:
    """With room for 2 connection ids, a third client's call closes the least recently used id: the table stays at
    2, and the closed id's next token is refused ("has closed") before any backend call."""
    clients = [HttpClient(session, served.base, BEARER) for _ in range(3)]
    request = await desk.request()
    for client in clients:
        assert (await within(client.call(request, command="list_pages"), CALL_LIMIT)).get("status") == "ok"
    kept = len(served.api._connections)
    assert kept == 2, f"{kept} connection ids kept, room for 2"
    call, token = request.mint(clients[0].connection)
    _, body = await within(clients[0].post({"command": "list_pages"}, token=token, tool_call=call), CALL_LIMIT)
    closed = body.get("reason_code") == "invalid_capability" and "has closed" in body.get("message", "")
    assert closed, f"a closed connection id's token: expected invalid_capability, got {body}"


FLOOD_IDS = 300
"""Fresh connection ids an unauthenticated client sends: more than `CONNECTIONS` (256), the ids kept at once."""


async def check_fresh_ids_allocate_nothing(desk: Desk, served: Served, session: aiohttp.ClientSession) -> int:
    """A live client calls; then `FLOOD_IDS` requests, each under a fresh connection id and without a token the host
    minted for that id (none, a forged one, a leaked genuine one of another id, in turn): each is
    invalid_capability, and the live client's next call is ok. Returns the connection ids kept after the flood."""
    live = HttpClient(session, served.base, BEARER)
    request = await desk.request()
    assert (await within(live.call(request, command="list_pages"), CALL_LIMIT)).get("status") == "ok"
    forged = "eyJ0b2tlbl9pZCI6ICJ4In0.AAAA"

    async def one(number: int) -> None:
        attacker = HttpClient(session, served.base, BEARER)
        token: str | None = (None, forged, request.mint("http-" + "0" * 32)[1])[number % 3]
        _, body = await attacker.post({"command": "list_pages"}, token=token, tool_call="call")
        assert body.get("reason_code") == "invalid_capability", f"request {number}: {body}"

    for start in range(0, FLOOD_IDS, 50):
        await within(asyncio.gather(*(one(n) for n in range(start, min(start + 50, FLOOD_IDS)))), CALL_LIMIT)
    kept = len(served.api._connections)
    after = await within(live.call(await desk.request(), command="list_pages"), CALL_LIMIT)
    assert after.get("status") == "ok", f"the live client's next call after {FLOOD_IDS} fresh ids: {after}"
    return kept


async def check_tokens_stay_in_their_kind(desk: Desk, pair: Both) -> None:
    """A token minted for the HTTP client's connection id, sent first on a fresh MCP connection: refused (and void),
    and the MCP connection binds nothing; a token minted for the MCP connection, sent to /v1 under the HTTP client's
    id: refused. Both clients' own next calls are ok."""
    request = await desk.request()
    call, token = request.mint(pair.http.connection)
    meta = {TOKEN_KEY: token, CALL_KEY: call}
    answer = await within(pair.mcp.client.call_tool(TOOL, {"command": "list_pages"}, meta=meta), CALL_LIMIT)
    on_mcp = answer.structured_content or {}
    message = on_mcp.get("message", "")
    refused = on_mcp.get("reason_code") == "invalid_capability" and "HTTP API connection id" in message
    assert refused, f"a /v1 token on an MCP connection: expected invalid_capability, got {on_mcp}"
    assert on_mcp.get("hint"), on_mcp
    call, token = request.mint(pair.mcp.connection)
    _, on_http = await within(pair.http.post({"command": "list_pages"}, token=token, tool_call=call), CALL_LIMIT)
    refused = on_http.get("reason_code") == "invalid_capability" and "MCP connection" in on_http.get("message", "")
    assert refused, f"an MCP token on /v1: expected invalid_capability, got {on_http}"
    mcp_next = await within(pair.mcp.call(await desk.request(), command="list_pages"), CALL_LIMIT)
    assert (mcp_next.structured_content or {}).get("status") == "ok", mcp_next
    assert (await within(pair.http.call(await desk.request(), command="list_pages"), CALL_LIMIT)).get("status") == "ok"


def nested(depth: int) -> bytes:
    """A JSON object nesting `depth` arrays: 2 bytes a level, far under 64 KiB, far over Python's recursion limit."""
    return b'{"command": "list_pages", "x": ' + b"[" * depth + b"]" * depth + b"}"


async def check_deep_json(desk: Desk, served: Served, session: aiohttp.ClientSession) -> None:
    """Deeply nested JSON under 64 KiB: 400 with a one-line reason on /v1, and no 5xx on /mcp; nothing reached."""
    body = nested(30_000)
    assert len(body) < LIMIT
    headers = {"Authorization": f"Bearer {BEARER}", "Content-Type": "application/json", CONNECTION_HEADER: "c" * 24}
    before = journal(desk)
    status, answer, _ = await within(raw(session, "POST", served.base + PATH, headers, body), CALL_LIMIT)
    one_line = isinstance(answer, dict) and "\n" not in answer.get("message", "\n")
    assert status == 400, (status, answer)
    assert answer.get("reason_code") == "invalid_arguments", answer
    assert one_line, answer
    assert "Traceback" not in json.dumps(answer)
    mcp = {**headers, "Accept": "application/json, text/event-stream"}
    async with session.post(served.base + "/mcp", headers=mcp, data=body) as response:
        text = await response.text()
    assert 400 <= response.status < 500, f"/mcp answered {response.status}: {text[:200]}"
    assert "Traceback" not in text, text[:200]
    assert journal(desk) == before


# -- the HTTP adapter variants the negative controls put into the live app -------------------------------------------


class IgnoresOrigin(HttpApi):
    """Broken: serves requests from web pages (no Origin check)."""

    def check_origin(self, headers: list[tuple[bytes, bytes]]) -> None:
        pass


class AcceptsAnyBody(IgnoresOrigin):
    """Broken: no Origin check, and any content type (what a page can send without a preflight)."""

    def check_media_type(self, headers: list[tuple[bytes, bytes]]) -> None:
        pass


class AllocatesFirst(HttpApi):
    """Broken: registers (and evicts for) every well-formed connection id before any token is checked (before
    issue 29)."""

    def admits(self, meta: dict[str, str], nonce: str) -> bool:
        return True


class MixesKinds(CapabilityVerifier):
    """Broken: binds a token to whatever connection presents it first, /v1 id or MCP connection alike (before issue
    29; a named connection still refuses another id's nonce)."""

    def bind(self, nonce: str, connection: object) -> None:
        if isinstance(connection, NamedConnection) and connection.nonce != nonce:
            raise CapabilityError("this page_context_token was minted for another connection id")


class KeepsEveryConnection(HttpApi):
    """Broken: keeps every connection id it is sent, for ever (its table grows with every new id)."""

    async def connection(self, connection_id: str, meta: dict[str, str]) -> NamedConnection:
        if connection_id not in self._connections:
            self._connections[connection_id] = NamedConnection(http_api.connection_nonce(connection_id))
        return self._connections[connection_id]


# -- the proofs ---------------------------------------------------------------------------------------------------


@pytest.mark.before_any_backend
@pytest.mark.req("http:origin-refused")
async def test_a_request_with_an_origin_header_is_refused_403_and_nothing_reaches_the_service(
    one_form: Desk, served: Served, http_session: aiohttp.ClientSession, tap: CDPTap
) -> None:
    await check_origin_refused(one_form, HttpClient(http_session, served.base, BEARER), tap)


HOSTILE_SCRIPT = """
(async () => {
  const body = JSON.stringify(%(arguments)s);
  const tries = {
    json: {method: "POST", headers: {"Content-Type": "application/json", ...%(headers)s}, body},
    simple: {method: "POST", mode: "no-cors", headers: {"Content-Type": "text/plain"}, body},
  };
  const out = {};
  for (const [name, init] of Object.entries(tries)) {
    try { const r = await fetch(%(url)s, init); out[name] = r.type + " " + r.status; }
    catch (e) { out[name] = "blocked " + e.name; }
  }
  return out;
})()
"""


async def check_hostile_page(desk: Desk, served: Served, client: HttpClient, tap: CDPTap) -> dict[str, str]:
    """Script on a real Chromium page, holding a leaked valid token, POSTs to the API (served as the app serves it,
    without a bearer token) the ways a page can: a JSON fetch with the token headers, which needs a CORS preflight,
    and a no-cors text/plain one, which does not (and cannot carry the headers): nothing reaches the service."""
    request = await desk.request()
    call, token = request.mint(client.connection)
    headers = {http_api.TOKEN_HEADER: token, http_api.CALL_HEADER: call, CONNECTION_HEADER: client.connection_id}
    script = HOSTILE_SCRIPT % {
        "arguments": json.dumps(observe_a(desk)),
        "headers": json.dumps(headers),
        "url": json.dumps(served.base + PATH),
    }
    tap.clear()
    before = journal(desk)
    outcome = await within(desk.workspace.evaluate(desk.labs["A"], script, await_promise=True), CALL_LIMIT)
    assert journal(desk) == before, f"a web page's request reached the service: {outcome}"
    assert_no_runtime_calls(tap)
    return outcome  # type: ignore[no-any-return]


@pytest.mark.before_any_backend
@pytest.mark.req("http:origin-refused")
async def test_script_on_a_real_page_holding_a_leaked_token_cannot_reach_the_service(
    one_form: Desk, http_session: aiohttp.ClientSession, tap: CDPTap
) -> None:
    async with serving(one_form.runtime, bearer=None) as served:
        outcome = await check_hostile_page(one_form, served, HttpClient(http_session, served.base), tap)
    assert outcome["json"].startswith("blocked"), outcome  # its preflight (with Origin) was refused
    assert outcome["simple"] == "opaque 0", outcome  # sent, answered 403, unreadable to the page


@pytest.mark.before_any_backend
@pytest.mark.req("http:token-required", "capability:missing", "reason:invalid_capability")
async def test_without_a_token_a_call_is_invalid_capability_before_any_backend_call(
    one_form: Desk, served: Served, http_session: aiohttp.ClientSession, tap: CDPTap
) -> None:
    await check_no_token(one_form, HttpClient(http_session, served.base, BEARER), tap)


@pytest.mark.before_any_backend
@pytest.mark.req("http:token-required", "capability:cross-connection")
async def test_a_token_presented_under_another_connection_id_is_refused_and_void_for_its_owner(
    one_form: Desk, served: Served, http_session: aiohttp.ClientSession, tap: CDPTap
) -> None:
    owner = HttpClient(http_session, served.base, BEARER)
    assert (await owner.call(await one_form.request(), command="list_pages")).get("status") == "ok"
    await check_other_connection(one_form, owner, HttpClient(http_session, served.base, BEARER), tap)


@pytest.mark.before_any_backend
@pytest.mark.req("http:token-required")
async def test_without_a_connection_id_a_valid_token_is_invalid_capability(
    one_form: Desk, served: Served, http_session: aiohttp.ClientSession, tap: CDPTap
) -> None:
    client = HttpClient(http_session, served.base, BEARER)
    request = await one_form.request()
    tap.clear()
    for connection_id in ("", "short", "has spaces in it but is long"):
        call, token = request.mint(client.connection)
        extra = {CONNECTION_HEADER: connection_id}
        _, body = await client.post(observe_a(one_form), token=token, tool_call=call, extra=extra)
        assert body.get("reason_code") == "invalid_capability", (connection_id, body)
        assert CONNECTION_HEADER in body["message"], body
    assert_no_runtime_calls(tap)


@pytest.mark.before_any_backend
@pytest.mark.req("http:request-limits", "reason:invalid_arguments")
async def test_only_a_json_post_within_64_kib_to_a_loopback_host_with_the_bearer_reaches_the_service(
    one_form: Desk, served: Served, http_session: aiohttp.ClientSession, tap: CDPTap
) -> None:
    await check_request_limits(one_form, served, http_session, tap)
    await check_streamed_body_capped(one_form, served, http_session)


@pytest.mark.before_any_backend
@pytest.mark.req("http:token-required")
async def test_the_connection_ids_kept_are_bounded_and_a_closed_ids_tokens_are_refused(
    one_form: Desk, http_session: aiohttp.ClientSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(http_api, "CONNECTIONS", 2)
    async with serving(one_form.runtime) as served:
        await check_connections_bounded(one_form, served, http_session)


@pytest.mark.before_any_backend
@pytest.mark.req("http:token-required")
async def test_three_hundred_unauthenticated_fresh_connection_ids_leave_a_live_clients_next_call_ok(
    one_form: Desk, served: Served, http_session: aiohttp.ClientSession
) -> None:
    kept = await check_fresh_ids_allocate_nothing(one_form, served, http_session)
    assert kept == 1, f"{kept} connection ids kept after {FLOOD_IDS} unauthenticated ones: only the live client's"


@pytest.mark.before_any_backend
@pytest.mark.req("http:token-required", "capability:cross-connection")
async def test_a_v1_token_is_refused_on_an_mcp_connection_and_an_mcp_token_on_v1(
    one_form: Desk, http_session: aiohttp.ClientSession, tap: CDPTap
) -> None:
    async with both(one_form, http_session) as pair:
        tap.clear()
        await check_tokens_stay_in_their_kind(one_form, pair)


@pytest.mark.before_any_backend
@pytest.mark.req("http:request-limits", "reason:invalid_arguments")
async def test_deeply_nested_json_under_64_kib_is_400_with_a_one_line_reason_never_a_traceback(
    one_form: Desk, served: Served, http_session: aiohttp.ClientSession, tap: CDPTap
) -> None:
    tap.clear()
    await check_deep_json(one_form, served, http_session)
    assert_no_runtime_calls(tap)


# -- negative controls --------------------------------------------------------------------------------------------


@pytest.mark.before_any_backend
@pytest.mark.negative_control
@pytest.mark.req("http:origin-refused")
async def test_the_origin_check_catches_an_http_adapter_that_serves_web_pages(
    one_form: Desk, http_session: aiohttp.ClientSession, tap: CDPTap
) -> None:
    async with serving(one_form.runtime, IgnoresOrigin) as broken:
        client = HttpClient(http_session, broken.base, BEARER)
        with pytest.raises(AssertionError, match=r"Origin 'http://attacker\.example' answered 200"):
            await check_origin_refused(one_form, client, tap)


@pytest.mark.before_any_backend
@pytest.mark.negative_control
@pytest.mark.req("http:origin-refused")
async def test_the_hostile_page_check_catches_an_adapter_without_the_origin_and_content_type_rules(
    one_form: Desk, http_session: aiohttp.ClientSession, tap: CDPTap
) -> None:
    async with serving(one_form.runtime, AcceptsAnyBody, bearer=None) as broken:
        client = HttpClient(http_session, broken.base)
        with pytest.raises(AssertionError, match="a web page's request reached the service"):
            await check_hostile_page(one_form, broken, client, tap)


@pytest.mark.before_any_backend
@pytest.mark.negative_control
@pytest.mark.sabotage("skip_capability")
@pytest.mark.req("http:token-required")
async def test_the_no_token_check_catches_a_runtime_that_skips_the_capability(
    one_form: Desk, served: Served, http_session: aiohttp.ClientSession, tap: CDPTap
) -> None:
    with pytest.raises(AssertionError, match="no token: expected invalid_capability"):
        await check_no_token(one_form, HttpClient(http_session, served.base, BEARER), tap)


@pytest.mark.before_any_backend
@pytest.mark.negative_control
@pytest.mark.req("http:token-required")
async def test_the_connection_id_check_catches_a_verifier_that_ignores_the_connection(
    one_form: Desk, served: Served, http_session: aiohttp.ClientSession, tap: CDPTap
) -> None:
    owner = HttpClient(http_session, served.base, BEARER)
    assert (await owner.call(await one_form.request(), command="list_pages")).get("status") == "ok"
    inject(one_form, IgnoresConnection)
    with pytest.raises(AssertionError, match="another connection id: expected invalid_capability"):
        await check_other_connection(one_form, owner, HttpClient(http_session, served.base, BEARER), tap)


@pytest.mark.before_any_backend
@pytest.mark.negative_control
@pytest.mark.req("http:request-limits")
async def test_the_size_check_catches_an_adapter_without_a_body_cap(
    one_form: Desk, served: Served, http_session: aiohttp.ClientSession, tap: CDPTap, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(http_api, "MAX_REQUEST_BYTES", 1 << 30)
    with pytest.raises(AssertionError, match="over 64 KiB: expected 413"):
        await check_request_limits(one_form, served, http_session, tap)


@pytest.mark.before_any_backend
@pytest.mark.negative_control
@pytest.mark.req("http:token-required")
async def test_the_bound_check_catches_an_adapter_that_keeps_every_connection_id(
    one_form: Desk, http_session: aiohttp.ClientSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(http_api, "CONNECTIONS", 2)
    async with serving(one_form.runtime, KeepsEveryConnection) as broken:
        with pytest.raises(AssertionError, match="3 connection ids kept, room for 2"):
            await check_connections_bounded(one_form, broken, http_session)


@pytest.mark.before_any_backend
@pytest.mark.negative_control
@pytest.mark.req("http:token-required")
async def test_the_fresh_id_check_catches_an_adapter_that_registers_an_id_before_checking_its_token(
    one_form: Desk, http_session: aiohttp.ClientSession
) -> None:
    async with serving(one_form.runtime, AllocatesFirst) as broken:
        with pytest.raises(AssertionError, match="the live client's next call after 300 fresh ids"):
            await check_fresh_ids_allocate_nothing(one_form, broken, http_session)


@pytest.mark.before_any_backend
@pytest.mark.negative_control
@pytest.mark.req("http:token-required", "capability:cross-connection")
async def test_the_kind_check_catches_a_verifier_that_binds_a_v1_token_to_an_mcp_connection(
    one_form: Desk, http_session: aiohttp.ClientSession
) -> None:
    inject(one_form, MixesKinds)
    async with both(one_form, http_session) as pair:
        with pytest.raises(AssertionError, match="a /v1 token on an MCP connection: expected invalid_capability"):
            await check_tokens_stay_in_their_kind(one_form, pair)
