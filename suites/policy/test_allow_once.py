""" "Allow once": a write handed to the user for its name alone is performed once when the user allows it, and only
that write, on that frame, as the runtime reads it a moment before the input.

The Page is the shadow scenario's light build (`/shadow/light`): "Delete all tasks" POSTs `/shadow/delete-all` (a
write the ledger counts) and is handed over for its name ("delete"); "Remove Buy milk" is handed over for its name
too and removes a task in the page alone, which the lab reads itself (`TASKS`). The host's side is the harness: it
finds the runtime's request (`Host.pending_approval`), mints the approval (`Host.approve`) and sends the same act
again with it (`Agent.act(..., approval=…)`), as the console does when the user presses "Allow once".
"""

from __future__ import annotations

import pytest

from fixtures_sites.server import FixtureServer
from runtime.capability.approval import ApprovalRequest, Approvals, Binding
from runtime.models import Action
from suites.harness import Agent, Desk, Seen, ref_of
from suites.proofs import assert_handed_over, assert_no_writes

TASKS = "document.querySelectorAll('task-item').length"
"""The lab's own reading of how many tasks the app shows (the light build: no shadow roots to cross)."""


def binding_of(desk: Desk, seen: Seen, **action: object) -> Binding:
    """What the host asks the runtime about: the call it just made, as the runtime binds an approval to it."""
    canonical = Action.model_validate(action).model_dump_json(exclude_none=True)
    return Binding(desk.runtime.host.id, seen.computer_session_id or "", seen.frame_id or "", canonical)


async def handed_over_delete(desk: Desk, agent: Agent) -> tuple[Seen, dict[str, object], ApprovalRequest]:
    """Observe the app, ask for "Delete all tasks", and find the request the runtime recorded for the user."""
    seen = await agent.observe(page="left")
    click = {"type": "click", "ref": ref_of(seen, "button", "Delete all tasks")}
    assert_handed_over(await agent.act(seen, **click), "Delete all tasks")
    request = desk.runtime.host.pending_approval(binding_of(desk, seen, **click))
    assert request is not None, "the runtime recorded no request the user could allow"
    return seen, click, request


@pytest.mark.req("policy:allow-once", "policy:sensitive")
async def test_a_write_handed_over_for_its_name_is_performed_once_when_the_user_allows_it(
    one_page_desk, agent: Agent, fixture_server: FixtureServer
) -> None:
    desk: Desk = await one_page_desk("/shadow/light")
    seen, click, request = await handed_over_delete(desk, agent)
    assert_no_writes(fixture_server)
    assert (request.concept, request.control) == ("delete", 'button "Delete all tasks"')
    sent = fixture_server.wait_for_request("/shadow/delete-all")  # registered before acting
    done = await agent.act(seen, approval=desk.runtime.host.approve(request), **click)
    assert done.status == "ok", done
    await sent
    assert [row["path"] for row in fixture_server.ledger.snapshot()["writes"]] == ["/shadow/delete-all"]
    assert await desk.workspace.evaluate(desk.labs["A"], TASKS) == 0


@pytest.mark.req("policy:allow-once")
async def test_an_approval_is_spent_by_its_first_use_and_holds_for_no_other_write_or_frame(
    one_page_desk, agent: Agent, fixture_server: FixtureServer
) -> None:
    desk: Desk = await one_page_desk("/shadow/light")
    seen, click, request = await handed_over_delete(desk, agent)
    host = desk.runtime.host
    remove = {"type": "click", "ref": ref_of(seen, "button", "Remove Buy milk")}
    assert_handed_over(await agent.act(seen, approval=host.approve(request), **remove), "another control")
    # That approval is spent, and so is the request it was for: the user must be asked again.
    assert host.pending_approval(binding_of(desk, seen, **click)) is None
    assert_handed_over(await agent.act(seen, **click))
    request = host.pending_approval(binding_of(desk, seen, **click))
    assert request is not None
    approval = host.approve(request)
    later = await agent.observe(computer_session_id=seen.computer_session_id)  # a newer frame of the same session
    click["ref"] = ref_of(later, "button", "Delete all tasks")
    assert_handed_over(await agent.act(later, approval=approval, **click), "a newer frame")
    assert_no_writes(fixture_server)
    assert await desk.workspace.evaluate(desk.labs["A"], TASKS) == 3


@pytest.mark.req("policy:allow-once", "policy:login")
async def test_a_sign_in_is_never_offered_for_approval(one_page_desk, agent: Agent) -> None:
    desk: Desk = await one_page_desk("/login/")
    seen = await agent.observe(page="left")
    click = {"type": "click", "ref": ref_of(seen, "button", "Sign in")}
    assert_handed_over(await agent.act(seen, **click))
    assert desk.runtime.host.pending_approval(binding_of(desk, seen, **click)) is None


class LooseApprovals(Approvals):
    """Negative control: approvals that hold for whatever write presents them (the write is not compared with the
    one the user allowed)."""

    def __init__(self) -> None:
        super().__init__()
        self.allowed: dict[str, ApprovalRequest] = {}

    def grant(self, request: ApprovalRequest, host: str) -> str:
        token = super().grant(request, host)
        self.allowed[token] = request
        return token

    def redeem(self, token: object, binding: Binding, concept: str, control: str) -> bool:
        allowed = self.allowed.pop(token, None) if isinstance(token, str) else None
        return allowed is not None and super().redeem(token, allowed.binding, allowed.concept, allowed.control)


@pytest.mark.negative_control
@pytest.mark.req("policy:allow-once")
async def test_the_approval_check_catches_a_runtime_whose_approvals_hold_for_any_write(
    one_page_desk, agent: Agent, fixture_server: FixtureServer
) -> None:
    desk: Desk = await one_page_desk("/shadow/light")
    desk.runtime.host.store.approvals = LooseApprovals()
    seen, _, request = await handed_over_delete(desk, agent)
    remove = {"type": "click", "ref": ref_of(seen, "button", "Remove Buy milk")}
    performed = await agent.act(seen, approval=desk.runtime.host.approve(request), **remove)
    with pytest.raises(AssertionError, match="another control not handed to the user"):
        assert_handed_over(performed, "another control")
    assert await desk.workspace.evaluate(desk.labs["A"], TASKS) == 2
