"""Backend freeze: a ComputerSession keeps the backend the setting named when it was created. Changing the setting
moves only the next session; a failure or a timeout never starts another backend and never causes a second write.

Proven with three independent instruments: the answer's message (which names the session's backend), the tap's
connection ids (every CDP command the runtime or a backend sends arrives on a numbered client connection; a
session's backend talks through connections opened for it), and the process audit (the direct children of this
test process: an upstream MCP server of the other kind would be one). The ledger counts the writes.

The negative control runs the failure check against the `switch_backend_on_failure` sabotage — a runtime that, on
a failed act, starts the backend the setting names now and sends the action again — and must catch it.
The ledger check (at most one write per click) is shown catching a backend adapter that sends each write action
twice (`suites/honesty/variants.py`), on a button that writes in place (`/race/`).
"""

from __future__ import annotations

import functools
import importlib
import json
import os
from dataclasses import dataclass

import allure
import pytest

from fixtures_sites.ledger import LedgerRow
from fixtures_sites.server import FixtureServer
from lab.processes import children_running
from lab.tap import CDPTap
from runtime.assembly import default_backends
from runtime.backend import Backend, BackendConfig, Element, Snapshot
from runtime.models import Action, ComputerUseResult
from runtime.service import BackendFactory, Settings
from suites.harness import BACKENDS, Agent, Desk, ref_of
from suites.honesty.variants import writing_twice
from suites.parity.ledger import diverges


def other_than(backend: str) -> str:
    """The backend the test switches the setting to: any other one this lab knows."""
    return next(name for name in BACKENDS if name != backend)


def executable(backend: str) -> str | None:
    """The upstream server a backend runs as a child process (its adapter module's EXECUTABLE), if any."""
    module = importlib.import_module(default_backends()[backend].__module__)
    return getattr(module, "EXECUTABLE", None)


def children_of_kind(backend: str) -> int:
    name = executable(backend)
    return len(children_running(os.getpid(), name)) if name else 0


@dataclass
class Mark:
    """A point in the tap's record stream, to tell the connections used before it from those after it."""

    tap: CDPTap
    index: int

    @classmethod
    def now(cls, tap: CDPTap) -> Mark:
        return cls(tap, len(tap.records))

    def connections(self) -> set[int]:
        """The runtime's client connections that carried a command up to this point."""
        return {r.conn for r in self.tap.records[: self.index] if r.kind == "command" and r.label == "runtime"}

    def since(self) -> set[int]:
        """The runtime's client connections that carried a command after this point."""
        return {r.conn for r in self.tap.records[self.index :] if r.kind == "command" and r.label == "runtime"}

    def input_since(self) -> set[int]:
        """The connections that carried synthetic input (the act itself) after this point."""
        return {
            r.conn
            for r in self.tap.records[self.index :]
            if r.kind == "command" and r.label == "runtime" and r.category == "input"
        }


def figures(name: str, values: dict[str, object]) -> None:
    allure.attach(json.dumps(values, indent=2, default=sorted), name, "application/json")
    print(f"{name}: {json.dumps(values, default=sorted)}")


def names_backend(result: ComputerUseResult, backend: str) -> bool:
    """The result names `backend` (its `backend` field), and its message names no other."""
    others = [name for name in BACKENDS if name != backend and f"with backend {name}" in result.message]
    return result.backend == backend and not others


def assert_never_switched(tap: CDPTap, before: Mark, other: str, children_before: int) -> None:
    """The failure check: after `before`, the runtime opened no new CDP connection and started no upstream of
    the `other` kind."""
    opened = before.since() - before.connections()
    started = children_of_kind(other) - children_before
    assert not opened, f"the runtime switched backend after a failure: new CDP connections {sorted(opened)}"
    assert started <= 0, f"the runtime switched backend after a failure: {started} new {other} child process(es)"


