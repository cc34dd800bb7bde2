"""The host side: the app that owns the chat and the turn authorizes Pages and mints one token per tool call.

A turn names the Pages the user authorized. Each provider request (one model call inside the turn) snapshots
those Pages as the Page Context — handle, relation, title, URL, short preview, revisions — which is exactly
what `list_pages` returns for tool calls of that request. A new provider request or a new turn makes the
older ones' tokens stale.
"""

from __future__ import annotations

import itertools
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from runtime.capability.token import Claims, new_secret, sign
from runtime.models.page import Page, PageInfo
from runtime.registry.registry import PageRegistry

PreviewReader = Callable[[Page], Awaitable[str]]


@dataclass
class PageContext:
    """The authorized Pages as snapshotted at the start of one provider request."""

    turn: str
    provider_request: str
    sequence: int  # this provider request's place in its turn: 1, 2, …
    pages: dict[str, PageInfo]
    revisions: dict[str, int]
    access_revision: int


@dataclass
class ContextStore:
    """Shared by host and runtime: the current turn and the Page Context of each provider request."""

    secret: bytes = field(default_factory=new_secret)
    current_turn: str | None = None
    current_request: dict[str, str] = field(default_factory=dict)  # turn -> latest provider request
    contexts: dict[str, PageContext] = field(default_factory=dict)  # provider request -> context


class ProviderRequest:
    def __init__(self, store: ContextStore, context: PageContext) -> None:
        self._store = store
        self.context = context
        self._calls = itertools.count(1)

    def mint(self, connection: str, tool_call: str | None = None) -> tuple[str, str]:
        """A one-time token for one tool call on one MCP connection. Returns (tool_call_id, token)."""
        tool_call = tool_call or f"{self.context.provider_request}-call-{next(self._calls)}"
        claims = Claims(
            token_id=f"{tool_call}:{new_secret().hex()[:16]}",
            connection=connection,
            turn=self.context.turn,
            provider_request=self.context.provider_request,
            tool_call=tool_call,
            pages=dict(self.context.revisions),
            access_revision=self.context.access_revision,
        )
        return tool_call, sign(claims, self._store.secret)


class Turn:
    def __init__(self, host: Host, turn_id: str, authorized: list[str]) -> None:
        self._host = host
        self.id = turn_id
        self.authorized = list(authorized)
        self._requests = itertools.count(1)

    async def provider_request(self) -> ProviderRequest:
        """Start a model call: snapshot the authorized Pages (fresh geometry, title, URL, preview)."""
        host = self._host
        registry = host.registry
        live = [h for h in self.authorized if not registry.is_lost(registry.get(h))]
        await registry.refresh(live)
        infos: dict[str, PageInfo] = {}
        for handle in live:
            page = registry.get(handle)
            if page.access_enabled and not registry.is_lost(page):
                page.preview = await host.read_preview(page)
                infos[handle] = registry.info(page)
        sequence = next(self._requests)
        request_id = f"{self.id}-req-{sequence}"
        context = PageContext(
            turn=self.id,
            provider_request=request_id,
            sequence=sequence,
            pages=infos,
            revisions={h: registry.get(h).revision for h in self.authorized},
            access_revision=registry.access_revision,
        )
        host.store.contexts[request_id] = context
        host.store.current_request[self.id] = request_id
        return ProviderRequest(host.store, context)


class Host:
    def __init__(self, registry: PageRegistry, store: ContextStore, read_preview: PreviewReader) -> None:
        self.registry = registry
        self.store = store
        self.read_preview = read_preview
        self._turns = itertools.count(1)

    def start_turn(self, authorized: list[str]) -> Turn:
        """The user authorized these Page handles for this turn; earlier turns' tokens become stale."""
        for handle in authorized:
            self.registry.get(handle)  # unknown handles are a host bug: fail loudly here
        turn = Turn(self, f"turn-{next(self._turns)}", authorized)
        self.store.current_turn = turn.id
        return turn
