"""Failure honesty: an empty assertion, a stale frame, a timeout and a lost target never come back as success, and
each gets its own reason code. (A cancel during act is proven from the server's side, over stdio and streamable
HTTP, in `suites/reliability/test_cancellation.py`.)

Each case has its negative control: the same scenario and the same check (`assert_not_success`) run against the
real runtime with one part broken in the suite (`suites/honesty/variants.py`) so that it reports that case's refusal
as success, and the check must catch it.
"""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from fixtures_sites.server import FixtureServer
from lab.workspace import Workspace
from runtime.models import ComputerUseResult
from suites.harness import Agent, Desk, other_backend, ref_of, second_agent
from suites.honesty.variants import report_success_for


def assert_not_success(result: ComputerUseResult, code: str) -> None:
    assert result.status != "ok", f"reported success: {result}"
    assert result.verified is not True
    assert result.reason_code == code, result
    assert result.hint


EMPTY_OR_UNKNOWN: tuple[dict[str, object], ...] = (
    {"type": "all_of", "of": []},
    {"type": "any_of", "of": []},
    {"type": "text_present", "text": ""},
    {"type": "looks_done"},
)


async def verify_empty_assertions(agent: Agent) -> list[ComputerUseResult]:
    seen = await agent.observe(page="left")
    return [await agent.verify(seen, **assertion) for assertion in EMPTY_OR_UNKNOWN]


@pytest.mark.req("honesty:empty-assertion", "reason:invalid_arguments")
async def test_an_empty_or_unknown_assertion_is_invalid_arguments_never_verified(one_page_desk, agent: Agent) -> None:
    await one_page_desk("/dom_form/")
    for result in await verify_empty_assertions(agent):
        assert_not_success(result, "invalid_arguments")


@pytest.mark.negative_control
@pytest.mark.req("honesty:empty-assertion")
async def test_the_honesty_check_catches_a_runtime_that_verifies_an_empty_assertion(
    one_page_desk, agent: Agent
) -> None:
    desk: Desk = await one_page_desk("/dom_form/")
    report_success_for(desk.runtime, "invalid_arguments")
    results = await verify_empty_assertions(agent)
    for result in results:
        with pytest.raises(AssertionError, match="reported success"):
            assert_not_success(result, "invalid_arguments")


async def verify_what_does_not_hold(agent: Agent) -> ComputerUseResult:
    seen = await agent.observe(page="left")
    return await agent.verify(seen, type="text_present", text="Your order has shipped")


@pytest.mark.req("honesty:verification-failed", "reason:verification_failed")
async def test_an_assertion_that_does_not_hold_is_verification_failed(one_page_desk, agent: Agent) -> None:
    await one_page_desk("/dom_form/")
    result = await verify_what_does_not_hold(agent)
    assert_not_success(result, "verification_failed")
    assert result.failures
    assert "absent" in result.failures[0]


@pytest.mark.negative_control
@pytest.mark.req("honesty:verification-failed")
async def test_the_honesty_check_catches_a_runtime_that_verifies_an_assertion_that_does_not_hold(
    one_page_desk, agent: Agent
) -> None:
    desk: Desk = await one_page_desk("/dom_form/")
    report_success_for(desk.runtime, "verification_failed")
    with pytest.raises(AssertionError, match="reported success"):
        assert_not_success(await verify_what_does_not_hold(agent), "verification_failed")


async def act_on_stale_frames(agent: Agent) -> list[ComputerUseResult]:
    """Type (the frame advances), then click with the spent frame, then with a ref the latest frame lacks."""
    first = await agent.observe(page="left")
    name = ref_of(first, '"Full name"')
    typed = await agent.act(first, type="type", ref=name, text="Ada")
    assert typed.status == "ok", typed
    assert typed.frame_id != first.frame_id
    save = ref_of(first, '"Save and continue"')
    return [await agent.act(first, type="click", ref=save), await agent.act(typed, type="click", ref="e99999")]


@pytest.mark.req("honesty:stale-frame", "reason:stale_observation", "lifecycle:frame-advances-after-write")
async def test_acting_on_a_stale_frame_is_stale_observation_and_writes_nothing(
    one_page_desk, agent: Agent, fixture_server: FixtureServer
) -> None:
    await one_page_desk("/dom_form/")
    for result in await act_on_stale_frames(agent):
        assert_not_success(result, "stale_observation")
    assert fixture_server.ledger.writes() == []


@pytest.mark.negative_control
@pytest.mark.req("honesty:stale-frame")
async def test_the_honesty_check_catches_a_runtime_that_reports_an_act_on_a_stale_frame_as_done(
    one_page_desk, agent: Agent
) -> None:
    desk: Desk = await one_page_desk("/dom_form/")
    report_success_for(desk.runtime, "stale_observation")
    for result in await act_on_stale_frames(agent):
        with pytest.raises(AssertionError, match="reported success"):
            assert_not_success(result, "stale_observation")


