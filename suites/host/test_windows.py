"""The window manager's arithmetic (host/windows.py), for many screens: every window the app places lies inside the
screen's work area, a new Page lands on the side the user chose, and no Page already open changes its relation.

The live half (a real console reporting its screen, real windows read back from Chromium) is
suites/host/test_console.py::test_every_placement_lies_inside_the_screens_work_area.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from host.windows import CHAT, SIDES, Placement, Rect, Side, WindowManager, fit, place
from runtime.models.page import Geometry
from runtime.registry.relation import relation


def related(page: Rect, chat: Rect) -> str:
    """The relation the registry will compute from these bounds."""
    return relation(Geometry(**page.bounds()), Geometry(**chat.bounds()), True)


def open_all(work: Rect, sides: list[Side], manager_place=place) -> list[tuple[Placement, list[tuple[str, Rect]]]]:
    """Open a Page on each side in turn as the app does; each step's placement and the Pages open before it."""
    chat = fit(CHAT, work)
    pages: list[tuple[str, Rect]] = []
    steps = []
    for side in sides:
        placed = manager_place(work, chat, side, list(pages))
        steps.append((placed, list(pages)))
        chat = placed.chat
        pages.append((related(placed.page, chat), placed.page))
    return steps


def check(work: Rect, sides: list[Side], manager_place=place) -> None:
    """The three promises, at every step: inside the work area, on the chosen side, no relation changed."""
    for (placed, before), side in zip(open_all(work, sides, manager_place), sides, strict=True):
        assert placed.chat.inside(work), f"the chat {placed.chat} is outside the work area {work}"
        assert placed.page.inside(work), f"the Page {side} of the chat, {placed.page}, is outside {work}"
        assert min(placed.page.width, placed.page.height) > 0, placed
        assert related(placed.page, placed.chat) == side, f"a Page opened {side} is {related(placed.page, placed.chat)}"
        moved = [(was, related(rect, placed.chat)) for was, rect in before if related(rect, placed.chat) != was]
        assert moved == [], f"making room for a Page {side} changed the relations of {moved}"


screens = st.builds(
    Rect,
    left=st.integers(-3000, 3000),
    top=st.integers(-1000, 1000),
    width=st.integers(640, 3840),
    height=st.integers(480, 2160),
)


@pytest.mark.req("app:placement")
@settings(max_examples=400, deadline=None)
@given(work=screens, sides=st.lists(st.sampled_from(SIDES), min_size=1, max_size=7))
def test_every_placement_lies_inside_the_work_area_on_its_side_for_any_screen(work: Rect, sides: list[Side]) -> None:
    check(work, sides)


@pytest.mark.req("app:placement")
@pytest.mark.parametrize(
    "work", [Rect(0, 0, 1280, 800), Rect(0, 0, 1600, 1000), Rect(0, 32, 1600, 968), Rect(1920, 0, 1366, 728)]
)
def test_the_chat_gives_room_when_a_page_does_not_fit_beside_it(work: Rect) -> None:
    """The issue's screen: "right of the chat" opened at x = 1520, 760 wide, on a 1600-px screen."""
    placed = place(work, fit(CHAT, work), "right")
    assert placed.page.right <= work.right
    assert placed.chat.left >= work.left
    assert placed.page.width >= 320, f"the Page got {placed.page.width} px"
    check(work, ["right", "left", "above", "below", "right"])


@pytest.mark.req("app:placement")
def test_until_the_console_reports_its_screen_pages_go_in_chat_sized_slots() -> None:
    manager = WindowManager(cdp=None)  # type: ignore[arg-type]  # placing is arithmetic: no browser call
    placed = manager.place(CHAT, "right", [("right", Rect(1520, 0, 760, 900))])
    assert placed == Placement(CHAT, Rect(760 + 2 * 760, 0, 760, 900))


def ignoring_the_work_area(work: Rect, chat: Rect, side: Side, others: list[tuple[str, Rect]]) -> Placement:
    """Broken on purpose: the old slots, one chat-sized step further out per Page on that side."""
    return WindowManager(cdp=None).place(chat, side, others)  # type: ignore[arg-type]


@pytest.mark.negative_control
@pytest.mark.req("app:placement")
def test_the_work_area_check_catches_a_window_manager_that_ignores_it() -> None:
    with pytest.raises(AssertionError, match="outside"):
        check(Rect(0, 0, 1600, 1000), ["right"], ignoring_the_work_area)
