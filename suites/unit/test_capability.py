"""Capability tokens: signed claims that cannot be forged, altered or read back as anything else; tokens that expire;
a store and a verifier that keep only what can still matter; hosts whose turns are independent.

Pure rules: the registry here talks to a stand-in browser with no Pages (every turn authorizes none), the clock is a
counter the test advances, and connections are plain objects with the SDK's teardown hook (`exit_stack`).
"""

from __future__ import annotations

import asyncio
import base64
import gc
import hashlib
import hmac
import re
from contextlib import AsyncExitStack
from typing import Any

import pytest

from runtime.capability.approval import Binding
from runtime.capability.contexts import ContextStore, Host, ProviderRequest
from runtime.capability.token import TOKEN_LIFETIME, CapabilityError, Claims, new_secret, open_token, sign
from runtime.capability.verifier import (
    CALL_KEY,
    TOKEN_KEY,
    UNIDENTIFIED,
    CapabilityVerifier,
    NamedConnection,
    NoConnection,
    StaleContext,
)
from runtime.models import Page
from runtime.registry.pages import PageRegistry
from suites.harness import Clock

pytestmark = pytest.mark.req("unit:capability-token")

CLAIMS = Claims("t1", "conn-a", "host-1", "host-1-turn-1", "host-1-turn-1-req-1", "call-1", {"page-1": 3}, 7, 120.0)


def test_a_signed_token_opens_to_exactly_its_claims() -> None:
    secret = new_secret()
    assert open_token(sign(CLAIMS, secret), secret) == CLAIMS


def test_a_token_is_two_unpadded_base64url_parts_whatever_the_lengths_of_its_claims() -> None:
    secret = new_secret()
    for n in range(6):  # claims of every length modulo 3: every padding base64 could need
        claims = Claims(**{**CLAIMS.__dict__, "token_id": "t" * (n + 1)})
        token = sign(claims, secret)
        assert re.fullmatch(r"[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+", token), token
        assert open_token(token, secret) == claims


@pytest.mark.parametrize("token", [None, "", "abc", "a.b.c", 42, "!!!.???"])
def test_a_missing_or_malformed_token_is_refused(token: object) -> None:
    with pytest.raises(CapabilityError):
        open_token(token, new_secret())


def test_a_token_signed_with_another_secret_is_refused() -> None:
    with pytest.raises(CapabilityError, match="not signed"):
        open_token(sign(CLAIMS, new_secret()), new_secret())


@pytest.mark.parametrize("edit", [{"pages": {"page-2": 3}}, {"expires_at": 10_000.0}, {"host": "host-2"}])
def test_a_token_whose_claims_were_edited_is_refused(edit: dict[str, Any]) -> None:
    secret = new_secret()
    token = sign(CLAIMS, secret)
    forged = sign(Claims(**{**CLAIMS.__dict__, **edit}), new_secret())
    spliced = forged.split(".")[0] + "." + token.split(".")[1]
    with pytest.raises(CapabilityError, match="not signed"):
        open_token(spliced, secret)


# -- expiry, pruning and hosts, against a stand-in browser --------------------------------------------------------


class NoBrowser:
    """A browser with no Pages: enough for a registry whose turns authorize none. `hold()` keeps its next answers
    until released, and says when a request has arrived."""

    def __init__(self) -> None:
        self.arrived = asyncio.Event()
        self.released: asyncio.Event | None = None

    def hold(self) -> asyncio.Event:
        self.released = asyncio.Event()
        return self.released

    def listen(self, listener: Any) -> None:
        pass

    async def send(self, method: str, params: dict[str, Any] | None = None, **_: Any) -> dict[str, Any]:
        self.arrived.set()
        if self.released is not None:
            await asyncio.wait_for(self.released.wait(), 10)
        return {"targetInfos": []}


class Connection:
    """What the verifier needs of the SDK's connection: identity, and the teardown stack closed with it."""

    def __init__(self) -> None:
        self.exit_stack = AsyncExitStack()


async def no_preview(page: Page) -> str:
    return ""


@pytest.fixture
def browser() -> NoBrowser:
    return NoBrowser()


@pytest.fixture
def registry(browser: NoBrowser) -> PageRegistry:
    return PageRegistry(browser)  # type: ignore[arg-type]


@pytest.fixture
def verifier(store: ContextStore, registry: PageRegistry) -> CapabilityVerifier:
    return CapabilityVerifier(store, registry)


