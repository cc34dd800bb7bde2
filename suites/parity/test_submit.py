"""`type` with `submit` means the same on every backend: the text, then Enter on that field, as one Action under one
policy read in submit mode, at most one write. Where a backend cannot do both in one upstream call, the runtime types,
checks that the field still has the focus, and presses Enter itself (`runtime/commands/act.py`).

The effect is read by the lab (the page's state through the lab's hands, the write ledger), never from what the
runtime says. Each check has a negative control built here through a named seam (`suites/sabotage.py`): a runtime
that submits twice, one that presses Enter without the focus check, one whose policy reads the act without submit.
A backend refusal of an action's shape (`Failure.unsupported`) is `invalid_arguments` with the adapter's advice, and
the frame stays the latest: the advice works on the next call.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from fixtures_sites.server import FixtureServer
from suites.harness import Agent, Desk, ref_of
from suites.honesty.variants import report_success_for
from suites.parity.ledger import diverges
from suites.proofs import assert_handed_over, assert_no_writes

NOTE = "Leave it with the neighbour at number 12"


def written(server: FixtureServer) -> list[str]:
    return [row.path for row in server.ledger.writes()]


def assert_exactly_one_write(server: FixtureServer, path: str) -> None:
    """One submit, one write: to `path`, and nowhere else."""
    assert written(server) == [path], f"writes for one type with submit: {written(server)}"


async def page_state(desk: Desk, expression: str) -> Any:
    return await desk.workspace.evaluate(desk.labs["A"], expression, await_promise=True)


async def type_a_note_and_submit(agent: Agent, server: FixtureServer) -> tuple[Any, dict[str, str]]:
    """On /submit/: type the courier note with submit; the act's answer and (awaited, bounded) the form it wrote."""
    seen = await agent.observe(page="left")
    saved = server.wait_for_request("/submit/note")  # registered before acting
    result = await agent.act(seen, type="type", ref=ref_of(seen, '"Note for the courier"'), text=NOTE, submit=True)
    return result, (await saved).form()


@pytest.mark.req("action:type-submit", "writes:at-most-one")
async def test_type_with_submit_types_the_field_and_submits_its_form_once_on_the_first_try(
    one_page_desk: Callable[[str], Awaitable[Desk]], agent: Agent, fixture_server: FixtureServer
) -> None:
    desk = await one_page_desk("/submit/")
    result, form = await type_a_note_and_submit(agent, fixture_server)
    assert result.status == "ok", result
    assert await page_state(desk, "document.getElementById('note').value") == NOTE
    assert form["note"] == NOTE
    assert_exactly_one_write(fixture_server, "/submit/note")


@pytest.mark.req("action:type-submit", "writes:at-most-one")
async def test_type_with_submit_adds_a_task_to_the_light_dom_task_app_with_one_write(
    one_page_desk: Callable[[str], Awaitable[Desk]], agent: Agent, fixture_server: FixtureServer
) -> None:
    desk = await one_page_desk("/shadow/light")
    seen = await agent.observe(page="left")
    added = fixture_server.wait_for_request("/shadow/add")  # registered before acting
    result = await agent.act(seen, type="type", ref=ref_of(seen, '"New task"'), text="Pay the rent", submit=True)
    assert result.status == "ok", result
    assert (await added).form()["title"] == "Pay the rent"
    assert "Pay the rent" in await page_state(desk, "document.querySelector('task-app').innerText")
    assert_exactly_one_write(fixture_server, "/shadow/add")


@pytest.mark.negative_control
@pytest.mark.sabotage("submit_twice")
@pytest.mark.req("action:type-submit", "writes:at-most-one")
async def test_the_exactly_once_check_catches_a_runtime_that_submits_twice(
    one_page_desk: Callable[[str], Awaitable[Desk]], agent: Agent, fixture_server: FixtureServer
) -> None:
    await one_page_desk("/submit/")
    second = fixture_server.wait_for_request("/submit/note", count=2)  # registered before acting
    await type_a_note_and_submit(agent, fixture_server)
    await second  # the second submit's write arrived too (bounded): the ledger is read after it
    with pytest.raises(AssertionError, match="writes for one type with submit"):
        assert_exactly_one_write(fixture_server, "/submit/note")


