"""Approvals ("Allow once", `runtime/capability/approval.py`) as pure logic: bound, one-time, expiring, kept small."""

from __future__ import annotations

import re

import pytest

from runtime.capability.approval import MAX_FIELD, MAX_PENDING, Approvals, Binding
from suites.harness import Clock

pytestmark = pytest.mark.req("unit:approvals")

BINDING = Binding("host-1", "s1", "f1", '{"type":"click","ref":"e1"}')
CONTROL = 'button "Delete account"'


def offered(approvals: Approvals, binding: Binding = BINDING) -> str:
    request = approvals.offer(binding, "page-1", "delete", CONTROL, "")
    return approvals.grant(request, binding.host)


def test_an_approval_holds_once_for_the_write_it_was_granted_for() -> None:
    approvals = Approvals()
    token = offered(approvals)
    assert approvals.redeem(token, BINDING, "delete", CONTROL)
    assert not approvals.redeem(token, BINDING, "delete", CONTROL)
    assert approvals.pending(BINDING) is None


@pytest.mark.parametrize(
    ("binding", "concept", "control"),
    [
        (Binding("host-2", "s1", "f1", BINDING.action), "delete", CONTROL),
        (Binding("host-1", "s2", "f1", BINDING.action), "delete", CONTROL),
        (Binding("host-1", "s1", "f2", BINDING.action), "delete", CONTROL),
        (Binding("host-1", "s1", "f1", '{"type":"click","ref":"e2"}'), "delete", CONTROL),
        (BINDING, "pay", CONTROL),
        (BINDING, "delete", 'button "Delete everything"'),
    ],
)
def test_an_approval_is_spent_and_refused_by_any_other_write(binding: Binding, concept: str, control: str) -> None:
    approvals = Approvals()
    token = offered(approvals)
    assert not approvals.redeem(token, binding, concept, control)
    assert not approvals.redeem(token, BINDING, "delete", CONTROL)


def test_an_approval_expires_with_the_token_lifetime_and_a_forged_one_holds_nothing() -> None:
    clock = Clock(0.0)
    approvals = Approvals(clock, lifetime=120.0)
    token = offered(approvals)
    clock.now = 120.0
    assert not approvals.redeem(token, BINDING, "delete", CONTROL)
    assert not approvals.redeem("forged", BINDING, "delete", CONTROL)
    assert not approvals.redeem(None, BINDING, "delete", CONTROL)


def test_a_request_is_granted_once_and_only_to_the_host_that_asked() -> None:
    approvals = Approvals()
    request = approvals.offer(BINDING, "page-1", "delete", CONTROL, "")
    refused = re.escape(repr(request.id))  # the host's log names the request it could not grant
    with pytest.raises(KeyError, match=refused):
        approvals.grant(request, "host-2")
    approvals.grant(request, "host-1")
    with pytest.raises(KeyError, match=refused):
        approvals.grant(request, "host-1")


def test_requests_are_kept_one_per_session_and_at_most_max_pending() -> None:
    approvals = Approvals()
    first = approvals.offer(BINDING, "page-1", "delete", CONTROL, "")
    newer = Binding("host-1", "s1", "f2", BINDING.action)
    approvals.offer(newer, "page-1", "delete", CONTROL, "")
    assert approvals.pending(BINDING) is None
    with pytest.raises(KeyError):
        approvals.grant(first, "host-1")
    for n in range(MAX_PENDING + 10):
        approvals.offer(Binding("host-1", f"other-{n}", "f", "{}"), "page-1", "delete", CONTROL, "")
    assert approvals.pending(newer) is None
    assert approvals.pending(Binding("host-1", f"other-{MAX_PENDING + 9}", "f", "{}")) is not None


def test_an_expired_approval_is_forgotten_by_the_next_grant_from_the_moment_it_expired() -> None:
    """Granted approvals are pruned when the next one is granted, so the record holds only approvals that can still
    be redeemed; one is dead from the very moment `clock() == expiry` (`redeem` refuses it then), so it goes then."""
    clock = Clock(0.0)
    approvals = Approvals(clock, lifetime=120.0)
    offered(approvals)
    clock.now = 120.0
    token = offered(approvals, Binding("host-1", "s2", "f1", BINDING.action))
    assert len(approvals._granted) == 1
    assert approvals.redeem(token, Binding("host-1", "s2", "f1", BINDING.action), "delete", CONTROL)


def test_a_request_records_what_the_person_approves_with_page_text_cut_to_max_field() -> None:
    """The console shows the request's control and address (`host/turns.py`): page text, so cut to `MAX_FIELD`;
    the Page handle and the concept are the runtime's own words and kept whole."""
    long_control, long_address = "button " + "x" * 300, "https://shop.test/" + "y" * 300
    request = Approvals().offer(BINDING, "page-7", "payment", long_control, long_address)
    assert (request.binding, request.page, request.concept) == (BINDING, "page-7", "payment")
    assert (request.control, request.commits_to) == (long_control[:MAX_FIELD], long_address[:MAX_FIELD])


def test_requests_of_two_sessions_are_kept_side_by_side_and_spending_one_approval_keeps_the_other() -> None:
    """One request per session, not one in all: each session's person may allow their own write, and redeeming one
    approval forgets only its own request's approvals."""
    approvals = Approvals()
    other = Binding("host-1", "s2", "f1", BINDING.action)
    first = approvals.offer(BINDING, "page-1", "delete", CONTROL, "")
    second = approvals.offer(other, "page-2", "delete", CONTROL, "")
    assert first.id != second.id
    assert (approvals.pending(BINDING), approvals.pending(other)) == (first, second)
    first_token, second_token = approvals.grant(first, "host-1"), approvals.grant(second, "host-1")
    assert approvals.redeem(second_token, other, "delete", CONTROL)
    assert approvals.redeem(first_token, BINDING, "delete", CONTROL)


def test_exactly_max_pending_requests_are_kept() -> None:
    """The bound is `MAX_PENDING` requests, not one fewer: the oldest leaves only when one more arrives."""
    approvals = Approvals()
    bindings = [Binding("host-1", f"s{n}", "f", "{}") for n in range(MAX_PENDING + 1)]
    for binding in bindings[:MAX_PENDING]:
        approvals.offer(binding, "page-1", "delete", CONTROL, "")
    assert approvals.pending(bindings[0]) is not None
    approvals.offer(bindings[MAX_PENDING], "page-1", "delete", CONTROL, "")
    assert approvals.pending(bindings[0]) is None
    assert approvals.pending(bindings[1]) is not None
