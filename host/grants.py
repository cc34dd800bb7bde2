"""User grants for third-party MCP clients: what the person allowed a paired `computer-use connect` to use.

A third-party client (Claude Code, Cursor, VS Code, the MCP Inspector) launches `computer-use connect`, which pairs
with the app over a socket only the same user can open (`host.pairing`). The console then shows "<client> asks for
browser access", and the person grants named Pages with a bound: until revoked, for a time limit, or until one of
the Pages changes (its revision moves: access toggled, hidden, moved to another group, replaced, or closed).

Each grant is a turn of a Host of its own on the runtime's shared context store, so its tokens are independent of
the chat's and of every other grant's; each forwarded `tools/call` is a provider request of that turn (a fresh Page
Context snapshot) with its own one-time token, minted here for the pairing's MCP connection nonce. Ending a grant
(revoke, expiry, a Page change, the client going away) forgets its host in the store: a token minted before is stale
from that moment, the next call gets no token at all, and the grant's ComputerSessions close at once (the store tells
the runtime's session manager: their backend children exit and their gateway ports close).

Client names come from the client (its MCP `initialize`): they are clipped, stripped of control characters and only
ever shown as text.
"""

from __future__ import annotations

import itertools
import secrets
import time
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from host.turns import ConsoleRefusal, clip
from runtime.capability.contexts import Host, Turn
from runtime.models import Page
from runtime.registry.pages import PageRegistry, UnknownPage

BOUNDS = ("revoke", "time", "page")
"""until revoked, for a time limit, until a granted Page changes."""
MAX_CLIENT_NAME = 60
MAX_MINUTES = 24 * 60
UNNAMED = "An MCP client"

GRANT_HINT = (
    "Ask the user to grant this client access to the Page in the MCP clients panel of the computer-use console "
    "(the app's window): it shows '<client> asks for browser access' with the Pages to tick."
)


def clean_text(raw: str, limit: int) -> str:
    """Text from outside as the console may show it: printable, one line, at most `limit` characters."""
    text = "".join(" " if unicodedata.category(ch)[0] in "CZ" else ch for ch in raw[: limit * 4])
    return clip(" ".join(text.split()), limit)


def clean_name(raw: object) -> str:
    """A client-supplied name as the console may show it: printable, one line, at most MAX_CLIENT_NAME characters."""
    text = clean_text(raw, MAX_CLIENT_NAME) if isinstance(raw, str) else ""
    return text or UNNAMED


class NoGrant(Exception):
    """No live grant for this pairing: the call gets `invalid_capability` with `GRANT_HINT`."""


@dataclass
class Grant:
    pages: list[str]
    bound: str
    host: Host
    turn: Turn
    revisions: dict[str, int]
    expires_at: float | None = None  # on the store's clock
    until: float | None = None  # wall-clock epoch seconds, for the console only


@dataclass
class Pairing:
    id: str
    nonce: str
    """The MCP connection nonce this pairing's tokens are minted for (the runtime binds it to the bridge's
    connection on first use)."""
    process: str = ""
    """What the kernel says of the paired process (`host.pairing.process_of`), shown beside its self-declared name."""
    client: str = ""
    grant: Grant | None = None
    ended: str = ""
    denied: bool = False


