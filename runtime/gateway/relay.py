"""Relay: every client connection gets its own upstream connection, and CDP crosses between them through the scope.

Client command ids are remapped to ids the gateway assigns per upstream connection, so the gateway's own calls can
never collide with a client's. An answer the gateway neither reads nor rewrites goes back unparsed, with only its id
replaced (`Relay.pass_answer`): on the catalogue, an `Accessibility.getFullAXTree` through the gateway took 657 ms
p50 parsed and re-encoded, 408 ms passed on. The relay also sends the `init` lifecycle event Chromium does not
replay to a late client (`Relay.lifecycle`).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
import re
from typing import Any

import aiohttp
from aiohttp import web

from runtime.gateway.allowlist import refusal_message
from runtime.gateway.records import DEFAULT_TIMEOUT, REFUSED_CODE, Absorbed, GatewayClient, Ledger, PendingCommand
from runtime.gateway.scope import READ_ANSWERS, TargetScope
from runtime.gateway.upstream import Upstream

log = logging.getLogger(__name__)

LOADERS_KEPT = 4096
"""Bound on the frames per client whose loader the gateway remembers (`Relay.lifecycle`)."""
ANSWER_HEAD = re.compile(r'\{"id":(\d+),"(?:result|error)":')
"""How Chromium starts every answer: its id first. An answer the gateway need not read is passed on with only the
id replaced, never parsed (an accessibility tree of a long page is megabytes: a parse and a re-encode of it here
doubled the JSON work of the backend's read)."""


class Relay:
    """The gateway's WebSocket clients, each pumped to and from its own upstream connection."""

    def __init__(self, upstream: Upstream, scope: TargetScope, ledger: Ledger) -> None:
        self.upstream = upstream
        self.scope = scope
        self.ledger = ledger
        self.clients: dict[int, GatewayClient] = {}
        self._conn_ids = itertools.count(1)
        self._handlers: set[asyncio.Task[Any]] = set()

    async def serve_ws(self, request: web.Request, kind: str, ident: str) -> web.StreamResponse:
        """A WebSocket on `/devtools/browser/…` or `/devtools/page/<bound>`, relayed until either end closes."""
        conn = next(self._conn_ids)
        if kind == "page" and ident != self.scope.target_id:
            reason = "the gateway exposes only the bound page"
            self.ledger.refuse(conn, f"connect /devtools/page/{ident}", reason, None)
            return web.Response(status=403, text=refusal_message("connect", reason))
        if kind not in ("browser", "page"):
            return web.Response(status=404, text=f"computer_use gateway: no such endpoint /devtools/{kind}")
        if kind == "page" and self.upstream.endpoint.websocket_only:
            reason = "the upstream is a browser WebSocket only; connect to the gateway's /devtools/browser/ endpoint"
            return web.Response(status=501, text=f"computer_use gateway: {reason}")
        upstream_url = self.upstream.browser_ws if kind == "browser" else self.upstream.page_ws(ident)
        try:
            upstream = await self.upstream.connect(upstream_url)
        except (aiohttp.ClientError, OSError, TimeoutError) as exc:
            return web.Response(status=502, text=f"computer_use gateway: upstream refused the connection: {exc}")
        ws = web.WebSocketResponse(max_msg_size=0)
        try:
            await ws.prepare(request)
        except BaseException:
            await upstream.close()
            raise
        client = GatewayClient(conn, kind == "browser", ws, upstream)
        self.clients[conn] = client
        task = asyncio.current_task()
        assert task is not None
        self._handlers.add(task)
        try:
            await self._pump(client)
        finally:
            self.clients.pop(conn, None)
            self._handlers.discard(task)
            await upstream.close()
            await ws.close()
        return ws

    async def close(self) -> None:
        """Close every client connection and its upstream connection; wait (bounded) for their handlers."""
        for client in list(self.clients.values()):
            with contextlib.suppress(Exception):
                await client.ws.close(code=aiohttp.WSCloseCode.GOING_AWAY, message=b"gateway closed")
            with contextlib.suppress(Exception):
                await client.upstream.close()
        if self._handlers:
            await asyncio.wait(self._handlers, timeout=DEFAULT_TIMEOUT)

    async def _pump(self, client: GatewayClient) -> None:
        async def from_client() -> None:
            async for frame in client.ws:
                message, problem = parse_command(frame)
                if message is None:
                    self.ledger.refuse(client.conn, "(malformed frame)", problem, None)
                    log.warning("gateway: closing client %s: %s", client.conn, problem)
                    await client.ws.close(code=aiohttp.WSCloseCode.UNSUPPORTED_DATA, message=problem.encode()[:120])
                    return
                await self.on_command(client, message)

        async def from_upstream() -> None:
            async for frame in client.upstream:
                if frame.type != aiohttp.WSMsgType.TEXT:
                    continue
                if await self.pass_answer(client, frame.data):
                    continue
                try:
                    message = json.loads(frame.data)
                except ValueError:
                    log.warning("gateway: dropping a non-JSON frame from upstream on client %s", client.conn)
                    continue
                if "id" in message:
                    await self._on_answer(client, message)
                elif self.scope.allow_event(client, message):
                    if message.get("method") == "Page.lifecycleEvent" and (init := self.lifecycle(client, message)):
                        await self.send(client, init)
                    if message.get("method") == "Page.frameNavigated":
                        self.scope.note_document(client, message.get("sessionId"), message["params"].get("frame"))
                    await self.send(client, frame.data)

        client_task = asyncio.create_task(from_client())
        upstream_task = asyncio.create_task(from_upstream())
        done, pending = await asyncio.wait({client_task, upstream_task}, return_when=asyncio.FIRST_COMPLETED)
        for task in pending:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        for task in done:
            if not task.cancelled() and task.exception() is not None:
                log.warning("gateway: client %s ended with %r", client.conn, task.exception())
        if upstream_task in done and not client.ws.closed:
            await client.ws.close(code=aiohttp.WSCloseCode.GOING_AWAY, message=b"upstream closed")

    async def send(self, client: GatewayClient, text: str) -> None:
        """One frame to the client; a client gone meanwhile is not an error (its pump ends on its own)."""
        async with client.send_lock:
            with contextlib.suppress(ConnectionError, aiohttp.ClientError, RuntimeError):
                await client.ws.send_str(text)

    async def _answer(self, client: GatewayClient, message: dict[str, Any], body: dict[str, Any]) -> None:
        answer: dict[str, Any] = {"id": message["id"], **body}
        if message.get("sessionId") is not None:
            # Clients route answers by session first; an answer without its sessionId would never be matched.
            answer["sessionId"] = message["sessionId"]
        await self.send(client, json.dumps(answer))

    async def on_command(self, client: GatewayClient, message: dict[str, Any]) -> None:
        """A client's command: refused, absorbed, or forwarded upstream under an id of the gateway's."""
        method: str = message["method"]
        params: dict[str, Any] = message.get("params") or {}
        session_id: str | None = message.get("sessionId")
        verdict = self.scope.decide(client, method, params, session_id)
        if verdict.action == "refuse":
            self.ledger.refuse(client.conn, method, verdict.reason, session_id)
            error = {"code": REFUSED_CODE, "message": refusal_message(method, verdict.reason)}
            await self._answer(client, message, {"error": error})
            return
        if verdict.action == "absorb":
            self.ledger.absorbed.append(Absorbed(client.conn, method, session_id))
            await self._answer(client, message, {"result": {}})
            return
        self.ledger.forwarded["browser" if client.browser_level and session_id is None else "page", method] += 1
        if method == "Target.detachFromTarget" and isinstance(params.get("sessionId"), str):
            client.detaching.add(params["sessionId"])
        pending = PendingCommand(message["id"], method, params, session_id)
        upstream_id = next(client.ids)
        if verdict.action == "auto_attach":
            if client.auto_attached or not params.get("autoAttach"):
                await self._answer(client, message, {"result": {}})
                return
            # Chromium sends its own Target.attachedToTarget before answering; that event reaches the client, and
            # the client's setAutoAttach is answered only after it, as Chromium would. Never synthesize a second
            # attachedToTarget: Playwright fails with "Duplicate target".
            client.auto_attached = True
            pending.auto_attach = True
            upstream: dict[str, Any] = {
                "id": upstream_id,
                "method": "Target.attachToTarget",
                "params": {"targetId": self.scope.target_id, "flatten": True},
            }
        else:
            upstream = {**message, "id": upstream_id}
        client.pending[upstream_id] = pending
        try:
            await client.upstream.send_str(json.dumps(upstream))
        except (ConnectionError, aiohttp.ClientError, RuntimeError) as exc:
            client.pending.pop(upstream_id, None)
            await self._answer(client, message, {"error": {"code": REFUSED_CODE, "message": f"upstream gone: {exc}"}})

    async def pass_answer(self, client: GatewayClient, text: str) -> bool:
        """An answer to a command whose result the gateway neither reads nor rewrites, passed on unparsed with the
        client's id in place of the gateway's; False for anything else (parsed and handled whole)."""
        head = ANSWER_HEAD.match(text)
        if head is None:
            return False
        upstream_id = int(head.group(1))
        pending = client.pending.get(upstream_id)
        if pending is None or pending.auto_attach or pending.method in READ_ANSWERS:
            return False
        del client.pending[upstream_id]
        await self.send(client, f"{text[: head.start(1)]}{pending.client_id}{text[head.end(1) :]}")
        return True

    async def _on_answer(self, client: GatewayClient, message: dict[str, Any]) -> None:
        pending = client.pending.pop(message["id"], None)
        if pending is None:
            return
        answer = {**message, "id": pending.client_id}
        if "result" in message:
            answer["result"] = self.scope.rewrite_result(client, pending, message["result"])
        elif pending.auto_attach:
            client.auto_attached = False
        await self.send(client, json.dumps(answer))

    @staticmethod
    def lifecycle(client: GatewayClient, message: dict[str, Any]) -> str | None:
        """The `init` lifecycle event Chromium did not send before this one, if any.

        Protocol quirk: `Page.setLifecycleEventsEnabled` on an already loaded document replays `commit`,
        `DOMContentLoaded`, `load`, ... but not `init`, and Puppeteer takes a frame's loaderId from `init` only.
        Every frame of a page the backend attached to late then has loaderId "", and chrome-devtools-mcp keys its
        uids on `loaderId_backendNodeId`: backend node ids are numbered per renderer process, so a node of the page
        and a node of a cross-site iframe can get the same uid, and a click on it lands on whichever came last.
        Sending the missing `init` (same frame, same loader) first gives every frame its real loaderId. Clients
        that ignore `init` (Playwright, our own adapter) are unaffected; a real navigation sends its own."""
        params = message.get("params") or {}
        frame, loader = params.get("frameId"), params.get("loaderId")
        if not isinstance(frame, str) or not isinstance(loader, str):
            return None
        key = (message.get("sessionId"), frame)
        seen = client.loaders.get(key)
        if params.get("name") == "init" or seen == loader:
            client.loaders[key] = loader
            return None
        client.loaders[key] = loader
        if len(client.loaders) > LOADERS_KEPT:  # a page can make frames without end
            del client.loaders[next(iter(client.loaders))]
        init: dict[str, Any] = {
            "method": "Page.lifecycleEvent",
            "params": {"frameId": frame, "loaderId": loader, "name": "init", "timestamp": params.get("timestamp", 0)},
        }
        if message.get("sessionId") is not None:
            init["sessionId"] = message["sessionId"]
        return json.dumps(init)


def parse_command(frame: aiohttp.WSMessage) -> tuple[dict[str, Any] | None, str]:
    """The command in a client frame, or None and why it is malformed."""
    if frame.type != aiohttp.WSMsgType.TEXT:
        return None, f"{frame.type.name} frame; CDP frames are JSON text"
    try:
        message = json.loads(frame.data)
    except ValueError as exc:
        return None, f"not JSON: {exc}"
    if not isinstance(message, dict):
        return None, "not a JSON object"
    if not isinstance(message.get("id"), int) or isinstance(message.get("id"), bool):
        return None, "a command needs an integer id"
    if not isinstance(message.get("method"), str):
        return None, "a command needs a string method"
    if "params" in message and not isinstance(message["params"], dict):
        return None, "params must be an object"
    if "sessionId" in message and not isinstance(message["sessionId"], str):
        return None, "sessionId must be a string"
    return message, ""
