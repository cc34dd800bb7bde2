"""Benchmark, per backend: what a browser on another host adds to `observe` and `act`, local against remote.

Local: the runtime on a Chromium of this host (`http://127.0.0.1:PORT`). Remote: the runtime on a Chromium in a
network namespace of this machine, reached through a farm's front door on its own address (`suites/remote/farm.py`:
every CDP message of the runtime, its gateway and its backend crosses the veth pair and the door's relay, and every
page load crosses it back to the fixture server). Each side opens the form page and the chat, then times the same
calls through a real MCP client: `observe` of the page, and `act` (a click on the gift box, its re-observation
included). The p50s and the difference go to the cost summary (`remote-latency-<backend>`); nothing is asserted:
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
from runtime.app import Runtime
from runtime.client import HostedClient
from runtime.endpoint import BrowserEndpoint
from runtime.models import ComputerUseResult
from runtime.settings import Settings
from suites.harness import client_in_task
from suites.proofs import record_cost
from suites.remote.farm import farm

pytestmark = pytest.mark.req("bench:remote-latency")

ROUNDS, WARMUP = 15, 2
GIFT = re.compile(r'(?m)^(\w+) checkbox "This is a gift"')
Call = Callable[..., Awaitable[ComputerUseResult]]


async def timed_calls(
    stack: contextlib.AsyncExitStack, endpoint: str | BrowserEndpoint, lab_cdp: CDPClient, server: FixtureServer,
    backend: str,
) -> dict[str, float]:  # fmt: skip
    """p50 milliseconds of `observe` and `act` (after `WARMUP` rounds of each) on `endpoint`'s browser."""
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

    async def p50(make: Callable[[], Awaitable[Any]]) -> float:
        spent = []
        for _ in range(WARMUP + ROUNDS):
            started = time.perf_counter()
            await make()
            spent.append((time.perf_counter() - started) * 1000)
        return round(statistics.median(spent[WARMUP:]), 1)

    state: dict[str, Any] = {}

    async def observe() -> None:
        state["seen"] = await call(command="observe", page=registered.registry_page_id)

    async def act() -> None:
        seen = state["seen"]
        frame = {"computer_session_id": seen.computer_session_id, "frame_id": seen.frame_id}
        state["seen"] = await call(command="act", **frame, action={"type": "click", "ref": state["ref"]})

    observed = await p50(observe)
    match = GIFT.search(state["seen"].observation or "")
    assert match, state["seen"].observation
    state["ref"] = match.group(1)  # of the latest observation; the box stays the same element after each click
    return {"observe_p50_ms": observed, "act_p50_ms": await p50(act)}


async def local_and_remote(backend: str) -> dict[str, dict[str, float]]:
    async with contextlib.AsyncExitStack() as stack:
        server = await FixtureServer().start()
        stack.push_async_callback(server.stop)
        chromium = await launch()
        stack.push_async_callback(chromium.close)
        lab_cdp = await chromium.connect()
        stack.push_async_callback(lab_cdp.close)
        local = await timed_calls(stack, chromium.http_endpoint, lab_cdp, server, backend)
        remote = await stack.enter_async_context(farm(server))
        remote_cdp = await CDPClient.connect(remote.door, headers=remote.headers)
        stack.push_async_callback(remote_cdp.close)
        through_door = await timed_calls(stack, remote.endpoint(), remote_cdp, server, backend)
    return {"local": local, "remote": through_door}


def test_bench_observe_and_act_p50_on_a_local_and_on_a_remote_browser(benchmark: Any, backend: str) -> None:
    if (reason := unavailable()) is not None:
        pytest.skip(reason)
    benchmark.group = f"remote browser, {backend}"
    figures: dict[str, dict[str, float]] = {}

    def measure() -> None:
        figures.update(asyncio.run(local_and_remote(backend)))

    benchmark.pedantic(measure, rounds=1, iterations=1)
    flat = {f"{side}_{name}": value for side, measured in figures.items() for name, value in measured.items()}
    added = {
        f"{name.removesuffix('_p50_ms')}_added_ms": round(figures["remote"][name] - figures["local"][name], 1)
        for name in ("observe_p50_ms", "act_p50_ms")
    }
    record_cost(f"remote-latency-{backend}", {**flat, **added, "rounds": ROUNDS, "warmup": WARMUP})
