"""The host side: the app that owns the chat and the turn authorizes Pages and mints one token per tool call.

A turn names the Pages the user authorized. Each provider request (one model call inside the turn) snapshots
those Pages as the Page Context — handle, relation, title, URL, short preview, revisions — which is exactly
what `list_pages` returns for tool calls of that request. A Page that shows a reserved origin (the host's console,
`PageRegistry.reserved_origins`) is left out, its preview never read. A new provider request or a new turn makes
the older ones' tokens stale.

Several hosts may share one runtime (two chats, two apps on one browser). Each `Host` has its own id and its own
current turn: a new turn of one host stales that host's older tokens and nobody else's.
"""

from __future__ import annotations

import itertools
import time
import weakref
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field

from runtime.capability.approval import ApprovalRequest, Approvals, Binding
from runtime.capability.token import TOKEN_LIFETIME, Claims, new_secret, sign
from runtime.models.page import Page, PageInfo
from runtime.registry.pages import PageRegistry

PreviewReader = Callable[[Page], Awaitable[str]]
TurnEnded = Callable[[str, "str | None"], None]
"""A listener of `ContextStore`: (host, turn) that ended; turn None for every turn of a host that went away."""


@dataclass
class PageContext:
    """The authorized Pages as snapshotted at the start of one provider request."""

    host: str
    turn: str
    provider_request: str
    sequence: int  # this provider request's place in its turn: 1, 2, …
    pages: dict[str, PageInfo]
    revisions: dict[str, int]
    access_revision: int


@dataclass
class ContextStore:
    """Shared by the hosts and the runtime: each host's current turn and its latest provider request's Page Context.

    Only the current ones are kept: a token of an older turn or provider request is stale whatever its Page Context
    said, so a new turn drops the host's previous context and a new provider request replaces it. The store holds
    at most one turn and one Page Context per live host, however many turns, requests and calls go by; a host that
    is garbage collected takes its entries with it.

    `token_lifetime` (seconds) bounds how long a minted token stays usable; `clock` is what both minting and
    verification read (monotonic: a wall-clock jump neither expires nor revives tokens; tests inject their own).

    A turn ends when the host starts another, ends it (`Turn.end`) or goes away (`forget_host`: a grant revoked,
    denied, expired or its client gone); every listener (`listen`: the session manager) hears it at that moment,
    so what the turn opened closes then, not at a later call.
    """

    secret: bytes = field(default_factory=new_secret)
    token_lifetime: float = TOKEN_LIFETIME
    clock: Callable[[], float] = time.monotonic
    turns: dict[str, str] = field(default_factory=dict)  # host id -> its current turn
    contexts: dict[str, PageContext] = field(default_factory=dict)  # host id -> its current turn's latest context
    approvals: Approvals = field(init=False, repr=False)
    """Writes handed to the user that the user may allow once, and the approvals hosts granted for them."""
    _host_numbers: Iterator[int] = field(default_factory=lambda: itertools.count(1), repr=False)
    _listeners: list[TurnEnded] = field(default_factory=list, repr=False)

    def __post_init__(self) -> None:
        # Approvals read the clock each time, so a test that swaps `clock` later moves them too.
        self.approvals = Approvals(lambda: self.clock(), self.token_lifetime)

    def add_host(self) -> str:
        return f"host-{next(self._host_numbers)}"

    def listen(self, listener: TurnEnded) -> None:
        """Call `listener(host, turn)` whenever a turn ends; `turn` None: every turn of a host that went away."""
        self._listeners.append(listener)

    def begin_turn(self, host: str, turn: str) -> None:
        previous = self.turns.get(host)
        self.turns[host] = turn
        self.contexts.pop(host, None)
        if previous is not None and previous != turn:
            self._ended(host, previous)

    def end_turn(self, host: str, turn: str) -> None:
        """The host's turn is over (its agent loop finished): its tokens are stale and its sessions close."""
        if self.turns.get(host) == turn:
            del self.turns[host]
            self.contexts.pop(host, None)
            self._ended(host, turn)

    def begin_request(self, host: str, context: PageContext) -> None:
        # A snapshot awaits the browser: if the host started another turn meanwhile, this one is already over.
        if self.turns.get(host) == context.turn:
            self.contexts[host] = context

    def forget_host(self, host: str) -> None:
        self.turns.pop(host, None)
        self.contexts.pop(host, None)
        self._ended(host, None)

    def _ended(self, host: str, turn: str | None) -> None:
        for listener in self._listeners:
            listener(host, turn)


