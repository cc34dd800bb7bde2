"""Tokens expire, and what the runtime remembers about tokens and connections stays bounded.

- An expired token is `invalid_capability` ("expired") before any backend call, on every backend. No sleeping: the
  runtime's context store reads an injected clock, and the test advances it.
- 10,000 `computer_use` calls across many turns, provider requests, hosts and connections leave the context store
  and the capability verifier with structurally bounded contents (from call 1,000 on), and the memory allocated
  through `runtime/` flat over the last 1,500 calls (tracemalloc). A tenth of the calls go through the real MCP
  in-process client (one connection per such turn); the rest call the service core (`ComputerUseService.handle`,
  the function the MCP tool calls) directly, with a stand-in connection that has the SDK's teardown hook, closed at
  the end of its turn as the SDK closes a real one. Every call carries a host-minted token that the real verifier
  checks.
- Tracing is on for the last 4,000 calls only: tracing every allocation of the process made a call seven times
  slower. What tracing sees held is what was allocated since it began, which climbs while the untraced working set
  is replaced: steeply for 1,000 calls (a turn in ten goes over MCP), then slowly until the pattern of turns repeats
  (a fresh host every third turn, MCP every tenth: 3,000 calls). So growth is measured after 2,500 traced calls.

Each proof has its negative control: a verifier that ignores expiry lets the expired token act; a verifier that
never forgets spent ids, and a store that keeps every Page Context, both fail the bounded-size check.
"""

from __future__ import annotations

import gc
import tracemalloc
from collections.abc import AsyncIterator, Sized
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from fixtures_sites.server import FixtureServer
from lab.tap import CDPTap
from lab.workspace import Workspace
from runtime.arguments import ComputerUseArgs
from runtime.assembly import Runtime
from runtime.capability.contexts import ContextStore, Host, PageContext
from runtime.capability.token import Claims
from runtime.capability.verifier import CALL_KEY, TOKEN_KEY, CapabilityVerifier, ExpiringSet
from runtime.models import ComputerUseResult
from runtime.settings import Settings
from runtime.transports.client import HostedClient
from runtime.transports.mcp.server import TOOL
from suites.harness import Agent, Clock, Desk, client_in_task, ref_of
from suites.proofs import assert_no_runtime_calls, assert_no_writes

pytestmark = pytest.mark.starts_early

RUNTIME_SOURCE = str(Path(__file__).resolve().parents[2] / "runtime") + "/"


@pytest.fixture
def clock() -> Clock:
    return Clock(10_000.0)


@pytest.fixture
def store_class() -> type[ContextStore]:
    return ContextStore


@pytest.fixture
async def runtime(tap: CDPTap, backend: str, clock: Clock, store_class: type[ContextStore]) -> AsyncIterator[Runtime]:
    """The suite's runtime, with the store on the test's clock (`store_class` is replaced by negative controls)."""
    rt = await Runtime.connect(
        await tap.endpoint("runtime"), settings=Settings(backend=backend), store=store_class(clock=clock)
    )
    yield rt
    await rt.close()


# -- expiry ------------------------------------------------------------------------------------------------------


async def check_expired_token_refused(
    desk: Desk, agent: Agent, tap: CDPTap, server: FixtureServer, clock: Clock
) -> None:
    """A token used just inside its lifetime works; one used at its end is invalid_capability, 0 CDP, 0 writes."""
    await desk.open("A", "/dom_form/", desk.workspace.column(0, 2))
    await desk.open("chat", "/chat/", desk.workspace.column(1, 2), chat=True)
    desk.authorize("A")
    request = await desk.request()
    lifetime = desk.runtime.host.store.token_lifetime
    tool_call, token = request.mint(agent.client.connection)
    clock.now += lifetime - 1
    seen = ComputerUseResult.model_validate(
        (
            await agent.client.client.call_tool(
                TOOL, {"command": "observe", "page": "left"}, meta={TOKEN_KEY: token, CALL_KEY: tool_call}
            )
        ).structured_content
    )
    assert seen.status == "ok", seen
    save = ref_of(seen, '"Save and continue"')
    tool_call, token = request.mint(agent.client.connection)
    clock.now += lifetime
    tap.clear()
    raw = await agent.client.client.call_tool(
        TOOL,
        {
            "command": "act",
            "computer_session_id": seen.computer_session_id,
            "frame_id": seen.frame_id,
            "action": {"type": "click", "ref": save},
        },
        meta={TOKEN_KEY: token, CALL_KEY: tool_call},
    )
    result = ComputerUseResult.model_validate(raw.structured_content)
    assert result.reason_code == "invalid_capability", result
    assert "expired" in result.message
    assert_no_runtime_calls(tap)
    assert_no_writes(server)


