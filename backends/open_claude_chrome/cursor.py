"""The action cursor: a marker where the runtime is about to click or type, for a human watching the Page.

Drawn by the browser's inspector overlay (`Overlay.highlightRect`), which paints above the page's compositor
layers and is not part of the document: page scripts cannot see it, `elementFromPoint` passes through it, the AX
tree and the DOM snapshot do not contain it, so it cannot change what the page does or what the next read
returns. It does show in `Page.captureScreenshot`, so it is hidden before every screenshot: an agent's image shows
the page, not our marker. It stays until the next action moves it, a screenshot hides it, or the session ends
(Chromium drops a detached client's overlay).

Cost: one `Overlay.highlightRect` per located action; `DOM.enable` + `Overlay.enable` once, on first use (the
overlay agent requires the DOM agent).
"""

from __future__ import annotations

from backends.open_claude_chrome.session import PageSession

SIZE = 18  # CSS px: a square centred on the point, large enough to see, small enough not to hide the target
FILL = {"r": 255, "g": 106, "b": 0, "a": 0.45}
OUTLINE = {"r": 204, "g": 51, "b": 0, "a": 1.0}


class ActionCursor:
    def __init__(self, session: PageSession) -> None:
        self.session = session
        self.enabled = False
        self.shown: tuple[float, float] | None = None
        """Where the marker is drawn now (viewport CSS px), or None."""

    async def show(self, x: float, y: float) -> None:
        if not self.enabled:
            await self.session.send("DOM.enable")
            await self.session.send("Overlay.enable")
            self.enabled = True
        half = SIZE / 2
        await self.session.send(
            "Overlay.highlightRect",
            {
                "x": round(x - half),
                "y": round(y - half),
                "width": SIZE,
                "height": SIZE,
                "color": FILL,
                "outlineColor": OUTLINE,
            },
        )
        self.shown = (x, y)

    async def hide(self) -> None:
        """Remove the marker if one is drawn."""
        if self.shown is None:
            return
        await self.session.send("Overlay.hideHighlight")
        self.shown = None
