"""Helpers and fixtures for the fault and cancellation proofs: the real runtime with short, known bounds, a record of
every backend it starts (so a test can tell that a session's child, gateway and work dir are gone), and a private
Chromium that a test may kill. Nothing here replaces a fixture of `suites/conftest.py`: a module that wants this
runtime under the suites' `desk` and `agent` overrides `runtime` with `faults_runtime` itself (the sessions and races
proofs in this folder keep the suites' runtime).

The bounds are constants here, not read back from the runtime: a check that waits "at most the documented bound"
must not take the bound from the runtime it checks, or a runtime that waits for ever would set its own bound.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
from collections.abc import AsyncIterator, Awaitable, Mapping
from dataclasses import dataclass, field
from typing import TypeVar
from urllib.parse import urlsplit

import pytest

from fixtures_sites.server import FixtureServer
from lab.browser import Chromium, launch
from lab.cdp import CDPClient, CDPError
from lab.processes import alive_in_group
from lab.tap import CDPTap
from lab.workspace import Bounds, Workspace
from runtime.assembly import Runtime, default_backends
from runtime.backend import Backend, BackendConfig
from runtime.models import ComputerUseResult, Page
from runtime.service import BackendFactory, ComputerUseService, Parts, Settings
from runtime.transports.client import HostedClient
from suites.harness import Agent, Desk, client_in_task

T = TypeVar("T")

ACT_TIMEOUT = 3.0
"""The runtime's act_timeout in these suites: a hung Page answers `timeout` after this long."""
OBSERVE_TIMEOUT = 20.0
"""The runtime's observe_timeout (it also bounds a backend's start, which is slow on a loaded machine)."""
SLACK = 15.0
"""What a loaded machine adds to a bound before a late answer counts as a hang."""
ACT_LIMIT = ACT_TIMEOUT + OBSERVE_TIMEOUT + SLACK
"""No act may take longer to answer: the action's own bound, then the re-observation's."""
CALL_LIMIT = OBSERVE_TIMEOUT + SLACK
"""No observe or verify may take longer to answer."""
RELEASE_LIMIT = 15.0
"""How long a session's backend child may take to exit once its session is over."""


async def within(call: Awaitable[T], limit: float, what: str = "the call") -> T:
    """The answer to `call`, or a failure saying it hung: past `limit` seconds it is a hang, not a late answer."""
    try:
        return await asyncio.wait_for(call, limit)
    except TimeoutError:
        raise AssertionError(f"{what} hung: no answer within {limit:g}s") from None


def assert_outcome(result: ComputerUseResult, code: str) -> None:
    """Not success, and exactly this reason code, with a hint."""
    assert result.status != "ok", f"reported success: {result}"
    assert result.verified is not True
    assert result.reason_code == code, f"expected {code}, got {result.reason_code}: {result.message}"
    assert result.hint


# -- the sessions' resources --------------------------------------------------------------------------------------


@dataclass
class Started:
    """One backend the runtime started (one per ComputerSession), as the runtime gave it its endpoint and folder."""

    config: BackendConfig
    backend: Backend

    @property
    def pid(self) -> int | None:
        """The backend's child process (its own process group), for the MCP-child backends; None otherwise."""
        return getattr(self.backend, "pid", None)


@dataclass
class Recorded:
    """Every backend the runtime started, in order. The runtime gets the real factories, wrapped only to record."""

    started: list[Started] = field(default_factory=list)

    def factories(self, real: Mapping[str, BackendFactory]) -> dict[str, BackendFactory]:
        def recording(factory: BackendFactory) -> BackendFactory:
            def make(config: BackendConfig) -> Backend:
                backend = factory(config)
                self.started.append(Started(config, backend))
                return backend

            return make

        return {name: recording(factory) for name, factory in real.items()}

    def only(self) -> Started:
        assert len(self.started) == 1, f"expected one session's backend, the runtime started {len(self.started)}"
        return self.started[0]