@dataclass
class GrantStore:
    """Pairings and their grants. `new_host` makes a Host on the runtime's shared store; `publish` tells the
    console (a `grants` event); `clock` decides expiry (monotonic; tests move it)."""

    registry: PageRegistry
    new_host: Callable[[], Host]
    publish: Callable[[dict[str, Any]], None]
    clock: Callable[[], float] = time.monotonic
    socket: str = ""
    """Where `computer-use connect` pairs (shown in the console); "" while clients cannot connect."""
    pairings: dict[str, Pairing] = field(default_factory=dict)
    _numbers: Any = field(default_factory=lambda: itertools.count(1), repr=False)

    # -- pairing ------------------------------------------------------------------------------------------------

    def pair(self, process: str = "") -> Pairing:
        pairing = Pairing(id=f"client-{next(self._numbers)}", nonce="conn-" + secrets.token_hex(8), process=process)
        self.pairings[pairing.id] = pairing
        return pairing

    def announce(self, pairing_id: str, name: object) -> None:
        """The paired client said who it is: from now on the console shows its request."""
        pairing = self.pairings.get(pairing_id)
        if pairing is None:
            return
        if not pairing.client:  # once introduced, a client cannot rename itself (say, after its grant)
            pairing.client = clean_name(name)
            self.show()

    def unpair(self, pairing_id: str) -> None:
        pairing = self.pairings.pop(pairing_id, None)
        if pairing is not None:
            self._end(pairing, "the client disconnected")
            self.show()

    # -- the person's decisions ---------------------------------------------------------------------------------

    def grant(self, pairing_id: str, pages: list[str], bound: str, minutes: float | None = None) -> Grant:
        pairing = self._pairing(pairing_id)
        if pairing.denied:
            raise ConsoleRefusal(f"{pairing.client} was denied; start it again to let it ask again.", 409)
        if bound not in BOUNDS:
            raise ConsoleRefusal(f"a grant lasts until one of: {', '.join(BOUNDS)}", 400)
        handles = list(dict.fromkeys(pages))
        if not handles:
            raise ConsoleRefusal("Tick at least one Page to grant.", 400)
        for handle in handles:
            if not self._grantable(handle):
                raise ConsoleRefusal(f"{clip(handle, 40)} is not an open Page you can grant.", 400)
        expires_at = until = None
        if bound == "time":
            if not isinstance(minutes, int | float) or isinstance(minutes, bool) or not 0 < minutes <= MAX_MINUTES:
                raise ConsoleRefusal(f"A time limit is 1 to {MAX_MINUTES} minutes.", 400)
            expires_at = self.clock() + minutes * 60
            until = time.time() + minutes * 60
        self._end(pairing, "")
        host = self.new_host()
        turn = host.start_turn(handles)
        revisions = {h: self.registry.get(h).revision for h in handles}
        pairing.grant = Grant(handles, bound, host, turn, revisions, expires_at, until)
        pairing.ended = ""
        self.show()
        return pairing.grant

    def revoke(self, pairing_id: str) -> None:
        pairing = self._pairing(pairing_id)
        if pairing.grant is None:
            raise ConsoleRefusal(f"{pairing.client or UNNAMED} has no access to revoke.", 409)
        self._end(pairing, "revoked")
        self.show()

    def deny(self, pairing_id: str) -> None:
        """The person does not want this client: its request leaves the console, and it gets nothing while it runs
        (a client started again asks again)."""
        pairing = self._pairing(pairing_id)
        self._end(pairing, "denied")
        pairing.denied = True
        self.show()

    # -- the bridge's calls -------------------------------------------------------------------------------------

    def current(self, pairing: Pairing) -> Grant | None:
        """The pairing's grant if it still holds (ending it, and telling the console, if its bound has passed)."""
        grant = pairing.grant
        if grant is None:
            return None
        why = self._over(grant)
        if why:
            self._end(pairing, why)
            self.show()
            return None
        return grant

    async def mint(self, pairing_id: str) -> tuple[str, str]:
        """(tool_call_id, token) for one forwarded call: a new provider request of the grant's turn. `NoGrant`
        when there is no live grant."""
        pairing = self.pairings.get(pairing_id)
        if pairing is None:
            raise NoGrant("this client is not paired with the app")
        if pairing.denied:
            raise NoGrant(f"the user denied {pairing.client or 'this client'} browser access")
        grant = self.current(pairing)
        if grant is None:
            why = f" (the last grant ended: {pairing.ended})" if pairing.ended else ""
            raise NoGrant(f"the user has not granted {pairing.client or 'this client'} browser access{why}")
        request = await grant.turn.provider_request()
        if pairing.grant is not grant or self.current(pairing) is None:
            raise NoGrant("the grant ended while the call was prepared")
        return request.mint(pairing.nonce)

    def expire(self) -> None:
        """End every grant whose bound has passed (the app runs this when a time limit is due)."""
        for pairing in list(self.pairings.values()):
            self.current(pairing)

    def on_page_event(self, page: Page, what: str) -> None:
        """A Page changed (the registry's listener): grants bound to it end now, not at their next call."""
        for pairing in list(self.pairings.values()):
            grant = pairing.grant
            if grant is not None and page.registry_page_id in grant.pages:
                self.current(pairing)

    # -- helpers ------------------------------------------------------------------------------------------------

    def _over(self, grant: Grant) -> str:
        if grant.expires_at is not None and self.clock() >= grant.expires_at:
            return "its time limit passed"
        if grant.bound == "page":
            for handle, revision in grant.revisions.items():
                try:
                    page = self.registry.get(handle)
                except UnknownPage:
                    return f"Page {handle} is gone"
                if self.registry.is_lost(page) or page.revision != revision:
                    return f"Page {handle} changed"
        return ""

    def _end(self, pairing: Pairing, why: str) -> None:
        grant, pairing.grant = pairing.grant, None
        if grant is not None:
            grant.host.store.forget_host(grant.host.id)  # tokens minted for it are stale from now on
            pairing.ended = why

    def _pairing(self, pairing_id: object) -> Pairing:
        pairing = self.pairings.get(pairing_id) if isinstance(pairing_id, str) else None
        if pairing is None or not pairing.client:
            raise ConsoleRefusal("That client is no longer connected.", 404)
        return pairing

    def _grantable(self, handle: str) -> bool:
        try:
            page = self.registry.get(handle)
        except UnknownPage:
            return False
        return not page.is_chat and not self.registry.is_lost(page) and not self.registry.is_reserved(page)

    def show(self) -> None:
        clients = []
        for pairing in self.pairings.values():
            if not pairing.client or pairing.denied:
                continue  # not yet introduced, or denied: nothing to ask the person
            grant = pairing.grant
            clients.append(
                {
                    "id": pairing.id,
                    "client": pairing.client,
                    "process": pairing.process,
                    "state": "granted" if grant is not None else "asking",
                    "pages": list(grant.pages) if grant is not None else [],
                    "bound": grant.bound if grant is not None else "",
                    "until": round(grant.until * 1000) if grant is not None and grant.until is not None else None,
                    "ended": pairing.ended,
                }
            )
        self.publish({"type": "grants", "clients": clients, "socket": self.socket})
