"""Visual limits: ordinary DOM flows take 0 screenshots; a canvas observation takes at most 1, and its point is
good for the next request only.

The number of screenshots is the runtime's own property too: every observe, act and verify result reports the
session's running count (`screenshots`), and the proofs check it against the `Page.captureScreenshot` commands the
tap saw reach the session's Page. A screenshot the runtime took without counting it breaks the equality.
"""

from __future__ import annotations

import json

import pytest

from fixtures_sites.scenarios import canvas
from fixtures_sites.server import FixtureServer
from lab.tap import CDPTap
from runtime.backend import Backend, BackendConfig, Snapshot
from runtime.commands import observe
from runtime.computer_session import ComputerSession
from runtime.models import ComputerUseResult
from runtime.service import BackendFactory
from suites.harness import Agent, Desk, ref_of


def screenshots(tap: CDPTap) -> int:
    return tap.count(category="screenshot")


def assert_no_screenshots(tap: CDPTap) -> None:
    taken = screenshots(tap)
    assert taken == 0, f"{taken} screenshots in a DOM flow"


def assert_runtime_counts_every_screenshot(result: ComputerUseResult, tap: CDPTap, target: str) -> None:
    """The session's count in the runtime's result equals the captures that reached its Page (the tap's count)."""
    taken = tap.count(target=target, method="Page.captureScreenshot")
    assert result.screenshots == taken, (
        f"the runtime reports {result.screenshots} screenshots; its Page received {taken} Page.captureScreenshot"
    )


def screenshot_on_every_snapshot(factory: BackendFactory) -> BackendFactory:
    """A broken backend for the count's negative control: its snapshot also takes the upstream screenshot, past
    the runtime's count (the way an upstream that screenshots on its own would)."""

    def make(config: BackendConfig) -> Backend:
        backend = factory(config)
        snapshot = backend.snapshot

        async def snapshot_and_screenshot() -> Snapshot:
            await backend.screenshot()
            return await snapshot()

        backend.snapshot = snapshot_and_screenshot  # type: ignore[method-assign]
        return backend

    return make


async def dom_flow(agent: Agent) -> ComputerUseResult:
    seen = await agent.observe(page="left")
    seen = await agent.act(seen, type="type", ref=ref_of(seen, '"Full name"'), text="Grace Hopper")
    seen = await agent.act(seen, type="select", ref=ref_of(seen, "combobox", '"Country"'), values=["Japan"])
    seen = await agent.act(seen, type="click", ref=ref_of(seen, '"This is a gift"'))
    assert seen.status == "ok", seen
    checked = await agent.verify(
        seen, type="element_state", role="checkbox", name="This is a gift", state="checked", expected=True
    )
    assert checked.verified is True, checked
    return checked


@pytest.mark.req(
    "visual:dom-zero-screenshots",
    "visual:runtime-screenshot-count",
    "action:type",
    "action:select",
    "action:click",
    "verify:element-state",
)
async def test_a_dom_form_flow_takes_no_screenshot_and_the_runtime_reports_none(
    one_page_desk, agent: Agent, tap: CDPTap
) -> None:
    desk: Desk = await one_page_desk("/dom_form/")
    last = await dom_flow(agent)
    assert_no_screenshots(tap)
    assert last.screenshots == 0, last
    assert_runtime_counts_every_screenshot(last, tap, desk.target("A"))


