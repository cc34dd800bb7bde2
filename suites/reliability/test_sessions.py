"""Sessions end: a ComputerSession's resources (backend child, gateway port, probe, work dir) live exactly as long
as the session can be used, on every backend.

Measured from outside the runtime: backend children from /proc (direct children of this process, by executable),
listening ports and open file descriptors of this process from /proc/<pid>/fd and /proc/net/tcp. The runtime, the
tap and the fixture server all live in this process, so fds also count their sockets; the checks compare readings
taken at the same point of a steady scenario, never absolute numbers.
"""

from __future__ import annotations

import asyncio
import json
import os
from dataclasses import asdict, dataclass

import allure
import pytest

from lab.processes import children_running, listening_ports, open_fds
from runtime.computer_session import ComputerSession
from runtime.sessions import SessionManager
from suites.harness import Agent, Desk
from suites.parity.test_backend_freeze import executable

CLOSE_TIMEOUT = 15.0
"""Bound on a session's close (backend child stop, gateway close) once it was invalidated."""
FD_SLACK = 4
"""Sockets this process opens or closes on its own between two readings (the fixture server's keep-alive
connections from Chromium, the tap's discovery answers); one live session costs far more (a listening port, its
upstream connections through the tap, the child's pipes)."""


@dataclass(frozen=True)
class Reading:
    when: str
    live: int
    children: int
    gateway_ports: int
    fds: int


def reading(when: str, manager: SessionManager, backend: str, baseline_ports: set[int]) -> Reading:
    me = os.getpid()
    name = executable(backend)
    return Reading(
        when=when,
        live=len(manager.live),
        children=len(children_running(me, name)) if name else 0,
        gateway_ports=len(listening_ports(me) - baseline_ports),
        fds=open_fds(me),
    )


async def open_three_pages(desk: Desk) -> None:
    for i, name in enumerate("ABC"):
        await desk.open(name, f"/dom_form/?page={name}", desk.workspace.column(i, 4))
    await desk.open("chat", "/chat/", desk.workspace.column(3, 4), chat=True)


