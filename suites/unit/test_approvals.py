"""Approvals ("Allow once", `runtime/capability/approval.py`) as pure logic: bound, one-time, expiring, kept small."""

from __future__ import annotations

import pytest

from runtime.capability.approval import MAX_PENDING, Approvals, Binding
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
    with pytest.raises(KeyError):
        approvals.grant(request, "host-2")
    approvals.grant(request, "host-1")
    with pytest.raises(KeyError):
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
