"""Session binding as unit logic: which call may use a ComputerSession, and what a refused call is told.

A SessionManager runs on a real PageRegistry; only the browser side is stood in (a CDP connection that answers the
few browser-level reads the registry makes, a gateway and a backend that start and close). Each case makes one rule
the deciding one and asserts the exact ReasonCode, the message and the hint the model acts on. The live proofs of the
same rules are in `suites/security/test_session_ownership.py` and `suites/reliability/test_sessions.py`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest

from runtime.backend import BackendConfig, Element, Snapshot
from runtime.capability.contexts import PageContext
from runtime.models import Page
from runtime.reasons import ReasonCode
from runtime.registry.pages import PageRegistry
from runtime.sessions import (
    EARLIER_TURN,
    ENDED,
    NOT_YOURS,
    OBSERVE_AGAIN,
    TARGET_LOST_MESSAGE,
    TOMBSTONES,
    Refusal,
    SessionManager,
)
from runtime.settings import Settings
from suites.harness import bare_session

pytestmark = pytest.mark.req("sessions:owner", "sessions:end-with-owner", "sessions:resources-end")


class StandInCDP:
    """The browser connection as the registry and probes use it: listeners, and answers to browser-level reads."""

    def __init__(self) -> None:
        self.listeners: list[Callable[..., None]] = []
        self.targets: list[dict[str, Any]] = []

    def listen(self, listener: Callable[..., None]) -> None:
        self.listeners.append(listener)

    def unlisten(self, listener: Callable[..., None]) -> None:
        if listener in self.listeners:
            self.listeners.remove(listener)

    def emit(self, method: str, params: dict[str, Any]) -> None:
        for listener in list(self.listeners):
            listener(method, params, None)

    async def send(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        if method == "Browser.getWindowBounds":
            return {"bounds": {"left": 0, "top": 0, "width": 800, "height": 600}}
        if method == "Target.getTargets":
            return {"targetInfos": self.targets}
        return {}


class StandInPart:
    """A gateway or backend that starts and closes (the binding logic never talks to the browser through them)."""

    lost: str | None = None

    def __init__(self, *args: object, **kwargs: object) -> None:
        self.closed = False

    async def start(self) -> str:
        return "ws://stand-in"

    async def close(self) -> None:
        self.closed = True


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class World:
    """A registry with Pages, a manager over it, and Page Contexts as a host would snapshot them."""

    def __init__(self, tmp: Any) -> None:
        self.cdp = StandInCDP()
        self.registry = PageRegistry(self.cdp)  # type: ignore[arg-type]
        self.clock = Clock()
        self.settings = Settings(backend="b1", clock=self.clock, workdir=tmp)
        factory: Callable[[BackendConfig], Any] = StandInPart
        self.manager = SessionManager(
            "ws://browser",
            self.cdp,  # type: ignore[arg-type]
            self.registry,
            {"b1": factory, "b2": factory},
            self.settings,
            gateway_factory=StandInPart,  # type: ignore[arg-type]
        )

    async def page(self, target: str) -> Page:
        return await self.registry.register(target, 1)

    def context(self, *pages: Page, host: str = "h1", turn: str = "t1") -> PageContext:
        return PageContext(host, turn, "r1", 1, {}, {p.registry_page_id: p.revision for p in pages}, 1)


@pytest.fixture
def world(tmp_path: Any) -> World:
    return World(tmp_path)


def refusal(call: Callable[[], object]) -> Refusal:
    with pytest.raises(Refusal) as caught:
        call()
    return caught.value


def said(refused: Refusal) -> tuple[ReasonCode, str, str | None]:
    return refused.code, str(refused), refused.hint


async def test_the_owner_acquires_its_session_and_each_call_marks_it_busy_and_used(world: World) -> None:
    page = await world.page("T1")
    session = await world.manager.open(page, "t1", "h1")
    before = session.last_used
    assert world.manager.acquire(session.id, world.context(page)) is session
    assert (session.busy, session.idle.is_set()) == (1, False)
    assert session.last_used > before
    used = session.last_used
    assert world.manager.acquire(session.id, world.context(page)) is session
    assert session.busy == 2
    assert session.last_used > used
    world.manager.release(session)
    assert (session.busy, session.idle.is_set(), session.closing) == (1, False, False)
    world.clock.now = 150.0
    world.manager.release(session)
    assert (session.busy, session.idle.is_set(), session.idle_since, session.closing) == (0, True, 150.0, False)
    assert session.id in world.manager.live
    assert session.invalid is None
    await world.manager.close()


async def test_an_unknown_session_id_is_invalid_arguments_that_says_to_observe_first(world: World) -> None:
    page = await world.page("T1")
    refused = refusal(lambda: world.manager.acquire("cs_nope", world.context(page)))
    assert said(refused) == (ReasonCode.invalid_arguments, "no ComputerSession 'cs_nope'; observe a Page first", None)


async def test_a_session_whose_page_the_request_does_not_authorize_is_invalid_capability(world: World) -> None:
    page, other = await world.page("T1"), await world.page("T2")
    session = await world.manager.open(page, "t1", "h1")
    refused = refusal(lambda: world.manager.acquire(session.id, world.context(other)))
    assert said(refused) == (
        ReasonCode.invalid_capability,
        "this session's Page is not authorized for this request",
        None,
    )
    assert session.busy == 0
    await world.manager.close()


async def test_another_hosts_call_is_invalid_capability_and_an_earlier_turns_is_page_context_stale(
    world: World,
) -> None:
    page = await world.page("T1")
    session = await world.manager.open(page, "t1", "h1")
    other_host = refusal(lambda: world.manager.acquire(session.id, world.context(page, host="h2")))
    assert said(other_host) == (ReasonCode.invalid_capability, NOT_YOURS, OBSERVE_AGAIN)
    other_turn = refusal(lambda: world.manager.acquire(session.id, world.context(page, turn="t2")))
    assert said(other_turn) == (ReasonCode.page_context_stale, EARLIER_TURN, OBSERVE_AGAIN)
    assert "observe" in OBSERVE_AGAIN
    assert "page=" in OBSERVE_AGAIN
    assert session.busy == 0
    assert session.invalid is None
    await world.manager.close()


async def test_an_ended_session_tells_its_owner_why_and_stays_unauthorized_and_foreign_to_others(world: World) -> None:
    page, other = await world.page("T1"), await world.page("T2")
    session = await world.manager.open(page, "t1", "h1")
    world.manager.owner_ended("h1", "t1")
    assert session.id not in world.manager.live
    ended = refusal(lambda: world.manager.acquire(session.id, world.context(page)))
    assert said(ended) == (ReasonCode.page_context_stale, ENDED, OBSERVE_AGAIN)
    foreign = refusal(lambda: world.manager.acquire(session.id, world.context(page, host="h2")))
    assert said(foreign) == (ReasonCode.invalid_capability, NOT_YOURS, OBSERVE_AGAIN)
    unauthorized = refusal(lambda: world.manager.acquire(session.id, world.context(other)))
    assert unauthorized.code is ReasonCode.invalid_capability
    assert "not authorized" in str(unauthorized)
    await world.manager.settle()
    assert session.closed.is_set()
    await world.manager.close()


async def test_a_turn_ending_closes_only_that_turns_sessions_and_a_host_ending_all_of_its_own(world: World) -> None:
    a, b, c = await world.page("TA"), await world.page("TB"), await world.page("TC")
    first = await world.manager.open(a, "t1", "h1")
    second = await world.manager.open(b, "t2", "h1")
    foreign = await world.manager.open(c, "t1", "h2")
    world.manager.owner_ended("h1", "t1")
    assert first.invalid == (ReasonCode.page_context_stale, ENDED, OBSERVE_AGAIN)
    assert (second.invalid, foreign.invalid) == (None, None)
    world.manager.owner_ended("h1", None)
    assert second.invalid == (ReasonCode.page_context_stale, ENDED, OBSERVE_AGAIN)
    assert foreign.invalid is None
    assert set(world.manager.live) == {foreign.id}
    await world.manager.close()


async def test_a_target_found_lost_without_an_event_is_target_lost_at_the_next_call(world: World) -> None:
    page = await world.page("T1")
    session = await world.manager.open(page, "t1", "h1")
    await world.registry.refresh([page.registry_page_id])  # the browser lists no target: lost, no event
    assert session.invalid is None
    refused = refusal(lambda: world.manager.acquire(session.id, world.context(page)))
    assert said(refused) == (ReasonCode.target_lost, TARGET_LOST_MESSAGE, None)
    assert session.id not in world.manager.live
    assert session.busy == 0
    await world.manager.close()


async def test_a_target_swapped_under_the_page_is_target_lost_even_if_nothing_reported_it(world: World) -> None:
    page = await world.page("T1")
    session = await world.manager.open(page, "t1", "h1")
    page.cdp_target_id = "T9"
    refused = refusal(lambda: world.manager.check_binding(session))
    assert said(refused) == (ReasonCode.target_lost, TARGET_LOST_MESSAGE, None)
    await world.manager.close()


async def test_disabled_access_is_page_access_disabled_before_the_revision_it_also_bumps(world: World) -> None:
    page = await world.page("T1")
    session = await world.manager.open(page, "t1", "h1")
    world.registry.set_access(page.registry_page_id, False)
    assert session.id not in world.manager.live
    refused = refusal(lambda: world.manager.acquire(session.id, world.context(page)))
    assert said(refused) == (ReasonCode.page_access_disabled, "the user disabled access to this Page", None)
    await world.manager.settle()
    assert session.closed.is_set()
    await world.manager.close()


async def test_a_hidden_page_is_page_context_stale_with_a_message_that_says_to_observe_again(world: World) -> None:
    page, other = await world.page("T1"), await world.page("T2")
    session = await world.manager.open(page, "t1", "h1")
    bystander = await world.manager.open(other, "t1", "h1")
    world.registry.hide(page.registry_page_id)
    assert session.id not in world.manager.live  # ended when hidden, not only at the next call
    refused = refusal(lambda: world.manager.acquire(session.id, world.context(page)))
    assert said(refused) == (
        ReasonCode.page_context_stale,
        "the Page was hidden, moved to another group or transferred; observe it again",
        None,
    )
    assert bystander.invalid is None
    assert bystander.id in world.manager.live
    await world.manager.close()


async def test_a_closed_or_replaced_target_ends_only_its_pages_sessions_as_target_lost(world: World) -> None:
    page, other, third = await world.page("T1"), await world.page("T2"), await world.page("T3")
    session = await world.manager.open(page, "t1", "h1")
    bystander = await world.manager.open(other, "t1", "h1")
    replaced = await world.manager.open(third, "t1", "h1")
    assert {k[0] for k in world.manager._opening} == {p.registry_page_id for p in (page, other, third)}
    world.cdp.emit("Target.targetDestroyed", {"targetId": "T1"})
    assert session.invalid == (ReasonCode.target_lost, TARGET_LOST_MESSAGE, None)
    assert (page.registry_page_id, "b1") not in world.manager._opening
    assert (other.registry_page_id, "b1") in world.manager._opening
    world.registry.replace_target(third.registry_page_id, "T3b", 2)
    assert replaced.invalid == (ReasonCode.target_lost, TARGET_LOST_MESSAGE, None)
    assert (third.registry_page_id, "b1") in world.manager._opening  # replaced, not lost: the handle lives on
    await world.page("T4")  # a newly registered Page changes no binding
    assert bystander.invalid is None
    assert set(world.manager.live) == {bystander.id}
    lost = refusal(lambda: world.manager.acquire(session.id, world.context(page)))
    assert said(lost) == (ReasonCode.target_lost, TARGET_LOST_MESSAGE, None)
    await world.manager.close()


async def test_a_session_invalidated_during_a_call_closes_when_the_call_ends_never_under_it(world: World) -> None:
    page = await world.page("T1")
    session = await world.manager.open(page, "t1", "h1")
    world.manager.acquire(session.id, world.context(page))
    world.manager.acquire(session.id, world.context(page))
    world.manager.invalidate(session, ReasonCode.target_lost, "gone", "look again")
    assert session.id not in world.manager.live
    assert world.manager.ended[session.id].hint == "look again"
    assert session.ended.is_set()
    world.manager.release(session)
    await world.manager.settle()
    assert not session.closing
    world.manager.release(session)
    await world.manager.settle()
    assert session.closing
    assert session.closed.is_set()
    tomb = world.manager.ended[session.id]
    assert (tomb.handle, tomb.owner, tomb.code, tomb.message) == (
        page.registry_page_id,
        ("h1", "t1"),
        ReasonCode.target_lost,
        "gone",
    )
    await world.manager.close()


async def test_an_idle_session_invalidated_closes_at_once(world: World) -> None:
    page = await world.page("T1")
    session = await world.manager.open(page, "t1", "h1")
    world.manager.invalidate(session, ReasonCode.stale_observation, "why", None)
    await world.manager.settle()
    assert session.closed.is_set()
    assert session.backend.closed
    await world.manager.close()


async def test_a_write_spends_the_frames_of_the_pages_other_sessions_only(world: World) -> None:
    page, other = await world.page("T1"), await world.page("T2")
    writer = await world.manager.open(page, "t1", "h1")
    elsewhere = await world.manager.open(other, "t1", "h1")
    world.settings.backend = "b2"
    sibling = await world.manager.open(page, "t1", "h1")
    assert sibling is not writer
    for session in (writer, elsewhere, sibling):
        session.new_frame(Snapshot("u", "t", "", ()), "interactive")
    world.manager.spend_frames_of_others(writer)
    assert sibling.latest is None
    assert writer.latest is not None
    assert elsewhere.latest is not None
    await world.manager.close()


async def test_tombstones_are_bounded_and_the_oldest_go_first(world: World) -> None:
    page = await world.page("T1")
    session = await world.manager.open(page, "t1", "h1")
    world.manager.live.clear()
    first = session.id
    for i in range(TOMBSTONES + 1):
        session.id = f"cs_{i}"
        world.manager._end(session, ReasonCode.stale_observation, "m")
    assert len(world.manager.ended) == TOMBSTONES
    assert "cs_0" not in world.manager.ended
    assert f"cs_{TOMBSTONES}" in world.manager.ended
    assert first not in world.manager.ended
    await world.manager.close()


def test_a_session_keeps_the_first_reason_it_was_invalidated_for_and_drops_its_frame() -> None:
    session = bare_session()
    session.new_frame(Snapshot("u", "t", "", ()), "interactive")
    session.invalidate(ReasonCode.target_lost, "first", "hint")
    assert session.latest is None
    assert session.ended.is_set()
    session.invalidate(ReasonCode.stale_observation, "second")
    assert session.invalid == (ReasonCode.target_lost, "first", "hint")


RUNTIME_REF = re.compile(r"[a-z]{3}[0-9]+")
"""A ref the runtime draws: a random three-letter prefix and the element's position."""


