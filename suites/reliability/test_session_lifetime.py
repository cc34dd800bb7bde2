"""Sessions live as long as their use, on every backend: at most one live session (one backend child, one gateway
port) per Page and backend however many turns go by, and a session nobody used for `Settings.session_idle` closes.

Measured from outside the runtime, as `test_sessions.py` does: backend children from /proc (direct children of this
process, by executable), the gateways' listening ports of this process from /proc/net/tcp, and whether a closed
session's gateway port still accepts a connection.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
from dataclasses import asdict, dataclass

import allure
import pytest

from lab.processes import children_running, listening_ports
from runtime.computer_session import ComputerSession
from suites.harness import Agent, Desk, second_agent
from suites.parity.test_backend_freeze import executable
from suites.reliability.conftest import SLACK, within
from suites.reliability.test_sessions import CLOSE_TIMEOUT

TURNS = 10


@dataclass(frozen=True)
class PerPage:
    """One reading of what the runtime holds for the one Page of the scenario."""

    when: str
    sessions: int
    children: int
    gateway_ports: int


def per_page(when: str, desk: Desk, backend: str, baseline_ports: set[int]) -> PerPage:
    page = desk.pages["A"]
    name = executable(backend)
    return PerPage(
        when=when,
        sessions=sum(1 for s in desk.runtime.service.sessions.live.values() if s.page is page),
        children=len(children_running(os.getpid(), name)) if name else 0,
        gateway_ports=len(listening_ports(os.getpid()) - baseline_ports),
    )


async def ten_turns_on_one_page(desk: Desk, agent: Agent, backend: str) -> list[PerPage]:
    """A Page A beside the chat; `TURNS` turns, each authorizing A and observing it twice (as a model does: a look,
    then another after thinking). Readings: before, after each turn."""
    await desk.open("A", "/dom_form/", desk.workspace.column(0, 3))
    await desk.open("chat", "/chat/", desk.workspace.column(1, 3), chat=True)
    ports = listening_ports(os.getpid())
    readings = [per_page("before", desk, backend, ports)]
    for turn in range(1, TURNS + 1):
        desk.authorize("A")
        seen = await agent.observe(page=desk.handle("A"))
        again = await agent.observe(page=desk.handle("A"))
        assert again.computer_session_id == seen.computer_session_id  # one session per turn and Page
        await desk.runtime.service.sessions.settle()  # closes already under way, bounded by their own timeouts
        readings.append(per_page(f"after turn {turn}", desk, backend, ports))
    allure.attach(json.dumps([asdict(r) for r in readings], indent=2), "per Page over 10 turns", "application/json")
    print(f"sessions and children per Page over {TURNS} turns ({backend}):", *readings, sep="\n  ")
    return readings


def assert_one_per_page(readings: list[PerPage], backend: str) -> None:
    before, *during = readings
    assert (before.sessions, before.children, before.gateway_ports) == (0, 0, 0), before
    has_child = executable(backend) is not None
    for r in during:
        assert r.sessions == 1, f"one live session per Page and backend: {r}"
        assert r.gateway_ports == 1, f"one gateway port per Page and backend: {r}"
        assert r.children == (1 if has_child else 0), f"one backend child per Page and backend: {r}"


@pytest.mark.req("sessions:one-per-page", "sessions:resources-end")
async def test_ten_turns_on_one_page_keep_one_session_one_child_and_one_gateway_port_on_every_backend(
    desk: Desk, agent: Agent, backend: str
) -> None:
    readings = await ten_turns_on_one_page(desk, agent, backend)
    assert_one_per_page(readings, backend)


@pytest.mark.negative_control
@pytest.mark.sabotage("keep_old_sessions")
@pytest.mark.req("sessions:one-per-page")
async def test_the_ten_turn_count_catches_a_manager_that_keeps_each_turns_session(
    desk: Desk, agent: Agent, backend: str
) -> None:
    readings = await ten_turns_on_one_page(desk, agent, backend)
    with pytest.raises(AssertionError):
        assert_one_per_page(readings, backend)
    assert readings[-1].sessions == desk.runtime.service.settings.max_sessions  # today's: 8 live, one per turn


def refuses(url: str) -> bool:
    """Whether nothing accepts a TCP connection at the URL's port on loopback any more."""
    port = int(url.rsplit(":", 1)[1].split("/", 1)[0])
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) != 0


