"""Pointer truth: before a click is judged, the pointer is already where the click will press.

A backend's click moves the pointer and presses in one call. A Page can answer the move: a row shows its Delete
button while hovered (CSS `:hover`), a button renames itself on `pointerover`. Read before the move, the policy would
judge what was there before and the press would land on what the move revealed. So the runtime moves the pointer
itself first, through its own CDP session on the bound target (`Input.dispatchMouseEvent`, `mouseMoved` only: no
press, no focus call, nothing on another Page), lets the Page answer for a rendering frame, and only then reads
what a click would commit (runtime/reading/commit.py). The backend's own move to the same point then changes nothing.

The press point of a ref is computed the way the backends press: the live element (the frame's role and name, in
the top document) scrolled into view if it is not, then the centre of its first content quad. Once the pointer is
there, the element under it must still be one with the frame's role and name; otherwise the frame is stale.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from enum import Enum
from typing import Any

from runtime.backend import Element
from runtime.cdp import CDPError
from runtime.models import Action
from runtime.phases import mark
from runtime.reading.commit import AT_POINT, aim, live
from runtime.reading.probe import FrameContext, PageProbe

POINTER_ANSWER_JS = """new Promise(done => {
  const settle = () => Promise.all(document.getAnimations()
    .filter(a => a.playState === 'running' && Number.isFinite(a.effect?.getComputedTiming().endTime))
    .map(a => a.finished.catch(() => null))).then(done);
  let framed = false;
  const frame = () => { if (!framed) { framed = true; settle(); } };
  requestAnimationFrame(() => requestAnimationFrame(frame));
  setTimeout(frame, 100);
  setTimeout(done, 750);
})"""
"""The Page's answer to the pointer (its listeners have run by the time the move is acked): two animation frames, for
a framework's state update and its render (at most 100 ms), then the CSS transitions and animations that are running
then and end (a control a `:hover` rule grows from 0 px wide with `transition: width .5s` has no box to press, and no
ref in a snapshot, until its transition has run); 750 ms at most."""
FIRST_FRAME = (
    "globalThis.computerUseFirstFrame = new Promise(done => {"
    " requestAnimationFrame(() => done(true)); setTimeout(() => done(false), 100); }), true"
)
"""The first of the two frames of `POINTER_ANSWER_JS`, asked for before the move is sent, so that it is the frame the
move is delivered in (Chromium delivers a pointer move with the next frame, before its animation-frame callbacks) or
the one after it; held in the probe's isolated world, which the Page's scripts cannot see. At most 100 ms."""
SECOND_FRAME = """new Promise(done => {
  let framed = false;
  const frame = () => {
    if (framed) return;
    framed = true;
    const running = document.getAnimations()
      .filter(a => a.playState === 'running' && Number.isFinite(a.effect?.getComputedTiming().endTime));
    if (!running.length) return done(false);
    Promise.all(running.map(a => a.finished.catch(() => null))).then(() => done(true));
  };
  requestAnimationFrame(frame);
  setTimeout(frame, 100);
  setTimeout(() => done(true), 750);
})"""
"""The rest of `POINTER_ANSWER_JS`: the second frame, then the transitions running then; true when it waited for any
(or for its bound), so what the accessibility tree said during that frame may be out of date."""
FRAME_WAIT = 1.0
"""Seconds the Page's answer gets at most."""


class Rest(Enum):
    """Where the pointer is once `rest_on` is done."""

    there = "there"
    """Where the click will press, and the Page has answered (or the act presses nothing with the pointer)."""
    changed = "changed"
    """Where the click will press, but what is there is no longer the element the frame named."""
    hidden = "hidden"
    """Not moved: the Page is hidden (a minimized window). Chromium delivers a pointer move there only with the next
    press or after about 5 s, so a move would not be answered before the read; the policy reads without it."""


UNDER = f"""
function (x, y, ...named) {{
  const control = ({AT_POINT})(x, y);
  for (let n = control; n; n = n.parentNode || n.host) {{
    if (named.includes(n)) return true;
    if (n.localName === 'label' && n.control && named.includes(n.control)) return true;
  }}
  return false;
}}
"""
"""True when the control under (x, y) is, or is inside, one of `named` (or is a label of one)."""


@dataclass(frozen=True)
class Pointed:
    """What `rest_on` did: where the pointer rests, and the top document's live elements with the frame's role and
    name as read once the Page answered it (None when none were read: the commit read then reads them itself)."""

    rest: Rest
    named: list[dict[str, Any]] | None = None


Answered = Callable[[PageProbe, FrameContext, Element, tuple[float, float]], Awaitable[list[dict[str, Any]]]]
"""How the pointer is moved to the press point, the Page's answer awaited and the named elements read once it has
answered (`answered`)."""