SENSITIVE = {
    "/login/": ("textbox", '"Email or username"', "username"),
    "/evasion/type-submit": ("Reference", "Reference", "reference"),
}
"""A sign-in form, and a form whose Enter confirms a transfer (typing alone is allowed there): page, the field's
ref needles, its id."""


@pytest.mark.parametrize("path", list(SENSITIVE))
@pytest.mark.req("action:type-submit", "policy:type-submit-commits", "policy:login")
async def test_type_with_submit_into_a_sensitive_form_is_needs_user_before_anything_is_typed(
    one_page_desk: Callable[[str], Awaitable[Desk]], agent: Agent, fixture_server: FixtureServer, path: str
) -> None:
    desk = await one_page_desk(path)
    *needles, field = SENSITIVE[path]
    seen = await agent.observe(page="left")
    assert_handed_over(await agent.act(seen, type="type", ref=ref_of(seen, *needles), text="INV-2231", submit=True))
    assert await page_state(desk, f"document.getElementById('{field}').value") == ""  # the policy came first
    assert_no_writes(fixture_server)


@pytest.mark.negative_control
@pytest.mark.sabotage("policy_without_submit")
@pytest.mark.req("policy:type-submit-commits")
async def test_the_no_write_check_catches_a_runtime_whose_policy_reads_type_with_submit_as_type(
    one_page_desk: Callable[[str], Awaitable[Desk]], agent: Agent, fixture_server: FixtureServer
) -> None:
    await one_page_desk("/evasion/type-submit")
    seen = await agent.observe(page="left")
    sent = fixture_server.wait_for_request("/evasion/transfer-now")  # registered before acting
    await agent.act(seen, type="type", ref=ref_of(seen, "Reference"), text="INV-2231", submit=True)
    await sent
    with pytest.raises(AssertionError, match="real writes"):
        assert_no_writes(fixture_server)


async def submit_an_expense_the_server_holds(desk: Desk, agent: Agent, server: FixtureServer) -> Any:
    """On /stall/: type the expense's description with submit while the server holds the form's POST past the act
    bound; the act's answer, once the write has arrived (then the held answer is let go)."""
    desk.runtime.service.settings.act_timeout = 2.0
    seen = await agent.observe(page="left")
    held = server.stall("/stall/write")  # registered before acting
    result = await agent.act(seen, type="type", ref=ref_of(seen, '"Description"'), text="Taxi", submit=True)
    await held.started()  # the write arrived: the submit happened, its answer did not
    held.release(text="<title>Expense submitted</title>", content_type="text/html")
    return result


def assert_timed_out_honestly(result: Any) -> None:
    assert result.status != "ok", f"reported success: {result}"
    assert result.reason_code == "timeout", result
    assert "may have partly happened" in result.message, result


@pytest.mark.req("action:type-submit", "honesty:timeout", "reason:timeout")
async def test_a_type_with_submit_whose_submit_does_not_finish_in_time_is_a_timeout_that_may_have_partly_happened(
    one_page_desk: Callable[[str], Awaitable[Desk]], agent: Agent, fixture_server: FixtureServer
) -> None:
    desk = await one_page_desk("/stall/")
    assert_timed_out_honestly(await submit_an_expense_the_server_holds(desk, agent, fixture_server))
    assert_exactly_one_write(fixture_server, "/stall/write")


@pytest.mark.negative_control
@pytest.mark.req("action:type-submit", "honesty:timeout")
async def test_the_honesty_check_catches_a_runtime_that_reports_a_type_with_submit_cut_short_as_done(
    one_page_desk: Callable[[str], Awaitable[Desk]], agent: Agent, fixture_server: FixtureServer
) -> None:
    desk = await one_page_desk("/stall/")
    report_success_for(desk.runtime, "timeout")
    result = await submit_an_expense_the_server_holds(desk, agent, fixture_server)
    with pytest.raises(AssertionError, match="reported success"):
        assert_timed_out_honestly(result)