def host_of(registry: PageRegistry, store: ContextStore) -> Host:
    return Host(registry, store, no_preview)


def call(verifier: CapabilityVerifier, request: ProviderRequest, connection: object, nonce: str = "conn-a") -> None:
    tool_call, token = request.mint(nonce)
    verifier.verify({TOKEN_KEY: token, CALL_KEY: tool_call}, connection)


async def test_a_token_is_good_until_its_lifetime_has_passed_and_then_invalid_capability_expired(
    store: ContextStore, registry: PageRegistry, verifier: CapabilityVerifier, clock: Clock
) -> None:
    request = await host_of(registry, store).start_turn([]).provider_request()
    connection = Connection()
    just_in_time = request.mint("conn-a")
    clock.now += TOKEN_LIFETIME - 0.001
    verifier.verify({TOKEN_KEY: just_in_time[1], CALL_KEY: just_in_time[0]}, connection)
    too_late = request.mint("conn-a")
    clock.now += TOKEN_LIFETIME
    with pytest.raises(CapabilityError, match="expired"):
        verifier.verify({TOKEN_KEY: too_late[1], CALL_KEY: too_late[0]}, connection)


async def test_the_lifetime_is_the_stores_setting_and_is_carried_in_the_signed_claims(
    registry: PageRegistry, clock: Clock
) -> None:
    store = ContextStore(clock=clock, token_lifetime=5.0)
    request = await host_of(registry, store).start_turn([]).provider_request()
    _, token = request.mint("conn-a")
    assert open_token(token, store.secret).expires_at == clock.now + 5.0


async def test_a_spent_token_id_is_forgotten_once_its_token_expired_and_the_token_is_still_refused(
    store: ContextStore, registry: PageRegistry, verifier: CapabilityVerifier, clock: Clock
) -> None:
    request = await host_of(registry, store).start_turn([]).provider_request()
    connection = Connection()
    tool_call, token = request.mint("conn-a")
    meta = {TOKEN_KEY: token, CALL_KEY: tool_call}
    verifier.verify(meta, connection)
    with pytest.raises(CapabilityError, match="already used"):
        verifier.verify(meta, connection)
    clock.now += TOKEN_LIFETIME
    with pytest.raises(CapabilityError, match="expired"):
        verifier.verify(meta, connection)
    assert len(verifier._spent) == 0


async def test_a_closed_connection_is_forgotten_and_its_nonce_binds_no_other_until_its_tokens_expired(
    store: ContextStore, registry: PageRegistry, verifier: CapabilityVerifier, clock: Clock
) -> None:
    request = await host_of(registry, store).start_turn([]).provider_request()
    first = Connection()
    call(verifier, request, first)
    leaked = request.mint("conn-a")  # minted while the connection was open, presented after it closed
    await first.exit_stack.aclose()
    assert (verifier._nonce_of, verifier._bound) == ({}, {})
    with pytest.raises(CapabilityError, match="has closed"):
        verifier.verify({TOKEN_KEY: leaked[1], CALL_KEY: leaked[0]}, Connection())
    clock.now += TOKEN_LIFETIME
    call(verifier, request, Connection(), nonce="conn-b")  # any call prunes what has expired
    assert "conn-a" not in verifier._retired


async def test_a_connection_without_a_teardown_hook_is_forgotten_when_it_is_collected(
    store: ContextStore, registry: PageRegistry, verifier: CapabilityVerifier
) -> None:
    request = await host_of(registry, store).start_turn([]).provider_request()

    class Bare:
        pass

    connection = Bare()
    call(verifier, request, connection)
    assert len(verifier._nonce_of) == 1
    del connection
    gc.collect()
    assert (verifier._nonce_of, verifier._bound) == ({}, {})


async def test_one_connection_cannot_present_two_nonces_nor_two_connections_one(
    store: ContextStore, registry: PageRegistry, verifier: CapabilityVerifier
) -> None:
    request = await host_of(registry, store).start_turn([]).provider_request()
    first = Connection()
    call(verifier, request, first, nonce="conn-a")
    with pytest.raises(CapabilityError, match="another MCP connection"):
        call(verifier, request, first, nonce="conn-b")
    with pytest.raises(CapabilityError, match="another MCP connection"):
        call(verifier, request, Connection(), nonce="conn-a")