async def rest_on(
    probe: PageProbe,
    frames: list[FrameContext],
    action: Action,
    element: Element | None,
    answer: Answered | None = None,
) -> Pointed:
    """Move the pointer to where `action` (a click) will press and let the Page answer. `Rest.changed` when, once the
    pointer is there, the control under it is not one with the role and name the frame gave the ref (renamed,
    covered or moved as the pointer reached it).

    A ref with no rendered match in the top document (hidden, or in a frame of its own) is not moved to: the
    backend's own checks refuse a hidden control, and a frame's element is read as before (docs/policy.md).
    `answer`: how the Page's answer is awaited and the named elements read then (`answered` unless one is passed)."""
    if not frames or not frames[0].top or action.type != "click" or not (action.is_point or element is not None):
        return Pointed(Rest.there)
    top = frames[0]
    if await probe.evaluate_in(top, "document.visibilityState") == "hidden":
        return Pointed(Rest.hidden)
    if action.is_point:
        mark("policy")
        await move_pointer(probe, top, float(action.x or 0), float(action.y or 0))
        await _answer(probe, top)
        mark("pointer")
        return Pointed(Rest.there)
    if element is None:
        return Pointed(Rest.there)
    named = await aim(probe, top, element)
    point = None
    for remote in named:
        point = await _press_point(probe, top, remote["objectId"])
        if point is not None:
            break
    if point is None:
        return Pointed(Rest.there)
    # Covered before the pointer came (a sticky header): not the move's doing, and the backend's own checks answer it.
    ours = await _under(probe, top, point, named)
    mark("policy")
    named = await (answer or answered)(probe, top, element, point)
    mark("pointer")
    if not named or (ours and not await _under(probe, top, point, named)):
        return Pointed(Rest.changed)
    return Pointed(Rest.there, named)


async def answered(
    probe: PageProbe, frame: FrameContext, element: Element, point: tuple[float, float]
) -> list[dict[str, Any]]:
    """Move the pointer to `point` and read the Page's answer (`POINTER_ANSWER_JS`: the frame asked for before the
    move, then one more and the transitions running then), and the live elements with the element's role and name
    once it has answered. The accessibility lookup waits for the Page's next rendering update anyway, so it is sent
    with the second frame's wait and answers with that frame, after the Page's callbacks of it; only when
    transitions were still running then is it asked again, once they have ended."""
    await probe.evaluate_in(frame, FIRST_FRAME)
    await move_pointer(probe, frame, *point)
    await _frames(probe, frame, "globalThis.computerUseFirstFrame")
    waited, named = await asyncio.gather(_frames(probe, frame, SECOND_FRAME), live(probe, frame, element))
    return await live(probe, frame, element) if waited else named


async def _under(
    probe: PageProbe, frame: FrameContext, point: tuple[float, float], named: list[dict[str, Any]]
) -> bool:
    """Whether the control at `point` is, or is inside, one of the `named` live elements."""
    found = await probe.send_in(
        frame,
        "Runtime.callFunctionOn",
        {
            "objectId": named[0]["objectId"],
            "functionDeclaration": UNDER,
            "arguments": [{"value": point[0]}, {"value": point[1]}]
            + [{"objectId": remote["objectId"]} for remote in named],
            "returnByValue": True,
        },
    )
    return found.get("result", {}).get("value") is True


async def _press_point(probe: PageProbe, frame: FrameContext, object_id: str) -> tuple[float, float] | None:
    """Where a backend's click presses this element: scrolled into view if needed, the centre of its first content
    quad (Playwright, Puppeteer and the first-party contract agree on it for any element with one box)."""
    try:
        await probe.send_in(frame, "DOM.scrollIntoViewIfNeeded", {"objectId": object_id})
        quads = (await probe.send_in(frame, "DOM.getContentQuads", {"objectId": object_id}))["quads"]
    except (CDPError, KeyError):
        return None  # not rendered (display: none) or gone
    for quad in quads:
        xs, ys = quad[0::2], quad[1::2]
        if max(xs) - min(xs) >= 1 and max(ys) - min(ys) >= 1:
            return sum(xs) / 4, sum(ys) / 4
    return None


async def hovered(probe: PageProbe) -> None:
    """After a hover (a scroll by ref: the backend rests the pointer on the element), let the Page answer before the
    act's re-observation reads it: what the hover reveals is then in the act's answer, at the size it will have when
    pressed. A Page the probe cannot read now is observed as it is."""
    with contextlib.suppress(CDPError):
        frames = await probe.frames()
        if frames and frames[0].top:
            await _answer(probe, frames[0])


async def move_pointer(probe: PageProbe, frame: FrameContext, x: float, y: float) -> None:
    """Move the mouse pointer to (x, y) of the Page, as a person's mouse would (no button, no focus)."""
    params: dict[str, Any] = {"type": "mouseMoved", "x": x, "y": y, "modifiers": 0}
    await probe.send_in(frame, "Input.dispatchMouseEvent", params)


async def _answer(probe: PageProbe, frame: FrameContext) -> None:
    await _frames(probe, frame, POINTER_ANSWER_JS)


async def _frames(probe: PageProbe, frame: FrameContext, expression: str) -> bool:
    """Wait for the Page's frames as `expression` does; its answer, or True when it did not answer in time."""
    params = {"expression": expression, "contextId": frame.world, "awaitPromise": True, "returnByValue": True}
    try:
        found = await asyncio.wait_for(probe.send_in(frame, "Runtime.evaluate", params), FRAME_WAIT)
    except TimeoutError:
        return True  # a Page that renders nothing and runs no timer now is read as it is
    return found.get("result", {}).get("value") is not False