@pytest.mark.req(
    "visual:canvas-one-screenshot", "visual:runtime-screenshot-count", "action:point-click", "writes:at-most-one"
)
async def test_a_canvas_observation_takes_one_screenshot_the_runtime_counts_and_its_point_lands(
    one_page_desk, agent: Agent, tap: CDPTap, fixture_server: FixtureServer
) -> None:
    desk: Desk = await one_page_desk("/canvas/?seat=17")
    seen = await agent.observe(page="left", detail="visual")
    assert seen.image
    assert screenshots(tap) == 1
    assert seen.screenshots == 1, seen
    assert_runtime_counts_every_screenshot(seen, tap, desk.target("A"))
    box = await desk.workspace.evaluate(
        desk.labs["A"], "JSON.stringify(document.querySelector('canvas').getBoundingClientRect())"
    )
    rect = json.loads(box)
    x, y = canvas.target_center(17)
    picked = fixture_server.wait_for_request("/canvas/pick")
    done = await agent.act(seen, type="click", x=rect["x"] + x, y=rect["y"] + y)
    assert done.status == "ok", done
    assert json.loads((await picked).body)["x"] == pytest.approx(x, abs=2)
    assert len(fixture_server.ledger.writes("/canvas/pick")) == 1
    assert screenshots(tap) == 1  # the act's re-observation is text only
    assert done.screenshots == 1, done
    assert_runtime_counts_every_screenshot(done, tap, desk.target("A"))


@pytest.mark.req("visual:point-next-request-only", "reason:stale_observation")
async def test_a_point_is_refused_after_the_request_that_followed_the_screenshot(one_page_desk, agent: Agent) -> None:
    await one_page_desk("/canvas/")
    seen = await agent.observe(page="left", detail="visual")
    assert (await agent.verify(seen, type="title_matches", pattern=".")).verified
    late = await agent.act(seen, type="click", x=10, y=10)
    assert late.reason_code == "stale_observation", late


@pytest.mark.negative_control
@pytest.mark.sabotage("screenshot_always")
@pytest.mark.req("visual:dom-zero-screenshots")
async def test_the_zero_screenshot_check_catches_a_runtime_that_screenshots_every_observation(
    one_page_desk, agent: Agent, tap: CDPTap
) -> None:
    await one_page_desk("/dom_form/")
    await dom_flow(agent)
    with pytest.raises(AssertionError, match="screenshots in a DOM flow"):
        assert_no_screenshots(tap)


@pytest.mark.negative_control
@pytest.mark.req("visual:runtime-screenshot-count")
async def test_the_screenshot_count_check_catches_a_screenshot_the_runtime_did_not_count(
    one_page_desk, agent: Agent, tap: CDPTap, backend: str
) -> None:
    desk: Desk = await one_page_desk("/dom_form/")
    backends = desk.runtime.service.sessions.backends
    backends[backend] = screenshot_on_every_snapshot(backends[backend])
    seen = await agent.observe(page="left")
    assert seen.screenshots == 0, seen  # the runtime asked for none
    with pytest.raises(AssertionError, match="the runtime reports 0 screenshots; its Page received 1 "):
        assert_runtime_counts_every_screenshot(seen, tap, desk.target("A"))