async def test_a_new_turn_of_one_host_stales_its_own_tokens_and_no_other_hosts(
    store: ContextStore, registry: PageRegistry, verifier: CapabilityVerifier
) -> None:
    one, two = host_of(registry, store), host_of(registry, store)
    assert one.id != two.id
    one_turn, two_turn = one.start_turn([]), two.start_turn([])
    assert one_turn.id != two_turn.id
    old, theirs = await one_turn.provider_request(), await two_turn.provider_request()
    call(verifier, old, Connection(), nonce="conn-1")
    call(verifier, theirs, Connection(), nonce="conn-2")
    new = await one.start_turn([]).provider_request()
    with pytest.raises(StaleContext, match="turn"):
        call(verifier, old, Connection(), nonce="conn-3")
    call(verifier, theirs, Connection(), nonce="conn-4")
    call(verifier, new, Connection(), nonce="conn-5")


async def test_the_store_keeps_one_turn_and_one_page_context_per_host(
    store: ContextStore, registry: PageRegistry, verifier: CapabilityVerifier
) -> None:
    hosts = [host_of(registry, store) for _ in range(3)]
    for _ in range(5):
        for host in hosts:
            turn = host.start_turn([])
            assert host.id not in store.contexts  # the previous turn's context went with it
            connection = Connection()
            for _ in range(4):
                call(verifier, await turn.provider_request(), connection, nonce=f"conn-{turn.id}")
    assert len(store.turns) == len(store.contexts) == 3


async def test_a_host_that_is_collected_leaves_nothing_in_the_store(
    store: ContextStore, registry: PageRegistry
) -> None:
    host = host_of(registry, store)
    await host.start_turn([]).provider_request()
    assert (len(store.turns), len(store.contexts)) == (1, 1)
    del host
    gc.collect()
    assert (store.turns, store.contexts) == ({}, {})


async def test_a_snapshot_that_ends_after_its_host_started_another_turn_never_becomes_current(
    store: ContextStore, registry: PageRegistry, verifier: CapabilityVerifier, browser: NoBrowser
) -> None:
    host = host_of(registry, store)
    release = browser.hold()
    late = asyncio.create_task(host.start_turn([]).provider_request())
    await asyncio.wait_for(browser.arrived.wait(), 10)  # the snapshot is reading the browser
    current = host.start_turn([])
    release.set()
    stale = await late
    fresh = await current.provider_request()
    assert store.contexts[host.id] is fresh.context
    with pytest.raises(StaleContext, match="turn"):
        call(verifier, stale, Connection())


# -- admits: the HTTP API's question before it touches a connection id ---------------------------------------------


async def test_admits_is_true_only_for_a_genuine_unspent_unexpired_token_of_that_nonce_and_spends_nothing(
    store: ContextStore, registry: PageRegistry, verifier: CapabilityVerifier, clock: Clock
) -> None:
    """`admits` gates whether the HTTP API registers a connection id: each refusal here is one `verify` would make,
    and asking twice must leave the token spendable (it spends nothing)."""
    request = await host_of(registry, store).start_turn([]).provider_request()
    tool_call, token = request.mint("http-a")
    meta = {TOKEN_KEY: token, CALL_KEY: tool_call}
    assert verifier.admits(meta, "http-a")
    assert verifier.admits(meta, "http-a")  # asking spent nothing
    assert not verifier.admits(meta, "http-b")  # minted for another connection id
    assert not verifier.admits({TOKEN_KEY: sign(open_token(token, store.secret), new_secret())}, "http-a")
    assert not verifier.admits(None, "http-a")
    late_call, late = request.mint("http-a")
    clock.now += TOKEN_LIFETIME
    assert not verifier.admits({TOKEN_KEY: late, CALL_KEY: late_call}, "http-a")  # expired


async def test_admits_refuses_a_token_once_verify_has_spent_it(
    store: ContextStore, registry: PageRegistry, verifier: CapabilityVerifier
) -> None:
    """A spent token (spent, not void: it was presented on the connection it was minted for) must not let a
    request register a connection id: this is the one refusal where only the spent-id record decides."""
    request = await host_of(registry, store).start_turn([]).provider_request()
    tool_call, token = request.mint("conn-a")
    meta = {TOKEN_KEY: token, CALL_KEY: tool_call}
    verifier.verify(meta, Connection())
    assert open_token(token, store.secret).token_id not in verifier._void
    assert not verifier.admits(meta, "conn-a")


# -- the end of a turn ---------------------------------------------------------------------------------------------


