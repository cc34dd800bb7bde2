"""The app's window manager: where the console's and the Pages' windows go, inside the screen's work area.

The work area is what the browser says of its screen (`screen.availLeft/availTop/availWidth/availHeight`, reported by
the console itself: the app never reads the chat Page). `place` is the arithmetic, pure: a new Page goes beside the
chat on the side the user chose; when the two do not fit, the chat first moves away from that side, then gives up
width (or height) down to `MIN_CHAT` (never below half of what the two share), and below that they share it
equally. Pages already open are never moved,
and the chat never moves past them, so every relation the registry computes from geometry stays what it was.
`WindowManager` does the browser's part: browser-level CDP only (window bounds by window id, targets).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from runtime.cdp import CDPConnection

Side = Literal["left", "right", "above", "below"]
SIDES: tuple[Side, ...] = ("left", "right", "above", "below")

MIN_CHAT = (480, 360)
"""The chat's smallest width and height when it makes room for a Page (below it the two share the space)."""
MIN_PAGE = (320, 240)
"""The smallest width and height a new Page is given while the chat can still shrink."""
CASCADE = 32
"""Pixels further down (or right) each further Page on a side opens, so the one below it stays visible."""


@dataclass(frozen=True)
class Rect:
    left: int
    top: int
    width: int
    height: int

    @property
    def right(self) -> int:
        return self.left + self.width

    @property
    def bottom(self) -> int:
        return self.top + self.height

    def inside(self, other: Rect) -> bool:
        return (
            self.left >= other.left and self.top >= other.top and self.right <= other.right
            and self.bottom <= other.bottom
        )  # fmt: skip

    def bounds(self) -> dict[str, int]:
        """As CDP's `Browser.setWindowBounds` and `Target.createTarget` take it."""
        return {"left": self.left, "top": self.top, "width": self.width, "height": self.height}

    @classmethod
    def of(cls, raw: Any) -> Rect:
        """From anything with left/top/width/height (a registry `Geometry`, CDP's bounds dict)."""
        get = raw.get if isinstance(raw, dict) else lambda key, default=0: getattr(raw, key, default)
        return cls(int(get("left", 0)), int(get("top", 0)), int(get("width", 0)), int(get("height", 0)))


CHAT = Rect(760, 0, 760, 900)
"""Where the console window asks to open before the screen is known (then `fit` into the work area)."""


@dataclass(frozen=True)
class Placement:
    chat: Rect
    """The chat's bounds after making room (the same as before when the Page fitted)."""
    page: Rect


def fit(rect: Rect, work: Rect) -> Rect:
    """`rect` made no larger than the work area and moved inside it."""
    width, height = min(rect.width, work.width), min(rect.height, work.height)
    left = min(max(rect.left, work.left), work.right - width)
    top = min(max(rect.top, work.top), work.bottom - height)
    return Rect(left, top, width, height)


def _flip(rect: Rect) -> Rect:
    """The same rectangle with the axes swapped: above/below are left/right of the transposed screen."""
    return Rect(rect.top, rect.left, rect.height, rect.width)


def _mirror(rect: Rect, work: Rect) -> Rect:
    """Mirrored about the work area's vertical centre line: left is right of the mirrored screen."""
    return Rect(work.left + work.right - rect.right, rect.top, rect.width, rect.height)


