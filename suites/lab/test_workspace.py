"""The window shell: geometry read back from Chromium equals what was set, for every move later suites use."""

from __future__ import annotations

from dataclasses import replace

import pytest

from fixtures_sites.server import FixtureServer
from lab.cdp import CDPClient
from lab.workspace import Bounds, LabPage, PageState, Workspace

pytestmark = pytest.mark.req("lab:workspace")


async def assert_swapped(ws: Workspace, a: LabPage, b: LabPage, before_a: Bounds, before_b: Bounds) -> None:
    assert (await ws.bounds(a), await ws.bounds(b)) == (before_b, before_a)


async def test_swapping_left_and_right_exchanges_the_real_window_bounds(
    workspace: Workspace, fixture_server: FixtureServer
) -> None:
    left = await workspace.open("left", fixture_server.url("/dom_form/"), workspace.column(0, 2))
    right = await workspace.open("right", fixture_server.url("/dom_form/"), workspace.column(1, 2))
    before_left, before_right = await workspace.bounds(left), await workspace.bounds(right)
    assert before_left == workspace.column(0, 2)

    await workspace.swap(left, right)

    await assert_swapped(workspace, left, right, before_left, before_right)
    # The page itself sees the move: its window's screen position is the new one.
    assert await workspace.evaluate(left, "window.screenX") == before_right.left
    assert await workspace.evaluate(right, "window.screenX") == before_left.left


