"""A browser farm's front door, in miniature: one WebSocket path, one header checked, CDP relayed both ways.

Selenium Grid 4 (`se:cdp`) and browserless hand out a browser WebSocket behind a door that wants a header
(`Authorization: Bearer …`) and serves no `/json`. This stands in for that door in the remote-browser proofs: it
answers the handshake on the browser's own path (`/devtools/browser/<id>`) only when the header is right (401 otherwise,
recorded) and it carries no `Origin` (a web page's request: 403, recorded), relays every frame unchanged to the browser,
and answers anything else 404.

Run beside the browser (`python -m lab.front_door --listen HOST --upstream ws://127.0.0.1:PORT/devtools/browser/ID`,
the header as `Name: value` in `$FRONT_DOOR_HEADER`): it prints its URL once it listens and stops on SIGTERM.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hmac
import os
import signal
import sys
from dataclasses import dataclass
from urllib.parse import urlsplit

import aiohttp
from aiohttp import web

HEADER_ENV = "FRONT_DOOR_HEADER"
READY = "front door listening on "
"""What the door prints, followed by its URL, once it accepts connections."""


@dataclass(frozen=True)
class Turned:
    """A handshake the door refused: the path asked for and why (never the header's value)."""

    path: str
    reason: str


class FrontDoor:
    """The door: `header` (name, value) wanted on a handshake to `upstream`'s path; nothing else served."""

    def __init__(self, upstream: str, header: tuple[str, str]) -> None:
        self.upstream = upstream
        self.path = urlsplit(upstream).path
        self.header = header
        self.turned: list[Turned] = []
        self.relayed = 0
        """Connections relayed to the browser."""
        self._runner: web.AppRunner | None = None
        self._http: aiohttp.ClientSession | None = None
        self.url = ""

    async def start(self, host: str, port: int = 0) -> str:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._serve)
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False, shutdown_timeout=1.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, host, port)
        await site.start()
        bound = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self._http = aiohttp.ClientSession()
        self.url = f"ws://{host}:{bound}{self.path}"
        return self.url

    async def close(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
        if self._http is not None:
            await self._http.close()

    async def _serve(self, request: web.Request) -> web.StreamResponse:
        if request.path != self.path or request.method != "GET":
            return web.Response(status=404, text="no such endpoint")
        if "Origin" in request.headers:  # a web page's request (its script can reach this address): never a client
            self.turned.append(Turned(request.path, "an Origin header"))
            return web.Response(status=403, text="no web origin may use this door")
        name, wanted = self.header
        given = request.headers.get(name)
        if given is None or not hmac.compare_digest(given.encode(), wanted.encode()):
            self.turned.append(Turned(request.path, f"{'no' if given is None else 'a wrong'} {name} header"))
            return web.Response(status=401, text=f"{name} required")
        assert self._http is not None
        try:
            upstream = await self._http.ws_connect(self.upstream, max_msg_size=0)
        except (aiohttp.ClientError, OSError) as exc:
            return web.Response(status=502, text=f"the browser refused: {exc}")
        client = web.WebSocketResponse(max_msg_size=0)
        await client.prepare(request)
        self.relayed += 1
        try:
            await _relay(client, upstream)
        finally:
            await upstream.close()
            await client.close()
        return client


async def _relay(client: web.WebSocketResponse, upstream: aiohttp.ClientWebSocketResponse) -> None:
    """Every text frame both ways, unchanged, until either side closes."""

    async def to_browser() -> None:
        async for frame in client:
            if frame.type == aiohttp.WSMsgType.TEXT:
                await upstream.send_str(frame.data)

    async def to_client() -> None:
        async for frame in upstream:
            if frame.type == aiohttp.WSMsgType.TEXT:
                await client.send_str(frame.data)

    tasks = {asyncio.create_task(to_browser()), asyncio.create_task(to_client())}
    _, pending = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    for task in pending:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task


async def _main(listen: str, upstream: str, header: str) -> None:
    name, _, value = header.partition(":")
    door = FrontDoor(upstream, (name.strip(), value.strip()))
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        asyncio.get_running_loop().add_signal_handler(sig, stop.set)
    url = await door.start(listen)
    print(READY + url, flush=True)
    try:
        await stop.wait()
    finally:
        await door.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lab.front_door", description=__doc__)
    parser.add_argument("--listen", required=True, help="the address to listen on (a free port is chosen)")
    parser.add_argument("--upstream", required=True, help="the browser's WebSocket URL")
    args = parser.parse_args(argv)
    header = os.environ.get(HEADER_ENV, "")
    if ":" not in header:
        parser.error(f"set ${HEADER_ENV} to the header the door wants, 'Name: value'")
    asyncio.run(_main(args.listen, args.upstream, header))
    return 0


if __name__ == "__main__":
    sys.exit(main())
