"""The app's MCP listeners: the runtime's MCP server on 127.0.0.1 (TCP `/mcp`, for any MCP client with a token) and
on the private socket beside the pairing one (`computer-use connect` alone), and the app's own client connection.

Each listener serves an ASGI app of its own (`MCPListeners.app`), so each has its own session manager and cap: a
flood of sessions on TCP `/mcp` (any local user can reach it) fills that cap, never connect's.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
from pathlib import Path

import uvicorn
from mcp import Client
from mcp.server import MCPServer

from runtime.listeners import BACKLOG, BoundedH11Protocol, ensure_descriptors
from runtime.loopback import unix_peer_uid
from runtime.startup import StartupFailure, port_failure
from runtime.transports.mcp.http import ASGIApp, bounded_config, http_app

log = logging.getLogger(__name__)

READY_TIMEOUT = 30.0
"""Seconds the app waits for each part to come up (MCP connection, the console's first subscription)."""


class StartError(StartupFailure):
    """The app could not start as configured: `what` went wrong, `todo` what to change (the command prints both as
    its one line)."""

    def __init__(self, what: str, todo: str = "start it again; if it fails the same way, please report it") -> None:
        super().__init__(what, todo)


class _MCPServer(uvicorn.Server):
    """uvicorn without its own signal handling: the app owns SIGINT/SIGTERM and stops its parts in order."""

    @contextlib.contextmanager
    def capture_signals(self):  # type: ignore[override]
        yield


class OwnerOnlyHTTP(BoundedH11Protocol):
    """The bounded HTTP protocol for the private MCP socket: a peer of another uid (`SO_PEERCRED`) is cut off as it
    connects, before a byte of its request is read. `owner_uid` is the only uid served."""

    owner_uid: int = os.getuid()

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        sock = transport.get_extra_info("socket")
        uid = unix_peer_uid(sock) if sock is not None else None
        self.admitted = uid == self.owner_uid
        if not self.admitted:
            log.warning("MCP socket: refused a peer of uid %s", uid)
            transport.abort()
            return
        super().connection_made(transport)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.admitted:  # a refused peer never had a connection set up to tear down
            super().connection_lost(exc)


class MCPListeners:
    """The runtime's MCP server on the app's two listeners, and the app's own client on the TCP one.
    `socket_protocol` serves the private socket (a negative control passes one without the peer-uid check)."""

    def __init__(self, server: MCPServer, socket_protocol: type[asyncio.Protocol] = OwnerOnlyHTTP) -> None:
        self.server = server
        self.socket_protocol = socket_protocol
        self.url = ""
        self.socket: Path | None = None
        self._tcp: _MCPServer | None = None
        self._tcp_task: asyncio.Task[None] | None = None
        self._unix: _MCPServer | None = None
        self._unix_task: asyncio.Task[None] | None = None
        self._client_task: asyncio.Task[None] | None = None
        self._client_stop = asyncio.Event()

    def app(self) -> ASGIApp:
        """An ASGI app of the runtime's MCP server, one per listener: each with its own session manager and cap, all
        with the one token verifier."""
        return http_app(self.server, "127.0.0.1", None)

    async def serve(self, port: int) -> Client:
        """Serve on 127.0.0.1:`port` (0: a free one) and open the app's own client connection to it."""
        ensure_descriptors()  # every listener's cap (runtime.listeners) must fit in the process's open-file limit
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # restart despite TIME_WAIT, as uvicorn does
            sock.bind(("127.0.0.1", port))
            sock.listen(BACKLOG)  # connections queue from here on, before uvicorn accepts: no wait for it to be up
        except OSError as exc:
            sock.close()
            raise port_failure(exc, "127.0.0.1", port) from None
        self.url = f"http://127.0.0.1:{sock.getsockname()[1]}/mcp"
        config = bounded_config(self.app(), log_level="warning", timeout_graceful_shutdown=2)
        self._tcp = _MCPServer(config)
        self._tcp_task = asyncio.create_task(self._tcp.serve(sockets=[sock]))
        ready: asyncio.Future[Client] = asyncio.get_running_loop().create_future()
        # The connection lives in a task of its own: anyio's cancel scopes must be left by the task entering them.
        self._client_task = asyncio.create_task(self._hold_client(ready))
        done, _ = await asyncio.wait(
            {ready, self._client_task, self._tcp_task}, timeout=READY_TIMEOUT, return_when=asyncio.FIRST_COMPLETED
        )
        if ready not in done:
            for task in done:
                task.result()  # raise why it ended
            raise StartError(f"no MCP connection to {self.url} within {READY_TIMEOUT:g}s")
        return ready.result()

    async def serve_socket(self, path: Path) -> None:
        """Serve on the Unix socket `path` for `connect` alone: in the pairing's 0700 directory (the app holds its
        pairing socket, so a socket left there is stale), 0600, each peer's uid checked on accept."""
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.bind(str(path))
            os.chmod(path, 0o600)
            sock.listen(128)
        except OSError:
            sock.close()
            raise
        self.socket = path
        config = uvicorn.Config(self.app(), http=self.socket_protocol, log_level="warning", timeout_graceful_shutdown=2)
        self._unix = _MCPServer(config)
        self._unix_task = asyncio.create_task(self._unix.serve(sockets=[sock]))

    async def _hold_client(self, ready: asyncio.Future[Client]) -> None:
        async with Client(self.url, mode="legacy") as client:
            ready.set_result(client)
            await self._client_stop.wait()

    async def close(self) -> None:
        """The client first, then the socket (its file removed), then TCP; safe on listeners partly started."""
        self._client_stop.set()
        if self._client_task is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._client_task, 10)
        if self._unix is not None and self._unix_task is not None:
            self._unix.should_exit = True
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._unix_task, 10)
            if self.socket is not None:
                with contextlib.suppress(FileNotFoundError):
                    self.socket.unlink()
        if self._tcp is not None and self._tcp_task is not None:
            self._tcp.should_exit = True
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._tcp_task, 10)