async def _exited(pid: int, limit: float) -> None:
    """Wait (bounded) until process `pid` exits: a pidfd becomes readable then, so this waits for an event."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return  # exited and reaped already
    loop = asyncio.get_running_loop()
    gone = loop.create_future()
    loop.add_reader(fd, lambda: gone.done() or gone.set_result(None))
    try:
        await within(gone, limit, f"the exit of the backend child {pid}")
    finally:
        loop.remove_reader(fd)
        os.close(fd)


def _listening(endpoint: str) -> bool:
    parts = urlsplit(endpoint)
    with socket.socket() as probe:
        return probe.connect_ex((parts.hostname or "127.0.0.1", parts.port or 80)) == 0


def _remains(started: Started) -> list[str]:
    """What is left of a session that should be over."""
    remains = []
    if started.pid is not None and (left := alive_in_group(started.pid)):
        remains.append(f"its backend child's processes {left}")
    if _listening(started.config.cdp_endpoint):
        remains.append(f"its gateway, listening at {started.config.cdp_endpoint}")
    if os.path.exists(started.config.workdir):
        remains.append(f"its work dir {started.config.workdir}")
    return remains


async def assert_released(runtime: Runtime, started: Started) -> None:
    """The session is over: once the closes under way have finished (bounded), its backend child has exited with
    its whole process group, its gateway no longer listens and its work dir is gone."""
    await within(runtime.service.sessions.settle(), RELEASE_LIMIT, "closing the sessions that ended")
    if started.pid is not None:
        await _exited(started.pid, RELEASE_LIMIT)
    remains = _remains(started)
    assert remains == [], f"the session ended but not its resources: {'; '.join(remains)}"


# -- the runtime under test ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Variant:
    """Which runtime a test runs: the real one by default. A negative control injects one broken part here."""

    name: str = "real"
    service: type[ComputerUseService] | None = None
    """A subclass of the service wrapping its public `handle` or `dispatch` (a broken rule), put in place of the real
    service's class."""
    parts: Parts | None = None
    """The service's parts with one broken (`runtime.service.Parts`)."""

    def __str__(self) -> str:
        return self.name


@pytest.fixture
def runtime_variant() -> Variant:
    """The real runtime. A negative control parametrizes `runtime_variant` with a broken one."""
    return Variant()


@pytest.fixture
def recorded() -> Recorded:
    """Every backend the runtime under test starts."""
    return Recorded()


async def build_runtime(endpoint: str, backend: str, recorded: Recorded, variant: Variant) -> Runtime:
    """The real runtime on `endpoint` with the suite's bounds, recording its backends, with `variant`'s one part."""
    settings = Settings(backend=backend, act_timeout=ACT_TIMEOUT, observe_timeout=OBSERVE_TIMEOUT)
    backends = recorded.factories(default_backends())
    runtime = await Runtime.connect(endpoint, backends=backends, settings=settings, parts=variant.parts)
    if variant.service is not None:
        assert issubclass(variant.service, type(runtime.service))
        runtime.service.__class__ = variant.service  # the same object and parts; only the overridden rule differs
    return runtime


@pytest.fixture
async def faults_runtime(
    tap: CDPTap, backend: str, recorded: Recorded, runtime_variant: Variant
) -> AsyncIterator[Runtime]:
    """The real runtime through the tap, with this suite's short bounds and its backends recorded."""
    rt = await build_runtime(await tap.endpoint("runtime"), backend, recorded, runtime_variant)
    yield rt
    await within(rt.close(), CALL_LIMIT, "closing the runtime")


# -- the lab's hands on a Page --------------------------------------------------------------------------------------