@pytest.mark.req("capability:expired", "reason:invalid_capability")
async def test_an_expired_token_is_invalid_capability_before_any_backend_call(
    desk: Desk, agent: Agent, tap: CDPTap, fixture_server: FixtureServer, clock: Clock
) -> None:
    await check_expired_token_refused(desk, agent, tap, fixture_server, clock)


class IgnoresExpiry(CapabilityVerifier):
    """Broken on purpose: every token is forever."""

    def expired(self, claims: Claims, now: float) -> bool:
        return False


@pytest.mark.negative_control
@pytest.mark.req("capability:expired")
async def test_the_expiry_check_catches_a_verifier_that_ignores_expiry(
    desk: Desk, agent: Agent, tap: CDPTap, fixture_server: FixtureServer, clock: Clock
) -> None:
    service = desk.runtime.service
    service.verifier = IgnoresExpiry(service.store, service.registry)
    with pytest.raises(AssertionError, match="invalid_capability"):
        await check_expired_token_refused(desk, agent, tap, fixture_server, clock)


# -- bounded store and verifier ----------------------------------------------------------------------------------

CALLS = 10_000
CALLS_PER_TURN = 100  # in 2 provider requests of 50 calls
REQUESTS_PER_TURN = 2
MCP_EVERY = 10  # every tenth turn's calls go over a real in-process MCP connection
SECONDS_PER_CALL = 1.0  # model time between calls, on the store's clock: 10,000 calls span 83 token lifetimes
MEASURE_FROM = 1_000  # structural peaks from here on
TRACED_CALLS = 4_000  # tracemalloc is on for the last calls only
GROWTH_WINDOW = 1_500  # memory growth measured over the last calls, once the traced working set has turned over
TRACE_FRAMES = 4  # deep enough to charge json decoding of a token to the runtime code that opened it
GROWTH_BOUND = 64 * 1024  # bytes allocated through runtime/ and still held over the growth window (~44 B a call)
NEGATIVE_CALLS = 4_000  # as many traced calls as the proof, so the same window: a spent-id leak crosses both bounds
NEGATIVE_CALLS_STORE = 1_500  # enough for a context leak to cross the size bound


def footprint(part: object) -> dict[str, int]:
    """The size of every container `part` holds, by attribute, one level into the capability's own objects — so a
    variant that adds a container of its own is measured too."""
    sizes: dict[str, int] = {}
    for name, value in vars(part).items():
        if isinstance(value, Sized) and not isinstance(value, str | bytes):
            sizes[name] = len(value)
        if type(value).__module__.startswith("runtime.capability") and hasattr(value, "__dict__"):
            sizes.update({f"{name}.{inner}": size for inner, size in footprint(value).items()})
    return sizes


