"""Fixtures for the release proofs: a desk of real windows registered with a real runtime, and an agent that
calls `computer_use` over a real MCP connection with host-minted tokens.

The desk (the host's side) opens Pages in real Chromium windows through the lab's window shell and registers
them with the runtime's Page Registry; the runtime reaches Chromium only through the tap (label "runtime"),
so every CDP call it or its backend makes is counted per target.
"""

from __future__ import annotations

import gc
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest

from fixtures_sites.server import FixtureServer
from lab.cdp import CDPClient
from lab.tap import CDPTap
from lab.workspace import Bounds, Workspace
from runtime.assembly import Runtime, default_backends
from runtime.service import Settings
from runtime.transports.client import HostedClient
from suites.harness import BACKENDS, Agent, Desk, client_in_task, skip_repeated_negative_controls
from suites.parity.inventory import DESELECTED_KEY
from suites.parity.ledger import proof_of
from suites.selection import SUITE_BACKENDS, backends_for, every_suite_on_every_backend


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--backend",
        action="append",
        default=None,
        help=f"run every test on this backend only (repeatable; default: release proofs and backend contract tests on "
        f"all of {', '.join(BACKENDS)}, the rest on {BACKENDS[0]}; every test on all with {SUITE_BACKENDS}=all)",
    )


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Release proofs and backend contract tests run on every chosen backend, the other tests on the default one
    unless `$SUITE_BACKENDS=all` (`make lab`) or `--backend` (`suites/selection.py`). One whose check stops before
    any backend call (and asserts that: 0 CDP commands) is marked `before_any_backend` and runs once, on the first
    chosen backend. A flow only some backends have is marked `backends(*names)` and runs on those of the chosen ones."""
    if "backend" in metafunc.fixturenames:
        metafunc.parametrize("backend", backends_for(metafunc))


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """`@pytest.mark.xfail_on(*backends, reason=...)`: a strict xfail on those backends only (a declared divergence).
    A negative control runs on one backend unless asked for more (`skip_repeated_negative_controls`). Every test is
    also labelled for the report (`report_labels`). Modules marked `starts_early` go first (`start_long_ones_early`);
    a `soak` test runs only with every suite (`SUITE_BACKENDS=all`, `make lab`)."""
    start_long_ones_early(items)
    if not every_suite_on_every_backend():
        for item in items:
            if item.get_closest_marker("soak"):
                item.add_marker(pytest.mark.skip(reason=f"a soak run: make lab runs it ({SUITE_BACKENDS}=all)"))
    skip_repeated_negative_controls(config, items)
    for item in items:
        marker = item.get_closest_marker("xfail_on")
        callspec = getattr(item, "callspec", None)
        if marker is not None and callspec is not None and callspec.params.get("backend") in marker.args:
            item.add_marker(pytest.mark.xfail(strict=True, reason=marker.kwargs["reason"]))
        for label_type, value in report_labels(item):
            item.add_marker(pytest.mark.allure_label(value, label_type=label_type))


def start_long_ones_early(items: list[pytest.Item]) -> None:
    """Modules marked `starts_early` (a test of 20 s or more) first, each kept whole, the rest in their order. Under
    `--dist worksteal` xdist hands each worker a contiguous quarter of the list and idle workers take the back half of
    another's queue: a long test late in the list can end the run alone; at the front it runs while the others work."""
    items.sort(key=lambda item: item.get_closest_marker("starts_early") is None)


def pytest_collection_finish(session: pytest.Session) -> None:
    """What imports and collection made lives as long as the run: moved out of the collector's reach (`gc.freeze`),
    so the full collections a long run triggers walk the tests' own objects, not the 150,000 made before them."""
    gc.collect()
    gc.freeze()


def pytest_deselected(items: list[pytest.Item]) -> None:
    """Items left out (`-k`, `-m`, `--deselect`, `--lf`): this session's items are no longer the whole tree, so the
    parity ledger collects its inventory in a child pytest."""
    if items:
        items[0].config.stash[DESELECTED_KEY] = True


def report_labels(item: pytest.Item) -> list[tuple[str, str]]:
    """The Allure labels a reviewer browses by: epic = the release proof the test's requirements belong to (else
    the suite), feature = the backend it ran on, story = its first requirement; negative controls are tagged."""
    reqs = [r for mark in item.iter_markers("req") for r in mark.args]
    proof = proof_of(reqs)
    suite = item.nodeid.split("/")[1] if item.nodeid.startswith("suites/") else "lab"
    callspec = getattr(item, "callspec", None)
    backend = callspec.params.get("backend") if callspec is not None else None
    labels = [("epic", f"proof: {proof.name}" if proof else f"suite: {suite}"), ("feature", backend or "no backend")]
    if reqs:
        labels.append(("story", reqs[0]))
    if item.get_closest_marker("negative_control"):
        labels.append(("tag", "negative control"))
    return labels


@pytest.fixture
async def runtime(tap: CDPTap, backend: str, request: pytest.FixtureRequest) -> AsyncIterator[Runtime]:
    """The real runtime, reaching Chromium through the tap. `@pytest.mark.sabotage(name)` assembles it from one of
    the broken parts in `suites/sabotage.py` on purpose (a negative control)."""
    from suites.sabotage import SABOTAGE, Sabotage

    marker = request.node.get_closest_marker("sabotage")
    broken = SABOTAGE[marker.args[0]] if marker else Sabotage()
    rt = await Runtime.connect(
        await tap.endpoint("runtime"),
        backends={**default_backends(), **broken.backends} if broken.backends else None,
        settings=Settings(backend=backend),
        parts=broken.parts,
        gateway_factory=broken.gateway_factory,
    )
    if broken.server_change is not None:
        broken.server_change(rt.server)
    yield rt
    await rt.close()


@pytest.fixture
async def desk(workspace: Workspace, runtime: Runtime, fixture_server: FixtureServer) -> Desk:
    return Desk(workspace, runtime, fixture_server)


@pytest.fixture
async def agent(desk: Desk) -> AsyncIterator[Agent]:
    async with client_in_task(desk.runtime.server) as client:
        yield Agent(HostedClient(client), desk)


@pytest.fixture
async def one_page_desk(desk: Desk) -> Callable[[str], Awaitable[Desk]]:
    """`await one_page_desk(path)`: the chat in the middle, one authorized Page A left of it showing `path`."""

    async def open_single(path: str) -> Desk:
        await desk.open("A", path, desk.workspace.column(0, 3))
        await desk.open("chat", "/chat/", desk.workspace.column(1, 3), chat=True)
        desk.authorize("A")
        return desk

    return open_single


@pytest.fixture
async def other_window(lab_cdp: CDPClient) -> AsyncIterator[Workspace]:
    """A second workspace window, beside the main one."""
    ws = Workspace(lab_cdp, "second", area=Bounds(2000, 0, 1200, 900))
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
