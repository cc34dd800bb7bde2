"""The Page Registry and the Page Context: relations from real geometry, revisions, access, replacement, popups."""

from __future__ import annotations

import asyncio

import pytest

from fixtures_sites.server import FixtureServer
from lab.workspace import Workspace
from runtime.models import Page
from suites.harness import Agent, Desk, ref_of


async def relations(agent: Agent) -> dict[str, str]:
    listed = await agent.call(command="list_pages")
    return {page.handle: page.relation for page in listed.pages or []}


async def three_across(desk: Desk) -> Desk:
    await desk.open("A", "/dom_form/", desk.workspace.column(0, 3))
    await desk.open("chat", "/chat/", desk.workspace.column(1, 3), chat=True)
    await desk.open("B", "/catalogue/", desk.workspace.column(2, 3))
    desk.authorize("A", "B")
    return desk


@pytest.mark.req("awareness:split-top-bottom")
async def test_splitting_puts_one_page_above_the_chat_and_one_below(desk: Desk, agent: Agent) -> None:
    await desk.open("A", "/dom_form/", desk.workspace.column(0, 2))
    await desk.open("chat", "/chat/", desk.workspace.column(1, 2), chat=True)
    await desk.open("B", "/dom_form/", desk.workspace.column(0, 2))
    desk.authorize("A", "B")
    area = desk.workspace.column(1, 2)
    third = area.height // 3
    await desk.workspace.place(desk.labs["A"], area.__class__(area.left, area.top, area.width, third))
    await desk.workspace.place(desk.labs["chat"], area.__class__(area.left, area.top + third, area.width, third))
    await desk.workspace.place(desk.labs["B"], area.__class__(area.left, area.top + 2 * third, area.width, third))
    assert await relations(agent) == {desk.handle("A"): "above", desk.handle("B"): "below"}


@pytest.mark.req("awareness:other-window")
async def test_a_page_in_another_workspace_window_is_other_window(
    desk: Desk, agent: Agent, other_window: Workspace
) -> None:
    await desk.open("chat", "/chat/", desk.workspace.column(1, 3), chat=True)
    await desk.open("D", "/dom_form/", other_window.column(0, 1), workspace=other_window)
    desk.authorize("D")
    assert await relations(agent) == {desk.handle("D"): "other_window"}


@pytest.mark.req("awareness:ambiguous", "reason:ambiguous_page")
async def test_a_relation_word_that_names_two_pages_is_ambiguous(desk: Desk, agent: Agent) -> None:
    await desk.open("chat", "/chat/", desk.workspace.column(2, 3), chat=True)
    await desk.open("A", "/dom_form/", desk.workspace.column(0, 3))
    await desk.open("B", "/dom_form/", desk.workspace.column(1, 3))
    desk.authorize("A", "B")
    result = await agent.call(command="observe", page="left")
    assert result.reason_code == "ambiguous_page", result
    assert (await agent.call(command="observe", page=desk.handle("B"))).status == "ok"


@pytest.mark.req("lifecycle:access-disabled", "reason:page_access_disabled", "reason:page_context_stale")
async def test_disabling_access_stops_the_next_call_and_stales_the_old_context(desk: Desk, agent: Agent) -> None:
    await three_across(desk)
    seen = await agent.observe(page="left")
    old = await desk.request()
    desk.runtime.registry.set_access(desk.handle("A"), False)
    stale = await agent.call(
        old,
        command="verify",
        computer_session_id=seen.computer_session_id,
        assertion={"type": "title_matches", "pattern": "."},
    )
    assert stale.reason_code == "page_context_stale", stale
    disabled = await agent.verify(seen, type="title_matches", pattern=".")
    assert disabled.reason_code == "page_access_disabled", disabled
    assert desk.handle("A") not in await relations(agent)


@pytest.mark.req("lifecycle:popup-is-a-new-page", "reason:invalid_capability")
async def test_a_popup_becomes_a_new_page_that_is_not_authorized_until_the_host_says_so(
    desk: Desk, agent: Agent, fixture_server: FixtureServer
) -> None:
    await desk.open("A", "/popup/", desk.workspace.column(0, 3))
    await desk.open("chat", "/chat/", desk.workspace.column(1, 3), chat=True)
    desk.authorize("A")
    registry = desk.runtime.registry
    seen = await agent.observe(page="left")
    registered: asyncio.Future[Page] = asyncio.get_running_loop().create_future()

    def on_change(page: Page, what: str) -> None:
        if what == "registered" and page.opener_page_id == desk.handle("A") and not registered.done():
            registered.set_result(page)

    registry.listen(on_change)
    opened = await agent.act(seen, type="click", ref=ref_of(seen, "button"))
    assert opened.status == "ok", opened
    popup = await asyncio.wait_for(registered, 10)
    assert [p.registry_page_id for p in registry.pages() if p.opener_page_id] == [popup.registry_page_id]
    assert popup.registry_page_id not in await relations(agent)
    refused = await agent.call(command="observe", page=popup.registry_page_id)
    assert refused.reason_code == "invalid_capability", refused

    desk.turn = desk.runtime.host.start_turn([popup.registry_page_id])  # the user authorizes the popup
    child = await agent.observe(page=popup.registry_page_id)
    confirmed = await agent.act(child, type="click", ref=ref_of(child, "button", "Confirm"))
    assert confirmed.status == "ok", confirmed
    assert [w.path for w in fixture_server.ledger.writes()] == ["/popup/confirm"]
