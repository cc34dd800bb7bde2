"""Fixtures for backend suites: one bound page, and backends connected to a tap endpoint (label "backend").

Every backend sits behind the runtime's scoped gateway on the tap, as the runtime always puts it: the gateway shows
it the bound page only, absorbs focus emulation, and is the one owner of the target's state (`target_state`). The
fixture still leaves exactly one page open, the bound page: every other page target (the session Chromium's
initial about:blank, anything left over) is closed through the lab's own hands, which the tap does not count.
"""

from __future__ import annotations

import functools
import json
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import allure
import pytest

from backends.chrome_devtools_mcp import ChromeDevToolsMCPBackend
from backends.open_claude_chrome import OpenClaudeChromeBackend
from backends.playwright_mcp import PlaywrightMCPBackend
from fixtures_sites.server import FixtureServer
from lab.cdp import CDPClient, CDPError
from lab.tap import CDPTap
from lab.workspace import LabPage, Workspace
from runtime.backend import Backend, BackendConfig, Element, Snapshot
from runtime.gateway import ScopedGateway
from runtime.observation import render

BACKEND_CLASSES: dict[str, type[Backend]] = {
    "playwright_mcp": PlaywrightMCPBackend,
    "chrome_devtools_mcp": ChromeDevToolsMCPBackend,
    "open_claude_chrome": OpenClaudeChromeBackend,
}


def observation_of(snapshot: Snapshot) -> list[str]:
    """Every read of a full observation of `snapshot`, as the agent receives it (`runtime.observation.render`,
    following `next_offset`): what the token figures measure."""
    reads: list[str] = []
    offset: int | None = 0
    while offset is not None:
        text, offset = render(snapshot, "interactive", offset)
        reads.append(text)
    return reads


def by_name(elements: tuple[Element, ...], role: str, name: str) -> Element:
    found = [e for e in elements if e.role == role and e.name == name]
    assert len(found) == 1, f"expected one {role} {name!r}, got {found}"
    return found[0]


def page_calls(tap: CDPTap, page: LabPage) -> Counter[str]:
    """The CDP calls the backend made on `page` since the tap was last cleared."""
    return tap.by_target(label="backend").get(page.target_id, Counter())


def figures(name: str, calls: dict[str, Counter[str]]) -> None:
    """Attach a table of counts per flow to the report, and print it."""
    table = {flow: {"total": sum(c.values()), **dict(c)} for flow, c in calls.items()}
    allure.attach(json.dumps(table, indent=2), name, allure.attachment_type.JSON)
    print(f"{name}: {json.dumps(table)}")


async def page_targets(lab_cdp: CDPClient) -> set[str]:
    infos = (await lab_cdp.send("Target.getTargets"))["targetInfos"]
    return {info["targetId"] for info in infos if info["type"] == "page"}


async def close_pages_except(lab_cdp: CDPClient, keep: set[str]) -> None:
    """Close every other page and return once Chromium reports each destroyed (closeTarget answers earlier)."""
    await lab_cdp.send("Target.setDiscoverTargets", {"discover": True})
    for target in await page_targets(lab_cdp) - keep:
        destroyed = lab_cdp.wait_for_event("Target.targetDestroyed", predicate=lambda p, t=target: p["targetId"] == t)
        try:
            await lab_cdp.send("Target.closeTarget", {"targetId": target})
        except CDPError:  # already gone
            destroyed.cancel()
            continue
        await destroyed


@pytest.fixture
async def bound_page(
    workspace: Workspace, fixture_server: FixtureServer, lab_cdp: CDPClient, request: pytest.FixtureRequest
) -> AsyncIterator[LabPage]:
    """The only page in the browser: `/dom_form/`, or the path given by `@pytest.mark.parametrize(indirect)`."""
    path = getattr(request, "param", "/dom_form/")
    page = await workspace.open("bound", fixture_server.url(path), workspace.column(0, 2))
    await close_pages_except(lab_cdp, {page.target_id})
    assert await page_targets(lab_cdp) == {page.target_id}
    yield page
    # An upstream that lost its page may have tried to open another.
    await close_pages_except(lab_cdp, {p.target_id for p in workspace.pages.values()})


MakeBackend = Callable[..., Awaitable[PlaywrightMCPBackend]]


@pytest.fixture
def make_backend(behind_gateway: Callable[..., Any]) -> MakeBackend:
    """`await make_backend(**options)`: a started PlaywrightMCPBackend behind the gateway (see `behind_gateway`)."""
    return functools.partial(behind_gateway, PlaywrightMCPBackend)


@pytest.fixture
async def playwright_backend(bound_page: LabPage, make_backend: MakeBackend) -> PlaywrightMCPBackend:
    return await make_backend()


MakeCDM = Callable[..., Awaitable[ChromeDevToolsMCPBackend]]
MakeOCC = Callable[..., Awaitable[OpenClaudeChromeBackend]]
MakeAdapter = Callable[..., Awaitable[Backend]]


@pytest.fixture
async def behind_gateway(tap: CDPTap, tmp_path: Path, bound_page: LabPage) -> AsyncIterator[Callable[..., Any]]:
    """`await behind_gateway(BackendClass, **options)`: a started backend behind the runtime's scoped gateway bound
    to `bound_page`, on the tap (label "backend"), in a workdir of its own; each closed after, its gateway last."""
    started: list[tuple[Any, ScopedGateway]] = []

    async def make(backend_class: Callable[..., Any], **options: Any) -> Any:
        workdir = tmp_path / f"backend-{len(started)}"
        workdir.mkdir()
        gateway = ScopedGateway(await tap.endpoint("backend"), bound_page.target_id)
        endpoint = await gateway.start()
        config = BackendConfig(cdp_endpoint=endpoint, workdir=workdir, target_state=lambda g=gateway: g.lost)
        backend = backend_class(config, **options)
        started.append((backend, gateway))
        await backend.start()
        return backend

    yield make
    for backend, gateway in started:
        try:
            await backend.close()
        finally:
            await gateway.close()


@pytest.fixture
def make_devtools_backend(behind_gateway: Callable[..., Any]) -> MakeCDM:
    """`await make_devtools_backend(**options)`: a started ChromeDevToolsMCPBackend behind the gateway."""
    return functools.partial(behind_gateway, ChromeDevToolsMCPBackend)


@pytest.fixture
async def devtools_backend(make_devtools_backend: MakeCDM) -> ChromeDevToolsMCPBackend:
    return await make_devtools_backend()


@pytest.fixture
def make_claude_backend(behind_gateway: Callable[..., Any]) -> MakeOCC:
    """`await make_claude_backend(**options)`: a started backend behind the scoped gateway (see `behind_gateway`)."""
    return functools.partial(behind_gateway, OpenClaudeChromeBackend)


@pytest.fixture
async def claude_backend(make_claude_backend: MakeOCC) -> OpenClaudeChromeBackend:
    return await make_claude_backend()


@pytest.fixture
def make_adapter(backend: str, behind_gateway: Callable[..., Any]) -> MakeAdapter:
    """`await make_adapter(**options)`: a started adapter of the backend the test is parametrized by (`backend`,
    see `suites/conftest.py`), behind the gateway (see `behind_gateway`)."""
    return functools.partial(behind_gateway, BACKEND_CLASSES[backend])


@pytest.fixture
async def adapter(make_adapter: MakeAdapter) -> Backend:
    return await make_adapter()
