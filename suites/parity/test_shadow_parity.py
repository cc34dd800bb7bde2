"""Shadow DOM parity: every command gives the same answer on a page built inside open shadow roots (`/shadow/`) as on
the same page built in the light DOM (`/shadow/light`), and verify's verdicts are the lab's own reading of the app.

The runtime's readers (verify's text and element checks, the preview, the policy's reads) once read the light DOM
only: on the shadow build `text_absent` of a task on screen answered verified (a false success) while the
observation showed the task. The lab reads the app's true state itself (`LAB_READING`, through its own CDP
connection, walking the shadow roots here in the test), and the expected verdicts follow from that reading, not from
the runtime. The negative control substitutes a light-DOM-only text read (`document.body.innerText`, what verify
used to read) for the runtime's (`suites/sabotage.py`, `light_dom_verify`), and the same check catches it.
"""

from __future__ import annotations

from typing import Any

import pytest
from aiohttp import web

from lab.workspace import Workspace
from runtime.reading.probe import PageProbe
from suites.harness import Agent, Desk, ref_of
from suites.proofs import assert_handed_over, assert_no_writes

BUILDS = {"shadow": "/shadow/", "light": "/shadow/light"}
TITLES = ("Buy milk", "Call the bank", "Water the plants")
STATUS = "3 tasks, 3 open"
ABSENT = "Feed the cat"

LAB_READING = r"""
(() => {
  // The lab's own eyes: every open shadow root of the document, and the app's state read from its elements.
  const roots = [document];
  for (let i = 0; i < roots.length; i++) {
    for (const el of roots[i].querySelectorAll('*')) if (el.shadowRoot) roots.push(el.shadowRoot);
  }
  const all = selector => roots.flatMap(root => [...root.querySelectorAll(selector)]);
  return {
    titles: all('li label').map(label => label.textContent),
    checked: Object.fromEntries(all('li').map(li => [li.querySelector('label').textContent,
                                                     li.querySelector('input[type=checkbox]').checked])),
    status: all('.status').map(p => p.textContent),
    due: all('input[type=date]').map(input => input.value),
    removes: all('button').map(button => button.getAttribute('aria-label')).filter(Boolean),
    shadow: roots.length - 1,
  };
})()
"""


async def lab_reading(workspace: Workspace, desk: Desk, name: str) -> dict[str, Any]:
    return await workspace.evaluate(desk.labs[name], LAB_READING)


def expected_verdicts(reading: dict[str, Any]) -> dict[str, str]:
    """What each check must answer, from the lab's reading: a text is on the Page when a task or the status says it."""
    texts = [*reading["titles"], *reading["status"]]

    def present(needle: str) -> bool:
        return any(needle in text for text in texts)

    def verdict(holds: bool) -> str:
        return "verified" if holds else "verification_failed"

    return {
        "text_present Call the bank": verdict(present("Call the bank")),
        f"text_present {STATUS}": verdict(present(STATUS)),
        "text_absent Water the plants": verdict(not present("Water the plants")),
        f"text_absent {ABSENT}": verdict(not present(ABSENT)),
        "checkbox Buy milk unchecked": verdict(reading["checked"].get("Buy milk") is False),
        "Due date by ref is empty": verdict(reading["due"] == [""]),
        "textbox Due date is empty": verdict(reading["due"] == [""]),
        "1 button Remove Buy milk": verdict(reading["removes"].count("Remove Buy milk") == 1),
    }


def verdict_of(result: Any) -> str:
    if result.status == "ok" and result.verified is True:
        return "verified"
    return result.reason_code.value if result.reason_code is not None else result.status


async def answers(agent: Agent, desk: Desk, name: str) -> dict[str, Any]:
    """Every command's answer on one build: the observation's text, each verify's verdict, the preview."""
    seen = await agent.observe(page=desk.handle(name))
    due = ref_of(seen, "textbox", '"Due date"')
    checks: dict[str, dict[str, Any]] = {
        "text_present Call the bank": {"type": "text_present", "text": "Call the bank"},
        f"text_present {STATUS}": {"type": "text_present", "text": STATUS},
        "text_absent Water the plants": {"type": "text_absent", "text": "Water the plants"},
        f"text_absent {ABSENT}": {"type": "text_absent", "text": ABSENT},
        "checkbox Buy milk unchecked": {
            "type": "element_state",
            "role": "checkbox",
            "name": "Buy milk",
            "state": "checked",
            "expected": False,
        },
        "Due date by ref is empty": {"type": "element_state", "ref": due, "state": "value", "expected": ""},
        "textbox Due date is empty": {
            "type": "element_state",
            "role": "textbox",
            "name": "Due date",
            "state": "value",
            "expected": "",
        },
        "1 button Remove Buy milk": {"type": "element_count", "role": "button", "name": "Remove Buy milk", "count": 1},
    }
    verdicts = {label: verdict_of(await agent.verify(seen, **check)) for label, check in checks.items()}
    listed = await agent.call(command="list_pages")
    preview = next(p.preview for p in listed.pages or [] if p.handle == desk.handle(name))
    text = seen.observation or ""
    return {
        "observed": [t for t in (*TITLES, STATUS) if t in text],
        "verdicts": verdicts,
        "preview": [t for t in TITLES if t in preview],
    }


async def both_builds(desk: Desk) -> Desk:
    await desk.open("shadow", BUILDS["shadow"], desk.workspace.column(0, 3))
    await desk.open("chat", "/chat/", desk.workspace.column(1, 3), chat=True)
    await desk.open("light", BUILDS["light"], desk.workspace.column(2, 3))
    desk.authorize("shadow", "light")
    return desk