async def change_the_setting_mid_session(desk: Desk, agent: Agent, tap: CDPTap, backend: str) -> None:
    """The freeze check: observe on `backend`, change the setting, act on the running session (its backend and
    its connections only), then a new session (the new backend, on new connections)."""
    other = other_than(backend)
    children_before = children_of_kind(other)
    start = Mark.now(tap)
    first = await agent.observe(page="left")
    assert names_backend(first, backend), first.message
    session_conns = start.since()

    desk.runtime.service.settings.backend = other  # the user changes the setting mid-session
    changed = Mark.now(tap)
    typed = await agent.act(first, type="type", ref=ref_of(first, '"Full name"'), text="Ada Lovelace")
    assert typed.status == "ok", typed
    assert names_backend(typed, backend), typed.message
    act_conns, act_input = changed.since(), changed.input_since()
    assert act_input, "the act sent no input at all: nothing to attribute"
    assert act_conns <= changed.connections(), f"the act opened connections {sorted(act_conns - changed.connections())}"
    assert act_input <= session_conns  # the typing went out on the session's own connections
    assert children_of_kind(other) == children_before  # nothing of the other kind started

    fresh_mark = Mark.now(tap)
    fresh = await agent.observe(page="left")  # a new ComputerSession
    assert fresh.computer_session_id != first.computer_session_id
    assert names_backend(fresh, other), fresh.message
    fresh_conns = fresh_mark.since() - fresh_mark.connections()
    assert fresh_conns, "the new session's backend used no new connection"
    if executable(other) is not None:
        assert children_of_kind(other) == children_before + 1  # the new session's upstream

    still = await agent.act(typed, type="click", ref=ref_of(typed, '"This is a gift"'))
    assert still.status == "ok", still
    assert names_backend(still, backend), still.message  # the first session is still on its backend
    figures(
        "backend freeze: connection ids",
        {
            "observe on the setting's backend (runtime + session)": {"backend": backend, "connections": session_conns},
            "act after the change": {"connections": act_conns, "input on": act_input},
            "next session": {"backend": other, "new connections": fresh_conns},
        },
    )


@pytest.mark.req("freeze:running-session-keeps-backend", "freeze:next-session-uses-new-backend")
async def test_changing_the_setting_keeps_the_running_session_on_its_backend_and_moves_only_the_next_session(
    one_page_desk, agent: Agent, tap: CDPTap, backend: str
) -> None:
    desk: Desk = await one_page_desk("/dom_form/")
    await change_the_setting_mid_session(desk, agent, tap, backend)


class Unfrozen:
    """A deliberately broken backend (negative control only): it follows the setting at every call instead of
    keeping the one its session was created with, starting the setting's backend on the session's gateway."""

    def __init__(self, config: BackendConfig, *, name: str, settings: Settings, kinds: dict[str, BackendFactory]):
        self.config, self.name, self.settings, self.kinds = config, name, settings, kinds
        self.current: Backend = kinds[name](config)
        self.followed: list[str] = []

    async def _follow(self) -> Backend:
        if self.settings.backend != self.name:
            old, self.name = self.current, self.settings.backend
            self.current = self.kinds[self.name](self.config)
            self.followed.append(self.name)
            await self.current.start()
            await old.close()
        return self.current

    async def start(self) -> None:
        await self.current.start()

    async def snapshot(self) -> Snapshot:
        return await (await self._follow()).snapshot()

    async def act(self, action: Action, element: Element | None) -> None:
        await (await self._follow()).act(action, element)

    async def screenshot(self) -> bytes:
        return await (await self._follow()).screenshot()

    async def close(self) -> None:
        await self.current.close()


@pytest.mark.negative_control
@pytest.mark.req("freeze:running-session-keeps-backend")
async def test_the_freeze_check_catches_a_session_that_follows_the_setting_to_another_backend(
    one_page_desk, agent: Agent, tap: CDPTap, backend: str
) -> None:
    desk: Desk = await one_page_desk("/dom_form/")
    sessions = desk.runtime.service.sessions
    kinds = dict(sessions.backends)
    made: list[Unfrozen] = []

    def unfrozen(name: str, config: BackendConfig) -> Unfrozen:
        made.append(Unfrozen(config, name=name, settings=desk.runtime.service.settings, kinds=kinds))
        return made[-1]

    sessions.backends = {name: functools.partial(unfrozen, name) for name in kinds}
    # The switched backend's refs do not name the frame's elements, so the act fails (or, if it lands, it does so
    # on new connections): either way the check must fail, and the variant must really have switched.
    with pytest.raises(AssertionError):
        await change_the_setting_mid_session(desk, agent, tap, backend)
    assert made[0].followed == [other_than(backend)]


