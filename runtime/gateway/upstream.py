"""The browser behind the gateway: its discovery endpoints and its WebSocket connections, each bounded.

A browser farm may hand out only the browser's WebSocket (`ws://…`/`wss://…`, `runtime.endpoint`), with no `/json`
beside it. The gateway still serves `/json/version` and `/json/list` to its backend: for such an upstream it builds
them from `Browser.getVersion` and `Target.getTargets`, each asked on a connection of its own, closed at once.
Every request and connection carries the endpoint's headers.
"""

from __future__ import annotations

import asyncio
import html
import json
from typing import Any
from urllib.parse import urlsplit

import aiohttp

from runtime.endpoint import BrowserEndpoint, endpoint_of, refused
from runtime.gateway.records import DEFAULT_TIMEOUT, GatewayError
from runtime.pipe import http_base, http_session

WEBSOCKET_ONLY = "/devtools/browser/gateway"
"""The browser WebSocket path a WebSocket-only upstream is announced under (its own path may be anything)."""


class Upstream:
    """The browser's CDP endpoint: `http://host:port`, a private Chromium's `unix:/path` (`runtime.pipe`), or a
    farm's `ws://`/`wss://` browser WebSocket, with its headers."""

    def __init__(self, endpoint: str | BrowserEndpoint) -> None:
        self.endpoint = endpoint_of(endpoint)
        self.http_base = http_base(self.endpoint.url)
        self.hostport = urlsplit(self.http_base).netloc
        self.browser_ws = self.endpoint.url if self.endpoint.websocket_only else ""
        """The browser's own WebSocket URL, once `open` has read it (at once for a WebSocket-only upstream)."""
        self._http: aiohttp.ClientSession | None = None

    async def open(self) -> None:
        """Find the browser's WebSocket (`/json/version`); GatewayError if the endpoint does not answer."""
        if not self.endpoint.websocket_only:
            self.browser_ws = (await self.json("/json/version"))["webSocketDebuggerUrl"]

    def page_ws(self, target_id: str) -> str:
        return f"ws://{self.hostport}/devtools/page/{target_id}"

    async def json(self, path: str) -> Any:
        """The answer to a discovery request (`/json/version`, `/json/list`), or GatewayError naming the endpoint."""
        try:
            if self.endpoint.websocket_only:
                return await self._synthesized(path)
            async with self._session().get(
                self.http_base + path, headers=self.endpoint.header_map, timeout=aiohttp.ClientTimeout(DEFAULT_TIMEOUT)
            ) as answer:
                answer.raise_for_status()
                return await answer.json(content_type=None)
        except (aiohttp.ClientError, OSError, TimeoutError, ValueError, KeyError) as exc:
            raise GatewayError(f"the upstream CDP endpoint {self.endpoint} did not answer {path}: {exc}") from exc

    async def connect(self, ws_url: str) -> aiohttp.ClientWebSocketResponse:
        """A new WebSocket connection to the browser (`ws_url`: its own or a page's), with the endpoint's headers;
        `EndpointRefused` if its front door answers the handshake with an HTTP error."""
        # Only the handshake is bounded; an open CDP connection may be idle for as long as its client likes.
        connecting = self._session().ws_connect(ws_url, max_msg_size=0, headers=self.endpoint.header_map)
        try:
            return await asyncio.wait_for(connecting, DEFAULT_TIMEOUT)
        except aiohttp.WSServerHandshakeError as exc:
            raise refused(self.endpoint, exc.status) from None

    async def close(self) -> None:
        if self._http is not None:
            await self._http.close()
            self._http = None

    def _session(self) -> aiohttp.ClientSession:
        if self._http is None:
            self._http = http_session(self.endpoint.url)
        return self._http

    async def _synthesized(self, path: str) -> Any:
        """`/json/version` or `/json/list` as Chromium would answer them, built over the browser WebSocket."""
        if path == "/json/version":
            version = await self._call("Browser.getVersion")
            return {
                "Browser": version.get("product", ""),
                "Protocol-Version": version.get("protocolVersion", ""),
                "User-Agent": version.get("userAgent", ""),
                "V8-Version": version.get("jsVersion", ""),
                "webSocketDebuggerUrl": f"ws://{self.hostport}{WEBSOCKET_ONLY}",
            }
        if path == "/json/list":
            infos = (await self._call("Target.getTargets"))["targetInfos"]
            return [
                {
                    "description": "",
                    "id": info["targetId"],
                    "title": html.escape(info.get("title", ""), quote=True),
                    "type": info.get("type", ""),
                    "url": info.get("url", ""),
                    "webSocketDebuggerUrl": self.page_ws(info["targetId"]),
                }
                for info in infos
            ]
        raise ValueError(f"no {path} on a WebSocket-only upstream")

    async def _call(self, method: str) -> dict[str, Any]:
        """One browser-level call on a connection of its own (the gateway's watch connection is never shared)."""
        ws = await self.connect(self.browser_ws)
        try:
            await ws.send_str(json.dumps({"id": 1, "method": method}))
            async with asyncio.timeout(DEFAULT_TIMEOUT):
                async for frame in ws:
                    if frame.type == aiohttp.WSMsgType.TEXT and (message := json.loads(frame.data)).get("id") == 1:
                        if "error" in message:
                            raise ValueError(f"{method} failed: {message['error']}")
                        return message["result"]
            raise ValueError(f"the browser closed the connection before answering {method}")
        finally:
            await ws.close()
