"""The window shell: a workspace of real Chromium windows, one Page per window, with real bounds.

This plays the part of the host application's window manager: a chat window and pane windows side by side, and
the moves later suites need (swap left/right, split top/bottom, minimize, occlude, close, replace the target behind
a logical tab, a second workspace window). It drives Chromium over its own direct CDP connection, never through
the tap, so the tap only ever counts the system under test. Geometry is always read back from Chromium.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, replace
from typing import Any

from lab.cdp import CDPClient

LOAD_TIMEOUT = 60.0
"""Seconds a Page may take to fire its load event. A bound for a hang, not a speed check: the 200,000-button seat
map loads in 5-11 s on an idle 2-core machine and took over 15 s with both test workers busy."""
LOADED_URL = "document.readyState === 'complete' && document.URL !== 'about:blank' ? document.URL : ''"
"""A window's document URL once it has loaded, "" while it still shows the blank document it was created with."""


# Installed before the window is activated, so a focus that arrives between the activation and the read is seen.
FOCUS_WAITER = """
(() => {
  const arrived = new Promise(resolve => window.addEventListener('focus', () => resolve(true), {once: true}));
  window.__labFocus = timeout => document.hasFocus() ? true : Promise.race([
    arrived.then(() => document.hasFocus()),
    new Promise(resolve => setTimeout(() => resolve(document.hasFocus()), timeout)),
  ]);
})()
"""


@dataclass(frozen=True)
class Bounds:
    left: int
    top: int
    width: int
    height: int

    @classmethod
    def of(cls, raw: dict[str, Any]) -> Bounds:
        return cls(raw["left"], raw["top"], raw["width"], raw["height"])

    def as_cdp(self) -> dict[str, int]:
        return {"left": self.left, "top": self.top, "width": self.width, "height": self.height}


@dataclass
class LabPage:
    """A logical tab in the workspace. `target_id` changes when the target behind it is replaced."""

    name: str
    target_id: str
    window_id: int
    url: str
    workspace: str


@dataclass(frozen=True)
class WindowState:
    bounds: Bounds
    state: str  # "normal" | "minimized" | "maximized" | "fullscreen"

    def covers(self, other: Bounds) -> bool:
        """Whether this window, shown (not minimized), spans every pixel of `other`."""
        b = self.bounds
        return (
            self.state != "minimized"
            and b.left <= other.left
            and b.top <= other.top
            and b.left + b.width >= other.left + other.width
            and b.top + b.height >= other.top + other.height
        )


@dataclass(frozen=True)
class PageState:
    """What the page's own document says about itself: `document.visibilityState` and `document.hasFocus()`."""

    visibility: str  # "visible" | "hidden"
    focused: bool


