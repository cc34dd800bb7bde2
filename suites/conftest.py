"""Fixtures for the release proofs: a desk of real windows registered with a real runtime, and an agent that
calls `computer_use` over a real MCP connection with host-minted tokens.

The desk (the host's side) opens Pages in real Chromium windows through the lab's window shell and registers
them with the runtime's Page Registry; the runtime reaches Chromium only through the tap (label "runtime"),
so every CDP call it or its backend makes is counted per target.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import Any

import pytest
from mcp import Client

from fixtures_sites.server import FixtureServer
from lab.cdp import CDPClient
from lab.tap import CDPTap
from lab.workspace import Bounds, LabPage, Workspace
from runtime.app import Runtime
from runtime.capability.host import ProviderRequest, Turn
from runtime.client import HostedClient
from runtime.models import ComputerUseResult, Page
from runtime.service import Settings

BACKENDS = ("playwright_mcp", "chrome_devtools_mcp", "open_claude_chrome")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--backend",
        action="append",
        default=None,
        help=f"run release proofs on this backend only (repeatable; default: all of {', '.join(BACKENDS)})",
    )


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Release proofs run on every chosen backend; one whose check stops before any backend call (and asserts
    that: 0 CDP commands) is marked `before_any_backend` and runs once, on the first chosen backend."""
    if "backend" in metafunc.fixturenames:
        chosen = metafunc.config.getoption("backend") or list(BACKENDS)
        if metafunc.definition.get_closest_marker("before_any_backend"):
            chosen = chosen[:1]
        metafunc.parametrize("backend", chosen)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """`@pytest.mark.xfail_on(*backends, reason=...)`: a strict xfail on those backends only (a declared divergence)."""
    for item in items:
        marker = item.get_closest_marker("xfail_on")
        callspec = getattr(item, "callspec", None)
        if marker is not None and callspec is not None and callspec.params.get("backend") in marker.args:
            item.add_marker(pytest.mark.xfail(strict=True, reason=marker.kwargs["reason"]))


@dataclass
class Desk:
    """The host's desk: real windows, their registration, the turn and its provider requests."""

    workspace: Workspace
    runtime: Runtime
    server: FixtureServer
    labs: dict[str, LabPage] = field(default_factory=dict)
    pages: dict[str, Page] = field(default_factory=dict)
    turn: Turn | None = None

    async def open(
        self, name: str, path: str, bounds: Bounds, *, chat: bool = False, workspace: Workspace | None = None
    ) -> Page:
        ws = workspace or self.workspace
        lab_page = await ws.open(name, self.server.url(path), bounds)
        page = await self.runtime.registry.register(
            lab_page.target_id, lab_page.window_id, workspace=ws.name, is_chat=chat
        )
        self.labs[name], self.pages[name] = lab_page, page
        return page

    def handle(self, name: str) -> str:
        return self.pages[name].registry_page_id

    def target(self, name: str) -> str:
        return self.labs[name].target_id

    def authorize(self, *names: str) -> Turn:
        self.turn = self.runtime.host.start_turn([self.handle(n) for n in names])
        return self.turn

    async def request(self) -> ProviderRequest:
        assert self.turn is not None, "authorize Pages for a turn first"
        return await self.turn.provider_request()


def ref_of(observation: str | None, *needles: str) -> str:
    """The ref of the first element line containing every needle (e.g. `'button'`, `'"Save and continue"'`)."""
    for line in (observation or "").splitlines():
        if line.startswith("[") and all(needle in line for needle in needles):
            return line[1 : line.index("]")]
    raise AssertionError(f"no element with {needles} in:\n{observation}")


