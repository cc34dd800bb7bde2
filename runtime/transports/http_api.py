"""`POST /v1/computer_use`: the plain HTTP API, on the same port as the MCP app and thin over the same service.

The body is `computer_use`'s arguments as a JSON object; the answer is the same result envelope the MCP tool returns
as structuredContent (`runtime.transports.adapter.envelope`), with status 200 whenever the call reached the tool (the
envelope's `status` says ok, failed or needs_user, as MCP's `isError` does). The capability travels in headers,
outside the arguments, as it travels in `_meta` over MCP:

- `Computer-Use-Token`: the host's one-time token for this call (`TOKEN_KEY` over MCP);
- `Computer-Use-Tool-Call`: the tool call id it was minted for (`CALL_KEY`);
- `Computer-Use-Connection`: the client's connection id, a secret it chose (16–128 of `A-Z a-z 0-9 _ -`).

Why a connection id: HTTP has no MCP connection to bind a token to, and the verifier binds every token to one
(`runtime.capability.verifier`). The client names its own; the host mints the client's tokens for the id's nonce,
`connection_nonce(id)` (a hash), and the adapter keeps one `NamedConnection` per id, which the verifier binds exactly
as it binds an MCP connection (first use binds; a token refused for its binding is void everywhere). A named
connection also refuses a token minted for another nonce outright: the token carries only the hash, so someone who
reads a token cannot name the connection it belongs to, as someone who reads an MCP token cannot enter that MCP
session. At most `CONNECTIONS` ids are kept; the least recently used one beyond that is closed as an MCP connection
closes (its nonce retired for a token lifetime: a client that gets "has closed" picks a new id).

Every web page is hostile, and its script can reach every loopback port. A browser sends `Origin` with every
cross-origin POST (and with its CORS preflight), so a request carrying `Origin` gets 403 before anything else is
read; `Content-Type` must be `application/json` (415), which no HTML form can send and no script can without a
preflight; the body is capped at `MAX_REQUEST_BYTES` (413); only POST is served (405). Bound to a loopback name, the
`Host` header must name loopback too (421), as the SDK checks for /mcp (a DNS-rebinding defence). A bearer token, when
configured, applies here too (`runtime.transports.mcp.http.BearerAuth` wraps both). No answer ever carries a traceback.
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import re
from collections import OrderedDict
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from runtime.capability.verifier import CALL_KEY, HTTP_NONCE_PREFIX, TOKEN_KEY, NamedConnection, NoConnection
from runtime.commands.base import Outcome
from runtime.service import ComputerUseService
from runtime.transports.adapter import envelope, invalid, serve

log = logging.getLogger(__name__)

PATH = "/v1/computer_use"
PREFIX = "/v1/"
TOKEN_HEADER = "Computer-Use-Token"
CALL_HEADER = "Computer-Use-Tool-Call"
CONNECTION_HEADER = "Computer-Use-Connection"
MAX_REQUEST_BYTES = 64 * 1024
"""Bytes a request body may have: every argument is bounded far below it (docs/mcp.md, "Limits")."""
CONNECTIONS = 256
"""Connection ids kept at once (least recently used closed first)."""
CONNECTION_ID = re.compile(r"[A-Za-z0-9_-]{16,128}")
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")
"""What the `Host` header may name when the app is bound to loopback (the SDK's list for /mcp), any port."""

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


def connection_nonce(connection_id: str) -> str:
    """The nonce a host mints an HTTP client's tokens for: a hash of its connection id, which stays secret."""
    return HTTP_NONCE_PREFIX + hashlib.sha256(connection_id.encode()).hexdigest()[:32]


class HTTPRefusal(Exception):
    """An HTTP-level refusal: a status and a JSON body, before anything reaches the service."""

    def __init__(self, status: int, body: dict[str, Any], headers: tuple[tuple[bytes, bytes], ...] = ()) -> None:
        super().__init__(status)
        self.status = status
        self.body = body
        self.headers = headers


def _error(status: int, error: str, message: str, *headers: tuple[bytes, bytes]) -> HTTPRefusal:
    return HTTPRefusal(status, {"error": error, "message": message}, headers)


def _one(headers: list[tuple[bytes, bytes]], name: str) -> str | None:
    """The header's value if it is sent exactly once (and is latin-1 text, as HTTP headers are); else None."""
    wanted = name.lower().encode()
    values = [value for key, value in headers if key.lower() == wanted]
    return values[0].decode("latin-1").strip() if len(values) == 1 else None


def _has(headers: list[tuple[bytes, bytes]], name: str) -> bool:
    wanted = name.lower().encode()
    return any(key.lower() == wanted for key, _ in headers)


def _loopback_host(value: str | None) -> bool:
    if not value:
        return False
    for name in LOOPBACK_NAMES:
        if value == name:
            return True
        if value.startswith(name + ":") and value[len(name) + 1 :].isdigit():
            return True
    return False


def _json_media_type(value: str | None) -> bool:
    return value is not None and value.split(";")[0].strip().lower() == "application/json"


class HttpApi:
    """ASGI: serves `PATH` (and answers 404 under `/v1/`), hands every other request to `app` (the MCP app).

    Its rules are public methods, the seams a broken variant overrides: `check_origin`, `check_media_type`,
    `admits`, `connection` and `body_of`."""

    def __init__(self, service: ComputerUseService, app: ASGIApp, check_host: bool) -> None:
        self.service = service
        self.app = app
        self.check_host = check_host
        self._connections: OrderedDict[str, NamedConnection] = OrderedDict()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not scope["path"].startswith(PREFIX):
            await self.app(scope, receive, send)
            return
        try:
            status, body = await self._answer(scope, receive)
            headers: tuple[tuple[bytes, bytes], ...] = ()
        except HTTPRefusal as refused:
            status, body, headers = refused.status, refused.body, refused.headers
        except Exception:
            log.exception("%s %s failed unexpectedly", scope.get("method"), scope["path"])
            status, body, headers = 500, {"error": "internal_error", "message": "the request failed"}, ()
        data = json.dumps(body, ensure_ascii=False).encode()
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(data)).encode()),
                    (b"cache-control", b"no-store"),
                    (b"x-content-type-options", b"nosniff"),
                    *headers,
                ],
            }
        )
        await send({"type": "http.response.body", "body": data})

    async def _answer(self, scope: Scope, receive: Receive) -> tuple[int, dict[str, Any]]:
        headers: list[tuple[bytes, bytes]] = list(scope.get("headers", []))
        self.check_origin(headers)
        if self.check_host and not _loopback_host(_one(headers, "host")):
            raise _error(421, "invalid_host", "the Host header must name 127.0.0.1, localhost or [::1]")
        if scope["path"] != PATH:
            raise _error(404, "not_found", f"the HTTP API serves {PATH} only")
        if scope["method"] != "POST":
            raise _error(405, "method_not_allowed", f"{PATH} takes POST only", (b"allow", b"POST"))
        self.check_media_type(headers)
        body = await _read(headers, receive)
        try:
            arguments = json.loads(body.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            return 400, envelope(invalid("the body is not JSON: send computer_use's arguments as a JSON object"))
        except RecursionError:
            return 400, envelope(invalid("the body nests too deeply: computer_use's arguments nest a few levels"))
        if not isinstance(arguments, dict):
            return 400, envelope(invalid("the body must be a JSON object: computer_use's arguments"))
        return 200, self.body_of(await self._call(arguments, headers))

    def check_origin(self, headers: list[tuple[bytes, bytes]]) -> None:
        """A request from a web page (any `Origin`, even a loopback one) goes no further."""
        if _has(headers, "origin"):
            raise _error(403, "origin_refused", "requests from web pages (an Origin header) are refused")

    def check_media_type(self, headers: list[tuple[bytes, bytes]]) -> None:
        """JSON only: a form or a script without a CORS preflight can send only text/plain, form or multipart."""
        if not _json_media_type(_one(headers, "content-type")):
            raise _error(415, "unsupported_media_type", "the body must be sent as Content-Type: application/json")

    def body_of(self, outcome: Outcome) -> dict[str, Any]:
        """The envelope, and the screenshot when one was taken (as MCP's image content block, in its own key)."""
        data = envelope(outcome)
        if outcome.image is not None:
            data["image"] = {"type": "image", "mimeType": "image/png", "data": base64.b64encode(outcome.image).decode()}
        return data

    async def _call(self, arguments: dict[str, Any], headers: list[tuple[bytes, bytes]]) -> Outcome:
        """What the MCP tool does with a call (`runtime.transports.adapter.serve`), the capability taken from the
        headers."""
        connection_id = _one(headers, CONNECTION_HEADER)
        connection: object = NoConnection(
            f"no connection to bind the token to: send {CONNECTION_HEADER} (16-128 of A-Z a-z 0-9 _ -), the id "
            "the host minted the token for"
        )
        meta = {
            key: value
            for key, value in ((TOKEN_KEY, _one(headers, TOKEN_HEADER)), (CALL_KEY, _one(headers, CALL_HEADER)))
            if value is not None
        }
        if connection_id is not None and CONNECTION_ID.fullmatch(connection_id):
            connection = await self.connection(connection_id, meta)
        return await serve(self.service, arguments, meta, connection)

    def admits(self, meta: dict[str, str], nonce: str) -> bool:
        """Whether the request's token is one the verifier could accept for `nonce` (`CapabilityVerifier.admits`):
        only then may the request register or touch its connection id."""
        return self.service.verifier.admits(meta, nonce)

    async def connection(self, connection_id: str, meta: dict[str, str]) -> NamedConnection:
        """The id's kept connection, once the request's token proves the host minted for it; else a connection of
        its own that is never kept, on which the verifier refuses the token and says why."""
        nonce = connection_nonce(connection_id)
        if not self.admits(meta, nonce):
            return NamedConnection(nonce)
        connection = self._connections.get(connection_id)
        if connection is not None:
            self._connections.move_to_end(connection_id)
            return connection
        connection = self._connections[connection_id] = NamedConnection(nonce)
        while len(self._connections) > CONNECTIONS:
            _, oldest = self._connections.popitem(last=False)
            await oldest.exit_stack.aclose()
        return connection


async def _read(headers: list[tuple[bytes, bytes]], receive: Receive) -> bytes:
    """The whole body, or 413 as soon as it is known to exceed `MAX_REQUEST_BYTES` (declared or received)."""
    too_large = _error(413, "body_too_large", f"the body may have at most {MAX_REQUEST_BYTES} bytes")
    declared = _one(headers, "content-length")
    if declared is not None and declared.isdigit() and int(declared) > MAX_REQUEST_BYTES:
        raise too_large
    body = bytearray()
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise _error(400, "incomplete_body", "the client went away before the body ended")
        body += message.get("body", b"")
        if len(body) > MAX_REQUEST_BYTES:
            raise too_large
        if not message.get("more_body", False):
            return bytes(body)