@pytest.mark.req("sessions:idle-close", "sessions:resources-end")
async def test_a_session_unused_for_the_idle_time_closes_its_child_and_gateway_and_its_id_says_observe_again(
    desk: Desk, agent: Agent, backend: str
) -> None:
    settings = desk.runtime.service.settings
    now = [0.0]
    settings.clock = lambda: now[0]  # the settings' clock seam: the test moves it, nobody sleeps
    await desk.open("A", "/dom_form/", desk.workspace.column(0, 3))
    await desk.open("chat", "/chat/", desk.workspace.column(1, 3), chat=True)
    desk.authorize("A")
    seen = await agent.observe(page=desk.handle("A"))
    session: ComputerSession = desk.runtime.service.sessions.live[seen.computer_session_id or ""]
    now[0] += settings.session_idle - 1
    await agent.observe(computer_session_id=seen.computer_session_id)  # a use: the idle time counts from here
    now[0] += settings.session_idle - 1
    desk.runtime.service.sessions.expire_idle()  # what the sweeper runs
    assert session.invalid is None, "a session used less than session_idle ago was closed"
    now[0] += 1
    await asyncio.wait_for(session.closed.wait(), CLOSE_TIMEOUT)  # the sweeper's, not a call's: nobody called
    assert refuses(session.gateway.url), "the idle session's gateway port still accepts connections"
    assert not session.workdir.exists()
    name = executable(backend)
    if name is not None:
        assert children_running(os.getpid(), name) == []
    late = await agent.call(command="observe", computer_session_id=seen.computer_session_id)
    assert late.reason_code == "stale_observation", late
    assert "unused" in late.message, late
    assert "page=" in (late.hint or ""), late
    fresh = await agent.observe(page=desk.handle("A"))  # the hint works
    assert fresh.computer_session_id != seen.computer_session_id


async def check_busy_session_is_not_closed(desk: Desk, agent: Agent, backend: str) -> None:
    """The chat's session of A has a call running (the manager's own `enter`, as the service brackets every call);
    another host's turn observes A, which would replace it: refused `timeout` within `lease_timeout` and the
    session, its child and its gateway untouched. Once the call ends (`release`), the same observe replaces it."""
    settings = desk.runtime.service.settings
    settings.lease_timeout = 2.0
    manager = desk.runtime.service.sessions
    desk.authorize("A")
    seen = await agent.observe(page=desk.handle("A"))
    session = manager.live[seen.computer_session_id or ""]
    other = desk.runtime.new_host().start_turn([desk.handle("A")])
    async with second_agent(desk) as client:
        manager.enter(session)
        try:
            waited = await within(
                client.call(await other.provider_request(), command="observe", page=desk.handle("A")),
                settings.lease_timeout + SLACK,
                "the observe that waits for a busy session",
            )
            assert session.invalid is None, f"a session was closed while a call ran on it: {session.invalid}"
            assert not refuses(session.gateway.url)
            assert waited.reason_code == "timeout", waited
        finally:
            manager.release(session)
        replaced = await client.call(await other.provider_request(), command="observe", page=desk.handle("A"))
        assert replaced.status == "ok", replaced
    await asyncio.wait_for(session.closed.wait(), CLOSE_TIMEOUT)
    assert [s.id for s in manager.live.values() if s.page is desk.pages["A"]] == [replaced.computer_session_id]


@pytest.mark.req("sessions:one-per-page", "reason:timeout")
async def test_a_session_with_a_call_running_is_never_replaced_under_it_the_new_observe_waits_then_is_refused(
    desk: Desk, agent: Agent, backend: str
) -> None:
    await desk.open("A", "/dom_form/", desk.workspace.column(0, 3))
    await desk.open("chat", "/chat/", desk.workspace.column(1, 3), chat=True)
    await check_busy_session_is_not_closed(desk, agent, backend)


@pytest.mark.negative_control
@pytest.mark.sabotage("replace_busy_sessions")
@pytest.mark.req("sessions:one-per-page")
async def test_the_busy_check_catches_a_manager_that_replaces_a_session_under_its_call(
    desk: Desk, agent: Agent, backend: str
) -> None:
    await desk.open("A", "/dom_form/", desk.workspace.column(0, 3))
    await desk.open("chat", "/chat/", desk.workspace.column(1, 3), chat=True)
    with pytest.raises(AssertionError, match="closed while a call ran"):
        await check_busy_session_is_not_closed(desk, agent, backend)
