"""`computer_use` over streamable HTTP (MCP at /mcp, the plain HTTP API at /v1/computer_use), and who may reach it.

The SDK's streamable HTTP transport checks `Host` and `Origin` (DNS-rebinding protection) only when bound to one of
`LOOPBACK_HOSTS`, and it authenticates nobody. On any other address every machine that can route to the port, and
every web page whose script can, would reach the MCP server. So serving elsewhere takes an explicit opt-in and a
bearer token (`check_exposure`), and with a token configured — on any address — `BearerAuth` answers every HTTP
request that lacks it with 401 before the MCP layer sees the request (the MCP authorization header:
`Authorization: Bearer <token>`).

Bounds: the MCP session manager keeps at most `MAX_SESSIONS` sessions and closes one nobody has used for
`SESSION_IDLE_TIMEOUT` (no request in flight and no open GET stream; the SDK's client keeps its GET stream open, so a
live client's session never idles out). Over the cap a new session is refused (503, "Too many open sessions") and
no live session is ever closed for it: a flood of sessions delays a new client until the flood's sessions idle out,
it never ends a client's. The uvicorn listener closes a connection whose request head is late and caps its
connections (`runtime.listeners`).

The token comes from a file or from the `COMPUTER_USE_BEARER_TOKEN` environment variable, never from a command-line
argument (which every user of the machine can read in `ps`).
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import os
import socket
from collections.abc import Awaitable, Callable, MutableMapping
from pathlib import Path
from typing import Any

import uvicorn
from mcp.server import MCPServer

from runtime.listeners import BoundedH11Protocol, ensure_descriptors
from runtime.transports.http_api import HttpApi
from runtime.transports.mcp.server import ComputerUseServer

LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")
"""Exactly the names the SDK protects against DNS rebinding (`127.0.0.2` is loopback, but not one of them)."""

TOKEN_ENV = "COMPUTER_USE_BEARER_TOKEN"
SHUTDOWN_GRACE = 2.0
"""Seconds open requests get to finish once the HTTP server is told to stop."""
MIN_TOKEN_LENGTH = 16
MAX_SESSIONS = 64
"""MCP sessions open at once (the SDK's default is 10,000)."""
SESSION_IDLE_TIMEOUT = 60.0
"""Seconds an MCP session may go without a request in flight or an open GET stream before it is closed (the SDK's
default is 30 minutes). A client whose session closed gets 404 and initializes again, as the MCP spec says."""

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


class ExposureRefused(Exception):
    """Serving as asked would expose the MCP server without authentication, or with a token that is no secret."""


def read_token(path: Path | None) -> str | None:
    """The bearer token from `path` (surrounding whitespace stripped) or else from `TOKEN_ENV`; None if neither."""
    if path is not None:
        try:
            token = path.read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise ExposureRefused(f"cannot read the bearer token file {path}: {exc.strerror}") from None
    else:
        token = os.environ.get(TOKEN_ENV, "").strip()
        if not token:
            return None
    if len(token) < MIN_TOKEN_LENGTH:
        raise ExposureRefused(f"the bearer token must be at least {MIN_TOKEN_LENGTH} characters")
    return token


def check_exposure(host: str, allow_remote: bool, token: str | None) -> None:
    """Refuse to serve on a non-loopback address unless the operator opted in and configured a bearer token."""
    if host in LOOPBACK_HOSTS:
        return
    missing = []
    if not allow_remote:
        missing.append("--allow-remote")
    if token is None:
        missing.append(f"a bearer token (--bearer-token-file FILE or the {TOKEN_ENV} environment variable)")
    if missing:
        raise ExposureRefused(
            f"--host {host} is not loopback ({', '.join(LOOPBACK_HOSTS)}): the SDK's DNS-rebinding protection is off "
            f"there and the MCP server authenticates nobody; serving on it needs {' and '.join(missing)}"
        )


class BearerAuth:
    """ASGI middleware: an HTTP request without `Authorization: Bearer <the token>` gets 401 and goes no further.

    The token is compared in constant time (`hmac.compare_digest`), so the answer's timing does not tell a guesser
    how much of a guess was right. Lifespan events pass through: they come from the server process, not a client.
    """

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self._expected = token.encode()

    def authorized(self, headers: list[tuple[bytes, bytes]]) -> bool:
        values = [value for name, value in headers if name.lower() == b"authorization"]
        if len(values) != 1:
            return False
        scheme, _, credentials = values[0].partition(b" ")
        return scheme.lower() == b"bearer" and hmac.compare_digest(credentials.strip(), self._expected)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan" or self.authorized(scope.get("headers", [])):
            await self.app(scope, receive, send)
        elif scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008})
        else:
            body = json.dumps({"error": "invalid_token", "error_description": "a valid bearer token is required"})
            await send(
                {
                    "type": "http.response.start",
                    "status": 401,
                    "headers": [
                        (b"content-type", b"application/json"),
                        (b"www-authenticate", b'Bearer error="invalid_token"'),
                    ],
                }
            )
            await send({"type": "http.response.body", "body": body.encode()})


