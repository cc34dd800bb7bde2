"""The browser behind the gateway: its discovery endpoints and its WebSocket connections, each bounded."""

from __future__ import annotations

import asyncio
from typing import Any
from urllib.parse import urlsplit

import aiohttp

from runtime.gateway.records import DEFAULT_TIMEOUT, GatewayError
from runtime.pipe import http_base, http_session


class Upstream:
    """The browser's CDP endpoint, `http://host:port` or a private Chromium's `unix:/path` (`runtime.pipe`)."""

    def __init__(self, endpoint: str) -> None:
        self.endpoint = endpoint
        self.http_base = http_base(endpoint)
        self.hostport = urlsplit(self.http_base).netloc
        self.browser_ws = ""
        """The browser's own WebSocket URL, once `open` has read it."""
        self._http: aiohttp.ClientSession | None = None

    async def open(self) -> None:
        """Find the browser's WebSocket (`/json/version`); GatewayError if the endpoint does not answer."""
        self._http = self._http or http_session(self.endpoint)
        self.browser_ws = (await self.json("/json/version"))["webSocketDebuggerUrl"]

    def page_ws(self, target_id: str) -> str:
        return f"ws://{self.hostport}/devtools/page/{target_id}"

    async def json(self, path: str) -> Any:
        """The answer to a discovery request (`/json/version`, `/json/list`), or GatewayError naming the endpoint."""
        self._http = self._http or http_session(self.endpoint)
        try:
            async with self._http.get(self.http_base + path, timeout=aiohttp.ClientTimeout(DEFAULT_TIMEOUT)) as answer:
                answer.raise_for_status()
                return await answer.json(content_type=None)
        except (aiohttp.ClientError, OSError, TimeoutError, ValueError) as exc:
            raise GatewayError(f"the upstream CDP endpoint {self.endpoint} did not answer {path}: {exc}") from exc

    async def connect(self, ws_url: str) -> aiohttp.ClientWebSocketResponse:
        """A new WebSocket connection to the browser (`ws_url`: its own or a page's)."""
        self._http = self._http or http_session(self.endpoint)
        # Only the handshake is bounded; an open CDP connection may be idle for as long as its client likes.
        return await asyncio.wait_for(self._http.ws_connect(ws_url, max_msg_size=0), DEFAULT_TIMEOUT)

    async def close(self) -> None:
        if self._http is not None:
            await self._http.close()
            self._http = None
