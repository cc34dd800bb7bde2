"""Acts by ref inside shadow roots: the same task app built inside open shadow roots (`/shadow/`, each task row a
`<task-item>` with a shadow root of its own, inside the app's) and in the light DOM (`/shadow/light`), the same acts
by ref on both, on every backend: each answers ok on the first try, and the page ends up in the same state after
each one, read by the lab's own hands (an expression of its own that walks the shadow roots), with the same writes
in the ledger.

Every act a backend does by ref is there: a click (tick a checkbox, press a button), a select, a type into a text
field and into a date field, a scroll to an element, and the press of Enter that submits the typed field (one
write). Negative control: open_claude_chrome with the identity check it had before (`LightDomCheck`: an element's
place read as if no shadow root were drawn) refuses the first act inside a shadow root as stale, and the same
check catches it (`suites/sabotage.py`, `light_dom_ref_check`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from fixtures_sites.server import FixtureServer
from runtime.models import ComputerUseResult
from suites.harness import Agent, Desk, ref_of

BUILDS = {"shadow": "/shadow/", "light": "/shadow/light"}

STATE = """(() => {
  const all = [];
  const walk = root => {
    for (const el of root.querySelectorAll('*')) {
      all.push(el);
      if (el.shadowRoot) walk(el.shadowRoot);
    }
  };
  walk(document);
  const one = selector => all.find(el => el.matches(selector));
  return {
    tasks: all.filter(el => el.localName === 'task-item').map(item => {
      const row = item.shadowRoot || item;
      return [row.querySelector('label').textContent, row.querySelector('input').checked];
    }),
    status: one('p.status').textContent,
    show: one('#show').value,
    due: one('#due').value,
    draft: one('#new-task').value,
  };
})()"""
"""The app's state as the lab reads it: every element, shadow roots walked (the page's own scripts take no part)."""


@dataclass(frozen=True)
class Step:
    name: str
    action: Callable[[ComputerUseResult], dict[str, Any]]
    state: dict[str, Any]
    """What the lab must read after the act (the fields it names; the others as they were)."""
    answer: str = "ok"
    """The act's status: `needs_user` where the policy hands the control to the user by its name (its concept)."""
    write: str | None = None


START = {
    "tasks": [["Buy milk", False], ["Call the bank", False], ["Water the plants", False]],
    "status": "3 tasks, 3 open",
    "show": "all",
    "due": "",
    "draft": "",
}
STEPS = (
    Step(
        "scroll to the checkbox Water the plants",
        lambda seen: {"type": "scroll", "ref": ref_of(seen, "checkbox", '"Water the plants"'), "direction": "down"},
        {},
    ),
    # "Buy" and "Remove" name concepts the policy hands to the user (docs/policy.md), whatever the control sits in.
    Step(
        "tick the checkbox Buy milk",
        lambda seen: {"type": "click", "ref": ref_of(seen, "checkbox", '"Buy milk"')},
        {},
        answer="needs_user",
    ),
    Step(
        "tick the checkbox Water the plants",
        lambda seen: {"type": "click", "ref": ref_of(seen, "checkbox", '"Water the plants"')},
        {
            "tasks": [["Buy milk", False], ["Call the bank", False], ["Water the plants", True]],
            "status": "3 tasks, 2 open",
        },
    ),
    Step(
        "select Open in Show",
        lambda seen: {"type": "select", "ref": ref_of(seen, "combobox", '"Show"'), "values": ["Open"]},
        {"tasks": [["Buy milk", False], ["Call the bank", False]], "show": "open"},
    ),
    Step(
        "type a date into Due date",
        lambda seen: {"type": "type", "ref": ref_of(seen, '"Due date"'), "text": "2026-12-24"},
        {"due": "2026-12-24"},
    ),
    Step(
        "click Remove Call the bank",
        lambda seen: {"type": "click", "ref": ref_of(seen, "button", '"Remove Call the bank"')},
        {},
        answer="needs_user",
    ),
    Step(
        "type Pay rent into New task",
        lambda seen: {"type": "type", "ref": ref_of(seen, "textbox", '"New task"'), "text": "Pay rent"},
        {"draft": "Pay rent"},
    ),
    Step(
        "press Enter",
        lambda seen: {"type": "press", "key": "Enter"},
        {
            "tasks": [["Buy milk", False], ["Call the bank", False], ["Pay rent", False]],
            "status": "4 tasks, 3 open",
            "draft": "",
        },
        write="/shadow/add",
    ),
)


