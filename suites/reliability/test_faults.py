"""Faults, live: a renderer crash and a killed browser in the middle of an act, a click that closes its own window,
a click whose handler never returns, and a dialog opened while the page loads. Each ends in a bounded answer with
its own reason code (`target_lost`, `timeout`, `needs_user`), never a hang and never success; no write happens that
the agent did not ask for; and once the fault has ended the session, the session's backend child, gateway and work
dir are gone.

Everything is real: Chromium, the npm MCP servers, the MCP transport (in-process client and server), the fixture
server. The faults themselves come from the lab's side — its own CDP connection crashes a renderer or answers a
dialog, it kills its own private Chromium, its server holds a request the page waits on — never through the runtime.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import pytest

from fixtures_sites.server import FixtureServer, Stall
from lab.cdp import CDPClient, CDPError
from lab.tap import CDPTap
from runtime.assembly import Runtime
from runtime.capability.contexts import ProviderRequest
from runtime.commands.act import Act
from runtime.models import ComputerUseResult
from runtime.reasons import ReasonCode
from runtime.service import ComputerUseService, Parts
from runtime.sessions import Refusal
from suites.harness import Agent, Desk, ref_of, second_agent
from suites.proofs import assert_no_writes
from suites.reliability.conftest import (
    ACT_LIMIT,
    ACT_TIMEOUT,
    CALL_LIMIT,
    OBSERVE_TIMEOUT,
    SLACK,
    PrivateBrowser,
    Recorded,
    Variant,
    assert_outcome,
    assert_released,
    close_if_open,
    crash_renderer,
    open_first_entry,
    within,
)
from suites.sabotage import AnswerDialogs

FORECAST = "/faults/forecast"
"""What "Recalculate forecast" fetches synchronously: held by the server, it hangs the page (`forecast_held`)."""


@pytest.fixture
def runtime(faults_runtime: Runtime) -> Runtime:
    """This module's runtime under the suites' `desk` and `agent`: the reliability bounds and recorded backends."""
    return faults_runtime


def writes_of(server: FixtureServer) -> list[str]:
    return [row.path for row in server.ledger.writes()]


async def submit_and_hold(
    agent: Agent, seen: ComputerUseResult, server: FixtureServer, request: ProviderRequest | None = None
) -> asyncio.Future:
    """Click "Submit expense" and return the pending act once its POST has reached the server and is held there."""
    held = server.stall("/stall/write")
    click = {"type": "click", "ref": ref_of(seen, '"Submit expense"')}
    call = asyncio.ensure_future(
        agent.call(
            request, command="act", computer_session_id=seen.computer_session_id, frame_id=seen.frame_id, action=click
        )
    )
    await held.started()
    assert not call.done(), f"the act answered before the fault: {call.result()}"
    return call


# -- a renderer crash during an act ---------------------------------------------------------------------------------


@pytest.mark.req(
    "honesty:target-lost",
    "lifecycle:target-crashed",
    "reason:target_lost",
    "writes:at-most-one",
    "sessions:resources-end",
)
async def test_a_renderer_crash_during_a_held_write_is_target_lost_and_the_server_keeps_serving_others(
    one_page_desk, agent: Agent, fixture_server: FixtureServer, lab_cdp: CDPClient, recorded: Recorded
) -> None:
    desk: Desk = await one_page_desk("/stall/")
    await desk.open("B", "/dom_form/", desk.workspace.column(2, 3))
    desk.authorize("A", "B")
    seen = await agent.observe(page=desk.handle("A"))
    session = recorded.only()
    act = await submit_and_hold(agent, seen, fixture_server)

    await crash_renderer(lab_cdp, desk.target("A"))

    assert_outcome(await within(act, ACT_LIMIT, "the act on the crashed Page"), "target_lost")
    again = await within(
        agent.call(command="observe", computer_session_id=seen.computer_session_id), CALL_LIMIT, "observe"
    )
    assert_outcome(again, "target_lost")
    assert_outcome(await within(agent.verify(seen, type="title_matches", pattern="."), CALL_LIMIT), "target_lost")
    async with second_agent(desk) as other:
        fine = await within(other.observe(page=desk.handle("B")), CALL_LIMIT, "observing another Page")
    assert '"Save and continue"' in (fine.observation or "")
    assert writes_of(fixture_server) == ["/stall/write"]  # the act's one write, made before the crash; no other
    await assert_released(desk.runtime, session)


class CallsALostPageATimeout(ComputerUseService):
    """A broken rule: a Page that is gone is answered as `timeout`, a code that invites the agent to try again."""

    async def handle(self, args, meta, connection):  # type: ignore[no-untyped-def]
        outcome = await super().handle(args, meta, connection)
        if outcome.result.reason_code is ReasonCode.target_lost:
            outcome.result.reason_code = ReasonCode.timeout
        return outcome


@pytest.mark.negative_control
@pytest.mark.parametrize("runtime_variant", [Variant("lost is timeout", service=CallsALostPageATimeout)], ids=str)
@pytest.mark.req("honesty:target-lost")
async def test_the_target_lost_check_catches_a_runtime_that_calls_a_crashed_page_a_timeout(
    one_page_desk, agent: Agent, fixture_server: FixtureServer, lab_cdp: CDPClient
) -> None:
    desk: Desk = await one_page_desk("/stall/")
    seen = await agent.observe(page="left")
    act = await submit_and_hold(agent, seen, fixture_server)
    await crash_renderer(lab_cdp, desk.target("A"))
    result = await within(act, ACT_LIMIT, "the act on the crashed Page")
    with pytest.raises(AssertionError, match="expected target_lost, got timeout"):
        assert_outcome(result, "target_lost")


# -- the browser killed during an act -------------------------------------------------------------------------------


@pytest.mark.req("honesty:target-lost", "reason:target_lost", "writes:at-most-one", "sessions:resources-end")
async def test_a_browser_killed_during_a_held_write_is_target_lost_for_that_call_and_every_later_one(
    private_browser: PrivateBrowser, fixture_server: FixtureServer, recorded: Recorded
) -> None:
    desk, agent = private_browser.desk, private_browser.agent
    await desk.open("A", "/stall/", desk.workspace.column(0, 3))
    await desk.open("chat", "/chat/", desk.workspace.column(1, 3), chat=True)
    desk.authorize("A")
    request = await desk.request()
    seen = await agent.call(request, command="observe", page="left")
    session = recorded.only()
    act = await submit_and_hold(agent, seen, fixture_server, request)

    private_browser.chromium.kill()

    assert_outcome(await within(act, ACT_LIMIT, "the act when the browser died"), "target_lost")
    session_id, frame = seen.computer_session_id, seen.frame_id
    later = {  # every later call, on tokens of the model request that was running when the browser died
        "observe the session": {"command": "observe", "computer_session_id": session_id},
        "act on it": {
            "command": "act",
            "computer_session_id": session_id,
            "frame_id": frame,
            "action": {"type": "click", "ref": ref_of(seen, '"Refresh balance"')},
        },
        "verify on it": {
            "command": "verify",
            "computer_session_id": session_id,
            "assertion": {"type": "title_matches", "pattern": "."},
        },
        "observe the Page anew": {"command": "observe", "page": "left"},
    }
    for what, arguments in later.items():
        assert_outcome(await within(agent.call(request, **arguments), ACT_LIMIT, what), "target_lost")
    fresh = await within(desk.request(), CALL_LIMIT, "the host's next model request")
    assert_outcome(
        await within(agent.call(fresh, command="observe", page=desk.handle("A")), CALL_LIMIT, "observe"), "target_lost"
    )
    assert writes_of(fixture_server) == ["/stall/write"]
    await assert_released(desk.runtime, session)


# -- a click that closes its window ----------------------------------------------------------------------------------


@pytest.mark.req("honesty:target-lost", "lifecycle:target-closed", "reason:target_lost", "sessions:resources-end")
async def test_a_click_that_closes_its_own_window_is_target_lost_never_a_hang(
    desk: Desk, agent: Agent, fixture_server: FixtureServer, lab_cdp: CDPClient, recorded: Recorded
) -> None:
    page = await open_first_entry(desk, "A", "/faults/", desk.workspace.column(0, 3))
    try:
        await desk.open("chat", "/chat/", desk.workspace.column(1, 3), chat=True)
        desk.authorize("A")
        seen = await agent.observe(page="left")
        session = recorded.only()
        await lab_cdp.send("Target.setDiscoverTargets", {"discover": True})
        closed = lab_cdp.wait_for_event(
            "Target.targetDestroyed", predicate=lambda p: p["targetId"] == page.cdp_target_id
        )
        click = agent.act(seen, type="click", ref=ref_of(seen, '"Finish and close window"'))

        result = await within(click, ACT_LIMIT, "the click that closed the window")
        await closed  # the window really closed: the page's own script did it

        assert_outcome(result, "target_lost")
        assert_outcome(await within(agent.verify(seen, type="title_matches", pattern="."), CALL_LIMIT), "target_lost")
        assert_no_writes(fixture_server)
        await assert_released(desk.runtime, session)
    finally:
        await close_if_open(lab_cdp, page.cdp_target_id)


# -- a click whose handler never returns -----------------------------------------------------------------------------


@contextlib.asynccontextmanager
async def forecast_held(server: FixtureServer) -> AsyncIterator[Stall]:
    """The server holds the forecast the page fetches synchronously on "Recalculate forecast" (registered before the
    click), so the page's main thread answers nothing until the test ends; then it is let go, and the page lives on.
    A held request, not a loop: a hung page that spins a core for the whole bound would take it from every other
    test running beside it."""
    held = server.stall(FORECAST)
    try:
        yield held
    finally:
        held.release()


async def click_into_a_hang(agent: Agent) -> tuple[ComputerUseResult, ComputerUseResult]:
    """Observe the till, click "Recalculate forecast" (its handler never returns); return (observation, answer)."""
    seen = await agent.observe(page="left")
    recalculate = agent.act(seen, type="click", ref=ref_of(seen, '"Recalculate forecast"'))
    return seen, await within(recalculate, ACT_TIMEOUT + SLACK, "the click into a handler that never returns")


@pytest.mark.req("honesty:timeout", "reason:timeout")
async def test_a_click_whose_handler_never_returns_is_timeout_and_every_later_call_is_bounded_too(
    one_page_desk, agent: Agent, fixture_server: FixtureServer
) -> None:
    desk: Desk = await one_page_desk("/faults/")
    settings = desk.runtime.service.settings
    async with forecast_held(fixture_server) as held:
        seen, result = await click_into_a_hang(agent)
        assert_outcome(result, "timeout")
        assert held.holding, "the page is not waiting on its forecast: the act's timeout proves nothing"
        # The Page still answers nothing: every later call on it times out within its own bound.
        settings.observe_timeout = ACT_TIMEOUT
        session_id = seen.computer_session_id
        looked = await within(agent.call(command="observe", computer_session_id=session_id), ACT_TIMEOUT + SLACK)
        assert_outcome(looked, "timeout")
        checked = await within(agent.verify(seen, type="text_present", text="Forecast updated"), ACT_TIMEOUT + SLACK)
        assert_outcome(checked, "timeout")
    settings.observe_timeout = OBSERVE_TIMEOUT
    # Nothing in the runtime or the backend stayed wedged behind the hung calls: the session works again.
    after = await within(agent.observe(computer_session_id=session_id), CALL_LIMIT, "observing once the page answers")
    assert "Recalculate forecast" in (after.observation or "")
    assert_no_writes(fixture_server)


class WaitsForThePage(Act):
    """A broken rule: when an act fails or times out, the runtime waits until the Page answers again before it
    replies (as a runtime that "makes sure" of the Page's state would) — on a hung Page, for ever."""

    async def run(self, session, args, context):  # type: ignore[no-untyped-def]
        try:
            return await super().run(session, args, context)
        except Refusal:
            while True:
                with contextlib.suppress(TimeoutError):
                    await session.probe.text()
                    raise


@pytest.mark.negative_control
@pytest.mark.parametrize("runtime_variant", [Variant("waits for the page", parts=Parts(act=WaitsForThePage))], ids=str)
@pytest.mark.req("honesty:timeout")
async def test_the_bound_check_catches_a_runtime_that_waits_on_a_hung_page_without_bound(
    one_page_desk, agent: Agent, fixture_server: FixtureServer
) -> None:
    await one_page_desk("/faults/")
    async with forecast_held(fixture_server):
        with pytest.raises(AssertionError, match="hung"):
            await click_into_a_hang(agent)


# -- a dialog opened while the page loads ----------------------------------------------------------------------------


async def watch_dialogs(cdp: CDPClient, target_id: str) -> tuple[str, asyncio.Future]:
    """The lab's own session on the Page with Page events on, and a wait for the next dialog registered on it.

    Chromium offers a dialog only to the sessions that listened when it opened: the user's hand (this session)
    must be there first to answer it later."""
    session = (await cdp.send("Target.attachToTarget", {"targetId": target_id, "flatten": True}))["sessionId"]
    await cdp.send("Page.enable", session_id=session)
    return session, cdp.wait_for_event("Page.javascriptDialogOpening", session_id=session)


async def the_user_answers(cdp: CDPClient, session: str, server: FixtureServer) -> None:
    """Answer the dialog as the user would, from the lab's side. Chromium refuses if no dialog is showing, so this
    also proves the dialog was still open: nothing else answered it."""
    answered = server.wait_for_request("/faults/dialog-answered")
    try:
        await cdp.send("Page.handleJavaScriptDialog", {"accept": True}, session_id=session)
    except CDPError as exc:
        raise AssertionError(f"the dialog was no longer open for the user: {exc}") from None
    await answered


def assert_left_to_the_user(result: ComputerUseResult, tap: CDPTap, server: FixtureServer) -> None:
    """Nothing the runtime or its backend sent answered the dialog, the call says `needs_user`, and the page has
    written nothing (it writes the moment its dialog returns)."""
    sent = tap.count(label="runtime", method="Page.handleJavaScriptDialog")
    assert sent == 0, f"the runtime answered the dialog ({sent} Page.handleJavaScriptDialog)"
    assert_outcome(result, "needs_user")
    assert_no_writes(server)


async def navigate_into_a_dialog(
    agent: Agent, seen: ComputerUseResult, url: str, opened: asyncio.Future
) -> ComputerUseResult:
    """The agent navigates the Page to `url`, whose loading opens a dialog; returns the act's (bounded) answer."""
    result = await within(agent.act(seen, type="navigate", url=url), ACT_LIMIT, "navigating into a dialog")
    await opened  # the dialog really opened while the page loaded
    return result


@pytest.mark.parametrize("kind", ["alert", "confirm"])
@pytest.mark.req("policy:dialog", "reason:needs_user")
async def test_a_dialog_opened_while_the_page_loads_is_needs_user_and_stays_for_the_user_to_answer(
    one_page_desk, agent: Agent, fixture_server: FixtureServer, lab_cdp: CDPClient, tap: CDPTap, kind: str
) -> None:
    desk: Desk = await one_page_desk("/faults/")
    seen = await agent.observe(page="left")
    lab_session, opened = await watch_dialogs(lab_cdp, desk.target("A"))

    url = fixture_server.url(f"/faults/dialog-on-load?kind={kind}")
    result = await navigate_into_a_dialog(agent, seen, url, opened)
    looked = await within(agent.call(command="observe", computer_session_id=seen.computer_session_id), CALL_LIMIT)

    assert_left_to_the_user(result, tap, fixture_server)
    assert_left_to_the_user(looked, tap, fixture_server)
    await the_user_answers(lab_cdp, lab_session, fixture_server)
    after = await within(agent.observe(computer_session_id=seen.computer_session_id), CALL_LIMIT)
    assert f"The {kind} was answered" in (after.observation or ""), after.observation
    assert writes_of(fixture_server) == ["/faults/dialog-answered"]  # the user's answer, and only that


@pytest.mark.req("policy:dialog", "reason:timeout")
async def test_a_dialog_already_open_when_the_page_is_first_observed_is_a_bounded_timeout_never_answered(
    one_page_desk, agent: Agent, fixture_server: FixtureServer, lab_cdp: CDPClient, tap: CDPTap
) -> None:
    """Chromium tells only the CDP sessions that were listening when a dialog opened, and a renderer showing one
    answers nothing else, exactly like a renderer stuck in a loop: a session started afterwards cannot tell the
    two apart, so its first observe is a bounded `timeout` — and still nothing answers the dialog."""
    desk: Desk = await one_page_desk("/faults/")
    lab_session, opened = await watch_dialogs(lab_cdp, desk.target("A"))
    await lab_cdp.send(
        "Page.navigate", {"url": fixture_server.url("/faults/dialog-on-load?kind=confirm")}, session_id=lab_session
    )
    await opened

    settings = desk.runtime.service.settings
    settings.observe_timeout = 6.0  # the bound is what is proved; the default would only make the wait longer
    result = await within(agent.call(command="observe", page="left"), CALL_LIMIT, "observing a Page behind a dialog")
    settings.observe_timeout = OBSERVE_TIMEOUT

    assert_outcome(result, "timeout")
    assert tap.count(label="runtime", method="Page.handleJavaScriptDialog") == 0
    assert_no_writes(fixture_server)
    await the_user_answers(lab_cdp, lab_session, fixture_server)
    after = await within(agent.observe(page="left"), CALL_LIMIT, "observing after the user answered")
    assert "The confirm was answered: true" in (after.observation or ""), after.observation


@pytest.mark.negative_control
@pytest.mark.parametrize("runtime_variant", [Variant("answers dialogs", parts=Parts(act=AnswerDialogs))], ids=str)
@pytest.mark.req("policy:dialog")
async def test_the_dialog_check_catches_a_runtime_that_answers_a_dialog_opened_on_load(
    one_page_desk, agent: Agent, fixture_server: FixtureServer, lab_cdp: CDPClient, tap: CDPTap
) -> None:
    desk: Desk = await one_page_desk("/faults/")
    seen = await agent.observe(page="left")
    lab_session, opened = await watch_dialogs(lab_cdp, desk.target("A"))
    url = fixture_server.url("/faults/dialog-on-load?kind=confirm")
    result = await navigate_into_a_dialog(agent, seen, url, opened)
    with pytest.raises(AssertionError, match="the runtime answered the dialog"):
        assert_left_to_the_user(result, tap, fixture_server)
    with pytest.raises(AssertionError, match="no longer open"):
        await the_user_answers(lab_cdp, lab_session, fixture_server)
