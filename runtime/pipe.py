"""Chromium's debugging pipe, served to the runtime's own CDP clients on a Unix socket only this user can open.

Why: Chromium's `--remote-debugging-port` is a TCP port every local user reaches. Its `/json/list` names every
Page's URL (the console's secret URL among them) and its WebSocket drives the whole browser. A Chromium launched
with `--remote-debugging-pipe` opens no port: it speaks CDP as NUL-terminated JSON on its fds 3 (it reads) and 4
(it writes), which only the process that launched it holds.

The runtime's clients of a browser endpoint (its own `runtime.cdp.CDPConnection`, each session's scoped gateway)
speak HTTP and WebSocket, so `PipeBroker` serves them the endpoint Chromium's port would, on a Unix socket
(`unix:/path/cdp.sock`) in a 0700 directory, the socket 0600; each peer's uid is checked (`SO_PEERCRED`) before
a byte is read from it:

- `GET /json/version` and `/json/list` (`/json`): Chromium's shape, built from `Browser.getVersion` and
  `Target.getTargets`, with WebSocket URLs on the broker (`ws://chromium.invalid/devtools/…`; the host name is
  never resolved, every request goes over the socket).
- A WebSocket on `/devtools/browser/<id>` is a CDP session of its own over the pipe
  (`Target.attachToBrowserTarget`: a flat browser session with its own Target domain state, so discovery and
  auto-attach stay per connection as on the port); one on `/devtools/page/<targetId>` is
  `Target.attachToTarget {flatten: true}`. The client never sees that root session: the broker adds its id to
  each command that names no session and strips it from the answers and events. Command ids are remapped.
- The flat sessions Chromium attaches under a client's sessions (`Target.attachedToTarget` on them) are that
  client's; a command naming a session the client does not own is answered with Chromium's own error for an
  unknown session, never forwarded.

Closing: a client's disconnect detaches its root session (Chromium detaches its children with it). When Chromium
exits, every client connection closes (as Chromium's port closes its connections) and the socket stops
listening; when the broker closes the pipe, Chromium exits.
"""

from __future__ import annotations

import asyncio
import contextlib
import html
import itertools
import json
import logging
import os
import re
import socket
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web

from runtime.loopback import unix_peer_uid

log = logging.getLogger(__name__)

UNIX_PREFIX = "unix:"
"""How an endpoint served on a Unix socket is written: `unix:/path/cdp.sock`."""
HOST = "chromium.invalid"
"""The host name in every URL the broker hands out (`.invalid` is reserved: it never resolves)."""
CDP_SOCKET_NAME = "cdp.sock"
CALL_TIMEOUT = 10.0
"""Bound on each of the broker's own calls (the version, the target list, attaching a client)."""

UNKNOWN_SESSION = {"code": -32001, "message": "Session with given id not found."}
"""Chromium's own answer to a command on a session it does not know; a client naming another's session gets it."""
ID_HEAD = re.compile(r'\{"id":(\d+),')
SESSION_TAIL = re.compile(r',"sessionId":"([^"]+)"\}$')
"""Chromium writes a message's `sessionId` last. At the very end of a JSON object, `,"sessionId":"…"}` can only be
a top-level member (an unescaped quote cannot sit inside a string): routing reads it there without a parse."""
SESSION_TAIL_CHARS = 128
"""How much of a message's end `session_tail` reads (a session id is 32 hex digits): a long answer is never scanned."""
TRACKED = ('{"method":"Target.attachedToTarget"', '{"method":"Target.detachedFromTarget"')


def http_base(endpoint: str) -> str:
    """The `http://` URL a CDP client builds discovery URLs on: the endpoint itself, or for a broker's `unix:…`
    endpoint the host name its URLs carry (requests reach it through `http_session`)."""
    return f"http://{HOST}" if endpoint.startswith(UNIX_PREFIX) else endpoint.rstrip("/")


