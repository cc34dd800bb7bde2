"""The suites' harness: the desk (the host's side: real windows registered with the runtime, turns and provider
requests), the agent (a model's side of the MCP connection), and how an agent reads what it was sent.

Fixtures live in `conftest.py`; these are the classes and helpers they and the suites build on (a module of its
own, so each is loaded once, whatever pytest does with conftest files).
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import re
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from fixtures_sites.server import FixtureServer
from lab.workspace import Bounds, LabPage, Workspace
from runtime.assembly import Runtime
from runtime.capability.contexts import ProviderRequest, Turn
from runtime.computer_session import ComputerSession
from runtime.models import ComputerUseResult, Page, from_text
from runtime.transports.client import HostedClient
from runtime.transports.mcp.server import ComputerUseServer, build_server

BACKENDS = ("playwright_mcp", "chrome_devtools_mcp", "open_claude_chrome")

WHOLE_RUN_BACKENDS = "INSTALLED_BACKENDS"
"""The environment variable naming the backends of the whole-app runs ("all" or a comma-separated list)."""


def whole_run_backends(config: pytest.Config) -> tuple[str, ...]:
    """The backends a whole-app run (the installed app, the evaluation runner) goes ahead on: those named with
    --backend, else $INSTALLED_BACKENDS ("all", what `make lab` sets, or a comma-separated list), else the default
    backend. Such a run takes a minute per backend; the release proofs cover every backend anyway."""
    if config.getoption("backend"):
        return tuple(config.getoption("backend"))
    raw = os.environ.get(WHOLE_RUN_BACKENDS, "").strip()
    if raw == "all":
        return BACKENDS
    return tuple(name.strip() for name in raw.split(",") if name.strip()) or BACKENDS[:1]


NEGATIVE_CONTROL_BACKENDS = "NEGATIVE_CONTROL_BACKENDS"
"""The environment variable that runs each negative control on every backend ("all", what `make lab` sets)."""


def skip_repeated_negative_controls(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Run each backend-parametrized negative control once: on the default backend, or on the first backend it has
    if the default is not among them. A negative control shows that its check can fail, against a runtime broken on
    purpose, and the breakage is the runtime's, not a backend's: one backend shows it. `--backend NAME` runs them on
    the named backends, and $NEGATIVE_CONTROL_BACKENDS=all (`make lab`) on every backend. The rest stay collected
    and are skipped, so the parity ledger counts what `make lab` runs."""
    if config.getoption("backend") or os.environ.get(NEGATIVE_CONTROL_BACKENDS, "").strip() == "all":
        return
    groups: dict[str, list[tuple[str, pytest.Item]]] = {}
    for item in items:
        callspec = getattr(item, "callspec", None)
        backend = callspec.params.get("backend") if callspec is not None else None
        if backend is None or item.get_closest_marker("negative_control") is None:
            continue
        # The test without its backend parameter: the same check with the same other parameters.
        groups.setdefault(item.nodeid.replace(backend, "*"), []).append((backend, item))
    for members in groups.values():
        kept = min((backend for backend, _ in members), key=BACKENDS.index)
        for backend, item in members:
            if backend != kept:
                reason = f"this negative control runs on {kept}; on {backend} with {NEGATIVE_CONTROL_BACKENDS}=all"
                item.add_marker(pytest.mark.skip(reason=reason))


def skip_other_backends(config: pytest.Config, items: list[pytest.Item], folder: Path, what: str) -> None:
    """Skip the tests under `folder` parametrized with a backend a whole-app run does not go ahead on (still
    collected, so the parity ledger sees what `make lab` exercises)."""
    wanted = whole_run_backends(config)
    for item in items:
        callspec = getattr(item, "callspec", None)
        backend = callspec.params.get("backend") if callspec is not None else None
        if item.path.is_relative_to(folder) and backend is not None and backend not in wanted:
            reason = f"{what} on {backend} goes with {WHOLE_RUN_BACKENDS}=all (make lab)"
            item.add_marker(pytest.mark.skip(reason=reason))


@contextlib.asynccontextmanager
async def file_lock(path: Path, timeout: float) -> AsyncIterator[None]:
    """An exclusive `flock` on `path`, held until the block ends (bounded wait).

    `flock` blocks, so it is taken on a daemon thread: if the wait times out the test fails, and the thread dies
    with the worker."""
    fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o600)
    loop = asyncio.get_running_loop()
    taken: asyncio.Future[None] = loop.create_future()

    def take() -> None:
        fcntl.flock(fd, fcntl.LOCK_EX)
        loop.call_soon_threadsafe(lambda: taken.done() or taken.set_result(None))

    threading.Thread(target=take, name=f"lock {path.name}", daemon=True).start()
    try:
        await asyncio.wait_for(taken, timeout)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock


