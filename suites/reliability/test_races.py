"""Races, proven live on every backend: one frame is one write, the write lease serializes sessions and re-checks
what changed while a call waited, and sessions on different Pages never cross.

Every race is forced, not hoped for: the test holds the Page's write lease itself, starts the acts, waits (bounded)
until the runtime has queued all of them on the lease (`WriteLease.queued`), then lets go. Concurrent acts are
parallel tool calls of one provider request (each with its own token), as a model issuing two calls at once sends
them. Writes are counted by the fixture server's ledger (`/race/` writes once per click and stays put, so a lost race
would be a second real write); each row's referer names the Page it came from.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import pytest

from fixtures_sites.server import FixtureServer
from lab.tap import CDPTap
from lab.tap.sessions import BROWSER
from runtime.capability.contexts import ProviderRequest
from runtime.computer_session import ComputerSession
from runtime.models import ComputerUseResult
from runtime.registry.pages import WriteLease
from suites.harness import Agent, Desk, other_backend, ref_of, second_agent

WAIT = 20.0
"""Bound on the runtime queueing the acts on the lease, and on each act once released."""
ADD = '"Add a note"'


async def open_race_pages(desk: Desk, names: str) -> None:
    columns = len(names) + 1
    for i, name in enumerate(names):
        await desk.open(name, f"/race/?page={name}", desk.workspace.column(i, columns))
    await desk.open("chat", "/chat/", desk.workspace.column(len(names), columns), chat=True)


@asynccontextmanager
async def lease_held(desk: Desk, name: str) -> AsyncIterator[WriteLease]:
    """Hold the Page's write lease from the test; released on exit, so queued acts go on."""
    lease = desk.runtime.registry.lease(desk.pages[name])
    await asyncio.wait_for(lease.acquire(), WAIT)
    try:
        yield lease
    finally:
        lease.release()


def click_add(agent: Agent, request: ProviderRequest, seen: ComputerUseResult) -> asyncio.Future[ComputerUseResult]:
    """One tool call of `request`: click "Add a note" on the session and latest frame of `seen`."""
    action = {"type": "click", "ref": ref_of(seen, "button", ADD)}
    return asyncio.ensure_future(
        agent.call(
            request, command="act", computer_session_id=seen.computer_session_id, frame_id=seen.frame_id, action=action
        )
    )


async def acts_released_together(
    desk: Desk, agent: Agent, seen: list[ComputerUseResult], between: Callable[[], None] = lambda: None
) -> list[ComputerUseResult]:
    """One click on "Add a note" per observation, all as parallel calls of one provider request, queued on the
    Page's held lease; `between()` runs while they wait; then the lease goes and every answer is collected."""
    request = await desk.request()
    async with lease_held(desk, "A") as lease:
        calls = [click_add(agent, request, s) for s in seen]
        await asyncio.wait_for(lease.queued(len(calls)), WAIT)
        between()
    return list(await asyncio.wait_for(asyncio.gather(*calls), WAIT))


def codes(results: list[ComputerUseResult]) -> list[str]:
    return sorted(r.reason_code.value if r.reason_code else r.status for r in results)


def notes(server: FixtureServer) -> int:
    return len(server.ledger.writes("/race/note"))


# -- the scenarios (each used by its proof and by the negative control) ------------------------------------------


async def two_acts_on_one_frame(desk: Desk, agent: Agent, server: FixtureServer) -> None:
    await open_race_pages(desk, "A")
    desk.authorize("A")
    seen = await agent.observe(page=desk.handle("A"))
    results = await acts_released_together(desk, agent, [seen, seen])
    assert codes(results) == ["ok", "stale_observation"], results
    assert notes(server) == 1


async def two_sessions_on_one_page(desk: Desk, agent: Agent, server: FixtureServer) -> None:
    """Two live sessions on one Page: the chat's on the test's backend and another host's turn after the backend
    setting changed (one session per Page and backend, so this is how two coexist); their acts queue on the Page's
    one write lease."""
    await open_race_pages(desk, "A")
    desk.authorize("A")
    first = await agent.observe(page=desk.handle("A"))
    other_backend(desk)
    other = desk.runtime.new_host().start_turn([desk.handle("A")])
    async with second_agent(desk) as client:
        second = await client.call(await other.provider_request(), command="observe", page=desk.handle("A"))
        assert second.status == "ok", second
        assert first.computer_session_id != second.computer_session_id
        request, other_request = await desk.request(), await other.provider_request()
        async with lease_held(desk, "A") as lease:
            calls = [click_add(agent, request, first), click_add(client, other_request, second)]
            await asyncio.wait_for(lease.queued(len(calls)), WAIT)
        results = list(await asyncio.wait_for(asyncio.gather(*calls), WAIT))
    assert codes(results) == ["ok", "stale_observation"], results  # the second frame went stale while it waited
    assert notes(server) == 1


async def access_disabled_while_queued(desk: Desk, agent: Agent, server: FixtureServer) -> None:
    await open_race_pages(desk, "A")
    desk.authorize("A")
    seen = await agent.observe(page=desk.handle("A"))
    results = await acts_released_together(
        desk, agent, [seen], between=lambda: desk.runtime.registry.set_access(desk.handle("A"), False)
    )
    assert codes(results) == ["page_access_disabled"], results
    assert notes(server) == 0


