"""The first-party MCP client adapter: attaches the host's one-time token to each `computer_use` call.

The token goes in the request's `_meta`, outside the model's arguments. Each adapter instance is one MCP
connection, identified to the host by a random nonce that the runtime binds to the first connection using it.
The connection must be stateful (`Client(..., mode="legacy")`, the initialize handshake): the stateless
2026-07-28 protocol has no connection to bind a token to.
"""

from __future__ import annotations

import secrets
from typing import Any

from mcp import Client
from mcp.types import CallToolResult

from runtime.capability.host import ProviderRequest
from runtime.capability.verifier import CALL_KEY, TOKEN_KEY
from runtime.mcp.server import TOOL


class HostedClient:
    def __init__(self, client: Client) -> None:
        self.client = client
        self.connection = "conn-" + secrets.token_hex(8)

    async def call(self, request: ProviderRequest, **arguments: Any) -> CallToolResult:
        """One tool call of one provider request, with a freshly minted token."""
        tool_call, token = request.mint(self.connection)
        return await self.client.call_tool(TOOL, arguments, meta={TOKEN_KEY: token, CALL_KEY: tool_call})