async def fail_and_time_out(agent: Agent, desk: Desk, tap: CDPTap, fixture_server: FixtureServer, other: str) -> Mark:
    """Observe on the stall page, switch the setting, then one refused act and one act that times out after its
    write arrived. Returns the mark taken right after the setting changed."""
    desk.runtime.service.settings.act_timeout = 2.0
    seen = await agent.observe(page="left")
    desk.runtime.service.settings.backend = other
    changed = Mark.now(tap)
    backend = desk.runtime.service.sessions.live[seen.computer_session_id or ""].backend_name
    assert diverges("action:press-on-ref", backend), "this failure needs an action the backend refuses"
    refused = await agent.act(seen, type="press", ref=ref_of(seen, '"Submit expense"'), key="Enter")
    assert refused.status == "failed", refused
    seen = await agent.observe(computer_session_id=seen.computer_session_id)
    held = fixture_server.stall("/stall/write")
    # A runtime that retries on the new backend observes the Page first; while the write is held that waits for the
    # whole observe bound, which need not be the default 30 s for the check to see the retry.
    desk.runtime.service.settings.observe_timeout = 8.0
    timed_out = await agent.act(seen, type="click", ref=ref_of(seen, '"Submit expense"'))
    assert timed_out.reason_code == "timeout", timed_out
    await held.started()  # the write arrived (it is counted on arrival); its answer is still held
    held.release(text="<title>Expense submitted</title>", content_type="text/html")
    return changed


def assert_at_most_one_write(server: FixtureServer, path: str) -> list[LedgerRow]:
    """The ledger check: one click reached the server as at most one write."""
    writes = server.ledger.writes(path)
    assert len(writes) <= 1, f"{len(writes)} writes for one click"
    return writes


@pytest.mark.req("freeze:failure-never-switches", "writes:at-most-one")
async def test_a_failed_or_timed_out_act_never_starts_another_backend_nor_writes_twice(
    one_page_desk, agent: Agent, tap: CDPTap, fixture_server: FixtureServer, backend: str
) -> None:
    desk: Desk = await one_page_desk("/stall/")
    other = other_than(backend)
    children_before = children_of_kind(other)
    changed = await fail_and_time_out(agent, desk, tap, fixture_server, other)
    assert_never_switched(tap, changed, other, children_before)
    writes = assert_at_most_one_write(fixture_server, "/stall/write")
    figures(
        "failure never switches",
        {
            "backend": backend,
            "connections before": changed.connections(),
            "after": changed.since(),
            "writes": len(writes),
        },
    )


@pytest.mark.negative_control
@pytest.mark.sabotage("switch_backend_on_failure")
@pytest.mark.req("freeze:failure-never-switches")
async def test_the_freeze_check_catches_a_runtime_that_retries_a_failed_act_on_the_new_backend(
    one_page_desk, agent: Agent, tap: CDPTap, fixture_server: FixtureServer, backend: str
) -> None:
    desk: Desk = await one_page_desk("/stall/")
    other = other_than(backend)
    children_before = children_of_kind(other)
    changed = await fail_and_time_out(agent, desk, tap, fixture_server, other)
    with pytest.raises(AssertionError, match="switched backend after a failure"):
        assert_never_switched(tap, changed, other, children_before)
    print(
        f"sabotaged: {len(fixture_server.ledger.writes('/stall/write'))} writes; new connections "
        f"{sorted(changed.since() - changed.connections())}"
    )


async def add_a_note(agent: Agent, server: FixtureServer) -> None:
    """One click on a button that writes without leaving the Page (`/race/`): a second click, if any backend sent
    one, would reach the server as a second write. (Under the freeze proof's held form POST no backend can send a
    second click at all: each waits on the pending navigation, so a variant that clicks twice is caught here.)"""
    seen = await agent.observe(page="left")
    arrived = server.wait_for_request("/race/note")
    added = await agent.act(seen, type="click", ref=ref_of(seen, '"Add a note"'))
    assert added.status == "ok", added
    await arrived  # the click's write reached the server (bounded)


@pytest.mark.req("writes:at-most-one", "action:click")
async def test_one_click_on_a_button_that_writes_in_place_is_one_write(
    one_page_desk, agent: Agent, fixture_server: FixtureServer
) -> None:
    await one_page_desk("/race/")
    await add_a_note(agent, fixture_server)
    assert len(assert_at_most_one_write(fixture_server, "/race/note")) == 1


@pytest.mark.negative_control
@pytest.mark.req("writes:at-most-one")
async def test_the_write_check_catches_a_backend_that_sends_the_click_twice(
    one_page_desk, agent: Agent, fixture_server: FixtureServer
) -> None:
    desk: Desk = await one_page_desk("/race/")
    sessions = desk.runtime.service.sessions
    sessions.backends = {name: writing_twice(factory) for name, factory in sessions.backends.items()}
    both = fixture_server.wait_for_request("/race/note", count=2)
    await add_a_note(agent, fixture_server)
    await both  # the second click's write arrived too (bounded): the ledger is read after it, not racing it
    with pytest.raises(AssertionError, match="2 writes for one click"):
        assert_at_most_one_write(fixture_server, "/race/note")