def http_session(endpoint: str, timeout: aiohttp.ClientTimeout | None = None) -> aiohttp.ClientSession:
    """A client session that reaches `endpoint`'s HTTP and WebSocket URLs: over the socket for `unix:/path`."""
    options: dict[str, Any] = {} if timeout is None else {"timeout": timeout}
    if endpoint.startswith(UNIX_PREFIX):
        options["connector"] = aiohttp.UnixConnector(path=endpoint.removeprefix(UNIX_PREFIX))
    return aiohttp.ClientSession(**options)


def session_tail(text: str) -> tuple[str, int] | None:
    """The message's top-level `sessionId` and where its member starts, read from the end; None if it has none."""
    start = max(len(text) - SESSION_TAIL_CHARS, 0)
    found = SESSION_TAIL.search(text, start)
    return (found.group(1), found.start()) if found else None


class BrokerError(RuntimeError):
    """Chromium did not answer on the pipe (it exited, or never got ready)."""


class Pipe:
    """The launcher's end of Chromium's debugging pipe: NUL-terminated JSON messages each way."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.WriteTransport) -> None:
        self._reader = reader
        self._writer = writer

    @classmethod
    async def open(cls, read_fd: int, write_fd: int) -> Pipe:
        """Wrap our ends (we read what Chromium writes on its fd 4, and write what it reads on its fd 3)."""
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader(limit=1 << 30)  # one message may be a long page's accessibility tree
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(read_fd, "rb", 0))
        writer, _ = await loop.connect_write_pipe(asyncio.Protocol, os.fdopen(write_fd, "wb", 0))
        return cls(reader, writer)

    async def read(self) -> str | None:
        """The next message, or None once Chromium has closed its end."""
        try:
            return (await self._reader.readuntil(b"\0"))[:-1].decode()
        except asyncio.IncompleteReadError:
            return None

    def write(self, text: str) -> None:
        if not self._writer.is_closing():
            self._writer.write(text.encode() + b"\0")

    def close(self) -> None:
        self._writer.close()


@dataclass(eq=False)
class _Client:
    """One WebSocket connection to the broker: its root session over the pipe and the sessions it created."""

    ws: web.WebSocketResponse
    root: str = ""
    sessions: set[str] = field(default_factory=set)
    outbox: asyncio.Queue[str | None] = field(default_factory=asyncio.Queue)
    """What goes to the client, in pipe order; a slow client only queues its own messages, never stalls the pipe."""

    def send(self, text: str) -> None:
        self.outbox.put_nowait(text)


@dataclass
class _Route:
    """Where the answer to a command sent on the pipe goes: a client (under its own id) or the broker's future."""

    client: _Client | None = None
    client_id: int = 0
    strip: bool = False  # the broker added the client's root session: take it off the answer
    future: asyncio.Future[dict[str, Any]] | None = None
    adopt: _Client | None = None  # the call attaches this client: its answer names the client's root session


def json_version(version: dict[str, Any], browser_id: str) -> dict[str, Any]:
    """What Chromium's `/json/version` says, from its `Browser.getVersion` answer."""
    webkit = re.search(r"AppleWebKit/([\d.]+)", version.get("userAgent", ""))
    return {
        "Browser": version.get("product", ""),
        "File-Path-Style": "posix",
        "Protocol-Version": version.get("protocolVersion", ""),
        "User-Agent": version.get("userAgent", ""),
        "V8-Version": version.get("jsVersion", ""),
        "WebKit-Version": f"{webkit.group(1) if webkit else ''} ({version.get('revision', '')})",
        "webSocketDebuggerUrl": f"ws://{HOST}/devtools/browser/{browser_id}",
    }


