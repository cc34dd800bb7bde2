"""Bounds for every HTTP listener the runtime and the app serve: a deadline for a request head, a cap on connections.

Without them one local process holds a listener's connections open by sending a request head a byte at a time (a
slowloris): neither uvicorn nor aiohttp closes a connection whose head never ends, and every held connection is a
file descriptor of the one process that also serves the console, /mcp, /v1, pairing and the gateways. About 1,100
such connections used to stop them all together.

- Request deadline (`HEAD_TIMEOUT`): a connection that has not sent a whole request, head and body, this long after
  it opened (or after its previous answer) is closed, so neither a head nor a body sent a byte at a time holds it.
  A request that is being served (its body in: an SSE stream, a CDP WebSocket) is never cut. aiohttp's listeners
  (the console, the gateways) get the head deadline only: each answers before it reads a body, and aiohttp drains an
  unread body for at most its `lingering_time`.
- Connection cap (`MAX_CONNECTIONS` per listener): a connection over the cap makes room by closing the oldest
  connection that is waiting for a head (a slow or idle one); a connection being served is never closed for it. Only
  when every connection is being served is the newcomer itself closed. A legitimate client sends its head at once, so
  a flood of slow heads delays it by nothing: the flood's oldest connection goes instead.

Every listener's file descriptors are so bounded by its cap; the app raises its soft `RLIMIT_NOFILE` to cover the sum
(`ensure_descriptors`).
"""

from __future__ import annotations

import asyncio
import resource
from typing import Any

import h11
from aiohttp import web
from uvicorn.protocols.http.h11_impl import H11Protocol

HEAD_TIMEOUT = 10.0
"""Seconds a connection may take to send a whole request, head and body (every body we serve is at most 64 KiB: a
local client sends it in microseconds)."""
MAX_CONNECTIONS = 256
"""Open connections per listener; over it the oldest one waiting for a head is closed."""
BACKLOG = 1024
"""Connections the kernel queues before the server accepts them: a burst waits there (costing the process no file
descriptor) instead of having its SYNs dropped, which delays a legitimate client by a retransmission (1 s, 3 s ...)."""
DESCRIPTORS = 4096
"""The soft open-file limit the app asks for: its listeners' caps, Chromium's pipes and the backends' sockets."""


class BoundedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with the request deadline and the connection cap (`uvicorn.Config(http=...)`).

    `head_timeout` and `max_connections` are class attributes, and `waiting_for_request` says what the deadline
    covers: a test's variant may change them.
    """

    head_timeout: float = HEAD_TIMEOUT
    max_connections: int = MAX_CONNECTIONS

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._head_timer: asyncio.TimerHandle | None = None
        self._head_since: float | None = None
        self._await_head()
        if len(self.connections) > self.max_connections:
            self._make_room()

    def connection_lost(self, exc: Exception | None) -> None:
        self._head_done()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        # uvicorn cancels its keep-alive timer on any byte, so a partial next head would otherwise wait for ever.
        if self._head_since is None and self.waiting_for_request():
            self._await_head()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if self._head_since is None and self.waiting_for_request():
            self._await_head()  # idle between requests: waiting for the next head, so the first to make room

    def handle_events(self) -> None:
        super().handle_events()
        if not self.waiting_for_request():
            self._head_done()

    def waiting_for_request(self) -> bool:
        """The client still owes (part of) a request: its head (IDLE) or the rest of its body (SEND_BODY)."""
        return not self.transport.is_closing() and self.conn.their_state in (h11.IDLE, h11.SEND_BODY)

    def _await_head(self) -> None:
        self._head_since = self.loop.time()
        if self.head_timeout > 0:
            self._head_timer = self.loop.call_later(self.head_timeout, self._head_late)

    def _head_done(self) -> None:
        self._head_since = None
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_late(self) -> None:
        self._head_timer = None
        if self.waiting_for_request():
            self.transport.close()

    def _make_room(self) -> None:
        waiting = [
            other
            for other in self.connections
            if isinstance(other, BoundedH11Protocol)
            and other is not self
            and other._head_since is not None
            and not other.transport.is_closing()
        ]
        oldest = min(waiting, key=lambda other: other._head_since or 0.0, default=self)
        oldest.transport.close()


class BoundedServer(web.Server):
    """aiohttp's low-level server with the connection cap (the head deadline is aiohttp's `keepalive_timeout`, which
    it arms when a connection opens and enforces while no request has been parsed)."""

    max_connections: int = MAX_CONNECTIONS

    def connection_made(self, handler: web.RequestHandler, transport: asyncio.Transport) -> None:  # type: ignore[type-arg]
        super().connection_made(handler, transport)
        open_ = [(other, held) for other, held in self._connections.items() if not held.is_closing()]
        if len(open_) <= self.max_connections:
            return
        # aiohttp has no public "is serving a request" flag; `_request_in_progress` is set while a handler runs.
        idle = [held for other, held in open_ if other is not handler and not other._request_in_progress]
        (idle[0] if idle else transport).close()


class BoundedAppRunner(web.AppRunner):
    """`web.AppRunner` whose server has the connection cap and whose head deadline is `HEAD_TIMEOUT`."""

    server_class: type[web.Server] = BoundedServer
    head_timeout: float = HEAD_TIMEOUT

    def __init__(self, app: web.Application, **kwargs: Any) -> None:
        kwargs.setdefault("keepalive_timeout", self.head_timeout)
        super().__init__(app, **kwargs)

    async def _make_server(self) -> web.Server:
        server = await super()._make_server()
        server.__class__ = self.server_class  # the app builds a plain `web.Server`; this one only adds the cap
        return server


def ensure_descriptors(wanted: int = DESCRIPTORS) -> int:
    """Raise this process's soft open-file limit to `wanted` (never above the hard limit, never lower); the result."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    if soft != resource.RLIM_INFINITY and soft < target:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        return target
    return soft