def elements(*names: str) -> tuple[Element, ...]:
    return tuple(Element(f"e{i}", "button", name) for i, name in enumerate(names, 1))


def test_each_frame_is_numbered_and_keeps_what_it_was_made_from() -> None:
    session = bare_session()
    snapshot = Snapshot("u", "t", "", elements("A", "B"))
    frame = session.new_frame(snapshot, "interactive", ("t1", 3), document="d")
    assert frame.id == f"{session.id}-f1"
    assert session.latest is frame
    assert (frame.detail, frame.upstream, frame.point_request, frame.document, frame.delta) == (
        "interactive",
        snapshot,
        ("t1", 3),
        "d",
        None,
    )
    assert [e.name for e in frame.snapshot.elements] == ["A", "B"]
    assert all(frame.element(e.ref) is not None for e in frame.snapshot.elements)
    assert session.new_frame(snapshot, "full").id == f"{session.id}-f2"


def test_refs_carry_over_only_from_a_frame_of_the_same_known_document() -> None:
    session = bare_session()
    first = session.new_frame(Snapshot("u", "t", "", elements("A", "B")), "interactive", document="d")
    old = [e.ref for e in first.snapshot.elements]
    grown = Snapshot("u", "t", "", elements("A", "B", "C"))
    same = session.new_frame(grown, "interactive", document="d", since=first)
    assert same.delta is not None
    assert [e.ref for e in same.snapshot.elements][:2] == old
    assert same.delta.added == {2}
    assert all(RUNTIME_REF.fullmatch(e.ref) for e in same.snapshot.elements)
    assert same.snapshot.elements[2].ref[:3] not in {r[:3] for r in old}
    for document in ("other", None):
        fresh = session.new_frame(grown, "interactive", document=document, since=same)
        assert fresh.delta is None
        assert all(RUNTIME_REF.fullmatch(e.ref) for e in fresh.snapshot.elements)
        assert not {e.ref for e in fresh.snapshot.elements} & {e.ref for e in same.snapshot.elements}
    unknown_before = session.new_frame(grown, "interactive", document=None)
    after = session.new_frame(grown, "interactive", document=None, since=unknown_before)
    assert after.delta is None