def place(work: Rect, chat: Rect, side: Side, others: Sequence[tuple[str, Rect]] = ()) -> Placement:
    """Where a new Page goes `side` of the chat, and where the chat goes to make room; both inside `work`, neither
    over the other, and every Page in `others` keeping its relation.

    `others` are the Pages already open, each with its relation to the chat. Worked out for `right`; the other
    sides are the same arithmetic on a mirrored or transposed screen."""
    if side not in SIDES:
        raise ValueError(f"side is one of {', '.join(SIDES)}")
    flip = side in ("above", "below")
    mirror = side in ("left", "above")
    frame = _flip(work) if flip else work

    def to(rect: Rect) -> Rect:  # into the frame where the new Page goes right
        rect = _flip(rect) if flip else rect
        return _mirror(rect, frame) if mirror else rect

    def back(rect: Rect) -> Rect:
        rect = _mirror(rect, frame) if mirror else rect
        return _flip(rect) if flip else rect

    across = {"left": "right", "right": "left", "above": "below", "below": "above"}[side]
    axis, cross = (1, 0) if flip else (0, 1)
    moved = to(fit(chat, work))
    if not flip and any(relation in ("above", "below") for relation, _ in others):
        # Left and right are judged before above and below (`runtime.registry.relation`): a chat moved sideways
        # could turn a Page above it into one beside it. Moved up or down, nothing left or right of it changes.
        floor = moved.left
    else:
        floor = max([frame.left] + [to(rect).right for relation, rect in others if relation == across])
        floor = min(floor, moved.left)
    want = moved.width
    room = frame.right - moved.right
    if room < want:  # move away from the new Page's side, never past the Pages on the other side
        shift = min(want - room, moved.left - floor)
        moved = replace(moved, left=moved.left - shift)
        room += shift
    if room < min(want, MIN_PAGE[axis]):  # still too little: the chat gives up width, keeping half at least
        span = frame.right - moved.left
        room = min(want, max(span - max(MIN_CHAT[axis], span // 2), min(MIN_PAGE[axis], span // 2)))
        moved = replace(moved, width=span - room)
    step = CASCADE * sum(1 for relation, _ in others if relation == side)
    height = max(moved.height - step, min(moved.height, MIN_PAGE[cross]))
    top = max(min(moved.top + step, frame.bottom - height), frame.top)
    page = Rect(moved.right, top, min(want, room), height)
    return Placement(back(moved), back(page))


class WindowManager:
    """The windows the app opens in the browser, placed inside the screen's work area."""

    def __init__(self, cdp: CDPConnection, work: Rect | None = None) -> None:
        self.cdp = cdp
        self.work = work
        """The screen's work area as the console last reported it; None until it has (then nothing is clamped)."""
        self.created: list[str] = []
        """Targets the app created: closed with it when the browser is not its own."""

    def chat_bounds(self, chat: Rect = CHAT) -> Rect:
        return fit(chat, self.work) if self.work is not None else chat

    def place(self, chat: Rect, side: Side, others: Sequence[tuple[str, Rect]]) -> Placement:
        if self.work is None:  # no screen reported (a console that never loaded): chat-sized slots, as before
            step = 1 + sum(1 for relation, _ in others if relation == side)
            dx = {"left": -chat.width, "right": chat.width}.get(side, 0) * step
            dy = {"above": -chat.height, "below": chat.height}.get(side, 0) * step
            return Placement(chat, replace(chat, left=chat.left + dx, top=chat.top + dy))
        return place(self.work, chat, side, others)

    async def open(self, url: str, bounds: Rect, *, background: bool) -> tuple[str, int]:
        """A new window at `bounds` showing `url`: (target id, window id)."""
        created = await self.cdp.send(
            "Target.createTarget", {"url": url, "newWindow": True, "background": background, **bounds.bounds()}
        )
        target = created["targetId"]
        self.created.append(target)
        window = (await self.cdp.send("Browser.getWindowForTarget", {"targetId": target}))["windowId"]
        await self.move(window, bounds)
        return target, window

    async def move(self, window: int, bounds: Rect) -> None:
        await self.cdp.send("Browser.setWindowBounds", {"windowId": window, "bounds": bounds.bounds()})

    async def close_strays(self) -> list[str]:
        """Close the blank windows the browser opened at launch (Chromium's first tab): a window nobody asked for
        stays behind the app's otherwise. Only for a browser the app launched itself."""
        targets = (await self.cdp.send("Target.getTargets"))["targetInfos"]
        strays = [
            t["targetId"]
            for t in targets
            if t.get("type") == "page" and t.get("url") == "about:blank" and t["targetId"] not in self.created
        ]
        for target in strays:
            await self.cdp.send("Target.closeTarget", {"targetId": target})
        return strays
