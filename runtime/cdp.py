"""The runtime's own CDP connection (flatten sessions over one WebSocket), for the Page Registry and the probe.

Deliberately separate from the lab's client: instruments never share code with what they measure.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
from collections.abc import Callable
from typing import Any

import aiohttp

from runtime.endpoint import BrowserEndpoint, endpoint_of, refused
from runtime.pipe import http_base, http_session

Listener = Callable[[str, dict[str, Any], str | None], None]  # (method, params, sessionId)


class CDPError(Exception):
    pass


class CDPConnection:
    def __init__(self, ws: aiohttp.ClientWebSocketResponse, http: aiohttp.ClientSession) -> None:
        self._ws = ws
        self._http = http
        self._ids = itertools.count(1)
        self._pending: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self._listeners: list[Listener] = []
        self.closed = asyncio.Event()
        self._reader = asyncio.create_task(self._read())

    @classmethod
    async def connect(cls, endpoint: str | BrowserEndpoint, timeout: float = 10.0) -> CDPConnection:
        """Connect to a CDP endpoint given as `http://host:port[/path]` (browser endpoint discovered at
        `<endpoint>/json/version`, so a scoped gateway's secret path prefix is kept), `unix:/path` (a private
        Chromium's pipe broker, `runtime.pipe`) or `ws://…`/`wss://…` (the browser's WebSocket itself, as a browser
        farm hands it out), with the endpoint's headers on every request. A handshake the endpoint refuses is
        `EndpointRefused`."""
        browser = endpoint_of(endpoint)
        headers = browser.header_map
        http = http_session(browser.url, aiohttp.ClientTimeout(total=timeout))
        try:
            url = browser.url
            if not browser.websocket_only:
                async with http.get(http_base(browser.url) + "/json/version", headers=headers) as response:
                    if response.status in (401, 403):
                        raise refused(browser, response.status)
                    response.raise_for_status()  # a refused discovery is an error, not a missing key
                    url = (await response.json(content_type=None))["webSocketDebuggerUrl"]
            try:
                ws = await http.ws_connect(url, max_msg_size=0, headers=headers)
            except aiohttp.WSServerHandshakeError as exc:
                raise refused(browser, exc.status) from None
        except BaseException:
            await http.close()
            raise
        return cls(ws, http)

    def listen(self, listener: Listener) -> None:
        self._listeners.append(listener)

    def unlisten(self, listener: Listener) -> None:
        with contextlib.suppress(ValueError):
            self._listeners.remove(listener)

    async def send(
        self, method: str, params: dict[str, Any] | None = None, session_id: str | None = None, timeout: float = 15.0
    ) -> dict[str, Any]:
        if self.closed.is_set():
            raise CDPError(f"{method}: the browser connection is closed")
        msg_id = next(self._ids)
        message: dict[str, Any] = {"id": msg_id, "method": method, "params": params or {}}
        if session_id is not None:
            message["sessionId"] = session_id
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._pending[msg_id] = future
        try:
            await self._ws.send_str(json.dumps(message))
            return await asyncio.wait_for(future, timeout)
        except TimeoutError:
            raise TimeoutError(f"{method}: no answer within {timeout:g}s") from None
        finally:
            self._pending.pop(msg_id, None)

    async def close(self) -> None:
        with contextlib.suppress(Exception):
            await self._ws.close()
        with contextlib.suppress(asyncio.CancelledError):
            await self._reader
        await self._http.close()

    async def _read(self) -> None:
        try:
            async for frame in self._ws:
                if frame.type != aiohttp.WSMsgType.TEXT:
                    continue
                message = json.loads(frame.data)
                if "id" in message:
                    future = self._pending.get(message["id"])
                    if future is not None and not future.done():
                        if "error" in message:
                            future.set_exception(CDPError(str(message["error"].get("message", message["error"]))))
                        else:
                            future.set_result(message.get("result", {}))
                    continue
                for listener in list(self._listeners):
                    listener(message.get("method", ""), message.get("params") or {}, message.get("sessionId"))
        finally:
            self.closed.set()
            for future in self._pending.values():
                if not future.done():
                    future.set_exception(CDPError("the browser connection closed before answering"))
