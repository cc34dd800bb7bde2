"""Watch: the gateway's own eye on the bound page, on a browser connection of its own.

It sends one call (`Target.setDiscoverTargets`, browser level; no call on any page) and reports, through the ledger,
popups the bound page opens, its crash or its destruction, and the loss of the browser: a popup is invisible to the
client behind the scope, so the runtime must hear of it here.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from typing import Any

import aiohttp

from runtime.gateway.records import DEFAULT_TIMEOUT, GatewayError, GatewayEvent, Ledger
from runtime.gateway.scope import TargetScope
from runtime.gateway.upstream import Upstream

log = logging.getLogger(__name__)


class Watch:
    """Target discovery on the bound page, from `start` until `close`."""

    def __init__(self, upstream: Upstream, scope: TargetScope, ledger: Ledger) -> None:
        self.upstream = upstream
        self.scope = scope
        self.ledger = ledger
        self.target_info: dict[str, Any] = {}
        """The bound target's latest `TargetInfo`, as discovery reported it."""
        self._ws: aiohttp.ClientWebSocketResponse | None = None
        self._task: asyncio.Task[None] | None = None
        self._closing = False

    async def start(self) -> None:
        """Discover targets; GatewayError if the browser does not answer or has no bound target."""
        target_id = self.scope.target_id
        try:
            self._ws = await self.upstream.connect(self.upstream.browser_ws)
        except (aiohttp.ClientError, OSError, TimeoutError) as exc:
            raise GatewayError(f"could not connect to the browser at {self.upstream.endpoint}: {exc}") from exc
        answered: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._task = asyncio.create_task(self._watch(self._ws, answered))
        # The only call the gateway makes on its own: browser level, no page is touched.
        discover = {"id": 1, "method": "Target.setDiscoverTargets", "params": {"discover": True}}
        await self._ws.send_str(json.dumps(discover))
        try:
            answer = await asyncio.wait_for(answered, DEFAULT_TIMEOUT)
        except TimeoutError:
            raise GatewayError("the browser did not answer Target.setDiscoverTargets") from None
        if "error" in answer:
            raise GatewayError(f"Target.setDiscoverTargets failed: {answer['error']}")
        # Chromium announces every existing target before it answers setDiscoverTargets.
        if not self.target_info:
            raise GatewayError(f"no target {target_id} in the browser")

    async def close(self) -> None:
        self._closing = True
        if self._ws is not None:
            with contextlib.suppress(Exception):
                await self._ws.close()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task

    async def _watch(self, ws: aiohttp.ClientWebSocketResponse, answered: asyncio.Future[dict[str, Any]]) -> None:
        try:
            async for frame in ws:
                if frame.type != aiohttp.WSMsgType.TEXT:
                    continue
                try:
                    message = json.loads(frame.data)
                    if "id" in message:
                        if not answered.done():
                            answered.set_result(message)
                        continue
                    self.on_event(message.get("method", ""), message.get("params") or {})
                except Exception:
                    log.exception("gateway: could not handle a discovery frame %.200s", frame.data)
        finally:
            if not answered.done():
                answered.set_result({"error": "the browser connection closed"})
            if not self._closing:
                self.ledger.emit(GatewayEvent("upstream_lost", self.scope.target_id, "the browser connection closed"))

    def on_event(self, method: str, params: dict[str, Any]) -> None:
        """One discovery event: the bound target's info, a popup it (or a child) opened, its crash or its end."""
        bound = self.scope.target_id
        info: dict[str, Any] = params.get("targetInfo") or {}
        target = info.get("targetId") or params.get("targetId")
        if method in ("Target.targetCreated", "Target.targetInfoChanged"):
            if target == bound:
                self.target_info = info
            elif method == "Target.targetCreated" and info.get("openerId") in (bound, *self.scope.children):
                self.ledger.emit(GatewayEvent("popup", target, f"opened by {info['openerId']}", info.get("url", "")))
        elif method == "Target.targetCrashed" and target == bound:
            why = f"{params.get('status')} (code {params.get('errorCode')})"
            self.ledger.emit(GatewayEvent("crashed", target, why))
        elif method == "Target.targetDestroyed":
            self.scope.children.discard(target)
            if target == bound:
                self.ledger.emit(GatewayEvent("destroyed", target, "the bound target was closed or replaced"))
