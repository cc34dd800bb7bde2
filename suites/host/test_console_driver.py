"""The console driver itself (`suites/console_driver.py`), on the app's real console: it acts only on what a person
could use (attached, visible, still, enabled, not covered), waits for it without polling, and says why when it never
could; a tick is checked after its one click.

The obstacles are the lab's own edits to the console's page (a cover, a disabled or hidden control, one that never
stops moving, a box that refuses its tick), made through the driver's own `evaluate`.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from suites.console_driver import ConsoleDriver
from suites.host.conftest import StartApp

pytestmark = pytest.mark.req("lab:console-driver")

BOUND = 2.0
"""Seconds a refused action is given before it must fail (nothing in these tests changes after)."""

COVER = """(() => {
    const cover = document.createElement('div');
    cover.id = 'lab-cover';
    const box = document.getElementById('send').getBoundingClientRect();
    Object.assign(cover.style, {position: 'fixed', left: box.left + 'px', top: box.top + 'px',
                                width: box.width + 'px', height: box.height + 'px', zIndex: 10});
    document.body.append(cover);
})()"""

OBSTACLES = {
    "missing": ("document.getElementById('send').remove()", "it is not in the console"),
    "hidden": ("document.getElementById('send').style.visibility = 'hidden'", "it is not visible"),
    "disabled": ("document.getElementById('send').disabled = true", "it is disabled"),
    "covered": (COVER, "a click at its centre reaches div#lab-cover"),
    "moving": (  # once running: an animation's first frames, while it is pending, hold it at its start
        "document.getElementById('send').animate([{transform: 'translateX(0)'}, {transform: 'translateX(40px)'}],"
        " {duration: 500, iterations: Infinity}).ready.then(() => true)",
        "it is still moving",
    ),
}

LAB_BOX = """(() => {
    const box = document.createElement('input');
    box.type = 'checkbox';
    box.id = 'lab-box';
    if (%s) box.addEventListener('click', (event) => event.preventDefault());
    document.getElementById('composer').prepend(box);
})()"""
"""A checkbox of the lab's own in the composer; `true`: one that undoes every click on it."""


async def live_console(start_app: StartApp, console_of: Any) -> ConsoleDriver:
    return await console_of(await start_app())


@pytest.mark.negative_control
@pytest.mark.parametrize("obstacle", list(OBSTACLES))
async def test_an_action_waits_for_a_control_a_person_could_use_and_says_why_it_never_could(
    start_app: StartApp, console_of: Any, obstacle: str
) -> None:
    console = await live_console(start_app, console_of)
    edit, why = OBSTACLES[obstacle]
    await console.evaluate(edit)
    with pytest.raises(AssertionError, match=f"#send never became usable in the console \\({why}\\)"):
        await console.actionable("#send", timeout=BOUND)


async def test_an_action_goes_ahead_once_what_covered_the_control_is_gone(start_app: StartApp, console_of: Any) -> None:
    console = await live_console(start_app, console_of)
    await console.evaluate(COVER)
    waiting = asyncio.create_task(console.actionable("#send"))  # registered before the cover goes
    await console.evaluate("document.getElementById('lab-cover').remove()")
    x, y = await waiting
    assert await console.evaluate(f"document.elementFromPoint({x}, {y}).id") == "send"


async def test_a_tick_takes_with_one_click(start_app: StartApp, console_of: Any) -> None:
    console = await live_console(start_app, console_of)
    await console.evaluate(LAB_BOX % "false")
    await console.tick("#lab-box")
    assert await console.evaluate("document.getElementById('lab-box').checked") is True
    await console.tick("#lab-box", ticked=False)
    assert await console.evaluate("document.getElementById('lab-box').checked") is False


@pytest.mark.negative_control
async def test_the_tick_check_catches_a_box_that_undoes_its_click(start_app: StartApp, console_of: Any) -> None:
    console = await live_console(start_app, console_of)
    await console.evaluate(LAB_BOX % "true")
    with pytest.raises(AssertionError, match="the console never showed #lab-box ticked"):
        await console.tick("#lab-box")
