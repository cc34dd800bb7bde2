"""The first-party client adapters: each attaches the host's one-time token to each `computer_use` call.

`HostedClient` speaks MCP; `HttpClient` the plain HTTP API (`runtime.transports.http_api`), with the token in headers.

Over MCP the token goes in the request's `_meta`, outside the model's arguments. Each MCP adapter instance is one MCP
connection, identified to the host by a random nonce that the runtime binds to the first connection using it.
The connection must be stateful (`Client(..., mode="legacy")`, the initialize handshake): the stateless
2026-07-28 protocol has no connection to bind a token to.
"""

from __future__ import annotations

import secrets
from typing import Any

import aiohttp
from mcp import Client
from mcp.types import CallToolResult

from runtime.capability.approval import APPROVAL_KEY
from runtime.capability.contexts import ProviderRequest
from runtime.capability.verifier import CALL_KEY, TOKEN_KEY
from runtime.transports.http_api import CALL_HEADER, CONNECTION_HEADER, PATH, TOKEN_HEADER, connection_nonce
from runtime.transports.mcp.server import TOOL


class HostedClient:
    def __init__(self, client: Client) -> None:
        self.client = client
        self.connection = "conn-" + secrets.token_hex(8)

    async def call(self, request: ProviderRequest, **arguments: Any) -> CallToolResult:
        """One tool call of one provider request, with a freshly minted token."""
        tool_call, token = request.mint(self.connection)
        return await self.client.call_tool(TOOL, arguments, meta={TOKEN_KEY: token, CALL_KEY: tool_call})

    async def call_approved(self, request: ProviderRequest, approval: str, arguments: dict[str, Any]) -> CallToolResult:
        """The act the user allowed once (`Host.approve`), sent again with its approval beside a fresh token."""
        tool_call, token = request.mint(self.connection)
        meta = {TOKEN_KEY: token, CALL_KEY: tool_call, APPROVAL_KEY: approval}
        return await self.client.call_tool(TOOL, arguments, meta=meta)


class HttpApiError(Exception):
    """The HTTP API refused the request itself (not a tool result): its status and JSON body."""

    def __init__(self, status: int, body: Any) -> None:
        super().__init__(f"HTTP {status}: {body}")
        self.status = status
        self.body = body


class HttpClient:
    """The first-party client of the plain HTTP API (`runtime.transports.http_api`): one connection id, a token per
    call.

    The connection id is a secret of this client; the host mints its tokens for the id's nonce
    (`connection_nonce`), so a token alone cannot be spent under any other id.
    """

    def __init__(self, session: aiohttp.ClientSession, base_url: str, bearer: str | None = None) -> None:
        self.session = session
        self.url = base_url.rstrip("/") + PATH
        self.connection_id = secrets.token_urlsafe(24)
        self.connection = connection_nonce(self.connection_id)
        self._bearer = bearer

    async def call(self, request: ProviderRequest, **arguments: Any) -> dict[str, Any]:
        """One tool call of one provider request, with a freshly minted token: the result envelope."""
        tool_call, token = request.mint(self.connection)
        status, body = await self.post(arguments, token=token, tool_call=tool_call)
        if status != 200:
            raise HttpApiError(status, body)
        return body  # type: ignore[no-any-return]

    async def post(
        self, body: Any, *, token: str | None = None, tool_call: str | None = None, extra: dict[str, str] | None = None
    ) -> tuple[int, Any]:
        """One raw POST of `body` (JSON) with exactly these capability headers; returns (status, JSON answer)."""
        sent = {CONNECTION_HEADER: self.connection_id, **(extra or {})}
        if token is not None:
            sent[TOKEN_HEADER] = token
        if tool_call is not None:
            sent[CALL_HEADER] = tool_call
        if self._bearer is not None:
            sent["Authorization"] = f"Bearer {self._bearer}"
        async with self.session.post(self.url, json=body, headers=sent) as response:
            return response.status, await response.json(content_type=None)