def http_app(server: MCPServer, host: str, token: str | None) -> ASGIApp:
    """The server's streamable HTTP app (at /mcp) and, for a `ComputerUseServer`, the plain HTTP API over the same
    service (`runtime.transports.http_api`, at /v1/computer_use); both behind `BearerAuth` when a token is
    configured."""
    app: ASGIApp = server.streamable_http_app(
        host=host, max_sessions=MAX_SESSIONS, session_idle_timeout=SESSION_IDLE_TIMEOUT
    )
    if isinstance(server, ComputerUseServer) and server.service is not None:
        app = HttpApi(server.service, app, check_host=host in LOOPBACK_HOSTS)
    return BearerAuth(app, token) if token is not None else app


class _Server(uvicorn.Server):
    """uvicorn without its own signal handling: the caller owns SIGINT/SIGTERM (uvicorn's would re-raise them once
    it stopped, and the default SIGTERM action ends the process before its browser and backends are cleaned up)."""

    @contextlib.contextmanager
    def capture_signals(self):  # type: ignore[no-untyped-def]
        yield

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if sockets is not None and self.started:
            # uvicorn announces only a socket it bound itself (given one, it assumes a Gunicorn worker whose master
            # did): say where it listens all the same, in its own words, which people and the suites read.
            self._log_started_message(sockets)


async def serve_http(
    server: MCPServer, host: str, port: int, token: str | None, sock: socket.socket | None = None
) -> None:
    """Serve until cancelled; cancelled, it stops as uvicorn does on a signal (stops listening, gives open requests,
    an MCP client's event stream say, `SHUTDOWN_GRACE` seconds, ends the app's lifespan) before it re-raises.
    Callers check `check_exposure` first: this binds whatever it is given, or listens on `sock`, bound already
    (`runtime.startup.listening_socket`: a busy port is found before anything starts)."""
    ensure_descriptors()
    config = bounded_config(
        http_app(server, host, token),
        host=host,
        port=port,
        log_level=server.settings.log_level,
        timeout_graceful_shutdown=SHUTDOWN_GRACE,
    )
    uvicorn_server = _Server(config)
    serving = asyncio.ensure_future(uvicorn_server.serve(sockets=None if sock is None else [sock]))
    try:
        await asyncio.shield(serving)
    except asyncio.CancelledError:
        uvicorn_server.should_exit = True
        await serving
        raise


def bounded_config(app: ASGIApp, **options: Any) -> uvicorn.Config:
    """uvicorn's configuration for `app` with the listener bounds (`runtime.listeners`): every server of /mcp and
    /v1 is built from it, so none runs without them."""
    options["log_level"] = str(options.get("log_level", "warning")).lower()
    return uvicorn.Config(app, http=BoundedH11Protocol, **options)