class ProviderRequest:
    def __init__(self, host: Host, context: PageContext) -> None:
        self._host = host  # a host lives while anything can still mint for it (see Host)
        self._store = host.store
        self.context = context
        self._calls = itertools.count(1)

    def mint(self, connection: str, tool_call: str | None = None) -> tuple[str, str]:
        """A one-time token for one tool call on one MCP connection. Returns (tool_call_id, token)."""
        tool_call = tool_call or f"{self.context.provider_request}-call-{next(self._calls)}"
        claims = Claims(
            token_id=f"{tool_call}:{new_secret().hex()[:16]}",
            connection=connection,
            host=self.context.host,
            turn=self.context.turn,
            provider_request=self.context.provider_request,
            tool_call=tool_call,
            pages=dict(self.context.revisions),
            access_revision=self.context.access_revision,
            expires_at=self._store.clock() + self._store.token_lifetime,
        )
        return tool_call, sign(claims, self._store.secret)


class Turn:
    def __init__(self, host: Host, turn_id: str, authorized: list[str]) -> None:
        self._host = host
        self.id = turn_id
        self.authorized = list(authorized)
        self._requests = itertools.count(1)

    def end(self) -> None:
        """The turn is over: its tokens are stale and the sessions it opened close now."""
        self._host.store.end_turn(self._host.id, self.id)

    async def provider_request(self) -> ProviderRequest:
        """Start a model call: snapshot the authorized Pages (fresh geometry, title, URL, preview)."""
        host = self._host
        registry = host.registry
        live = [h for h in self.authorized if not registry.is_lost(registry.get(h))]
        await registry.refresh(live)
        infos: dict[str, PageInfo] = {}
        for handle in live:
            page = registry.get(handle)
            if page.access_enabled and not registry.is_lost(page) and not registry.is_reserved(page):
                page.preview = await host.read_preview(page)
                infos[handle] = registry.info(page)
        sequence = next(self._requests)
        context = PageContext(
            host=host.id,
            turn=self.id,
            provider_request=f"{self.id}-req-{sequence}",
            sequence=sequence,
            pages=infos,
            revisions={h: registry.get(h).revision for h in self.authorized},
            access_revision=registry.access_revision,
        )
        host.store.begin_request(host.id, context)
        return ProviderRequest(host, context)


class Host:
    """One app that owns a chat and its turns. Its id is unique in its store, and so are its turn ids.

    Once nothing refers to a host any more (nor to a turn or provider request of it, which hold it), nothing can
    mint for it either: its entries leave the store.
    """

    def __init__(self, registry: PageRegistry, store: ContextStore, read_preview: PreviewReader) -> None:
        self.registry = registry
        self.store = store
        self.read_preview = read_preview
        self.id = store.add_host()
        self._turns = itertools.count(1)
        weakref.finalize(self, store.forget_host, self.id)

    def start_turn(self, authorized: list[str]) -> Turn:
        """The user authorized these Page handles for this turn; this host's earlier turns' tokens become stale."""
        for handle in authorized:
            self.registry.get(handle)  # unknown handles are a host bug: fail loudly here
        turn = Turn(self, f"{self.id}-turn-{next(self._turns)}", authorized)
        self.store.begin_turn(self.id, turn.id)
        return turn

    def pending_approval(self, binding: Binding) -> ApprovalRequest | None:
        """The write the runtime handed to the user for exactly this call of this host, if the user may allow it
        once (`runtime/capability/approval.py`); None otherwise."""
        return self.store.approvals.pending(binding) if binding.host == self.id else None

    def approve(self, request: ApprovalRequest) -> str:
        """The user allowed `request` once: the approval to send with the same act (in `_meta`, `APPROVAL_KEY`)."""
        return self.store.approvals.grant(request, self.id)