def heard_by(store: ContextStore) -> list[tuple[str, str | None]]:
    """What the store's listeners (the session manager) hear, in order."""
    heard: list[tuple[str, str | None]] = []
    store.listen(lambda host, turn: heard.append((host, turn)))
    return heard


async def test_ending_a_turn_stales_its_tokens_drops_its_context_and_tells_the_listeners_which_turn_ended(
    store: ContextStore, registry: PageRegistry, verifier: CapabilityVerifier
) -> None:
    """The host app ends each turn when its agent loop finishes (`host/turns.py`): the sessions the turn opened
    close on that word, so the listener must hear this host and this turn, and nobody else's turn may end."""
    one, two = host_of(registry, store), host_of(registry, store)
    turn, theirs = one.start_turn([]), two.start_turn([])
    request, other = await turn.provider_request(), await theirs.provider_request()
    heard = heard_by(store)
    turn.end()
    assert heard == [(one.id, turn.id)]
    assert store.turns == {two.id: theirs.id}
    assert list(store.contexts) == [two.id]
    with pytest.raises(StaleContext, match="turn"):
        call(verifier, request, Connection(), nonce="conn-1")
    call(verifier, other, Connection(), nonce="conn-2")


async def test_a_turn_that_made_no_model_request_ends_as_well(store: ContextStore, registry: PageRegistry) -> None:
    """A turn may end before its first provider request (the model call failed): it has no Page Context to drop."""
    host = host_of(registry, store)
    turn = host.start_turn([])
    heard = heard_by(store)
    turn.end()
    assert heard == [(host.id, turn.id)]
    assert (store.turns, store.contexts) == ({}, {})


async def test_ending_a_turn_that_is_no_longer_current_changes_nothing(
    store: ContextStore, registry: PageRegistry, verifier: CapabilityVerifier
) -> None:
    """An older turn ended when the host started the next one; its late `end` must not end the current turn."""
    host = host_of(registry, store)
    old = host.start_turn([])
    current = host.start_turn([])
    request = await current.provider_request()
    heard = heard_by(store)
    old.end()
    assert heard == []
    assert store.turns == {host.id: current.id}
    assert store.contexts[host.id] is request.context
    call(verifier, request, Connection())


# -- the HTTP API's connections ------------------------------------------------------------------------------------


async def test_a_request_without_a_connection_id_is_refused_with_the_reason_the_adapter_gave(
    store: ContextStore, registry: PageRegistry, verifier: CapabilityVerifier
) -> None:
    """The HTTP API says what to send (`NoConnection.why`); the client reads it in the refusal."""
    request = await host_of(registry, store).start_turn([]).provider_request()
    with pytest.raises(CapabilityError, match="send Computer-Use-Connection"):
        call(verifier, request, NoConnection("no connection to bind the token to: send Computer-Use-Connection"))


async def test_a_named_connection_accepts_its_own_nonce_and_closing_it_retires_the_nonce(
    store: ContextStore, registry: PageRegistry, verifier: CapabilityVerifier
) -> None:
    """A /v1 connection id spends tokens minted for its nonce; closing its `exit_stack` (the id expired or was
    dropped) releases the binding like an MCP client going away, so a leaked token of it is refused after."""
    request = await host_of(registry, store).start_turn([]).provider_request()
    connection = NamedConnection("http-a")
    call(verifier, request, connection, nonce="http-a")
    leaked = request.mint("http-a")
    await connection.exit_stack.aclose()
    assert (verifier._nonce_of, verifier._bound) == ({}, {})
    with pytest.raises(CapabilityError, match="has closed"):
        verifier.verify({TOKEN_KEY: leaked[1], CALL_KEY: leaked[0]}, NamedConnection("http-a"))


# -- a host's approvals ----------------------------------------------------------------------------------------------


async def test_a_host_sees_and_approves_only_the_writes_handed_over_on_its_own_calls(
    store: ContextStore, registry: PageRegistry
) -> None:
    """Two hosts share one runtime: a write one host's call handed to the user is that host's to show and to
    approve; the other host neither sees it nor can approve it."""
    one, two = host_of(registry, store), host_of(registry, store)
    binding = Binding(one.id, "s1", "f1", '{"type":"click","ref":"e1"}')
    request = store.approvals.offer(binding, "page-1", "delete", 'button "Delete"', "")
    assert one.pending_approval(binding) == request
    assert two.pending_approval(binding) is None
    with pytest.raises(KeyError):
        two.approve(request)
    approval = one.approve(request)
    assert store.approvals.redeem(approval, binding, "delete", 'button "Delete"')


