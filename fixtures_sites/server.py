"""The fixture web server: one per test session (per xdist worker), two origins, routes as data.

Shaped after Playwright-python's `tests/server.py`: the server listens on an ephemeral port on loopback and is
reachable as two origins, `http://localhost:PORT` and `http://127.0.0.1:PORT`; tests register a wait *before*
the action that triggers a request; `reset()` after each test rejects every waiter that was never satisfied and
releases every held answer, so nothing leaks into the next test.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass, field
from urllib.parse import parse_qsl

from aiohttp import web

from fixtures_sites.ledger import WriteLedger
from fixtures_sites.routes import Handler, Route
from fixtures_sites.scenarios import ROUTES

log = logging.getLogger(__name__)

DEFAULT_WAIT = 10.0
"""Seconds a `wait_for_request` waits by default. Every wait is bounded."""

STALL_LIMIT = 30.0
"""Seconds a held answer waits for `release()` before the server gives up with 504 (a test bug, logged)."""


class ResetError(Exception):
    """A waiter or held answer that was still pending when the test ended."""


@dataclass(frozen=True)
class SeenRequest:
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: bytes
    host: str
    peer: str = ""
    """The address the request came from (a browser on another host has its own)."""

    def form(self) -> dict[str, str]:
        """The body as an urlencoded form (what a plain HTML form submit sends)."""
        return dict(parse_qsl(self.body.decode("utf-8", "replace"), keep_blank_values=True))


class RequestWaiter:
    """A registered wait for the next request to a path (or the `count`-th from now); await it (bounded) after
    triggering the request."""

    def __init__(self, path: str, timeout: float, count: int = 1) -> None:
        self.path = path
        self.timeout = timeout
        self.count = self.remaining = count
        self.future: asyncio.Future[SeenRequest] = asyncio.get_running_loop().create_future()

    def __await__(self):
        return self._wait().__await__()

    async def _wait(self) -> SeenRequest:
        try:
            return await asyncio.wait_for(asyncio.shield(self.future), self.timeout)
        except TimeoutError:
            missing = f" ({self.remaining} of {self.count} still expected)" if self.count > 1 else ""
            raise TimeoutError(f"no request to {self.path} within {self.timeout:g}s{missing}") from None


class Stall:
    """A route whose answer is held until the test releases it: the basis of every "during act" test."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._arrived: asyncio.Future[SeenRequest] = asyncio.get_running_loop().create_future()
        self._release: asyncio.Future[web.StreamResponse] = asyncio.get_running_loop().create_future()

    async def started(self, timeout: float = DEFAULT_WAIT) -> SeenRequest:
        """Wait (bounded) until a request to the held route has arrived and is being held."""
        try:
            return await asyncio.wait_for(asyncio.shield(self._arrived), timeout)
        except TimeoutError:
            raise TimeoutError(f"no request reached the stalled route {self.path} within {timeout:g}s") from None

    @property
    def holding(self) -> bool:
        return self._arrived.done() and not self._release.done()

    def release(self, status: int = 200, text: str = '{"ok": true}', content_type: str = "application/json") -> None:
        """Let the held answer go (or answer the next request immediately, if none arrived yet)."""
        if not self._release.done():
            self._release.set_result(web.Response(status=status, text=text, content_type=content_type))

    def _arrive(self, seen: SeenRequest) -> None:
        if not self._arrived.done():
            self._arrived.set_result(seen)

    async def _hold(self) -> web.StreamResponse:
        try:
            return await asyncio.wait_for(asyncio.shield(self._release), STALL_LIMIT)
        except TimeoutError:
            log.error("stall %s was never released; answering 504", self.path)
            return web.Response(status=504, text="stall never released")


@dataclass
class _State:
    overrides: dict[tuple[str, str], Route] = field(default_factory=dict)
    waiters: dict[str, list[RequestWaiter]] = field(default_factory=dict)
    stalls: dict[str, Stall] = field(default_factory=dict)
    seen: list[SeenRequest] = field(default_factory=list)


