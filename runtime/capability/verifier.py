"""Verifying a tool call's capability before anything touches a backend.

Order matters for the reason code: a token that is missing, forged, replayed, bound to another connection or
another tool call is `invalid_capability`; a genuine, unused token from an older provider request or turn, or
whose Pages or access changed since, is `page_context_stale`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from runtime.capability.host import ContextStore, PageContext
from runtime.capability.token import CapabilityError, open_token
from runtime.registry.registry import PageRegistry, UnknownPage

TOKEN_KEY = "page_context_token"
CALL_KEY = "tool_call_id"


class StaleContext(Exception):
    """A genuine token whose Page Context is no longer current."""


class CapabilityVerifier:
    def __init__(self, store: ContextStore, registry: PageRegistry) -> None:
        self._store = store
        self._registry = registry
        self._spent: set[str] = set()
        self._bound: dict[str, object] = {}  # connection nonce -> the MCP connection that first presented it
        self._nonce_of: dict[int, tuple[object, str]] = {}  # id(connection) -> (connection, its nonce)

    def verify(self, meta: Mapping[str, Any] | None, connection: object) -> PageContext:
        """Spend the token and return its Page Context. Raises CapabilityError or StaleContext."""
        meta = meta or {}
        claims = open_token(meta.get(TOKEN_KEY), self._store.secret)
        if connection is None:
            raise CapabilityError(
                "tokens are bound to an MCP connection; connect statefully (initialize handshake) to use computer_use"
            )
        if claims.token_id in self._spent:
            raise CapabilityError("this page_context_token was already used: tokens are one-time")
        self._spent.add(claims.token_id)
        bound = self._bound.setdefault(claims.connection, connection)
        _, nonce = self._nonce_of.setdefault(id(connection), (connection, claims.connection))
        if bound is not connection or nonce != claims.connection:
            raise CapabilityError("this page_context_token was minted for another MCP connection")
        if meta.get(CALL_KEY) != claims.tool_call:
            raise CapabilityError("this page_context_token was minted for another tool call")
        if claims.turn != self._store.current_turn:
            raise StaleContext("the turn this token belongs to has ended")
        if self._store.current_request.get(claims.turn) != claims.provider_request:
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
        return self._store.contexts[claims.provider_request]