RACES: dict[str, Callable[[Desk, Agent, FixtureServer], Awaitable[None]]] = {
    "same frame": two_acts_on_one_frame,
    "two sessions": two_sessions_on_one_page,
    "access disabled": access_disabled_while_queued,
}


@pytest.mark.req("concurrency:one-frame-one-write", "reason:stale_observation", "writes:at-most-one")
async def test_two_concurrent_acts_with_one_frame_write_exactly_once_and_the_other_is_stale(
    desk: Desk, agent: Agent, fixture_server: FixtureServer
) -> None:
    await two_acts_on_one_frame(desk, agent, fixture_server)


@pytest.mark.req("concurrency:write-lease", "concurrency:recheck-under-lease", "reason:stale_observation")
async def test_two_sessions_on_one_page_are_serialized_and_the_queued_one_finds_its_frame_stale(
    desk: Desk, agent: Agent, fixture_server: FixtureServer
) -> None:
    await two_sessions_on_one_page(desk, agent, fixture_server)


@pytest.mark.req("concurrency:recheck-under-lease", "reason:page_access_disabled")
async def test_a_queued_act_whose_page_access_is_disabled_while_it_waits_is_refused_without_writing(
    desk: Desk, agent: Agent, fixture_server: FixtureServer
) -> None:
    await access_disabled_while_queued(desk, agent, fixture_server)


@pytest.mark.negative_control
@pytest.mark.req("concurrency:one-frame-one-write", "concurrency:recheck-under-lease")
@pytest.mark.parametrize("race", RACES)
async def test_the_race_checks_catch_a_runtime_that_checks_only_when_a_call_arrives(
    desk: Desk, agent: Agent, fixture_server: FixtureServer, monkeypatch: pytest.MonkeyPatch, race: str
) -> None:
    """The broken part: a service that checks frame and binding when the call arrives and never looks again: not
    under the lease, and not while the backend acts (what the runtime did before the lease re-check)."""
    service = desk.runtime.service

    async def only_the_action(session: ComputerSession, call: Awaitable[object], timeout: float) -> object:
        return await asyncio.wait_for(call, timeout)

    monkeypatch.setattr(service.act, "recheck", lambda session, frame_id: None)
    monkeypatch.setattr(service.reach, "until_stopped", only_the_action)
    with pytest.raises(AssertionError):
        await RACES[race](desk, agent, fixture_server)


# -- parallel sessions on several Pages -----------------------------------------------------------------------


async def four_pages_in_parallel(desk: Desk, agent: Agent, server: FixtureServer, tap: CDPTap) -> None:
    await open_race_pages(desk, "ABCD")
    desk.authorize(*"ABCD")
    root = set(tap.connections(label="runtime"))  # the runtime's own connection: registry, probe, previews
    seen = [await agent.observe(page=desk.handle(name)) for name in "ABCD"]
    request = await desk.request()
    results = await asyncio.wait_for(asyncio.gather(*(click_add(agent, request, s) for s in seen)), WAIT * 2)
    assert codes(list(results)) == ["ok"] * 4, results
    pages = sorted(row.referer.rsplit("page=", 1)[-1] for row in server.ledger.writes("/race/note"))
    assert pages == list("ABCD"), server.ledger.writes("/race/note")  # one write on each Page, on its own
    targets = {desk.target(name): name for name in "ABCD"}
    touched: dict[int, set[str]] = {}
    for record in tap.records:
        ours = record.kind == "command" and record.label == "runtime" and record.conn not in root
        if ours and record.target != BROWSER:
            touched.setdefault(record.conn, set()).add(targets.get(record.target, record.target))
    crossing = {conn: names for conn, names in touched.items() if len(names) > 1}
    assert not crossing, f"a session's connection reached several Pages: {crossing}"
    assert set().union(*touched.values()) == set("ABCD"), touched


@pytest.mark.req("concurrency:pages-in-parallel")
async def test_four_sessions_acting_in_parallel_on_four_pages_each_write_on_their_own_page_only(
    desk: Desk, agent: Agent, fixture_server: FixtureServer, tap: CDPTap
) -> None:
    await four_pages_in_parallel(desk, agent, fixture_server, tap)


@pytest.mark.negative_control
@pytest.mark.req("concurrency:pages-in-parallel")
async def test_the_parallel_check_catches_a_manager_that_hands_out_one_session_for_every_page(
    desk: Desk, agent: Agent, fixture_server: FixtureServer, tap: CDPTap, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The broken part: a session manager that reuses any live session, whatever Page was asked for."""
    manager = desk.runtime.service.sessions
    real_open = manager.open

    async def any_session(page: object, turn: str) -> ComputerSession:
        if manager.live:
            return next(iter(manager.live.values()))
        return await real_open(page, turn)  # type: ignore[arg-type]

    monkeypatch.setattr(manager, "open", any_session)
    with pytest.raises(AssertionError):
        await four_pages_in_parallel(desk, agent, fixture_server, tap)