class FixtureServer:
    """The lab's web server. Use `prefix` and `cross_origin` to build URLs of the two origins."""

    def __init__(self, routes: Iterable[Route] = ROUTES) -> None:
        routes = tuple(routes)
        self._routes: dict[tuple[str, str], Route] = {}
        for route in routes:
            key = (route.method, route.path)
            if key in self._routes:
                raise ValueError(f"route declared twice: {route.method} {route.path}")
            self._routes[key] = route
        self._folders = sorted((r for r in routes if r.folder), key=lambda r: -len(r.path))
        """Folder routes, the longest first."""
        self.ledger = WriteLedger()
        self._state = _State()
        self._runner: web.AppRunner | None = None
        self.port = 0

    # -- lifecycle ---------------------------------------------------------------------------------------------

    async def start(self, port: int = 0) -> FixtureServer:
        app = web.Application(client_max_size=8 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._dispatch)
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await self._runner.setup()
        v4 = web.TCPSite(self._runner, "127.0.0.1", port)
        await v4.start()
        self.port = v4._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        if socket.has_ipv6:
            # Chromium may resolve `localhost` to ::1 first; listen there too when the machine allows it.
            with contextlib.suppress(OSError):
                await web.TCPSite(self._runner, "::1", self.port).start()
        return self

    async def listen(self, host: str) -> None:
        """Listen on `host` too, on the same port (a browser on another host reaches the server there)."""
        assert self._runner is not None, "start() the server first"
        await web.TCPSite(self._runner, host, self.port).start()

    async def stop(self) -> None:
        self.reset()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    @property
    def prefix(self) -> str:
        return f"http://localhost:{self.port}"

    @property
    def cross_origin(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def url(self, path: str, cross: bool = False) -> str:
        return (self.cross_origin if cross else self.prefix) + path

    # -- test API ----------------------------------------------------------------------------------------------

    def begin_test(self, test_id: str) -> None:
        self.ledger.begin(test_id)

    def set_route(self, path: str, handler: Handler, method: str = "*", write: bool = False) -> None:
        """Override (or add) a route for the current test; `reset()` removes it."""
        self._state.overrides[(method, path)] = Route(method, path, handler, scenario="override", write=write)

    def wait_for_request(self, path: str, timeout: float = DEFAULT_WAIT, *, count: int = 1) -> RequestWaiter:
        """Register a wait for the next request to `path` (`count`: the count-th request from now). Call before
        acting; await after."""
        waiter = RequestWaiter(path, timeout, count)
        self._state.waiters.setdefault(path, []).append(waiter)
        return waiter

    @contextlib.asynccontextmanager
    async def expect_request(self, path: str, timeout: float = DEFAULT_WAIT) -> AsyncIterator[RequestWaiter]:
        """`async with server.expect_request(p) as req: <act>` then `await req` — or leave the block to await it."""
        waiter = self.wait_for_request(path, timeout)
        yield waiter
        await waiter

    def stall(self, path: str) -> Stall:
        """Hold the answer of the next request to `path` until `release()`. Register before acting."""
        stall = self._state.stalls.get(path)
        if stall is None or stall._release.done():
            stall = self._state.stalls[path] = Stall(path)
        return stall

    def requests(self, path: str | None = None) -> list[SeenRequest]:
        return [r for r in self._state.seen if path is None or r.path == path]

    def reset(self) -> list[str]:
        """End-of-test clean-up: empties the ledger, rejects pending waiters, releases held answers.

        Returns what was left pending, for the report.
        """
        state, self._state = self._state, _State()
        self.ledger.clear()
        leftovers: list[str] = []
        for path, waiters in state.waiters.items():
            for waiter in waiters:
                if not waiter.future.done():
                    leftovers.append(f"waiter for {path}")
                    waiter.future.set_exception(ResetError(f"server reset while waiting for {path}"))
                    waiter.future.exception()  # mark retrieved: nobody may await a leaked waiter
        for stall in state.stalls.values():
            if stall.holding:
                leftovers.append(f"held answer for {stall.path}")
            stall.release(status=503, text="server reset")
        return leftovers

    # -- dispatch ----------------------------------------------------------------------------------------------

    def _route_for(self, method: str, path: str) -> Route | None:
        for table in (self._state.overrides, self._routes):
            route = table.get((method, path)) or table.get(("*", path))
            if route is not None:
                return route
        return next((r for r in self._folders if r.method in (method, "*") and r.serves(path)), None)

    async def _dispatch(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        seen = SeenRequest(
            method=request.method,
            path=request.path,
            query=dict(request.query),
            headers=dict(request.headers),
            body=body,
            host=request.host,
            peer=request.remote or "",
        )
        state = self._state
        state.seen.append(seen)
        route = self._route_for(request.method, request.path)
        if route is not None and route.write:
            referer = request.headers.get("Referer", "")[:2048]
            self.ledger.record_write(route.scenario, request.method, request.path, request.host, body, referer)
        if route is not None and route.attacker:
            self.ledger.record_attacker_hit(route.scenario, request.method, request.path, request.host, body)
        waiting = state.waiters.pop(request.path, [])
        for waiter in waiting:
            waiter.remaining -= 1
            if waiter.remaining <= 0 and not waiter.future.done():
                waiter.future.set_result(seen)
        if still := [waiter for waiter in waiting if not waiter.future.done()]:
            state.waiters[request.path] = still
        if route is None:
            return web.Response(status=404, text=f"no fixture route for {request.method} {request.path}")
        stall = state.stalls.get(request.path)
        if stall is None and route.stall:
            stall = self.stall(request.path)
        if stall is not None:
            stall._arrive(seen)
            return await stall._hold()
        return await route.handler(request)