@dataclass
class Run:
    """What a bulk run saw: the largest footprints from call 1,000 on, and the memory held (allocated since tracing
    began) at the start of the growth window and at the last call."""

    calls: int
    done: int = 0
    store_peak: dict[str, int] = field(default_factory=dict)
    verifier_peak: dict[str, int] = field(default_factory=dict)
    held_at: dict[int, int] = field(default_factory=dict)  # call number -> bytes held, allocated through runtime/
    total_at: dict[int, int] = field(default_factory=dict)  # call number -> bytes held in the whole process

    @property
    def trace_from(self) -> int:
        return max(self.calls - TRACED_CALLS, 0)

    @property
    def window_from(self) -> int:
        return max(self.calls - GROWTH_WINDOW, MEASURE_FROM)

    def sample(self, rt: Runtime) -> None:
        if self.done < MEASURE_FROM:
            return
        for peak, part in ((self.store_peak, rt.host.store), (self.verifier_peak, rt.service.verifier)):
            for name, size in footprint(part).items():
                peak[name] = max(peak.get(name, 0), size)

    def measure(self) -> None:
        gc.collect()
        snapshot = tracemalloc.take_snapshot()
        # A prefix test per frame: `Snapshot.filter_traces` normalizes and fnmatches every frame of the whole
        # process's traces, which took as long as a thousand calls.
        self.held_at[self.done] = sum(
            trace.size
            for trace in snapshot.traces
            if any(frame.filename.startswith(RUNTIME_SOURCE) for frame in trace.traceback)
        )
        self.total_at[self.done] = tracemalloc.get_traced_memory()[0]

    def report(self) -> None:
        print(
            f"{self.done:,} calls; store peak {self.store_peak}; verifier peak {self.verifier_peak}; traced from "
            f"call {self.trace_from:,}, held through runtime/ at call {self.window_from:,}: "
            f"{self.held_at[self.window_from]:,} B, at call {self.done:,}: {self.held_at[self.done]:,} B; whole "
            f"process (tap and fixture server included): {self.total_at[self.window_from]:,} B → "
            f"{self.total_at[self.done]:,} B"
        )


class StandInConnection:
    """A connection for the direct calls: identity plus the SDK's per-connection teardown stack."""

    def __init__(self) -> None:
        self.exit_stack = AsyncExitStack()


