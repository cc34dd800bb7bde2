"""Know when the bound page is gone, without asking the upstream.

Why: an upstream MCP server does not reliably say "your page is gone". @playwright/mcp 0.0.83, when the page it
acts on closes, runs `ensureTab()` on its next call and answers from a *new* page (a snapshot "succeeds" on
about:blank, a click says "Ref e3 not found"); chrome-devtools-mcp 1.11.0 drops the page from its list and answers
"No page found" or selects whatever page is left. Only the call that races the close reports the loss itself.

So the backend watches the target itself, over the same CDP endpoint the upstream uses (the gateway shows it the
bound page only): one browser-level connection, `Target.setDiscoverTargets` + `Target.getTargets` at start, then
only events (`targetDestroyed`, `targetCrashed`). Zero calls reach the page. If exactly one page is visible at
start, that page is bound; otherwise (an unscoped endpoint with several pages) the watcher binds nothing and the
backend relies on the upstream's error texts alone.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
from typing import Any

import aiohttp

CONNECT_TIMEOUT = 10.0


class TargetWatcher:
    def __init__(self, cdp_endpoint: str, timeout: float = CONNECT_TIMEOUT, label: str = "backend") -> None:
        self.label = label
        self.cdp_endpoint = cdp_endpoint.rstrip("/")
        self.timeout = timeout
        self.bound: str | None = None
        self.lost: str | None = None  # why the bound page is gone, once it is
        self._http: aiohttp.ClientSession | None = None
        self._ws: aiohttp.ClientWebSocketResponse | None = None
        self._reader: asyncio.Task[None] | None = None
        self._ids = itertools.count(1)
        self._pending: dict[int, asyncio.Future[dict[str, Any]]] = {}

    async def start(self) -> str | None:
        """Connect and bind the only visible page. Returns its target id, or None if there was not exactly one."""
        self._http = aiohttp.ClientSession()
        async with asyncio.timeout(self.timeout):
            async with self._http.get(self.cdp_endpoint + "/json/version") as response:
                ws_url = (await response.json())["webSocketDebuggerUrl"]
            self._ws = await self._http.ws_connect(ws_url, max_msg_size=0)
        self._reader = asyncio.create_task(self._read(), name=f"{self.label} target watcher")
        await self._send("Target.setDiscoverTargets", {"discover": True})
        infos = (await self._send("Target.getTargets"))["targetInfos"]
        pages = [info["targetId"] for info in infos if info.get("type") == "page"]
        self.bound = pages[0] if len(pages) == 1 else None
        return self.bound

    async def _send(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        assert self._ws is not None
        message_id = next(self._ids)
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._pending[message_id] = future
        try:
            await self._ws.send_str(json.dumps({"id": message_id, "method": method, "params": params or {}}))
            answer = await asyncio.wait_for(future, self.timeout)
        finally:
            self._pending.pop(message_id, None)
        if "error" in answer:
            raise RuntimeError(f"{method}: {answer['error'].get('message')}")
        return answer.get("result", {})

    async def _read(self) -> None:
        assert self._ws is not None
        try:
            async for frame in self._ws:
                if frame.type != aiohttp.WSMsgType.TEXT:
                    continue
                message = json.loads(frame.data)
                if "id" in message:
                    future = self._pending.get(message["id"])
                    if future is not None and not future.done():
                        future.set_result(message)
                    continue
                self._on_event(message.get("method", ""), message.get("params", {}))
        finally:
            if self.bound is not None and self.lost is None:
                self.lost = "the CDP connection to the page closed"
            for future in self._pending.values():
                if not future.done():
                    future.set_exception(ConnectionError("CDP connection closed"))

    def _on_event(self, method: str, params: dict[str, Any]) -> None:
        if self.bound is None or self.lost is not None:
            return
        target = params.get("targetId") or params.get("targetInfo", {}).get("targetId")
        if target != self.bound:
            return
        if method == "Target.targetDestroyed":
            self.lost = "the page was closed"
        elif method == "Target.targetCrashed":
            self.lost = f"the page crashed ({params.get('status', 'unknown')})"

    async def close(self) -> None:
        if self._ws is not None:
            with contextlib.suppress(Exception):
                await self._ws.close()
        if self._reader is not None:
            self._reader.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._reader
        if self._http is not None:
            await self._http.close()
