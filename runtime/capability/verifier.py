"""Verifying a tool call's capability before anything touches a backend.

Order matters for the reason code: a token that is missing, forged, expired, replayed, bound to another connection
or another tool call is `invalid_capability`; a genuine, unused token from an older provider request or turn of its
host, or whose Pages or access changed since, is `page_context_stale`.
"""

from __future__ import annotations

import functools
import heapq
import weakref
from collections.abc import Mapping
from contextlib import AsyncExitStack
from typing import Any

from runtime.capability.contexts import ContextStore, PageContext
from runtime.capability.token import CapabilityError, Claims, open_token
from runtime.registry.pages import PageRegistry, UnknownPage

TOKEN_KEY = "page_context_token"
CALL_KEY = "tool_call_id"

HTTP_NONCE_PREFIX = "http-"
"""What every nonce of an HTTP API connection id starts with (`runtime.transports.http_api.connection_nonce`), and no
MCP connection's nonce may: a token minted for a /v1 id is refused on an MCP connection, and one minted for an MCP
connection on /v1."""

UNIDENTIFIED = object()
"""The connection argument for a stateful call whose MCP connection the runtime could not identify: refused."""


class NoConnection:
    """The connection argument for a call that names no connection its token could be bound to: refused, saying
    `why` (the HTTP API's request without a usable connection id)."""

    def __init__(self, why: str) -> None:
        self.why = why


class NamedConnection:
    """A connection that knows the nonce its tokens are minted for, and accepts no other's.

    The plain HTTP API has no MCP connection: its client names one in a header, and the adapter derives the nonce
    from that name (`runtime/transports/http_api.py`). Beyond the binding every connection gets (first use binds, see
    `CapabilityVerifier.bind`), a named connection refuses a token minted for another nonce even on its first use:
    the name is a secret the token does not carry, so a token alone cannot be spent elsewhere. Closing its
    `exit_stack` ends the connection as an MCP client's going away does.
    """

    def __init__(self, nonce: str) -> None:
        self.nonce = nonce
        self.exit_stack = AsyncExitStack()


class StaleContext(Exception):
    """A genuine token whose Page Context is no longer current."""


class ExpiringSet:
    """Keys that leave on their own once their time has passed: a heap orders the departures."""

    def __init__(self) -> None:
        self._until: dict[str, float] = {}
        self._departures: list[tuple[float, str]] = []

    def add(self, key: str, until: float) -> None:
        self._until[key] = until
        heapq.heappush(self._departures, (until, key))

    def prune(self, now: float) -> None:
        while self._departures and self._departures[0][0] <= now:
            until, key = heapq.heappop(self._departures)
            if self._until.get(key) == until:
                del self._until[key]

    def __contains__(self, key: object) -> bool:
        return key in self._until

    def __len__(self) -> int:
        return len(self._until)