@dataclass
class Agent:
    """A model's side of the MCP connection: every call is one tool call with a host-minted token."""

    client: HostedClient
    desk: Desk

    async def call(self, request: ProviderRequest | None = None, **arguments: Any) -> ComputerUseResult:
        request = request or await self.desk.request()
        raw = await self.client.call(request, **arguments)
        return ComputerUseResult.model_validate(raw.structured_content or json.loads(raw.content[0].text))

    async def observe(self, **arguments: Any) -> ComputerUseResult:
        result = await self.call(command="observe", **arguments)
        assert result.status == "ok", result
        return result

    async def act(self, seen: ComputerUseResult, **action: Any) -> ComputerUseResult:
        """One act on the session and latest frame of `seen`."""
        return await self.call(
            command="act", computer_session_id=seen.computer_session_id, frame_id=seen.frame_id, action=action
        )

    async def verify(self, seen: ComputerUseResult, **assertion: Any) -> ComputerUseResult:
        return await self.call(command="verify", computer_session_id=seen.computer_session_id, assertion=assertion)


@pytest.fixture
async def runtime(tap: CDPTap, backend: str, request: pytest.FixtureRequest) -> AsyncIterator[Runtime]:
    """The real runtime, reaching Chromium through the tap. `@pytest.mark.sabotage(...)` breaks it on purpose."""
    marker = request.node.get_closest_marker("sabotage")
    sabotage = frozenset(marker.args if marker else ())
    rt = await Runtime.connect(await tap.endpoint("runtime"), settings=Settings(backend=backend), sabotage=sabotage)
    yield rt
    await rt.close()


@pytest.fixture
async def desk(workspace: Workspace, runtime: Runtime, fixture_server: FixtureServer) -> Desk:
    return Desk(workspace, runtime, fixture_server)


@contextlib.asynccontextmanager
async def client_in_task(
    target: Any, timeout: float = 30.0, *, opened: Callable[[], AbstractAsyncContextManager[Client]] | None = None
) -> AsyncIterator[Client]:
    """An MCP Client whose connection lives in its own task: `Client(target, mode="legacy")`, or what `opened()`
    opens (another mode, a client over an HTTP client of its own).

    anyio cancel scopes must be exited by the task that entered them, and pytest-asyncio runs a fixture's set-up
    and tear-down in different tasks; so the `async with Client(...)` runs in a task of its own.
    """
    ready: asyncio.Future[Client] = asyncio.get_running_loop().create_future()
    stop = asyncio.Event()
    opened = opened or (lambda: Client(target, mode="legacy"))

    async def hold() -> None:
        async with opened() as client:
            ready.set_result(client)
            await stop.wait()

    task = asyncio.create_task(hold())
    done, _ = await asyncio.wait({task, ready}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    if task in done:
        task.result()  # the connection failed: raise why
    if not ready.done():
        task.cancel()
        raise TimeoutError(f"no MCP connection within {timeout:g}s")
    try:
        yield ready.result()
    finally:
        stop.set()
        await asyncio.wait_for(task, timeout)


@pytest.fixture
async def agent(desk: Desk) -> AsyncIterator[Agent]:
    async with client_in_task(desk.runtime.server) as client:
        yield Agent(HostedClient(client), desk)


@pytest.fixture
async def single(desk: Desk) -> Callable[[str], Awaitable[Desk]]:
    """`await single(path)`: the chat in the middle, one authorized Page A left of it showing `path`."""

    async def open_single(path: str) -> Desk:
        await desk.open("A", path, desk.workspace.column(0, 3))
        await desk.open("chat", "/chat/", desk.workspace.column(1, 3), chat=True)
        desk.authorize("A")
        return desk

    return open_single


@pytest.fixture
async def other_window(hands: CDPClient) -> AsyncIterator[Workspace]:
    """A second workspace window, beside the main one."""
    ws = Workspace(hands, "second", area=Bounds(2000, 0, 1200, 900))
    yield ws
    await ws.close_all()


@pytest.fixture
async def layout(desk: Desk, other_window: Workspace) -> Desk:
    """The isolation layout: A left of the chat, B right of it, D in a second workspace window; only A authorized."""
    await desk.open("A", "/dom_form/", desk.workspace.column(0, 3))
    await desk.open("chat", "/chat/", desk.workspace.column(1, 3), chat=True)
    await desk.open("B", "/dom_form/", desk.workspace.column(2, 3))
    await desk.open("D", "/dom_form/", other_window.column(0, 1), workspace=other_window)
    desk.authorize("A")
    return desk