@pytest.mark.negative_control
@pytest.mark.req("visual:runtime-screenshot-count")
async def test_the_screenshot_count_check_catches_a_runtime_that_forgets_to_count_a_visual_observation(
    one_page_desk, agent: Agent, tap: CDPTap, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def screenshot_uncounted(session: ComputerSession) -> bytes:
        return await session.backend.screenshot()

    monkeypatch.setattr(ComputerSession, "screenshot", screenshot_uncounted)
    desk: Desk = await one_page_desk("/canvas/")
    seen = await agent.observe(page="left", detail="visual")
    assert seen.image, seen
    with pytest.raises(AssertionError, match="the runtime reports 0 screenshots; its Page received 1 "):
        assert_runtime_counts_every_screenshot(seen, tap, desk.target("A"))


# -- the screenshot fallback: one viewport screenshot when semantic location is not enough -------------------------

FALLBACK = ("open_claude_chrome",)
WITHOUT_FALLBACK = ("playwright_mcp", "chrome_devtools_mcp")


def assert_one_fallback_screenshot(seen: ComputerUseResult, tap: CDPTap) -> None:
    taken = screenshots(tap)
    assert taken == 1, f"{taken} screenshots for an interactive observation of a drawn surface"
    assert seen.image, seen
    assert seen.screenshots == 1, seen


@pytest.mark.backends(*FALLBACK)
@pytest.mark.req("visual:semantic-fallback", "visual:canvas-one-screenshot", "action:point-click")
async def test_an_interactive_observation_of_a_canvas_carries_one_screenshot_whose_point_lands(
    one_page_desk, agent: Agent, tap: CDPTap, fixture_server: FixtureServer
) -> None:
    desk: Desk = await one_page_desk("/canvas/?seat=17")
    seen = await agent.observe(page="left")
    assert_one_fallback_screenshot(seen, tap)
    assert_runtime_counts_every_screenshot(seen, tap, desk.target("A"))
    rect = json.loads(
        await desk.workspace.evaluate(
            desk.labs["A"], "JSON.stringify(document.querySelector('canvas').getBoundingClientRect())"
        )
    )
    x, y = canvas.target_center(17)
    picked = fixture_server.wait_for_request("/canvas/pick")
    done = await agent.act(seen, type="click", x=rect["x"] + x, y=rect["y"] + y)
    assert done.status == "ok", done
    assert json.loads((await picked).body)["x"] == pytest.approx(x, abs=2)
    assert screenshots(tap) == 1  # the act's re-observation takes none
    again = await agent.observe(computer_session_id=seen.computer_session_id, detail="full")
    assert again.image, again  # one per observation: a new observation of the canvas takes its own
    assert screenshots(tap) == 2


@pytest.mark.backends(*FALLBACK)
@pytest.mark.req("visual:semantic-fallback", "visual:dom-zero-screenshots")
async def test_the_screenshot_fallback_takes_nothing_on_a_dom_page_or_a_canvas_scrolled_out_of_view(
    one_page_desk, agent: Agent, tap: CDPTap
) -> None:
    desk: Desk = await one_page_desk("/canvas/")
    await desk.workspace.evaluate(
        desk.labs["A"], "document.body.style.minHeight = '5000px'; scrollTo(0, 4000); scrollY"
    )
    seen = await agent.observe(page="left")
    assert not seen.image, seen
    assert_no_screenshots(tap)


@pytest.mark.backends(*WITHOUT_FALLBACK)
@pytest.mark.req("visual:semantic-fallback")
async def test_a_backend_without_the_fallback_takes_a_canvas_screenshot_only_when_asked(
    one_page_desk, agent: Agent, tap: CDPTap
) -> None:
    await one_page_desk("/canvas/")
    seen = await agent.observe(page="left")
    assert not seen.image, seen
    assert_no_screenshots(tap)
    asked = await agent.observe(computer_session_id=seen.computer_session_id, detail="visual")
    assert asked.image, asked


@pytest.mark.negative_control
@pytest.mark.backends(*FALLBACK)
@pytest.mark.req("visual:semantic-fallback", "visual:dom-zero-screenshots")
async def test_the_zero_screenshot_check_catches_a_fallback_that_sees_a_drawn_surface_everywhere(
    one_page_desk, agent: Agent, tap: CDPTap, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(observe, "DRAWN_JS", "true")
    await one_page_desk("/dom_form/")
    await dom_flow(agent)
    with pytest.raises(AssertionError, match="screenshots in a DOM flow"):
        assert_no_screenshots(tap)


@pytest.mark.negative_control
@pytest.mark.backends(*FALLBACK)
@pytest.mark.req("visual:semantic-fallback")
async def test_the_one_screenshot_check_catches_a_fallback_blind_to_the_canvas(
    one_page_desk, agent: Agent, tap: CDPTap, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(observe, "DRAWN_JS", "false")
    await one_page_desk("/canvas/")
    seen = await agent.observe(page="left")
    with pytest.raises(AssertionError, match="0 screenshots for an interactive observation of a drawn surface"):
        assert_one_fallback_screenshot(seen, tap)
