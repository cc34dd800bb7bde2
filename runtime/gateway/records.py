"""What the gateway's rooms share: what it records and reports (`Ledger`), and one client connection's state.

The rooms (`admission`, `scope`, `relay`, `watch`) never call each other's private parts; what one of them learns
that another needs (a session the client now holds, a child target, a refusal, the loss of the bound page) is
written here or on the `GatewayClient`.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import aiohttp
from aiohttp import web

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT = 10.0
"""Bound on every upstream HTTP request, connect and the discovery handshake."""

REFUSED_CODE = -32000

REFUSALS_KEPT = 10_000
"""Bound on `Ledger.refusals`: a page can make a gateway refuse requests as fast as it can send them, so past this
many the oldest half is dropped (a few MB at most)."""

EventKind = Literal["popup", "crashed", "destroyed", "detached", "upstream_lost"]


@dataclass(frozen=True)
class GatewayEvent:
    """Something the runtime must know about the bound page; the client behind the gateway may never see it.

    - `popup`: a new target whose opener is the bound page (or one of its frames); `target_id` is the popup's.
    - `crashed`: the bound page's renderer crashed.
    - `destroyed`: the bound target is gone (closed, or replaced by another target).
    - `detached`: Chromium detached a client's session from the bound page without the client asking.
    - `upstream_lost`: the gateway's browser connection closed; nothing behind this gateway works any more.
    """

    kind: EventKind
    target_id: str
    detail: str = ""
    url: str = ""


@dataclass(frozen=True)
class RefusedCommand:
    """A command (or HTTP request, `conn == 0`) the gateway answered with an error and never forwarded."""

    conn: int
    method: str
    reason: str
    session_id: str | None = None


@dataclass(frozen=True)
class Absorbed:
    """A command the gateway answered `{}` without forwarding (see `allowlist.ABSORBED`)."""

    conn: int
    method: str
    session_id: str | None = None


class GatewayError(RuntimeError):
    """The gateway could not start: the upstream endpoint did not answer or the bound target does not exist."""


class Ledger:
    """Everything a gateway refused, absorbed and forwarded, and what it reported about the bound page."""

    def __init__(self, target_id: str, on_event: Callable[[GatewayEvent], None] | None = None) -> None:
        self.target_id = target_id
        self.refusals: list[RefusedCommand] = []
        self.absorbed: list[Absorbed] = []
        self.forwarded: Counter[tuple[str, str]] = Counter()
        """(level, method) → how many commands the gateway let through; level is "browser" or "page" (the bound
        page's sessions and its children's): what the backend behind it really uses, against `allowlist.py`."""
        self.events: list[GatewayEvent] = []
        self.lost: str | None = None
        """Why the bound page is out of reach, once it is (sticky); see `ScopedGateway.lost`."""
        self._on_event = on_event

    def refuse(self, conn: int, method: str, reason: str, session_id: str | None) -> None:
        self.refusals.append(RefusedCommand(conn, method, reason, session_id))
        if len(self.refusals) > REFUSALS_KEPT:
            del self.refusals[: REFUSALS_KEPT // 2]
        log.info("gateway: refused %s on client %s: %s", method, conn, reason)

    def emit(self, event: GatewayEvent) -> None:
        if event.kind != "popup" and self.lost is None:
            self.lost = f"{event.kind}: {event.detail}" if event.detail else event.kind
        self.events.append(event)
        if self._on_event is not None:
            try:
                self._on_event(event)
            except Exception:
                log.exception("gateway: on_event raised for %s", event)


@dataclass
class PendingCommand:
    """A client command forwarded upstream under the gateway's id, waiting for its answer."""

    client_id: int
    method: str
    params: dict[str, Any]
    session_id: str | None
    auto_attach: bool = False  # the upstream call was the gateway's attachToTarget standing in for setAutoAttach


@dataclass
class GatewayClient:
    """One client connection: its socket, its own upstream connection, and what the scope knows it holds."""

    conn: int
    browser_level: bool  # /devtools/browser/… (root session = browser) or /devtools/page/<bound> (root = page)
    ws: web.WebSocketResponse
    upstream: aiohttp.ClientWebSocketResponse
    sessions: dict[str, str] = field(default_factory=dict)
    """sessionId → targetId of every session this client may use: the bound page's and its children's."""
    detaching: set[str] = field(default_factory=set)
    pending: dict[int, PendingCommand] = field(default_factory=dict)
    ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    auto_attached: bool = False
    send_lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    loaders: dict[tuple[str | None, str], str] = field(default_factory=dict)
    """(sessionId, frameId) → the loaderId whose `init` lifecycle event the client has seen (`Relay.lifecycle`)."""
