"""A backend failure the backend cannot name (`Failure.upstream`) is `target_lost` when the target is gone, even if
the session gateway has not yet read the end of its own browser connection; on a live Page it stays what it was.

The race this pins (a clean-clone CI run in stop 26): the browser was killed during a held write, @playwright/mcp
answered the runtime's re-observation with an error text none of its known phrases match, and the gateway, whose own
connection had closed at the same moment, had not read that yet. The act came back `stale_observation`. The runtime
now asks the browser itself (`PageProbe.gone`: one browser-level `Target.getTargetInfo` on its own connection).

To make the race certain instead of rare, the gateway's word is held at "alive" and the session's backend read fails
with an unnamed upstream error; Chromium, its killing, the runtime's own connection and the tap are real. Negative
control: a probe that takes only the gateway's word (the runtime before the change) is caught by the same check.
"""

from __future__ import annotations

import pytest

from runtime.assembly import Runtime
from runtime.backend import BackendError, Failure, Snapshot
from runtime.gateway import ScopedGateway
from runtime.models import ComputerUseResult
from runtime.reading.probe import PageProbe
from suites.harness import Agent, Desk
from suites.reliability.conftest import ACT_LIMIT, PrivateBrowser, Recorded, assert_outcome, within

pytestmark = pytest.mark.req("honesty:target-lost", "reason:target_lost")


@pytest.fixture
def runtime(faults_runtime: Runtime) -> Runtime:
    """The suites' `desk` and `agent` on the reliability runtime, whose backends are recorded."""
    return faults_runtime


async def unnamed_failure() -> Snapshot:
    raise BackendError(Failure.upstream, "an error text the backend has no phrase for")


def gateway_not_told(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every session gateway says the target lives, as one that has not read its connection's end yet would."""
    monkeypatch.setattr(ScopedGateway, "lost", property(lambda self: None))


async def observed(desk: Desk, agent: Agent) -> str:
    await desk.open("A", "/dom_form/", desk.workspace.column(0, 3))
    await desk.open("chat", "/chat/", desk.workspace.column(1, 3), chat=True)
    desk.authorize("A")
    seen = await agent.observe(page="left")
    assert seen.status == "ok", seen
    return seen.computer_session_id or ""


async def observes_after_the_browser_died(
    private_browser: PrivateBrowser, recorded: Recorded, monkeypatch: pytest.MonkeyPatch
) -> list[ComputerUseResult]:
    """Two observes of the session, after its backend's read fails unnamed and Chromium is killed (the second finds
    the session over, without asking anyone)."""
    desk, agent = private_browser.desk, private_browser.agent
    session = await observed(desk, agent)
    request = await desk.request()  # the model request running when the browser dies
    monkeypatch.setattr(recorded.only().backend, "snapshot", unnamed_failure)
    gateway_not_told(monkeypatch)
    private_browser.chromium.kill()
    return [
        await within(agent.call(request, command="observe", computer_session_id=session), ACT_LIMIT, what)
        for what in ("observe", "observe again")
    ]


async def test_an_unnamed_backend_failure_after_the_browser_died_is_target_lost_before_the_gateway_knows(
    private_browser: PrivateBrowser, recorded: Recorded, monkeypatch: pytest.MonkeyPatch
) -> None:
    for seen in await observes_after_the_browser_died(private_browser, recorded, monkeypatch):
        assert_outcome(seen, "target_lost")


async def gateway_word_only(self: PageProbe) -> bool:
    """Broken on purpose: the target is gone only once the gateway says so (no question to the browser)."""
    return self._target_state() is not None


@pytest.mark.negative_control
async def test_the_lost_check_catches_a_runtime_that_waits_for_the_gateways_word(
    private_browser: PrivateBrowser, recorded: Recorded, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(PageProbe, "gone", gateway_word_only)
    first, _ = await observes_after_the_browser_died(private_browser, recorded, monkeypatch)
    with pytest.raises(AssertionError, match="expected target_lost, got stale_observation"):
        assert_outcome(first, "target_lost")


async def test_an_unnamed_backend_failure_on_a_live_page_stays_stale_observation(
    desk: Desk, agent: Agent, recorded: Recorded, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The other side of the check: it asks the browser, and a Page that answers is not called lost."""
    session = await observed(desk, agent)
    monkeypatch.setattr(recorded.only().backend, "snapshot", unnamed_failure)
    gateway_not_told(monkeypatch)
    seen = await within(agent.call(command="observe", computer_session_id=session), ACT_LIMIT, "observe")
    assert_outcome(seen, "stale_observation")
    monkeypatch.undo()
    again = await within(agent.observe(computer_session_id=session), ACT_LIMIT, "observe once the backend reads")
    assert again.status == "ok", again