def json_list(infos: list[dict[str, Any]], revision: str) -> list[dict[str, Any]]:
    """What Chromium's `/json/list` says of each target (its favicon aside: CDP does not tell it), from its
    `Target.getTargets` answer."""
    listing = []
    for info in infos:
        target = info["targetId"]
        entry = {
            "description": "",
            "devtoolsFrontendUrl": "https://chrome-devtools-frontend.appspot.com/serve_rev/"
            f"{revision}/inspector.html?ws={HOST}/devtools/page/{target}",
            "id": target,
            "title": html.escape(info.get("title", ""), quote=True),
            "type": info.get("type", ""),
            "url": info.get("url", ""),
            "webSocketDebuggerUrl": f"ws://{HOST}/devtools/page/{target}",
        }
        if info.get("parentId"):
            entry["parentId"] = info["parentId"]
        listing.append(entry)
    return listing


class PipeBroker:
    """A Chromium-compatible CDP endpoint on a Unix socket, over one debugging pipe (see the module docstring)."""

    owner_uid: int = os.getuid()
    """The only uid served (`admits`)."""

    def __init__(self, pipe: Pipe, directory: Path) -> None:
        """`directory`: a fresh 0700 directory this user owns (the socket goes there); the caller removes it."""
        self.pipe = pipe
        self.path = directory / CDP_SOCKET_NAME
        self.browser_id = str(uuid.uuid4())
        self.closed = asyncio.Event()
        """Set once Chromium has closed the pipe (it exited) or the broker was closed."""
        self._version: dict[str, Any] = {}
        self._ids = itertools.count(1)
        self._pending: dict[int, _Route] = {}
        self._owners: dict[str, _Client] = {}
        self._clients: set[_Client] = set()
        self._reader: asyncio.Task[None] | None = None
        self._accepting: asyncio.Task[None] | None = None
        self._listener: socket.socket | None = None
        self._runner: web.ServerRunner | None = None

    @property
    def endpoint(self) -> str:
        return UNIX_PREFIX + str(self.path)

    async def start(self, timeout: float = CALL_TIMEOUT) -> str:
        """Read the pipe, wait (`timeout`) until Chromium answers on it, then listen; returns the endpoint
        (`unix:/…/cdp.sock`). BrokerError if Chromium exits first."""
        self._reader = asyncio.create_task(self._read())
        self._version = await self._call("Browser.getVersion", timeout=timeout)
        self._runner = web.ServerRunner(web.Server(self._serve), handle_signals=False, shutdown_timeout=2.0)
        await self._runner.setup()
        server = self._runner.server
        assert server is not None
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            listener.bind(str(self.path))
            os.chmod(self.path, 0o600)  # inside a 0700 directory: nobody else could reach it before this
            listener.listen(64)
            listener.setblocking(False)
        except BaseException:
            listener.close()
            raise
        self._listener = listener
        self._accepting = asyncio.create_task(self._accept(listener, server))
        return self.endpoint

    async def close(self) -> None:
        """Close every client, stop listening and close the pipe (Chromium exits when it sees it closed)."""
        self._stop_listening()
        for client in list(self._clients):
            self._release(client, detach=False)
        if self._runner is not None:  # waits (bounded) for every client's handler to finish
            await self._runner.cleanup()
            self._runner = None
        self.pipe.close()
        if self._reader is not None:
            self._reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reader
        self.closed.set()

    # -- the socket ----------------------------------------------------------------------------------------------

    async def _accept(self, listener: socket.socket, server: web.Server) -> None:
        loop = asyncio.get_running_loop()
        while True:
            conn, _ = await loop.sock_accept(listener)
            uid = unix_peer_uid(conn)
            if not self.admits(uid):
                log.warning("CDP broker: refused a connection from uid %s", uid)
                conn.close()
                continue
            try:
                await loop.connect_accepted_socket(server, conn)
            except OSError:
                conn.close()

    def admits(self, uid: int | None) -> bool:
        """Whether a peer of this uid (None: unknown) may use the socket; asked before a byte is read from it."""
        return uid is not None and uid == self.owner_uid

    def _stop_listening(self) -> None:
        if self._accepting is not None:
            self._accepting.cancel()
            self._accepting = None
        if self._listener is not None:
            self._listener.close()
            self._listener = None
            with contextlib.suppress(FileNotFoundError):
                self.path.unlink()

    async def _serve(self, request: web.BaseRequest) -> web.StreamResponse:
        parts = [part for part in request.path.split("/") if part]
        if parts[:1] == ["json"] and request.method == "GET":
            return await self._serve_json(parts[1:])
        if len(parts) == 3 and parts[0] == "devtools" and request.method == "GET":
            return await self._serve_ws(request, parts[1], parts[2])
        return web.Response(status=404, text=f"Unknown command: {request.path[:100]}")

    async def _serve_json(self, rest: list[str]) -> web.StreamResponse:
        try:
            if rest == ["version"]:
                return web.json_response(json_version(self._version, self.browser_id))
            if rest in ([], ["list"]):
                infos = (await self._call("Target.getTargets"))["targetInfos"]
                return web.json_response(json_list(infos, self._version.get("revision", "")))
        except (BrokerError, TimeoutError) as exc:
            return web.Response(status=502, text=f"the browser did not answer: {exc}")
        return web.Response(status=404, text=f"Unknown command: {'/'.join(rest)[:100]}")

    async def _serve_ws(self, request: web.BaseRequest, kind: str, ident: str) -> web.StreamResponse:
        if self.closed.is_set():
            return web.Response(status=502, text="the browser has closed")
        if kind == "browser" and ident == self.browser_id:
            method, params = "Target.attachToBrowserTarget", {}
        elif kind == "page":
            method, params = "Target.attachToTarget", {"targetId": ident, "flatten": True}
        else:
            return web.Response(status=404, text=f"No such target id: {ident[:100]}")
        client = _Client(web.WebSocketResponse(max_msg_size=0))
        try:
            # Attached before the handshake, as Chromium refuses a handshake for a target it does not have.
            await self._call(method, params, adopt=client)
        except (BrokerError, TimeoutError) as exc:
            return web.Response(status=404 if kind == "page" else 502, text=f"{method} failed: {exc}")
        try:
            await client.ws.prepare(request)
        except BaseException:
            self._release(client)
            raise
        writer = asyncio.create_task(self._write(client))
        try:
            async for frame in client.ws:
                if frame.type != aiohttp.WSMsgType.TEXT or not self._on_command(client, frame.data):
                    await client.ws.close(code=aiohttp.WSCloseCode.UNSUPPORTED_DATA, message=b"not a CDP command")
                    break
        finally:
            self._release(client)
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await asyncio.wait_for(writer, CALL_TIMEOUT)
        return client.ws

    @staticmethod
    async def _write(client: _Client) -> None:
        """Send the client its messages in order; at the end of its outbox, close its connection."""
        while (text := await client.outbox.get()) is not None:
            try:
                await client.ws.send_str(text)
            except (ConnectionError, RuntimeError):
                return
        await client.ws.close()

    def _release(self, client: _Client, *, detach: bool = True) -> None:
        """Forget a client and close its connection once what it was sent is out; `detach` its root session (and
        with it every session it made) from Chromium."""
        client.outbox.put_nowait(None)
        if client not in self._clients:
            return
        self._clients.discard(client)
        for session in client.sessions:
            if self._owners.get(session) is client:
                del self._owners[session]
        if detach and client.root and not self.closed.is_set():
            self._send_own("Target.detachFromTarget", {"sessionId": client.root})

    # -- the pipe ------------------------------------------------------------------------------------------------

    def _on_command(self, client: _Client, text: str) -> bool:
        """Forward one client command under a pipe id of its own; False if it is not a CDP command at all."""
        try:
            message = json.loads(text)
        except ValueError:
            return False
        if not isinstance(message, dict) or type(message.get("id")) is not int:
            return False
        session = message.get("sessionId")
        if session is not None and session not in client.sessions:
            answer = {"id": message["id"], "error": UNKNOWN_SESSION}
            client.send(json.dumps(answer))
            return True
        route = _Route(client, message["id"], strip=session is None)
        if session is None:
            message["sessionId"] = client.root
        pipe_id = next(self._ids)
        self._pending[pipe_id] = route
        message["id"] = pipe_id
        self.pipe.write(json.dumps(message))
        return True

    async def _call(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        *,
        adopt: _Client | None = None,
        timeout: float = CALL_TIMEOUT,
    ) -> Any:
        """One of the broker's own calls, on the pipe's root session; its result, or BrokerError."""
        if self.closed.is_set():
            raise BrokerError("the browser has closed")
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        pipe_id = next(self._ids)
        self._pending[pipe_id] = _Route(future=future, adopt=adopt)
        self.pipe.write(json.dumps({"id": pipe_id, "method": method, "params": params or {}}))
        try:
            answer = await asyncio.wait_for(future, timeout)
        finally:
            self._pending.pop(pipe_id, None)
        if "error" in answer:
            raise BrokerError(str(answer["error"].get("message", answer["error"])))
        return answer.get("result", {})

    def _send_own(self, method: str, params: dict[str, Any]) -> None:
        """A call of the broker's whose answer nobody waits for (detaching a gone client)."""
        pipe_id = next(self._ids)
        self._pending[pipe_id] = _Route()
        self.pipe.write(json.dumps({"id": pipe_id, "method": method, "params": params}))

    async def _read(self) -> None:
        try:
            while (text := await self.pipe.read()) is not None:
                try:
                    self._dispatch(text)
                except Exception:
                    log.exception("CDP broker: could not route %.200s", text)
        finally:
            self.closed.set()
            for route in self._pending.values():
                if route.future is not None and not route.future.done():
                    route.future.set_exception(BrokerError("the browser closed before answering"))
            self._pending.clear()
            self._stop_listening()
            for client in list(self._clients):  # Chromium is gone: its connections close, as its port's would
                self._release(client, detach=False)

    def _dispatch(self, text: str) -> None:
        head = ID_HEAD.match(text)
        if head is not None:
            self._on_answer(text, head)
            return
        tail = session_tail(text)
        if tail is None:
            self._on_root_event(json.loads(text))
            return
        session, at = tail
        client = self._owners.get(session)
        if client is None:
            return  # a session of a client that has gone
        if text.startswith(TRACKED):
            self._track(client, json.loads(text))
        if session == client.root:
            text = text[:at] + "}"
        client.send(text)

    def _on_answer(self, text: str, head: re.Match[str]) -> None:
        route = self._pending.pop(int(head.group(1)), None)
        if route is None:
            return
        if route.client is None:
            answer = json.loads(text)
            adopt, session = route.adopt, (answer.get("result") or {}).get("sessionId")
            if adopt is not None and isinstance(session, str):
                # Owned from the answer on, in pipe order: no event on the new session can arrive unrouted.
                adopt.root = session
                adopt.sessions.add(session)
                self._owners[session] = adopt
                self._clients.add(adopt)
            if route.future is not None and not route.future.done():
                route.future.set_result(answer)
            return
        if route.client not in self._clients:
            return
        text = f"{text[: head.start(1)]}{route.client_id}{text[head.end(1) :]}"
        if route.strip and (tail := session_tail(text)) is not None and tail[0] == route.client.root:
            text = text[: tail[1]] + "}"
        route.client.send(text)

    def _on_root_event(self, message: dict[str, Any]) -> None:
        """Events on the pipe's own session: only the attach and detach of the clients' root sessions."""
        if message.get("method") != "Target.detachedFromTarget":
            return
        client = self._owners.get((message.get("params") or {}).get("sessionId", ""))
        if client is not None and client.root == message["params"]["sessionId"]:
            # The client's target is gone (closed, or its renderer replaced): Chromium closes such a connection.
            self._release(client, detach=False)

    def _track(self, client: _Client, message: dict[str, Any]) -> None:
        params = message.get("params") or {}
        session = params.get("sessionId")
        if not isinstance(session, str):
            return
        if message.get("method") == "Target.attachedToTarget":
            client.sessions.add(session)
            self._owners[session] = client
        elif self._owners.get(session) is client:
            client.sessions.discard(session)
            del self._owners[session]
