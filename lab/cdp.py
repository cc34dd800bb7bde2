"""A minimal raw CDP client over one WebSocket, in flatten mode (sessions multiplexed by `sessionId`).

The lab's own hands: it launches nothing and hides nothing. It also keeps its own log of every command it sent
(`sent`), which is the independent count the CDP tap's self-test compares against.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
from collections.abc import Callable
from typing import Any

import aiohttp

DEFAULT_TIMEOUT = 10.0

EventPredicate = Callable[[dict[str, Any]], bool]


class CDPError(Exception):
    """Chromium answered a command with an error, or the connection ended before it answered."""


class CDPClient:
    """One CDP WebSocket connection. `send` is bounded; `wait_for_event` registers before you act."""

    def __init__(self, ws: aiohttp.ClientWebSocketResponse, http: aiohttp.ClientSession) -> None:
        self._ws = ws
        self._http = http
        self._ids = itertools.count(1)
        self._pending: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self._waiters: list[tuple[str, str | None, EventPredicate | None, asyncio.Future[dict[str, Any]]]] = []
        self.sent: list[tuple[str | None, str]] = []
        """(sessionId, method) of every command this client sent, in order."""
        self.closed = asyncio.Event()
        self._reader = asyncio.create_task(self._read())

    @classmethod
    async def connect(cls, ws_url: str, headers: dict[str, str] | None = None) -> CDPClient:
        """`headers`: what the handshake carries (a browser farm's door wants one)."""
        http = aiohttp.ClientSession()
        try:
            timeout = aiohttp.ClientWSTimeout(ws_close=2)
            ws = await http.ws_connect(ws_url, max_msg_size=0, timeout=timeout, headers=headers)
        except BaseException:
            await http.close()
            raise
        return cls(ws, http)

    async def send(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        session_id: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
    ) -> dict[str, Any]:
        if self.closed.is_set():
            raise CDPError(f"{method}: connection closed")
        msg_id = next(self._ids)
        message: dict[str, Any] = {"id": msg_id, "method": method, "params": params or {}}
        if session_id is not None:
            message["sessionId"] = session_id
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._pending[msg_id] = future
        self.sent.append((session_id, method))
        await self._ws.send_str(json.dumps(message))
        try:
            return await asyncio.wait_for(future, timeout)
        except TimeoutError:
            raise TimeoutError(f"{method}: no answer within {timeout:g}s") from None
        finally:
            self._pending.pop(msg_id, None)

    def wait_for_event(
        self,
        method: str,
        session_id: str | None = None,
        predicate: EventPredicate | None = None,
        timeout: float = DEFAULT_TIMEOUT,
    ) -> asyncio.Future[dict[str, Any]]:
        """Register a wait for an event (its params are the result). Call before the command that causes it."""
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._waiters.append((method, session_id, predicate, future))

        async def bounded() -> dict[str, Any]:
            try:
                return await asyncio.wait_for(future, timeout)
            except TimeoutError:
                raise TimeoutError(f"no {method} event within {timeout:g}s") from None

        return asyncio.ensure_future(bounded())

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
                    if future is None or future.done():
                        continue
                    if "error" in message:
                        future.set_exception(CDPError(f"{message['error'].get('message')} ({message['error']})"))
                    else:
                        future.set_result(message.get("result", {}))
                else:
                    self._dispatch_event(message)
        finally:
            self.closed.set()
            for future in self._pending.values():
                if not future.done():
                    future.set_exception(CDPError("connection closed before the answer"))
            for *_, future in self._waiters:
                if not future.done():
                    future.set_exception(CDPError("connection closed before the event"))

    def _dispatch_event(self, message: dict[str, Any]) -> None:
        params = message.get("params", {})
        keep = []
        for waiter in self._waiters:
            method, session_id, predicate, future = waiter
            if future.done():
                continue
            if (
                method == message.get("method")
                and (session_id is None or session_id == message.get("sessionId"))
                and (predicate is None or predicate(params))
            ):
                future.set_result(params)
            else:
                keep.append(waiter)
        self._waiters = keep