async def app_state(desk: Desk, name: str) -> dict[str, Any]:
    return await desk.workspace.evaluate(desk.labs[name], STATE)


async def run_task(desk: Desk, agent: Agent, name: str) -> list[tuple[str, str, dict[str, Any]]]:
    """The task on Page `name`: per step, the act's status and the lab's reading after it. Each act must answer
    ok on the first try (no retry, no fallback) and leave the state its step declares; a write step makes exactly
    one write, from this Page."""
    server = desk.server
    state = await app_state(desk, name)
    assert state == START, f"{name} did not start as the app does: {state}"
    seen = await agent.observe(page=desk.handle(name))
    trail: list[tuple[str, str, dict[str, Any]]] = []
    for step in STEPS:
        before = len(server.ledger.writes())
        written = server.wait_for_request(step.write) if step.write else None  # registered before acting
        result = await agent.act(seen, **step.action(seen))
        assert result.status == step.answer, f"{name}: {step.name}: {result.status} {result.reason_code} " + (
            f"{result.message} {result.hint}"
        )
        if written is not None:
            assert (await written).form() == {"title": "Pay rent"}
        writes = server.ledger.writes()[before:]
        assert [(w.path, w.referer.rsplit("/", 1)[-1]) for w in writes] == (
            [(step.write, desk.labs[name].url.rsplit("/", 1)[-1])] if step.write else []
        ), f"{name}: {step.name}: writes {writes}"
        state = {**state, **step.state}
        read = await app_state(desk, name)
        assert read == state, f"{name}: after {step.name} the lab reads {read}, not {state}"
        trail.append((step.name, result.status, read))
        if result.status == "ok":
            seen = result  # the act's answer is the latest frame; a refused act leaves the one it was sent on
    return trail


async def run_both(desk: Desk, agent: Agent) -> dict[str, list[tuple[str, str, dict[str, Any]]]]:
    await desk.open("shadow", BUILDS["shadow"], desk.workspace.column(0, 3))
    await desk.open("chat", "/chat/", desk.workspace.column(1, 3), chat=True)
    await desk.open("light", BUILDS["light"], desk.workspace.column(2, 3))
    desk.authorize("shadow", "light")
    return {name: await run_task(desk, agent, name) for name in BUILDS}


@pytest.mark.req("parity:shadow-acts")
async def test_acts_by_ref_inside_shadow_roots_answer_and_change_the_page_as_in_the_light_dom(
    desk: Desk, agent: Agent, backend: str, fixture_server: FixtureServer
) -> None:
    trails = await run_both(desk, agent)
    assert trails["shadow"] == trails["light"]
    assert [w.path for w in fixture_server.ledger.writes()] == ["/shadow/add", "/shadow/add"]


@pytest.mark.req("parity:shadow-acts")
@pytest.mark.negative_control
@pytest.mark.backends("open_claude_chrome")
@pytest.mark.sabotage("light_dom_ref_check")
async def test_the_shadow_act_check_catches_a_ref_check_that_cannot_place_an_element_in_a_shadow_root(
    desk: Desk, agent: Agent, backend: str, fixture_server: FixtureServer
) -> None:
    with pytest.raises(
        AssertionError, match=r"shadow: scroll to the checkbox Water the plants: failed stale_observation"
    ):
        await run_both(desk, agent)
    assert fixture_server.ledger.writes() == []
