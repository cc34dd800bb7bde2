"""Every canonical Action does what it says on every backend — or, where the parity ledger declares a divergence for
that backend, is refused with a reason code before anything reaches the Page: never another action instead. A shape
the adapter cannot express is `invalid_arguments` with its advice (observing again would not help).

The expected outcome is read from the ledger, so a declared divergence is pinned both ways: a backend that starts
to perform the action (the divergence is stale) fails here just like one that stops performing a conforming one.
The effect is checked by the lab (the page's own state through the lab's hands, the write ledger, the tap), never
by what the runtime or the backend says.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import pytest

from fixtures_sites.server import FixtureServer
from lab.tap import CDPTap
from runtime.models import ComputerUseResult
from suites.harness import ELEMENT_LINE, Agent, Desk, ref_of
from suites.parity.ledger import diverges


@dataclass(frozen=True)
class Case:
    """One action on one scenario: how to build it from the observation, and the lab's check of its effect."""

    path: str
    action: Callable[[ComputerUseResult, FixtureServer], dict[str, Any]]
    effect: str
    """A JS expression, evaluated in the page by the lab after the act: true when the action took effect."""
    prepare: str = "true"
    """Evaluated (and awaited) before observing: e.g. registering a scroll listener before acting."""
    visual: bool = False
    """Observe with a screenshot first (point actions are valid only right after one)."""
    write: str | None = None
    """The write the action makes where it takes effect: awaited (registered before acting) and counted once."""


def last_ref(seen: ComputerUseResult) -> str:
    """The last element of the observation's first read: far down a long page."""
    return [found.group(2) for line in (seen.observation or "").splitlines() if (found := ELEMENT_LINE.match(line))][-1]


SCROLLED = "window.__scrolled = new Promise(r => addEventListener('scroll', () => r(true), {once: true})); true"

CASES: dict[str, Case] = {
    "action:type-submit": Case(
        "/dom_form/",
        lambda seen, server: {
            "type": "type",
            "ref": ref_of(seen, '"Full name"'),
            "text": "Ada",
            "submit": True,
        },
        "location.pathname === '/dom_form/submit' || document.getElementById('full_name')?.value === 'Ada'",
        write="/dom_form/submit",
    ),
    "action:type-multiline": Case(
        "/dom_form/",
        lambda seen, server: {
            "type": "type",
            "ref": ref_of(seen, '"Delivery notes"'),
            "text": "Ring\ntwice",
        },
        "document.getElementById('notes').value === 'Ring\\ntwice'",
    ),
    "action:select-by-value": Case(
        "/dom_form/",
        lambda seen, server: {
            "type": "select",
            "ref": ref_of(seen, "combobox", '"Country"'),
            "values": ["jp"],
        },
        "document.getElementById('country').value === 'jp'",
    ),
    "action:scroll-without-ref": Case(
        "/catalogue/", lambda seen, server: {"type": "scroll", "direction": "down"}, "scrollY > 0", prepare=SCROLLED
    ),
    "action:press-on-ref": Case(
        "/dom_form/",
        lambda seen, server: {"type": "press", "ref": ref_of(seen, '"Full name"'), "key": "Tab"},
        "document.activeElement && document.activeElement.id === 'email'",
    ),
    "action:point-scroll": Case(
        "/catalogue/",
        lambda seen, server: {"type": "scroll", "x": 400, "y": 300, "direction": "down"},
        "scrollY > 0",
        prepare=SCROLLED,
        visual=True,
    ),
    "action:press": Case(
        "/dom_form/",
        lambda seen, server: {"type": "press", "key": "Tab"},
        "document.activeElement !== null && document.activeElement !== document.body",
    ),
    "action:scroll": Case(
        "/catalogue/",
        lambda seen, server: {"type": "scroll", "ref": last_ref(seen), "direction": "down"},
        "scrollY > 0",
        prepare=SCROLLED,
    ),
    "action:navigate": Case(
        "/dom_form/",
        lambda seen, server: {"type": "navigate", "url": server.url("/catalogue/")},
        "location.pathname === '/catalogue/'",
    ),
}


REFUSED_UPSTREAM = frozenset({"action:select-by-value"})
"""Divergences the upstream itself refuses once asked (the adapter cannot tell in advance); the others are refused by
the adapter, which cannot express the action (`Failure.unsupported`)."""


async def page_state(desk: Desk, expression: str) -> Any:
    return await desk.workspace.evaluate(desk.labs["A"], expression, await_promise=True)


@pytest.mark.parametrize("requirement", [pytest.param(r, marks=pytest.mark.req(r)) for r in CASES])
async def test_an_action_takes_effect_or_is_refused_before_reaching_the_page_where_the_ledger_says_it_diverges(
    one_page_desk: Callable[[str], Awaitable[Desk]],
    agent: Agent,
    backend: str,
    tap: CDPTap,
    fixture_server: FixtureServer,
    requirement: str,
) -> None:
    case = CASES[requirement]
    desk = await one_page_desk(case.path)
    await page_state(desk, case.prepare)
    seen = await agent.observe(page="left", detail="visual" if case.visual else "interactive")
    reason = diverges(requirement, backend)
    written = fixture_server.wait_for_request(case.write) if case.write and reason is None else None
    before = tap.count(label="runtime", category=("input", "write"))
    result = await agent.act(seen, **case.action(seen, fixture_server))
    if reason is None:
        assert result.status == "ok", result
        assert result.frame_id not in (None, seen.frame_id)  # the runtime re-observed: the answer is the new frame
        if written is not None:
            await written
            assert len(fixture_server.ledger.writes(case.write)) == 1
        if case.prepare == SCROLLED:
            await page_state(desk, "window.__scrolled")  # registered before acting; bounded by the lab's CDP timeout
        assert await page_state(desk, case.effect), f"{requirement} on {backend}: no effect ({case.effect})"
        return
    # Declared divergence: a clear failure with a reason code and a hint; nothing reached the Page.
    assert result.status == "failed", f"{backend} diverges on {requirement} ({reason}) yet answered {result}"
    if requirement in REFUSED_UPSTREAM:
        assert result.reason_code == "stale_observation", result  # the frame is spent: observe, then act differently
    else:  # the adapter cannot express it: observing again would not help; its advice says what would
        assert result.reason_code == "invalid_arguments", result
        assert "same frame_id" in (result.hint or ""), result
    assert result.hint
    assert tap.count(label="runtime", category=("input", "write")) == before, "the refused action reached the Page"
    assert not await page_state(desk, case.effect), f"{requirement} took effect on {backend} although refused"
    assert fixture_server.ledger.writes() == []
    again = await agent.observe(computer_session_id=seen.computer_session_id)
    assert again.status == "ok", again  # the session stays usable: a refusal is not a lost Page
