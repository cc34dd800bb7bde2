"""Benchmark, per backend: what a browser on another host adds to `observe` and `act`, local against remote.

Local: the runtime on a Chromium of this host (`http://127.0.0.1:PORT`). Remote: the runtime on a Chromium in a
network namespace of this machine, reached through a farm's front door on its own address (`suites/remote/farm.py`:
every CDP message of the runtime, its gateway and its backend crosses the veth pair and the door's relay, and every
page load crosses it back to the fixture server). Each side opens the form page and the chat; then the same calls
go through a real MCP client to each side in turn, round after round: `observe` of the page, and `act` (a click on
the gift box, its re-observation included). The p50s and the p50 of the paired differences go to the cost summary
(`remote-latency-<backend>`); nothing is asserted:
timings belong in benchmarks, and a timed assert fails at random on shared machines. `make bench` runs it; `make
test` skips it. Without root or `ip`, it skips with the reason.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from fixtures_sites.server import FixtureServer
from lab.browser import launch
from lab.cdp import CDPClient
from lab.netns import unavailable
from lab.workspace import Workspace
from runtime.assembly import Runtime
from runtime.endpoint import BrowserEndpoint
from runtime.models import ComputerUseResult
from runtime.settings import Settings
from runtime.transports.client import HostedClient
from suites.harness import client_in_task
from suites.proofs import record_cost
from suites.remote.farm import farm

pytestmark = pytest.mark.req("bench:remote-latency")

ROUNDS, WARMUP = 21, 2
GIFT = re.compile(r'(?m)^(\w+) checkbox "This is a gift"')
Call = Callable[..., Awaitable[ComputerUseResult]]


class Side:
    """One runtime on one browser, with the form page authorized: `observe()` and `act()` (a click on the gift box),
    each a real MCP call, each checked ok."""

    def __init__(self, runtime: Runtime, page: str, call: Call) -> None:
        self.runtime = runtime
        self.page = page
        self.call = call
        self.seen: ComputerUseResult | None = None
        self.ref = ""

    @classmethod
    async def open(
        cls, stack: contextlib.AsyncExitStack, endpoint: str | BrowserEndpoint, lab_cdp: CDPClient,
        server: FixtureServer, backend: str,
    ) -> Side:  # fmt: skip
        workspace = Workspace(lab_cdp)
        page = await workspace.open("A", server.url("/dom_form/"), workspace.column(0, 3))
        chat = await workspace.open("chat", server.url("/chat/"), workspace.column(1, 3))
        stack.push_async_callback(workspace.close_all)
        runtime = await Runtime.connect(endpoint, settings=Settings(backend=backend))
        stack.push_async_callback(runtime.close)
        registered = await runtime.registry.register(page.target_id, page.window_id)
        await runtime.registry.register(chat.target_id, chat.window_id, is_chat=True)
        turn = runtime.host.start_turn([registered.registry_page_id])
        hosted = HostedClient(await stack.enter_async_context(client_in_task(runtime.server)))

        async def call(**arguments: Any) -> ComputerUseResult:
            raw = await hosted.call(await turn.provider_request(), **arguments)
            result = ComputerUseResult.model_validate(raw.structured_content)
            assert result.status == "ok", result
            return result

        return cls(runtime, registered.registry_page_id, call)

    async def observe(self) -> None:
        self.seen = await self.call(command="observe", page=self.page)
        found = GIFT.search(self.seen.observation or "")
        assert found, self.seen.observation
        self.ref = found.group(1)  # the box stays the same element after each click: its ref holds for the acts

    async def act(self) -> None:
        assert self.seen is not None
        frame = {"computer_session_id": self.seen.computer_session_id, "frame_id": self.seen.frame_id}
        self.seen = await self.call(command="act", **frame, action={"type": "click", "ref": self.ref})


async def p50s(sides: dict[str, Side]) -> dict[str, float]:
    """Each command timed on each side in turn, round after round (a load that comes and goes on a shared machine
    then falls on both alike): p50 per side and command, and p50 of the paired differences."""
    spent: dict[tuple[str, str], list[float]] = {}
    for command in ("observe", "act"):
        for _ in range(WARMUP + ROUNDS):
            for side, runner in sides.items():
                started = time.perf_counter()
                await getattr(runner, command)()
                spent.setdefault((side, command), []).append((time.perf_counter() - started) * 1000)
    figures = {f"{side}_{command}_p50_ms": median(times) for (side, command), times in spent.items()}
    for command in ("observe", "act"):
        pairs = zip(spent["remote", command][WARMUP:], spent["local", command][WARMUP:], strict=True)
        figures[f"{command}_added_p50_ms"] = round(statistics.median(r - loc for r, loc in pairs), 1)
    return figures


def median(times: list[float]) -> float:
    return round(statistics.median(times[WARMUP:]), 1)


async def local_and_remote(backend: str) -> dict[str, float]:
    async with contextlib.AsyncExitStack() as stack:
        server = await FixtureServer().start()
        stack.push_async_callback(server.stop)
        chromium = await launch()
        stack.push_async_callback(chromium.close)
        lab_cdp = await chromium.connect()
        stack.push_async_callback(lab_cdp.close)
        remote = await stack.enter_async_context(farm(server))
        remote_cdp = await CDPClient.connect(remote.door, headers=remote.headers)
        stack.push_async_callback(remote_cdp.close)
        sides = {
            "local": await Side.open(stack, chromium.http_endpoint, lab_cdp, server, backend),
            "remote": await Side.open(stack, remote.endpoint(), remote_cdp, server, backend),
        }
        return await p50s(sides)


def test_bench_observe_and_act_p50_on_a_local_and_on_a_remote_browser(benchmark: Any, backend: str) -> None:
    if (reason := unavailable()) is not None:
        pytest.skip(reason)
    benchmark.group = f"remote browser, {backend}"
    figures: dict[str, float] = {}

    def measure() -> None:
        figures.update(asyncio.run(local_and_remote(backend)))

    benchmark.pedantic(measure, rounds=1, iterations=1)
    record_cost(f"remote-latency-{backend}", {**figures, "rounds": ROUNDS, "warmup": WARMUP})