async def navigate_to_a_held_page(
    desk: Desk, agent: Agent, server: FixtureServer
) -> tuple[ComputerUseResult, ComputerUseResult]:
    """Navigate to a page whose answer the fixture server holds past the act bound, and let it go once the act has
    answered. Returns (the frame the act carried, the act's answer)."""
    desk.runtime.service.settings.act_timeout = 3.0
    seen = await agent.observe(page="left")
    held = server.stall("/stall/slow-page")
    result = await agent.act(seen, type="navigate", url=server.url("/stall/slow-page"))
    assert held.holding  # the answer was still held when the runtime answered: this really was a timeout
    held.release(text="<title>late</title>", content_type="text/html")
    return seen, result


@pytest.mark.req("honesty:timeout", "reason:timeout")
async def test_an_action_that_does_not_finish_in_time_is_timeout(
    one_page_desk, agent: Agent, fixture_server: FixtureServer
) -> None:
    desk: Desk = await one_page_desk("/stall/")
    seen, result = await navigate_to_a_held_page(desk, agent, fixture_server)
    assert_not_success(result, "timeout")
    again = await agent.act(seen, type="navigate", url=fixture_server.url("/dom_form/"))
    assert_not_success(again, "stale_observation")  # the frame was spent: observe before acting again


@pytest.mark.req("concurrency:write-lease", "reason:timeout")
async def test_a_second_session_cannot_write_while_the_first_holds_the_pages_write_lease(
    one_page_desk, agent: Agent, fixture_server: FixtureServer
) -> None:
    desk: Desk = await one_page_desk("/stall/")
    desk.runtime.service.settings.lease_timeout = 1.0
    first = await agent.observe(page="left")
    # Another host's turn on the Page after the backend setting changed: a second live session on it (there is one
    # per Page and backend).
    other_backend(desk)
    other = desk.runtime.new_host().start_turn([desk.handle("A")])
    async with second_agent(desk) as client:
        second = await client.call(await other.provider_request(), command="observe", page=desk.handle("A"))
        assert second.computer_session_id != first.computer_session_id
        held = fixture_server.stall("/stall/write")
        writing = asyncio.ensure_future(agent.act(first, type="click", ref=ref_of(first, '"Submit expense"')))
        await held.started()
        action = {"type": "click", "ref": ref_of(second, "button")}
        waited = await client.call(
            await other.provider_request(),
            command="act",
            computer_session_id=second.computer_session_id,
            frame_id=second.frame_id,
            action=action,
        )
        assert_not_success(waited, "timeout")
        held.release()
        await writing
    assert len(fixture_server.ledger.writes()) == 1


@pytest.mark.req("honesty:target-lost", "lifecycle:target-crashed", "reason:target_lost")
async def test_a_crashed_page_is_target_lost_for_act_and_verify(
    one_page_desk, agent: Agent, workspace: Workspace
) -> None:
    desk: Desk = await one_page_desk("/dom_form/")
    seen = await agent.observe(page="left")
    crashed = workspace.cdp.wait_for_event(
        "Target.targetCrashed", predicate=lambda p: p["targetId"] == desk.target("A")
    )
    await workspace.cdp.send("Target.setDiscoverTargets", {"discover": True})
    session = (await workspace.cdp.send("Target.attachToTarget", {"targetId": desk.target("A"), "flatten": True}))[
        "sessionId"
    ]
    crash = asyncio.ensure_future(workspace.cdp.send("Page.crash", session_id=session))
    await crashed
    crash.cancel()
    with contextlib.suppress(BaseException):
        await crash
    assert_not_success(await agent.act(seen, type="click", ref=ref_of(seen, "button")), "target_lost")
    assert_not_success(await agent.verify(seen, type="title_matches", pattern="."), "target_lost")


async def verify_on_a_closed_page(desk: Desk, agent: Agent, workspace: Workspace) -> ComputerUseResult:
    seen = await agent.observe(page="left")
    await workspace.close(desk.labs["A"])
    return await agent.verify(seen, type="title_matches", pattern=".")


@pytest.mark.req("honesty:target-lost", "lifecycle:target-closed", "reason:target_lost")
async def test_a_closed_page_is_target_lost(one_page_desk, agent: Agent, workspace: Workspace) -> None:
    desk: Desk = await one_page_desk("/dom_form/")
    assert_not_success(await verify_on_a_closed_page(desk, agent, workspace), "target_lost")


@pytest.mark.negative_control
@pytest.mark.req("honesty:target-lost")
async def test_the_honesty_check_catches_a_runtime_that_verifies_on_a_closed_page(
    one_page_desk, agent: Agent, workspace: Workspace
) -> None:
    desk: Desk = await one_page_desk("/dom_form/")
    report_success_for(desk.runtime, "target_lost")
    result = await verify_on_a_closed_page(desk, agent, workspace)
    with pytest.raises(AssertionError, match="reported success"):
        assert_not_success(result, "target_lost")


@pytest.mark.negative_control
@pytest.mark.req("honesty:timeout")
async def test_the_honesty_check_catches_a_runtime_that_reports_a_timeout_as_done(
    one_page_desk, agent: Agent, fixture_server: FixtureServer
) -> None:
    desk: Desk = await one_page_desk("/stall/")
    report_success_for(desk.runtime, "timeout")
    _, result = await navigate_to_a_held_page(desk, agent, fixture_server)
    with pytest.raises(AssertionError, match="reported success"):
        assert_not_success(result, "timeout")