class Workspace:
    """Windows laid out inside a rectangle of the (virtual) screen. `origin` separates two workspace windows."""

    _serial = itertools.count(1)

    def __init__(self, cdp: CDPClient, name: str = "main", area: Bounds = Bounds(0, 0, 1800, 1000)) -> None:
        self.cdp = cdp
        self.name = name
        self.area = area
        self.pages: dict[str, LabPage] = {}
        self._sessions: dict[str, str] = {}

    # -- opening -----------------------------------------------------------------------------------------------

    async def open(self, name: str, url: str, bounds: Bounds) -> LabPage:
        """Open `url` in a new window with exactly `bounds`; return once its load event fired."""
        if name in self.pages:
            raise ValueError(f"a page named {name!r} is already open in workspace {self.name!r}")
        target_id = await self._create_loaded(url, bounds)
        window = await self.cdp.send("Browser.getWindowForTarget", {"targetId": target_id})
        page = LabPage(name, target_id, window["windowId"], url, self.name)
        self.pages[name] = page
        return page

    def column(self, index: int, columns: int) -> Bounds:
        """The `index`-th of `columns` equal side-by-side slots of this workspace's area."""
        width = self.area.width // columns
        return Bounds(self.area.left + index * width, self.area.top, width, self.area.height)

    async def _create_loaded(self, url: str, bounds: Bounds) -> str:
        # Created at its URL, not blank and then navigated: one renderer for the window instead of a blank one and
        # the site's after it (a fifth less of Chromium's CPU per window, and suites open thousands of windows).
        created = await self.cdp.send(
            "Target.createTarget", {"url": url, "newWindow": True, "background": True, **bounds.as_cdp()}
        )
        target_id = created["targetId"]
        attached = await self.cdp.send("Target.attachToTarget", {"targetId": target_id, "flatten": True})
        session = attached["sessionId"]
        try:
            if not url.startswith("about:"):
                await self._loaded(session, url)
        except BaseException:
            # A window whose load failed is closed, not left behind: on a 200,000-button page a leaked window
            # keeps hundreds of MB and its layout work for the rest of the run, slowing every later test.
            await self._close_target(target_id)
            raise
        await self.cdp.send("Target.detachFromTarget", {"sessionId": session})
        return target_id

    async def _loaded(self, session: str, url: str) -> None:
        """Return once the window's document at `url` has loaded. The load may have ended before the lab attached,
        so the wait is registered first and the document is then asked whether it has loaded already."""
        await self.cdp.send("Page.enable", session_id=session, timeout=LOAD_TIMEOUT)  # the renderer answers it
        loaded = self.cdp.wait_for_event("Page.loadEventFired", session_id=session, timeout=LOAD_TIMEOUT)
        shown = await self._loaded_url(session)
        if shown:
            loaded.cancel()
        else:
            await loaded
            shown = await self._loaded_url(session)
        if shown.startswith("chrome-error:"):
            raise RuntimeError(f"could not load {url}: the browser shows its error page")

    async def _loaded_url(self, session: str) -> str:
        """The document's URL once it has loaded; "" while the window still shows its initial blank document.
        Bounded by the load's own bound, not a command's: a loading document's script holds the main thread, which
        answers only when it is done (a 200,000-button page's takes over 10 s on a loaded machine)."""
        result = await self.cdp.send(
            "Runtime.evaluate", {"expression": LOADED_URL, "returnByValue": True}, session_id=session,
            timeout=LOAD_TIMEOUT,
        )  # fmt: skip
        return str(result.get("result", {}).get("value") or "")

    async def _session(self, page: LabPage) -> str:
        session = self._sessions.get(page.target_id)
        if session is None:
            attached = await self.cdp.send("Target.attachToTarget", {"targetId": page.target_id, "flatten": True})
            session = self._sessions[page.target_id] = attached["sessionId"]
        return session

    async def navigate(self, page: LabPage, url: str) -> None:
        """Load `url` in the page, as a user typing it would; return once its load event fired."""
        await self._load(await self._session(page), url)

    async def _load(self, session: str, url: str) -> None:
        # The load wait is registered before the navigation: no race with a fast load.
        await self.cdp.send("Page.enable", session_id=session, timeout=LOAD_TIMEOUT)  # the renderer answers it
        loaded = self.cdp.wait_for_event("Page.loadEventFired", session_id=session, timeout=LOAD_TIMEOUT)
        result = await self.cdp.send("Page.navigate", {"url": url}, session_id=session)
        if result.get("errorText"):
            loaded.cancel()
            raise RuntimeError(f"could not load {url}: {result['errorText']}")
        await loaded

    async def evaluate(self, page: LabPage, expression: str, await_promise: bool = False) -> Any:
        """Evaluate in the page (the shell's own eyes, for checks; never the system under test's)."""
        session = await self._session(page)
        result = await self.cdp.send(
            "Runtime.evaluate",
            {"expression": expression, "awaitPromise": await_promise, "returnByValue": True},
            session_id=session,
        )
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression!r} threw: {result['exceptionDetails'].get('text')}")
        return result["result"].get("value")

    async def page_state(self, page: LabPage) -> PageState:
        """The page's visibility and focus as its document reports them now.

        One `Runtime.evaluate` on the shell's own session: reading never activates, raises or focuses the window
        (no `Page.bringToFront`, no focus emulation), so it cannot make the state it reads.
        """
        visibility, focused = await self.evaluate(page, "[document.visibilityState, document.hasFocus()]")
        return PageState(visibility, focused)

    async def focus(self, page: LabPage, timeout_ms: int = 5000) -> bool:
        """Activate the page's window, as a user clicking into it would (the window manager's move, not the SUT's).

        Returns whether the page's document reports the focus. It arrives after `Page.bringToFront` has answered
        (the browser hands focus to the renderer on its own schedule; a loaded machine shows the gap), so the
        document's `focus` event is awaited, bounded by `timeout_ms`; the listener is installed before the move.
        """
        await self.evaluate(page, FOCUS_WAITER)
        await self.cdp.send("Page.bringToFront", session_id=self._sessions[page.target_id])
        return bool(await self.evaluate(page, f"window.__labFocus({timeout_ms})", await_promise=True))

    # -- geometry ----------------------------------------------------------------------------------------------

    async def window(self, page: LabPage) -> WindowState:
        """The page's window as Chromium reports it now."""
        raw = await self.cdp.send("Browser.getWindowBounds", {"windowId": page.window_id})
        bounds = raw["bounds"]
        return WindowState(Bounds.of(bounds), bounds.get("windowState", "normal"))

    async def bounds(self, page: LabPage) -> Bounds:
        return (await self.window(page)).bounds

    async def covered_by(self, page: LabPage) -> list[LabPage]:
        """The windows opened after `page` (so stacked above it) that span all of it, as Chromium reports them now."""
        names = list(self.pages)
        later = names[names.index(page.name) + 1 :] if page.name in names else []
        target = await self.bounds(page)
        return [self.pages[n] for n in later if (await self.window(self.pages[n])).covers(target)]

    async def place(self, page: LabPage, bounds: Bounds) -> Bounds:
        """Move and resize the page's window; returns the bounds read back from Chromium."""
        state = await self.window(page)
        if state.state != "normal":
            await self._set(page, {"windowState": "normal"})
        await self._set(page, bounds.as_cdp())
        return await self.bounds(page)

    async def _set(self, page: LabPage, bounds: dict[str, Any]) -> None:
        await self.cdp.send("Browser.setWindowBounds", {"windowId": page.window_id, "bounds": bounds})

    async def swap(self, a: LabPage, b: LabPage) -> tuple[Bounds, Bounds]:
        """Exchange the two windows' places (e.g. left and right). Returns (a, b) bounds as read back."""
        bounds_a, bounds_b = await self.bounds(a), await self.bounds(b)
        return await self.place(a, bounds_b), await self.place(b, bounds_a)

    async def split(self, top: LabPage, bottom: LabPage, area: Bounds | None = None) -> tuple[Bounds, Bounds]:
        """Stack two windows in `area` (default: where `top` is now), `top` above `bottom`."""
        area = area or await self.bounds(top)
        half = area.height // 2
        return (
            await self.place(top, replace(area, height=half)),
            await self.place(bottom, replace(area, top=area.top + half, height=area.height - half)),
        )

    async def minimize(self, page: LabPage) -> WindowState:
        await self._set(page, {"windowState": "minimized"})
        return await self.window(page)

    async def restore(self, page: LabPage) -> WindowState:
        await self._set(page, {"windowState": "normal"})
        return await self.window(page)

    async def occlude(self, page: LabPage, url: str = "about:blank") -> LabPage:
        """Open another window over exactly the page's bounds, created last so it is on top."""
        bounds = await self.bounds(page)
        return await self.open(f"occluder-{next(self._serial)}", url, bounds)

    # -- lifecycle ---------------------------------------------------------------------------------------------

    async def close(self, page: LabPage) -> None:
        """Close the page's target and return once Chromium reports it destroyed."""
        await self._close_target(page.target_id)
        self.pages.pop(page.name, None)

    async def _close_target(self, target_id: str) -> None:
        self._sessions.pop(target_id, None)
        # closeTarget answers before the target is gone; discovery events tell us when it is.
        await self.cdp.send("Target.setDiscoverTargets", {"discover": True})
        destroyed = self.cdp.wait_for_event("Target.targetDestroyed", predicate=lambda p: p["targetId"] == target_id)
        await self.cdp.send("Target.closeTarget", {"targetId": target_id})
        await destroyed

    async def replace_target(self, page: LabPage) -> LabPage:
        """Close the target behind the logical tab and recreate it in the same place: same name, new target id."""
        bounds = await self.bounds(page)
        await self._close_target(page.target_id)
        target_id = await self._create_loaded(page.url, bounds)
        window = await self.cdp.send("Browser.getWindowForTarget", {"targetId": target_id})
        page.target_id, page.window_id = target_id, window["windowId"]
        return page

    async def close_all(self) -> None:
        for page in list(self.pages.values()):
            try:
                await self.close(page)
            except Exception:  # a page may already be gone (crashed, or closed by the test)
                self.pages.pop(page.name, None)
