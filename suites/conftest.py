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
import re
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
    """`@pytest.mark.xfail_on(*backends, reason=...)`: a strict xfail on those backends only (a declared divergence).
    Every test is also labelled for the report (`report_labels`)."""
    for item in items:
        marker = item.get_closest_marker("xfail_on")
        callspec = getattr(item, "callspec", None)
        if marker is not None and callspec is not None and callspec.params.get("backend") in marker.args:
            item.add_marker(pytest.mark.xfail(strict=True, reason=marker.kwargs["reason"]))
        for label_type, value in report_labels(item):
            item.add_marker(pytest.mark.allure_label(value, label_type=label_type))


def report_labels(item: pytest.Item) -> list[tuple[str, str]]:
    """The Allure labels a reviewer browses by: epic = the release proof the test's requirements belong to (else
    the suite), feature = the backend it ran on, story = its first requirement; negative controls are tagged."""
    from suites.parity.ledger import RELEASE_PROOFS  # the ledger names BACKENDS of this module

    reqs = [r for mark in item.iter_markers("req") for r in mark.args]
    proof = next((p.name for p in RELEASE_PROOFS if set(p.requirements) & set(reqs)), None)
    suite = item.nodeid.split("/")[1] if item.nodeid.startswith("suites/") else "lab"
    callspec = getattr(item, "callspec", None)
    backend = callspec.params.get("backend") if callspec is not None else None
    labels = [("epic", f"proof: {proof}" if proof else f"suite: {suite}"), ("feature", backend or "no backend")]
    if reqs:
        labels.append(("story", reqs[0]))
    if item.get_closest_marker("negative_control"):
        labels.append(("tag", "negative control"))
    return labels


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


ELEMENT_LINE = re.compile(r"^(?:[~+] )?(\[([^\]]+)\] .*)$")
ELEMENTS_HEADER = re.compile(r"^elements \d+-\d+ of (\d+)(?:, in view first)?:$", re.M)
"""An observation's element count line; group 1 is the frame's number of elements."""
"""An element line of an observation, `[ref] role "name"`, or of an act's changes (`~ ` changed, `+ ` added)."""
CHANGES = re.compile(r"^changes: ")
CONTINUED = re.compile(r"^elements (\d+)-\d+ of \d+:$")


class Seen(ComputerUseResult):
    """A result as the agent holds it: `known` is every element line the agent knows for the result's session, the
    way a model remembers them: an act's changes applied to the frame it was sent on, a continuation appended."""

    known: str = ""
    content: str = ""
    """The text content block of the tool result: what a client passes on to the model."""
    image: bool = False
    """The result carried an image content block (a screenshot)."""


def ref_of(seen: ComputerUseResult | str | None, *needles: str) -> str:
    """The ref of the first element line containing every needle (e.g. `'button'`, `'"Save and continue"'`): of
    all the element lines the agent knows after `seen`, or of one observation text."""
    # Duck-typed: pytest may load this module twice (as the conftest and as `suites.conftest`), so two `Seen`s.
    text = seen if seen is None or isinstance(seen, str) else getattr(seen, "known", "") or seen.observation
    for line in (text or "").splitlines():
        if (found := ELEMENT_LINE.match(line)) and all(needle in found.group(1) for needle in needles):
            return found.group(2)
    raise AssertionError(f"no element with {needles} in:\n{text}")


def remember(known: dict[str, str], observation: str) -> dict[str, str]:
    """The element lines (ref → line) an agent knows after reading `observation`, having known `known` of the
    same session before: a full frame replaces them, a continuation adds to them, an act's changes edit them."""
    lines = observation.splitlines()
    changes = any(CHANGES.match(line) for line in lines)
    continued = any((m := CONTINUED.match(line)) and m.group(1) != "1" for line in lines)
    now = dict(known) if changes or continued else {}
    for line in lines:
        if changes and line.startswith("- "):
            for ref in line[2:].split():
                now.pop(ref, None)
        elif found := ELEMENT_LINE.match(line):
            now[found.group(2)] = found.group(1)
    return now


@dataclass
class Agent:
    """A model's side of the MCP connection: every call is one tool call with a host-minted token."""

    client: HostedClient
    desk: Desk
    memory: dict[str, dict[str, str]] = field(default_factory=dict)
    """computer_session_id → the element lines the agent knows of it (`remember`)."""

    async def call(self, request: ProviderRequest | None = None, **arguments: Any) -> Seen:
        request = request or await self.desk.request()
        raw = await self.client.call(request, **arguments)
        text = raw.content[0].text if raw.content and raw.content[0].type == "text" else ""
        seen = Seen.model_validate(raw.structured_content or json.loads(text))
        seen.content = text
        seen.image = any(part.type == "image" for part in raw.content)
        session = seen.computer_session_id
        if session is not None and seen.observation is not None:
            self.memory[session] = remember(self.memory.get(session, {}), seen.observation)
        seen.known = "\n".join(self.memory.get(session or "", {}).values())
        return seen

    async def observe(self, **arguments: Any) -> Seen:
        result = await self.call(command="observe", **arguments)
        assert result.status == "ok", result
        return result

    async def act(self, seen: ComputerUseResult, **action: Any) -> Seen:
        """One act on the session and latest frame of `seen`."""
        return await self.call(
            command="act", computer_session_id=seen.computer_session_id, frame_id=seen.frame_id, action=action
        )

    async def verify(self, seen: ComputerUseResult, **assertion: Any) -> Seen:
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
