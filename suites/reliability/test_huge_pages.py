"""Deep and huge pages (issue 11, part 4), on every backend.

- A Page nested 1,500 levels deep is observed with both of its buttons (the one near the top, the one at the bottom
  of the nesting): the parsers walk with explicit stacks, so depth never reaches Python's recursion limit, and a
  parse failure is never reported as `target_lost`.
- A Page of 200,000 buttons gives a bounded, paginated observation or, where the upstream cannot snapshot it within
  the observe timeout, `timeout`; never `target_lost`. Another MCP connection is answered while that observation is
  in flight: the check waits (bounded) until the backend's snapshot has started, then asks list_pages on the other
  connection and requires its answer while the observation is still running.

Measured figures (time per backend, upstream output size, memory) are printed with `-s`, never asserted.
To measure again: `.venv/bin/pytest suites/reliability/test_huge_pages.py -q -p no:randomly -s -k wide`.

Negative control: the deep-page check against open_claude_chrome with its text walk replaced by a recursive one
(the parser as it was before issue 11), which it must catch as a `target_lost` answer.
"""

from __future__ import annotations

import asyncio
import resource
import time
from collections.abc import Callable
from typing import Any

import pytest

import backends.open_claude_chrome.accessibility as accessibility
from backends.chrome_devtools_mcp.adapter import ChromeDevToolsMCPBackend
from backends.common.normalize import MAX_ELEMENTS
from backends.open_claude_chrome.adapter import OpenClaudeChromeBackend
from backends.playwright_mcp.adapter import PlaywrightMCPBackend
from lab.tokens import count_text
from runtime.models import ComputerUseResult
from runtime.observation import OBSERVATION_TOKENS
from runtime.transports.client import HostedClient
from suites.harness import Agent, client_in_task, ref_of
from suites.reliability.conftest import CALL_LIMIT, within

DEEP = "/huge/deep?levels=1500"
WIDE = "/huge/wide?buttons=200000"
BOUND = 5.0
"""How long the other connection may take to answer list_pages while the huge observation runs."""
BACKEND_CLASSES = (PlaywrightMCPBackend, ChromeDevToolsMCPBackend, OpenClaudeChromeBackend)


def assert_observed_deep(seen: ComputerUseResult) -> None:
    assert seen.reason_code != "target_lost", f"a deep page was reported lost: {seen.message}"
    assert seen.status == "ok", seen
    ref_of(seen, '"Show catalogue"')
    ref_of(seen, '"Order sample"')


@pytest.mark.xfail_on(
    "playwright_mcp",
    reason="@playwright/mcp 0.0.83 cannot snapshot 1,500 levels: its browser_snapshot fails with "
    "'RangeError: Maximum call stack size exceeded' (upstream), so the observation fails",
)
@pytest.mark.req("bounds:deep-page")
async def test_a_page_nested_1500_levels_deep_is_observed_with_its_top_and_bottom_buttons(
    one_page_desk, agent: Agent, backend: str
) -> None:
    await one_page_desk(DEEP)
    seen = await within(agent.call(command="observe", page="left"), CALL_LIMIT)
    print(f"{backend} {DEEP}: {seen.status} {seen.reason_code} {seen.message}")
    assert_observed_deep(seen)


@pytest.mark.req("bounds:deep-page")
async def test_a_page_nested_1500_levels_deep_is_never_reported_as_a_lost_page(
    one_page_desk, agent: Agent, backend: str
) -> None:
    await one_page_desk(DEEP)
    seen = await within(agent.call(command="observe", page="left"), CALL_LIMIT)
    assert seen.reason_code != "target_lost", seen
    listed = await within(agent.call(command="list_pages"), CALL_LIMIT)
    assert listed.status == "ok", listed


def recursive_text_lines(original: Callable[..., list[str]]) -> Callable[..., list[str]]:
    """The broken variant: before reading, walk the tree recursively, as the text walk did before issue 11."""

    def depth(item: accessibility.AXItem) -> int:
        return 1 + max((depth(child) for child in item.children), default=0)

    def walk(read: accessibility.PageRead) -> list[str]:
        for root in read.roots:
            depth(root)
        return original(read)

    return walk


@pytest.mark.negative_control
@pytest.mark.req("bounds:deep-page")
async def test_the_deep_page_check_catches_a_text_walk_that_recurses(
    one_page_desk, agent: Agent, backend: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if backend != "open_claude_chrome":
        pytest.skip("only open_claude_chrome's own tree is as deep as the page (the upstreams' trees are flatter)")
    monkeypatch.setattr(accessibility, "text_lines", recursive_text_lines(accessibility.text_lines))
    await one_page_desk(DEEP)
    seen = await within(agent.call(command="observe", page="left"), CALL_LIMIT)
    with pytest.raises(AssertionError, match="a deep page was reported lost"):
        assert_observed_deep(seen)


def watch_snapshots(monkeypatch: pytest.MonkeyPatch, started: asyncio.Event, figures: dict[str, Any]) -> None:
    """Set `started` when a backend's snapshot begins; note how long it took and what the upstream returned."""
    for cls in BACKEND_CLASSES:
        original = cls.snapshot

        async def snapshot(self: Any, original: Any = original) -> Any:
            started.set()
            begun = time.perf_counter()
            try:
                result = await original(self)
            except BaseException as exc:
                figures["snapshot"] = f"{type(exc).__name__} after {time.perf_counter() - begun:.1f}s"
                raise
            figures["snapshot"] = f"{time.perf_counter() - begun:.1f}s"
            figures["upstream_chars"] = result.upstream_chars
            figures["elements"] = len(result.elements)
            return result

        monkeypatch.setattr(cls, "snapshot", snapshot)


@pytest.mark.req("bounds:huge-page")
async def test_a_page_of_200000_buttons_gives_a_bounded_observation_or_timeout_and_other_connections_are_served(
    one_page_desk, agent: Agent, backend: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    desk = await one_page_desk(WIDE)
    # What is proved is the bound, whatever it is; every upstream needs more than 30 s for this page (see the
    # ledger's note), so a short bound proves the same in a third of the time.
    desk.runtime.service.settings.observe_timeout = 10.0
    started = asyncio.Event()
    figures: dict[str, Any] = {}
    watch_snapshots(monkeypatch, started, figures)
    request = await desk.request()  # one model request: a tool call on each connection
    async with client_in_task(desk.runtime.server) as client:
        other = Agent(HostedClient(client), desk)
        begun = time.perf_counter()
        observing = asyncio.create_task(agent.call(request, command="observe", page="left"))
        await within(started.wait(), CALL_LIMIT, "the huge observation's snapshot")
        listed = await within(other.call(request, command="list_pages"), BOUND, "the other connection")
        in_flight = not observing.done()
        seen = await within(observing, CALL_LIMIT, "the huge observation")
    figures["observe"] = f"{time.perf_counter() - begun:.1f}s {seen.status} {seen.reason_code or ''}"
    figures["runtime maxrss MiB"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
    print(f"{backend} {WIDE}: {figures}")
    assert listed.status == "ok", listed
    assert in_flight, "list_pages was answered only after the huge observation ended"
    assert seen.reason_code in (None, "timeout"), seen
    if seen.status == "ok":
        tokens = count_text(seen.observation or "")
        assert tokens <= OBSERVATION_TOKENS, f"an observation of {tokens} tokens (cap {OBSERVATION_TOKENS})"
        assert seen.next_offset is not None, "a huge page without next_offset"
        assert figures["elements"] <= MAX_ELEMENTS