async def test_splitting_stacks_two_windows_top_and_bottom(workspace: Workspace, fixture_server: FixtureServer) -> None:
    top = await workspace.open("top", fixture_server.url("/dom_form/"), workspace.column(0, 2))
    bottom = await workspace.open("bottom", fixture_server.url("/dom_form/"), workspace.column(1, 2))
    area = workspace.column(1, 2)

    await workspace.split(top, bottom, area)

    got_top, got_bottom = await workspace.bounds(top), await workspace.bounds(bottom)
    assert got_top == Bounds(area.left, area.top, area.width, area.height // 2)
    assert got_bottom == Bounds(area.left, area.top + area.height // 2, area.width, area.height - area.height // 2)
    assert await workspace.evaluate(bottom, "window.screenY") == got_bottom.top


async def test_a_minimized_window_is_hidden_and_comes_back_where_it_was(
    workspace: Workspace, fixture_server: FixtureServer
) -> None:
    page = await workspace.open("page", fixture_server.url("/dom_form/"), workspace.column(0, 2))
    where = await workspace.bounds(page)

    assert (await workspace.minimize(page)).state == "minimized"
    assert await workspace.evaluate(page, "document.visibilityState") == "hidden"

    restored = await workspace.restore(page)
    assert (restored.state, restored.bounds) == ("normal", where)
    assert await workspace.evaluate(page, "document.visibilityState") == "visible"


async def test_an_occluding_window_covers_the_page_exactly_and_leaves_it_open(
    workspace: Workspace, fixture_server: FixtureServer
) -> None:
    page = await workspace.open("page", fixture_server.url("/dom_form/"), workspace.column(0, 2))
    cover = await workspace.occlude(page)
    assert await workspace.bounds(cover) == await workspace.bounds(page)
    assert (await workspace.window(page)).state == "normal"
    assert cover.window_id != page.window_id


async def test_replacing_the_target_keeps_the_logical_tab_and_its_place_but_not_its_target_id(
    workspace: Workspace, fixture_server: FixtureServer, lab_cdp: CDPClient
) -> None:
    page = await workspace.open("tab", fixture_server.url("/dom_form/"), workspace.column(1, 3))
    old_target, where = page.target_id, await workspace.bounds(page)

    await workspace.replace_target(page)

    live = {t["targetId"] for t in (await lab_cdp.send("Target.getTargets"))["targetInfos"]}
    assert page.target_id != old_target
    assert page.target_id in live
    assert old_target not in live
    assert await workspace.bounds(page) == where
    assert await workspace.evaluate(page, "location.pathname") == "/dom_form/"


async def test_closing_a_page_removes_its_target(
    workspace: Workspace, fixture_server: FixtureServer, lab_cdp: CDPClient
) -> None:
    page = await workspace.open("gone", fixture_server.url("/dom_form/"), workspace.column(0, 2))
    await workspace.close(page)
    live = {t["targetId"] for t in (await lab_cdp.send("Target.getTargets"))["targetInfos"]}
    assert page.target_id not in live
    assert "gone" not in workspace.pages


async def test_a_page_that_fails_to_load_leaves_no_window_behind(workspace: Workspace, lab_cdp: CDPClient) -> None:
    async def pages() -> set[str]:
        targets = (await lab_cdp.send("Target.getTargets"))["targetInfos"]
        return {t["targetId"] for t in targets if t["type"] == "page"}

    before = await pages()
    with pytest.raises(RuntimeError, match="could not load"):
        await workspace.open("refused", "http://127.0.0.1:1/", workspace.column(0, 2))
    assert await pages() == before
    assert "refused" not in workspace.pages


async def test_a_second_workspace_window_lives_in_its_own_area(
    workspace: Workspace, lab_cdp: CDPClient, fixture_server: FixtureServer
) -> None:
    second = Workspace(lab_cdp, "second", area=Bounds(2000, 100, 1200, 800))
    try:
        there = await second.open("there", fixture_server.url("/dom_form/"), second.column(0, 1))
        here = await workspace.open("here", fixture_server.url("/dom_form/"), workspace.column(0, 1))
        assert await second.bounds(there) == Bounds(2000, 100, 1200, 800)
        assert (await workspace.bounds(here)).left == 0
        assert there.workspace == "second"
        assert there.window_id != here.window_id
    finally:
        await second.close_all()


class OneSidedSwap(Workspace):
    """A broken window manager: moves the first window and forgets the second."""

    async def swap(self, a: LabPage, b: LabPage) -> tuple[Bounds, Bounds]:
        moved = await self.place(a, await self.bounds(b))
        return moved, await self.bounds(b)


@pytest.mark.negative_control
async def test_the_swap_check_catches_a_window_manager_that_moves_only_one_window(
    lab_cdp: CDPClient, fixture_server: FixtureServer
) -> None:
    broken = OneSidedSwap(lab_cdp, "broken")
    try:
        left = await broken.open("left", fixture_server.url("/dom_form/"), broken.column(0, 2))
        right = await broken.open("right", fixture_server.url("/dom_form/"), broken.column(1, 2))
        before_left, before_right = await broken.bounds(left), await broken.bounds(right)
        await broken.swap(left, right)
        with pytest.raises(AssertionError):
            await assert_swapped(broken, left, right, before_left, before_right)
    finally:
        await broken.close_all()


async def test_the_page_state_reader_sees_minimized_and_focused_pages_and_never_focuses_by_reading(
    workspace: Workspace, fixture_server: FixtureServer
) -> None:
    page = await workspace.open("page", fixture_server.url("/dom_form/"), workspace.column(0, 2))
    for _ in range(3):  # reading again and again must not make the state it reads
        assert await workspace.page_state(page) == PageState("visible", False)

    await workspace.minimize(page)
    assert await workspace.page_state(page) == PageState("hidden", False)
    await workspace.restore(page)
    assert await workspace.focus(page) is True
    assert await workspace.page_state(page) == PageState("visible", True)


async def test_a_window_opened_over_the_page_covers_it_and_one_beside_it_does_not(
    workspace: Workspace, fixture_server: FixtureServer
) -> None:
    page = await workspace.open("page", fixture_server.url("/dom_form/"), workspace.column(0, 2))
    await workspace.open("beside", fixture_server.url("/chat/"), workspace.column(1, 2))
    assert await workspace.covered_by(page) == []
    cover = await workspace.occlude(page)
    assert await workspace.covered_by(page) == [cover]
    assert await workspace.covered_by(cover) == []  # the page, opened earlier, lies under it


@pytest.mark.negative_control
async def test_the_cover_check_catches_a_window_that_covers_only_part_of_the_page(
    workspace: Workspace, fixture_server: FixtureServer
) -> None:
    page = await workspace.open("page", fixture_server.url("/dom_form/"), workspace.column(0, 2))
    where = await workspace.bounds(page)
    await workspace.open("part", fixture_server.url("/chat/"), replace(where, width=where.width - 1))
    assert await workspace.covered_by(page) == []
    minimized = await workspace.occlude(page)
    await workspace.minimize(minimized)
    assert await workspace.covered_by(page) == []  # a minimized window covers nothing