# -- what each refusal says ------------------------------------------------------------------------------------------


async def test_every_refusal_says_exactly_why_and_what_to_do(
    store: ContextStore, registry: PageRegistry, verifier: CapabilityVerifier, clock: Clock
) -> None:
    """A refusal's message is what the client (and the model behind it) reads to recover: each one is asserted
    whole, so a reworded, truncated or emptied message is caught. The cases run in an order where each later one
    is not disturbed by an earlier one (fresh nonces and connections; staleness last)."""
    host = host_of(registry, store)
    turn = host.start_turn([])
    request = await turn.provider_request()
    said: list[tuple[str, str]] = []

    def refusal(meta: dict[str, Any] | None, connection: object, expected: str) -> None:
        with pytest.raises((CapabilityError, StaleContext)) as refused:
            verifier.verify(meta, connection)
        said.append((str(refused.value), expected))

    def minted(nonce: str) -> dict[str, Any]:
        tool_call, token = request.mint(nonce)
        return {TOKEN_KEY: token, CALL_KEY: tool_call}

    refusal(None, Connection(), "the page_context_token is missing or malformed")
    refusal({TOKEN_KEY: "a.b"}, Connection(), "the page_context_token is malformed")
    refusal({TOKEN_KEY: "ab.cd"}, Connection(), "the page_context_token is not signed by this runtime's host")
    body = b'{"token_id": "t1"}'
    mac = hmac.new(store.secret, body, hashlib.sha256).digest()
    unshaped = f"{base64.urlsafe_b64encode(body).decode()}.{base64.urlsafe_b64encode(mac).decode().rstrip('=')}"
    refusal({TOKEN_KEY: unshaped}, Connection(), "the page_context_token carries malformed claims")
    refusal(
        minted("c1"),
        None,
        "this client is stateless (no initialize handshake), so there is no MCP connection to bind the token to; "
        "connect statefully to use computer_use",
    )
    refusal(
        minted("c1"),
        UNIDENTIFIED,
        "the runtime cannot tell which MCP connection this call came on, so it cannot check the token's binding; "
        "refused rather than guessed",
    )
    late = minted("c2")
    clock.now += TOKEN_LIFETIME
    refusal(
        late,
        Connection(),
        "this page_context_token has expired: tokens live 120 s, and the host mints a fresh one for every call",
    )
    bound = Connection()
    spent = minted("c3")
    verifier.verify(spent, bound)
    refusal(spent, bound, "this page_context_token was already used: tokens are one-time")
    leaked = minted("c3")
    refusal(leaked, Connection(), "this page_context_token was minted for another MCP connection")
    refusal(
        leaked,
        bound,
        "this page_context_token was presented on another MCP connection first and is void: it has leaked; the "
        "host mints a fresh one for every call",
    )
    refusal(minted("c4"), bound, "this page_context_token was minted for another MCP connection")
    refusal(
        {**minted("c3"), CALL_KEY: "another-call"}, bound, "this page_context_token was minted for another tool call"
    )
    refusal(
        minted("c5"),
        NamedConnection("http-a"),
        "this page_context_token was minted for an MCP connection, not an HTTP API connection id: send it on the "
        "MCP connection it was minted for",
    )
    refusal(minted("http-b"), NamedConnection("http-a"), "this page_context_token was minted for another connection id")
    refusal(
        minted("http-c"),
        Connection(),
        "this page_context_token was minted for an HTTP API connection id (POST /v1/computer_use), not an MCP "
        "connection: send it to /v1 with the Computer-Use-Connection id it was minted for",
    )
    closing = Connection()
    verifier.verify(minted("c6"), closing)
    await closing.exit_stack.aclose()
    refusal(minted("c6"), Connection(), "the MCP connection this page_context_token was minted for has closed")
    older = minted("c7")
    request = await turn.provider_request()
    refusal(older, Connection(), "a newer model request has started; its Page Context replaces this one")
    changed = minted("c8")
    registry.access_revision += 1  # what `PageRegistry.set_access` does when a Page's access is switched
    refusal(changed, Connection(), "Page access changed since the Page Context was taken")
    ended = minted("c9")
    turn.end()
    refusal(ended, Connection(), "the turn this token belongs to has ended")
    assert [got for got, _ in said] == [expected for _, expected in said]