class CapabilityVerifier:
    """Spends tokens and binds connection nonces, keeping only what can still matter.

    - Spent token ids are kept until their token expires, then forgotten. That keeps the replay check sound: an
      expired token is refused before the replay check is reached, so a forgotten id can never be spent twice.
    - A connection's binding (nonce ↔ connection) is dropped when the connection closes: the SDK's `Connection`
      unwinds its `exit_stack` when its client goes away (stdio EOF, HTTP session end, in-process client exit),
      the hook the SDK offers for per-connection teardown; and any connection object that is garbage collected
      without closing is released then (a weak reference), before its id could be reused. Its nonce is retired
      for one token lifetime after that: every token minted while the connection was open has expired by then,
      so none of them can bind the nonce to a new connection (first use binds, see `bind`).
    - A token refused because its connection binding does not hold is void from then on, on every connection
      (kept like a spent id, until it expires): it has been in someone else's hands, and the legitimate client
      must not race whoever holds it. The host mints a fresh token for the next call anyway.
    Sizes therefore track the calls of the last token lifetime and the open connections, not the runtime's age.
    Its rules are public methods, the seams a broken variant overrides: `verify`, `expired`, `spend`, `check_call`
    and `bind` (`runtime.service.Parts.verifier` passes one in).
    """

    def __init__(self, store: ContextStore, registry: PageRegistry) -> None:
        self._store = store
        self._registry = registry
        self._spent = ExpiringSet()  # token ids, until their token expires
        self._retired = ExpiringSet()  # nonces of closed connections, until their last token expires
        self._void = ExpiringSet()  # token ids presented on a connection they were not bound to, until they expire
        self._nonce_of: dict[int, str] = {}  # id(open connection) -> the nonce it presented first
        self._bound: dict[str, int] = {}  # nonce -> id(the open connection that presented it first)

    def verify(self, meta: Mapping[str, Any] | None, connection: object) -> PageContext:
        """Spend the token and return its Page Context. Raises CapabilityError or StaleContext.

        `connection` identifies the MCP connection (any weak-referenceable object; None for a stateless client,
        `UNIDENTIFIED` when the transport's connection could not be found), or the HTTP API's `NamedConnection`
        (`NoConnection` when its request named none).
        """
        meta = meta or {}
        claims = open_token(meta.get(TOKEN_KEY), self._store.secret)
        if connection is None:
            raise CapabilityError(
                "this client is stateless (no initialize handshake), so there is no MCP connection to bind the "
                "token to; connect statefully to use computer_use"
            )
        if isinstance(connection, NoConnection):
            raise CapabilityError(connection.why)
        if connection is UNIDENTIFIED:
            raise CapabilityError(
                "the runtime cannot tell which MCP connection this call came on, so it cannot check the token's "
                "binding; refused rather than guessed"
            )
        now = self._store.clock()
        self._spent.prune(now)
        self._retired.prune(now)
        self._void.prune(now)
        if self.expired(claims, now):
            raise CapabilityError(
                "this page_context_token has expired: tokens live "
                f"{self._store.token_lifetime:g} s, and the host mints a fresh one for every call"
            )
        if claims.token_id in self._void:
            raise CapabilityError(
                "this page_context_token was presented on another MCP connection first and is void: it has leaked; "
                "the host mints a fresh one for every call"
            )
        if claims.token_id in self._spent:
            raise CapabilityError("this page_context_token was already used: tokens are one-time")
        self.spend(claims, connection)
        self.check_call(meta, claims)
        if self._store.turns.get(claims.host) != claims.turn:
            raise StaleContext("the turn this token belongs to has ended")
        context = self._store.contexts.get(claims.host)
        if context is None or context.provider_request != claims.provider_request:
            raise StaleContext("a newer model request has started; its Page Context replaces this one")
        if claims.access_revision != self._registry.access_revision:
            raise StaleContext("Page access changed since the Page Context was taken")
        for handle, revision in claims.pages.items():
            try:
                page = self._registry.get(handle)
            except UnknownPage:
                raise StaleContext(f"Page {handle} is no longer registered") from None
            if page.revision != revision:
                raise StaleContext(f"Page {handle} changed since the Page Context was taken")
        return context

    def admits(self, meta: Mapping[str, Any] | None, nonce: str) -> bool:
        """Whether `verify` could accept this request's token on a connection of `nonce`: signed by the host, minted
        for `nonce`, neither expired nor spent. Spends nothing: the HTTP API asks before it registers or touches a
        connection id, so a request without such a token allocates nothing (`runtime.transports.http_api`)."""
        try:
            claims = open_token((meta or {}).get(TOKEN_KEY), self._store.secret)
        except CapabilityError:
            return False
        now = self._store.clock()
        spent = claims.token_id in self._spent or claims.token_id in self._void
        return claims.connection == nonce and not self.expired(claims, now) and not spent

    def expired(self, claims: Claims, now: float) -> bool:
        return now >= claims.expires_at

    def spend(self, claims: Claims, connection: object) -> None:
        """Spend the token, then check its binding; a token refused for its binding is void everywhere after."""
        self._spent.add(claims.token_id, claims.expires_at)
        try:
            self.bind(claims.connection, connection)
        except CapabilityError:
            self._void.add(claims.token_id, claims.expires_at)
            raise

    def check_call(self, meta: Mapping[str, Any], claims: Claims) -> None:
        """The token is for one tool call: presented with another call's id (a token moved between calls), no."""
        if meta.get(CALL_KEY) != claims.tool_call:
            raise CapabilityError("this page_context_token was minted for another tool call")

    def bind(self, nonce: str, connection: object) -> None:
        """A nonce belongs to the first open connection that presents it, and a connection to its first nonce."""
        if isinstance(connection, NamedConnection):
            if not nonce.startswith(HTTP_NONCE_PREFIX):
                raise CapabilityError(
                    "this page_context_token was minted for an MCP connection, not an HTTP API connection id: send "
                    "it on the MCP connection it was minted for"
                )
            if connection.nonce != nonce:
                raise CapabilityError("this page_context_token was minted for another connection id")
        elif nonce.startswith(HTTP_NONCE_PREFIX):
            raise CapabilityError(
                "this page_context_token was minted for an HTTP API connection id (POST /v1/computer_use), not an "
                "MCP connection: send it to /v1 with the Computer-Use-Connection id it was minted for"
            )
        key = id(connection)  # entries leave when the connection closes, before its id can be reused
        known = self._nonce_of.get(key)
        if known is None:
            if nonce in self._retired:
                raise CapabilityError("the MCP connection this page_context_token was minted for has closed")
            if nonce in self._bound:
                raise CapabilityError("this page_context_token was minted for another MCP connection")
            self._nonce_of[key] = nonce
            self._bound[nonce] = key
            release = functools.partial(self._release, key, nonce)
            weakref.finalize(connection, release).atexit = False
            stack = getattr(connection, "exit_stack", None)
            if isinstance(stack, AsyncExitStack):
                stack.callback(release)
        elif known != nonce:
            raise CapabilityError("this page_context_token was minted for another MCP connection")

    def _release(self, key: int, nonce: str) -> None:
        if self._nonce_of.get(key) != nonce:
            return  # released already: closed first, collected later
        del self._nonce_of[key], self._bound[nonce]
        self._retired.add(nonce, self._store.clock() + self._store.token_lifetime)
