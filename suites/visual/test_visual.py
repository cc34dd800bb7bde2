"""Visual limits: ordinary DOM flows take 0 screenshots; a canvas observation takes at most 1, and its point is
good for the next request only.
"""

from __future__ import annotations

import json

import pytest

from fixtures_sites.scenarios import canvas
from fixtures_sites.server import FixtureServer
from lab.tap import CDPTap
from suites.conftest import Agent, Desk, ref_of


def screenshots(tap: CDPTap) -> int:
    return tap.count(category="screenshot")


def assert_no_screenshots(tap: CDPTap) -> None:
    taken = screenshots(tap)
    assert taken == 0, f"{taken} screenshots in a DOM flow"


async def dom_flow(agent: Agent) -> None:
    seen = await agent.observe(page="left")
    seen = await agent.act(seen, type="type", ref=ref_of(seen.observation, '"Full name"'), text="Grace Hopper")
    seen = await agent.act(seen, type="select", ref=ref_of(seen.observation, "combobox", '"Country"'), values=["Japan"])
    seen = await agent.act(seen, type="click", ref=ref_of(seen.observation, '"This is a gift"'))
    assert seen.status == "ok", seen
    checked = await agent.verify(
        seen, type="element_state", role="checkbox", name="This is a gift", state="checked", expected=True
    )
    assert checked.verified is True, checked


@pytest.mark.req("visual:dom-zero-screenshots", "action:type", "action:select", "action:click", "verify:element-state")
async def test_a_dom_form_flow_takes_no_screenshot(single, agent: Agent, tap: CDPTap) -> None:
    await single("/dom_form/")
    await dom_flow(agent)
    assert_no_screenshots(tap)


@pytest.mark.req("visual:canvas-one-screenshot", "action:point-click", "writes:at-most-one")
async def test_a_canvas_observation_takes_one_screenshot_and_its_point_lands(
    single, agent: Agent, tap: CDPTap, fixture_server: FixtureServer
) -> None:
    desk: Desk = await single("/canvas/?seat=17")
    seen = await agent.observe(page="left", detail="visual")
    assert seen.screenshot_attached
    assert screenshots(tap) == 1
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


@pytest.mark.req("visual:point-next-request-only", "reason:stale_observation")
async def test_a_point_is_refused_after_the_request_that_followed_the_screenshot(single, agent: Agent) -> None:
    await single("/canvas/")
    seen = await agent.observe(page="left", detail="visual")
    assert (await agent.verify(seen, type="title_matches", pattern=".")).verified
    late = await agent.act(seen, type="click", x=10, y=10)
    assert late.reason_code == "stale_observation", late


@pytest.mark.negative_control
@pytest.mark.sabotage("screenshot_always")
@pytest.mark.req("visual:dom-zero-screenshots")
async def test_the_zero_screenshot_check_catches_a_runtime_that_screenshots_every_observation(
    single, agent: Agent, tap: CDPTap
) -> None:
    await single("/dom_form/")
    await dom_flow(agent)
    with pytest.raises(AssertionError, match="screenshots in a DOM flow"):
        assert_no_screenshots(tap)