def run_folder(tmp_path_factory: pytest.TempPathFactory) -> Path | None:
    """The folder this run's xdist workers share (and no other run: pytest's base folder, private to the user);
    None outside xdist. Work done once per run is recorded here for the other workers to read."""
    if os.environ.get("PYTEST_XDIST_WORKER") is None:
        return None
    return tmp_path_factory.getbasetemp().parent


async def once_per_run(
    tmp_path_factory: pytest.TempPathFactory, name: str, produce: Callable[[], str], timeout: float
) -> str:
    """`produce()`'s text, made once per run: under xdist the first worker to take the lock makes it (in a thread,
    within `timeout`) and records it in the run's folder, and the others read the record."""
    if (shared := run_folder(tmp_path_factory)) is None:
        return await asyncio.to_thread(produce)
    record = shared / f"{name}.txt"
    async with file_lock(shared / f"{name}.lock", 2 * timeout):
        if not record.exists():
            record.write_text(await asyncio.wait_for(asyncio.to_thread(produce), timeout), encoding="utf-8")
    return record.read_text(encoding="utf-8")


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


ELEMENT_LINE = re.compile(r"^(?:[~+] )?(([\w-]*\d) .*)$")
"""An element line of an observation, `ref role "name"`, or of an act's changes (`~ ` changed, `+ ` added). A ref
ends in its number (`qfz12`; a backend's own: `e12`, `1_12`, `ref_12`), which no other line's first word does."""
ELEMENTS_HEADER = re.compile(r"^elements \d+-\d+ of (\d+)(?:, in view first)?:$", re.M)
"""An observation's element count line; group 1 is the frame's number of elements."""
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

    async def call(self, request: ProviderRequest | None = None, approval: str | None = None, **arguments: Any) -> Seen:
        """One tool call; with `approval`, the host's re-send of an act the user allowed once."""
        request = request or await self.desk.request()
        if approval is not None:
            raw = await self.client.call_approved(request, approval, arguments)
        else:
            raw = await self.client.call(request, **arguments)
        text = raw.content[0].text if raw.content and raw.content[0].type == "text" else ""
        seen = Seen.model_validate(raw.structured_content or from_text(text))
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

    async def act(self, seen: ComputerUseResult, approval: str | None = None, **action: Any) -> Seen:
        """One act on the session and latest frame of `seen` (with the user's `approval`, if the host has one)."""
        return await self.call(
            approval=approval,
            command="act",
            computer_session_id=seen.computer_session_id,
            frame_id=seen.frame_id,
            action=action,
        )

    async def verify(self, seen: ComputerUseResult, **assertion: Any) -> Seen:
        return await self.call(command="verify", computer_session_id=seen.computer_session_id, assertion=assertion)


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


class _NoService:
    """Stands where the service would: `tools/list` never reaches it, and any call that did would fail loudly."""


def tools_only_server() -> ComputerUseServer:
    """The runtime's MCP server with no service behind it: for what `tools/list` shows, nothing else."""
    return build_server(_NoService())  # type: ignore[arg-type]


@contextlib.asynccontextmanager
async def second_agent(desk: Desk) -> AsyncIterator[Agent]:
    """Another MCP connection to the same server, as a second client would open."""
    async with client_in_task(desk.runtime.server) as client:
        yield Agent(HostedClient(client), desk)


def other_backend(desk: Desk) -> str:
    """Switch the runtime's backend setting (as the app's Settings panel does) to another backend than the current
    one, and name it: the way to a second live session on one Page, since there is one per Page and backend."""
    settings = desk.runtime.service.settings
    settings.backend = next(name for name in sorted(desk.runtime.service.sessions.backends) if name != settings.backend)
    return settings.backend


class Clock:
    """A clock the test moves (`clock.now += 61`) instead of waiting: what a store, a grant or a session manager takes
    as its `clock`."""

    def __init__(self, now: float = 1_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def bare_session() -> ComputerSession:
    """A ComputerSession with nothing behind it, for the unit tests of what a session keeps (frames, refs, its end)."""
    return ComputerSession(
        page=None,  # type: ignore[arg-type]
        target_id="t",
        revision=0,
        backend_name="b",
        backend=None,  # type: ignore[arg-type]
        probe=None,  # type: ignore[arg-type]
        gateway=None,  # type: ignore[arg-type]
        workdir=None,  # type: ignore[arg-type]
    )