async def bulk(rt: Runtime, handle: str, clock: Clock, calls: int = CALLS) -> Run:
    """`calls` list_pages calls, 100 per turn in 2 provider requests, hosts and connections changing per turn."""
    run = Run(calls)
    second = rt.new_host()
    try:
        for number in range(calls // CALLS_PER_TURN):
            # Two hosts that stay, and every third turn a fresh one that is gone after its turn.
            has_fresh_host = number % 3 == 2
            fresh = Host(rt.registry, rt.host.store, rt.host.read_preview) if has_fresh_host else None
            turn = (fresh or (rt.host, second)[number % 3]).start_turn([handle])
            del fresh
            async with AsyncExitStack() as connection_scope:
                if number % MCP_EVERY == 0:
                    hosted = HostedClient(await connection_scope.enter_async_context(client_in_task(rt.server)))
                else:
                    connection = StandInConnection()
                    connection_scope.push_async_callback(connection.exit_stack.aclose)  # as the SDK closes one
                    nonce = f"direct-{number}"
                for _ in range(REQUESTS_PER_TURN):
                    request = await turn.provider_request()
                    for _ in range(CALLS_PER_TURN // REQUESTS_PER_TURN):
                        if run.done == run.trace_from and not tracemalloc.is_tracing():
                            tracemalloc.start(TRACE_FRAMES)
                        clock.now += SECONDS_PER_CALL
                        if number % MCP_EVERY == 0:
                            raw = await hosted.call(request, command="list_pages")
                            result = ComputerUseResult.model_validate(raw.structured_content)
                        else:
                            tool_call, token = request.mint(nonce)
                            meta: dict[str, Any] = {TOKEN_KEY: token, CALL_KEY: tool_call}
                            result = (
                                await rt.service.handle(ComputerUseArgs(command="list_pages"), meta, connection)
                            ).result
                        assert result.status == "ok", result
                        assert len(result.pages or []) == 1
                        run.done += 1
                        if run.done in (run.window_from, calls):
                            run.measure()
                    run.sample(rt)
            del turn, request  # they hold the turn's host
            if has_fresh_host:
                gc.collect()  # the fresh host is gone now: its entries must have left with it
            run.sample(rt)
    finally:
        tracemalloc.stop()
    run.report()
    return run


def check_sizes(run: Run, hosts: int) -> None:
    """Structural bounds: the store holds one turn and one Page Context per live host; the verifier holds the
    spent tokens of one token lifetime and the open (or lately closed) connections."""
    per_lifetime = int(ContextStore().token_lifetime / SECONDS_PER_CALL) + 1
    assert run.done == run.calls
    too_big = {name: size for name, size in run.store_peak.items() if size > hosts}
    assert not too_big, f"the context store outgrew one entry per live host ({hosts}): {too_big}"
    too_big = {name: size for name, size in run.verifier_peak.items() if size > per_lifetime + hosts}
    assert not too_big, f"the verifier outgrew the calls of one token lifetime ({per_lifetime}): {too_big}"


def check_memory(run: Run) -> None:
    """A generous bound on what runtime/ came to hold over the growth window (allocated since tracing began)."""
    growth = run.held_at[run.calls] - run.held_at[run.window_from]
    assert growth < GROWTH_BOUND, f"memory held through runtime/ grew by {growth:,} B from call {run.window_from:,}"


@pytest.fixture
async def bulk_runtime(
    tap: CDPTap, workspace: Workspace, fixture_server: FixtureServer, clock: Clock, store_class: type[ContextStore]
) -> AsyncIterator[tuple[Runtime, str]]:
    """A runtime (no backend: list_pages needs none) with Page A and the chat registered; yields it and A's handle."""
    rt = await Runtime.connect(await tap.endpoint("runtime"), store=store_class(clock=clock))
    desk = Desk(workspace, rt, fixture_server)
    await desk.open("A", "/dom_form/", workspace.column(0, 2))
    await desk.open("chat", "/chat/", workspace.column(1, 2), chat=True)
    yield rt, desk.handle("A")
    await rt.close()


@pytest.mark.soak
@pytest.mark.req("capability:bounded", "capability:replayed", "capability:stale", "capability:cross-connection")
async def test_ten_thousand_calls_leave_the_store_and_verifier_bounded_and_memory_flat(
    bulk_runtime: tuple[Runtime, str], clock: Clock
) -> None:
    rt, handle = bulk_runtime
    run = await bulk(rt, handle, clock)
    check_sizes(run, hosts=3)
    check_memory(run)


class NeverPrunes(ExpiringSet):
    def prune(self, now: float) -> None:
        pass


class NeverForgets(CapabilityVerifier):
    """Broken on purpose: spent token ids and closed connections' nonces are kept forever."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self._spent, self._retired = NeverPrunes(), NeverPrunes()


@dataclass
class KeepsEveryContext(ContextStore):
    """Broken on purpose: the store of old, keeping the Page Context of every provider request ever made."""

    every_context: dict[str, PageContext] = field(default_factory=dict)

    def begin_request(self, host: str, context: PageContext) -> None:
        super().begin_request(host, context)
        self.every_context[context.provider_request] = context


@pytest.mark.soak
@pytest.mark.negative_control
@pytest.mark.req("capability:bounded")
async def test_the_size_and_memory_checks_catch_a_verifier_that_never_forgets_spent_tokens(
    bulk_runtime: tuple[Runtime, str], clock: Clock
) -> None:
    rt, handle = bulk_runtime
    rt.service.verifier = NeverForgets(rt.service.store, rt.registry)
    run = await bulk(rt, handle, clock, calls=NEGATIVE_CALLS)
    with pytest.raises(AssertionError, match="the verifier outgrew"):
        check_sizes(run, hosts=3)
    with pytest.raises(AssertionError, match="memory held through runtime/ grew"):
        check_memory(run)


@pytest.mark.soak
@pytest.mark.negative_control
@pytest.mark.parametrize("store_class", [KeepsEveryContext])
@pytest.mark.req("capability:bounded")
async def test_the_size_check_catches_a_store_that_never_prunes(
    bulk_runtime: tuple[Runtime, str], clock: Clock
) -> None:
    rt, handle = bulk_runtime
    run = await bulk(rt, handle, clock, calls=NEGATIVE_CALLS_STORE)
    with pytest.raises(AssertionError, match="the context store outgrew"):
        check_sizes(run, hosts=3)