async def observe_across_turns(desk: Desk, agent: Agent, backend: str, calls: int) -> list[Reading]:
    """`calls` observes spread over 3 turns on 3 Pages (each turn: every Page once, then round robin), then
    `Runtime.close()`. Readings: before, after each turn's first round, at each turn's end, after close."""
    manager = desk.runtime.service.sessions
    ports = listening_ports(os.getpid())
    readings = [reading("before", manager, backend, ports)]
    per_turn = [calls // 3 + (1 if t < calls % 3 else 0) for t in range(3)]
    for turn, count in enumerate(per_turn, start=1):
        desk.authorize("A", "B", "C")
        for i in range(count):
            await agent.observe(page=desk.handle("ABC"[i % 3]))
            if i == 2:
                readings.append(reading(f"turn {turn}, first round", manager, backend, ports))
        readings.append(reading(f"turn {turn}, {count} observes", manager, backend, ports))
    await desk.runtime.close()
    readings.append(reading("after Runtime.close()", manager, backend, ports))
    allure.attach(json.dumps([asdict(r) for r in readings], indent=2), "session resources", "application/json")
    print("session resources:", *readings, sep="\n  ")
    return readings


def assert_bounded(readings: list[Reading], backend: str, cap: int) -> None:
    before, *during, after = readings
    has_child = executable(backend) is not None
    for r in during:
        assert r.live <= cap, r
        assert r.gateway_ports == r.live, f"one gateway port per live session: {r}"
        assert r.children == (r.live if has_child else 0), f"one backend child per live session: {r}"
    for first, last in zip(during[::2], during[1::2], strict=True):
        assert last.live == first.live, f"observes after the first round opened sessions: {first} -> {last}"
        assert last.fds <= first.fds + FD_SLACK, f"observes after the first round leaked fds: {first} -> {last}"
    assert (after.live, after.children, after.gateway_ports) == (0, 0, 0), after
    assert after.fds <= before.fds + FD_SLACK, f"fds after close: {before} -> {after}"


@pytest.mark.req("sessions:resources-end", "sessions:reuse-and-cap")
async def test_a_hundred_observes_across_three_pages_and_three_turns_keep_one_child_per_live_session_and_flat_fds(
    desk: Desk, agent: Agent, backend: str
) -> None:
    await open_three_pages(desk)
    cap = desk.runtime.service.settings.max_sessions
    readings = await observe_across_turns(desk, agent, backend, calls=100)
    assert_bounded(readings, backend, cap)
    assert readings[-2].live == 3  # one per Page: each turn's session replaced the one of the turn before


@pytest.mark.negative_control
@pytest.mark.req("sessions:resources-end")
async def test_the_resource_check_catches_a_manager_that_never_closes_a_session(
    desk: Desk, agent: Agent, backend: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The broken part: a session manager whose close forgets the resources (marks the session closed only)."""
    await open_three_pages(desk)
    manager = desk.runtime.service.sessions
    leaked: list[ComputerSession] = []
    real_close = manager._close

    async def forget(session: ComputerSession) -> None:
        session.closing = True
        leaked.append(session)
        session.closed.set()

    monkeypatch.setattr(manager, "_close", forget)
    try:
        readings = await observe_across_turns(desk, agent, backend, calls=9)
        with pytest.raises(AssertionError):
            assert_bounded(readings, backend, manager.settings.max_sessions)
    finally:
        for session in leaked:
            session.closing = False
            await real_close(session)


@pytest.mark.req("sessions:reuse-and-cap", "sessions:one-per-page", "reason:stale_observation")
async def test_observe_reuses_the_live_session_of_its_turn_and_a_new_turn_replaces_it(desk: Desk, agent: Agent) -> None:
    await open_three_pages(desk)
    desk.authorize("A")
    first = await agent.observe(page=desk.handle("A"))
    again = await agent.observe(page=desk.handle("A"))
    assert again.computer_session_id == first.computer_session_id
    assert again.frame_id != first.frame_id
    stale = await agent.act(first, type="click", ref="e1")
    assert stale.reason_code == "stale_observation", stale  # the reuse made a new frame; the old one is not latest
    desk.authorize("A")
    other = await agent.observe(page=desk.handle("A"))
    assert other.computer_session_id != first.computer_session_id
    assert list(desk.runtime.service.sessions.live) == [other.computer_session_id]  # the earlier turn's ended
    earlier = await agent.call(command="observe", computer_session_id=first.computer_session_id)
    assert earlier.reason_code == "page_context_stale", earlier


@pytest.mark.req("sessions:resources-end", "lifecycle:target-closed", "reason:target_lost")
async def test_a_closed_page_frees_its_session_within_the_bounded_wait(desk: Desk, agent: Agent, backend: str) -> None:
    await open_three_pages(desk)
    desk.authorize("A", "B")
    seen = await agent.observe(page=desk.handle("A"))
    await agent.observe(page=desk.handle("B"))
    manager = desk.runtime.service.sessions
    session = manager.live[seen.computer_session_id or ""]
    port = int(session.gateway.url.rsplit(":", 1)[1].split("/", 1)[0])
    await desk.workspace.close(desk.labs["A"])
    await asyncio.wait_for(session.closed.wait(), CLOSE_TIMEOUT)
    assert port not in listening_ports(os.getpid())
    assert not session.workdir.exists()
    name = executable(backend)
    if name is not None:
        assert len(children_running(os.getpid(), name)) == 1  # B's only
    lost = await agent.call(command="observe", computer_session_id=seen.computer_session_id)
    assert lost.reason_code == "target_lost", lost


@pytest.mark.req("sessions:resources-end", "lifecycle:access-disabled", "reason:page_access_disabled")
async def test_disabling_access_closes_the_session_and_its_id_answers_page_access_disabled(
    desk: Desk, agent: Agent, backend: str
) -> None:
    await open_three_pages(desk)
    desk.authorize("A")
    seen = await agent.observe(page=desk.handle("A"))
    session = desk.runtime.service.sessions.live[seen.computer_session_id or ""]
    desk.runtime.registry.set_access(desk.handle("A"), False)
    await asyncio.wait_for(session.closed.wait(), CLOSE_TIMEOUT)
    name = executable(backend)
    if name is not None:
        assert children_running(os.getpid(), name) == []
    answer = await agent.verify(seen, type="title_matches", pattern=".")
    assert answer.reason_code == "page_access_disabled", answer


@pytest.mark.req("sessions:reuse-and-cap", "sessions:resources-end")
async def test_past_the_session_cap_the_least_recently_used_idle_session_is_closed_and_says_so(
    desk: Desk, agent: Agent, backend: str
) -> None:
    await open_three_pages(desk)
    desk.runtime.service.settings.max_sessions = 2
    desk.authorize("A", "B", "C")
    a = await agent.observe(page=desk.handle("A"))
    b = await agent.observe(page=desk.handle("B"))
    await agent.observe(computer_session_id=a.computer_session_id)  # A is now used more recently than B
    evicted = desk.runtime.service.sessions.live[b.computer_session_id or ""]
    await agent.observe(page=desk.handle("C"))
    assert evicted.closed.is_set()
    live = desk.runtime.service.sessions.live
    assert a.computer_session_id in live
    assert b.computer_session_id not in live
    assert len(live) == 2
    name = executable(backend)
    if name is not None:
        assert len(children_running(os.getpid(), name)) == 2
    answer = await agent.act(b, type="click", ref="e1")
    assert answer.reason_code == "stale_observation", answer
    assert "observe the Page again" in answer.message