async def crash_renderer(cdp: CDPClient, target_id: str) -> None:
    """Crash the Page's renderer from the lab's own connection (never through the runtime); return once Chromium
    reports the crash.

    Chromium refuses `Page.crash` while a navigation is pending ("Page has pending navigations", e.g. a form POST
    whose answer is held); then the debug URL `chrome://crash` crashes the renderer instead (Chromium handles it
    without starting a navigation)."""
    crashed = cdp.wait_for_event("Target.targetCrashed", predicate=lambda p: p["targetId"] == target_id)
    await cdp.send("Target.setDiscoverTargets", {"discover": True})
    session = (await cdp.send("Target.attachToTarget", {"targetId": target_id, "flatten": True}))["sessionId"]
    # A Page.crash that works never answers: the renderer that would answer is gone. The crash event is the answer.
    crash = asyncio.ensure_future(cdp.send("Page.crash", session_id=session))
    try:
        await asyncio.wait({crash, crashed}, return_when=asyncio.FIRST_COMPLETED)
        if crash.done() and not crashed.done():
            with contextlib.suppress(CDPError):
                crash.result()
            await cdp.send("Page.navigate", {"url": "chrome://crash"}, session_id=session)
        await crashed
    finally:
        for future in (crash, crashed):
            future.cancel()
            with contextlib.suppress(BaseException):
                await future


LOADED = "new Promise(done => document.readyState === 'complete' ? done() : addEventListener('load', done))"


async def open_first_entry(desk: Desk, name: str, path: str, bounds: Bounds) -> Page:
    """Open `path` in a new window *as its first history entry* (created at its URL, not navigated from
    about:blank), and register it: Chromium lets a script close only such a window or one a script opened.

    The window shell's own `open` navigates from about:blank (two entries). The test closes what this opens."""
    cdp = desk.workspace.cdp
    created = await cdp.send(
        "Target.createTarget",
        {"url": desk.server.url(path), "newWindow": True, "background": True, **bounds.as_cdp()},
    )
    target_id = created["targetId"]
    session = (await cdp.send("Target.attachToTarget", {"targetId": target_id, "flatten": True}))["sessionId"]
    try:
        # The load event may have fired before the attach: the page itself answers either way.
        await cdp.send("Runtime.evaluate", {"expression": LOADED, "awaitPromise": True}, session_id=session)
        length = await cdp.send(
            "Runtime.evaluate", {"expression": "history.length", "returnByValue": True}, session_id=session
        )
        assert length["result"]["value"] == 1, "the Page must be its window's first and only history entry"
    finally:
        await cdp.send("Target.detachFromTarget", {"sessionId": session})
    window = await cdp.send("Browser.getWindowForTarget", {"targetId": target_id})
    page = await desk.runtime.registry.register(target_id, window["windowId"], workspace=desk.workspace.name)
    desk.pages[name] = page
    return page


async def close_if_open(cdp: CDPClient, target_id: str) -> None:
    """Close a window the test opened itself, unless it is gone already."""
    targets = (await cdp.send("Target.getTargets"))["targetInfos"]
    if any(t["targetId"] == target_id for t in targets):
        await cdp.send("Target.closeTarget", {"targetId": target_id})


# -- a private browser ----------------------------------------------------------------------------------------------


@dataclass
class PrivateBrowser:
    """A Chromium of the test's own, with its own tap, runtime, window shell, desk and agent: it may be killed."""

    chromium: Chromium
    lab_cdp: CDPClient
    tap: CDPTap
    desk: Desk
    agent: Agent


@pytest.fixture
async def private_browser(
    fixture_server: FixtureServer, backend: str, recorded: Recorded, runtime_variant: Variant
) -> AsyncIterator[PrivateBrowser]:
    """A Chromium of the test's own with the runtime and instruments around it; torn down even once killed."""
    chromium = await launch()
    stack = contextlib.AsyncExitStack()
    try:
        stack.push_async_callback(chromium.close)
        lab_cdp = await chromium.connect()
        stack.push_async_callback(lab_cdp.close)
        tap = await CDPTap(chromium.http_endpoint).start()
        stack.push_async_callback(tap.close)
        rt = await build_runtime(await tap.endpoint("runtime"), backend, recorded, runtime_variant)
        stack.push_async_callback(lambda: within(rt.close(), CALL_LIMIT, "closing the runtime"))
        workspace = Workspace(lab_cdp, "private")
        desk = Desk(workspace, rt, fixture_server)
        client = await stack.enter_async_context(client_in_task(rt.server))
        yield PrivateBrowser(chromium, lab_cdp, tap, desk, Agent(HostedClient(client), desk))
    finally:
        await stack.aclose()