def assert_enter_reached_no_other_field(server: FixtureServer) -> None:
    assert "/submit/subscribe" not in written(server), f"Enter went to another field: {written(server)}"


@pytest.mark.req("action:type-submit-focus-moved", "writes:at-most-one")
async def test_type_with_submit_never_presses_enter_on_a_field_the_page_moved_the_focus_to(
    one_page_desk: Callable[[str], Awaitable[Desk]], agent: Agent, fixture_server: FixtureServer, backend: str
) -> None:
    await one_page_desk("/submit/focus-moves")
    seen = await agent.observe(page="left")
    note = ref_of(seen, '"Note for the courier"')
    saved = fixture_server.wait_for_request("/submit/note")  # registered before acting
    result = await agent.act(seen, type="type", ref=note, text=NOTE, submit=True)
    if diverges("action:type-submit-focus-moved", backend) is None:
        # The upstream presses Enter on the field itself (it focuses the field first): the note's form is submitted.
        assert result.status == "ok", result
        await saved
        assert_enter_reached_no_other_field(fixture_server)
        assert_exactly_one_write(fixture_server, "/submit/note")
        return
    assert result.status == "failed", result
    assert result.reason_code == "stale_observation", result
    assert "Enter was not pressed" in result.message
    assert "moved the focus" in result.message
    assert_enter_reached_no_other_field(fixture_server)
    assert_no_writes(fixture_server)
    # The hint works: observe, then submit with the form's own button.
    assert "form's own button" in (result.hint or "")
    seen = await agent.observe(computer_session_id=seen.computer_session_id)
    assert (await agent.act(seen, type="click", ref=ref_of(seen, "button", '"Save note"'))).status == "ok"
    await saved
    assert_exactly_one_write(fixture_server, "/submit/note")


@pytest.mark.negative_control
@pytest.mark.backends("chrome_devtools_mcp", "open_claude_chrome")
@pytest.mark.sabotage("enter_without_focus_check")
@pytest.mark.req("action:type-submit-focus-moved")
async def test_the_focus_check_catches_a_runtime_that_presses_enter_wherever_the_focus_is(
    one_page_desk: Callable[[str], Awaitable[Desk]], agent: Agent, fixture_server: FixtureServer, backend: str
) -> None:
    await one_page_desk("/submit/focus-moves")
    seen = await agent.observe(page="left")
    subscribed = fixture_server.wait_for_request("/submit/subscribe")  # registered before acting
    await agent.act(seen, type="type", ref=ref_of(seen, '"Note for the courier"'), text=NOTE, submit=True)
    await subscribed
    with pytest.raises(AssertionError, match="Enter went to another field"):
        assert_enter_reached_no_other_field(fixture_server)


@pytest.mark.req("action:press-on-ref", "reason:invalid_arguments")
async def test_an_action_the_backend_cannot_express_is_invalid_arguments_with_advice_that_works_on_the_same_frame(
    one_page_desk: Callable[[str], Awaitable[Desk]], agent: Agent, fixture_server: FixtureServer
) -> None:
    await one_page_desk("/submit/")
    seen = await agent.observe(page="left")
    note = ref_of(seen, '"Note for the courier"')
    refused = await agent.act(seen, type="press", ref=note, key="Enter")
    assert refused.status == "failed", refused
    assert refused.reason_code == "invalid_arguments", refused
    assert "without ref" in (refused.hint or "")
    assert "same frame_id" in (refused.hint or "")
    assert_no_writes(fixture_server)
    # The advice, on the same frame: type into the field (it takes the focus), then press without a ref.
    typed = await agent.act(seen, type="type", ref=note, text=NOTE)
    assert typed.status == "ok", typed
    saved = fixture_server.wait_for_request("/submit/note")  # registered before acting
    assert (await agent.act(typed, type="press", key="Enter")).status == "ok"
    await saved
    assert_exactly_one_write(fixture_server, "/submit/note")