async def check_parity(agent: Agent, desk: Desk, workspace: Workspace) -> None:
    """The same answers on both builds, and each verdict the one the lab's own reading calls for."""
    got = {name: await answers(agent, desk, name) for name in BUILDS}
    for name in BUILDS:
        reading = await lab_reading(workspace, desk, name)
        assert list(reading["titles"]) == list(TITLES), reading
        assert got[name]["verdicts"] == expected_verdicts(reading), f"{name}: {got[name]['verdicts']}"
        assert got[name]["observed"] == [*TITLES, STATUS], (name, got[name])
        assert "Buy milk" in got[name]["preview"], (name, got[name])
    assert got["shadow"] == got["light"], got


@pytest.mark.req("parity:shadow-dom", "reason:verification_failed")
async def test_every_command_answers_alike_on_the_app_in_shadow_roots_and_in_the_light_dom_as_the_lab_reads_it(
    desk: Desk, agent: Agent, workspace: Workspace
) -> None:
    await both_builds(desk)
    shadow = await lab_reading(workspace, desk, "shadow")
    assert shadow["shadow"] >= 4, shadow  # the app and each task sit in open shadow roots of their own
    assert (await lab_reading(workspace, desk, "light"))["shadow"] == 0
    await check_parity(agent, desk, workspace)
    assert_no_writes(desk.server)


@pytest.mark.negative_control
@pytest.mark.sabotage("light_dom_verify")
@pytest.mark.req("parity:shadow-dom")
async def test_the_shadow_parity_check_catches_a_verify_that_reads_the_light_dom_only(
    desk: Desk, agent: Agent, workspace: Workspace
) -> None:
    await both_builds(desk)
    with pytest.raises(AssertionError, match="shadow: "):
        await check_parity(agent, desk, workspace)


@pytest.mark.req("policy:shadow-dom", "reason:needs_user")
async def test_delete_all_tasks_inside_a_shadow_root_is_needs_user_by_ref_as_in_the_light_dom(
    desk: Desk, agent: Agent
) -> None:
    await both_builds(desk)
    for name in BUILDS:
        seen = await agent.observe(page=desk.handle(name))
        result = await agent.act(seen, type="click", ref=ref_of(seen, "button", '"Delete all tasks"'))
        assert_handed_over(result, f"Delete all tasks on the {name} build")
    assert_no_writes(desk.server)


CARDS = "/cards/"
CARDS_PAGE = """<!doctype html><html lang=en><head><meta charset=utf-8><link rel=icon href='data:,'>
<title>Cards</title></head><body><h1>Cards</h1>
<x-card><span slot=title>Quarterly report</span><span>Due Friday</span></x-card>
<a href="/cards/delete?id=7"><x-chip></x-chip></a>
<script>
customElements.define('x-card', class extends HTMLElement { connectedCallback() {
  this.attachShadow({mode: 'open'}).innerHTML =
      '<h2>Title: <slot name=title></slot></h2><p>Owner: Dana</p><slot></slot><p hidden>Archived</p>';
} });
customElements.define('x-chip', class extends HTMLElement { connectedCallback() {
  this.attachShadow({mode: 'open'}).innerHTML = '<button type=button>Open</button>';
} });
</script></body></html>"""
"""A card whose title is slotted into its shadow root's heading, and a button in a shadow root inside a link to an
address that deletes (a GET the ledger records as a write)."""


async def cards(desk: Desk) -> Desk:
    async def page(request: web.Request) -> web.Response:
        return web.Response(text=CARDS_PAGE, content_type="text/html")

    async def deleted(request: web.Request) -> web.Response:
        return web.Response(text="deleted", content_type="text/plain")

    desk.server.set_route(CARDS, page)
    desk.server.set_route("/cards/delete", deleted, method="GET", write=True)
    await desk.open("A", CARDS, desk.workspace.column(0, 3))
    await desk.open("chat", "/chat/", desk.workspace.column(1, 3), chat=True)
    desk.authorize("A")
    return desk


@pytest.mark.req("parity:shadow-dom")
async def test_slotted_text_is_read_where_its_slot_shows_it_as_the_observation_shows_it(
    desk: Desk, agent: Agent
) -> None:
    await cards(desk)
    seen = await agent.observe(page="left")
    assert "Title: Quarterly report" in (seen.observation or "")
    for text in ("Title: Quarterly report", "Owner: Dana Due Friday"):
        result = await agent.verify(seen, type="text_present", text=text)
        assert verdict_of(result) == "verified", (text, result)
    result = await agent.verify(seen, type="text_absent", text="Quarterly report")
    assert verdict_of(result) == "verification_failed", result
    result = await agent.verify(seen, type="text_absent", text="Archived")  # in the shadow root, never shown
    assert verdict_of(result) == "verified", result


@pytest.mark.req("parity:shadow-dom")
async def test_the_page_text_read_keeps_its_limit_on_both_builds(desk: Desk, agent: Agent) -> None:
    await both_builds(desk)
    for name in BUILDS:
        probe = PageProbe(desk.runtime.cdp, desk.target(name), watch_dialogs=False)
        try:
            whole, cut = await probe.text(), await probe.text(limit=12)
        finally:
            await probe.close()
        assert all(title in whole for title in TITLES), (name, whole)
        assert cut == whole[:12], (name, cut, whole)


@pytest.mark.req("policy:shadow-dom", "reason:needs_user")
async def test_a_button_in_a_shadow_root_inside_a_link_that_deletes_is_needs_user_by_ref(
    desk: Desk, agent: Agent
) -> None:
    await cards(desk)
    seen = await agent.observe(page="left")
    result = await agent.act(seen, type="click", ref=ref_of(seen, "button", '"Open"'))
    assert_handed_over(result, "a click through a link that deletes")
    assert_no_writes(desk.server)
