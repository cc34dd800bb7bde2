"""The contract's `navigate`, and how every action that may make the page navigate waits for the new document
(DOMContentLoaded), bounded."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

from backends.open_claude_chrome.session import ProtocolError
from backends.open_claude_chrome.tools import ToolBase, tool
from runtime.backend import BackendError, Failure

FLUSH_JS = (
    "new Promise(done => { const c = new MessageChannel(); c.port1.onmessage = () => done(true);"
    " c.port2.postMessage(0); })"
)
NAVIGATION_FLUSH_TIMEOUT = 2.0


@dataclass(frozen=True)
class NavigateResult:
    url: str


class Navigation(ToolBase):
    @tool
    async def navigate(self, url: str) -> NavigateResult:
        """Load `url` (no scheme → https://) or go `"back"`/`"forward"` in history; returns once the new document
        is parsed (DOMContentLoaded), bounded by the navigation timeout."""
        if url in ("back", "forward"):
            history = await self.session.send("Page.getNavigationHistory")
            index = history["currentIndex"] + (-1 if url == "back" else 1)
            if not 0 <= index < len(history["entries"]):
                raise BackendError(Failure.upstream, f"there is no page to go {url} to")
            before = self.session.navigations
            await self.session.send("Page.navigateToHistoryEntry", {"entryId": history["entries"][index]["id"]})
            await self._await(lambda: self.session.navigations > before and not self.session.loading)
            return NavigateResult(self.session.main.url)
        if "://" not in url:
            url = "https://" + url
        try:
            started = await self.session.send("Page.navigate", {"url": url}, timeout=self.navigation_timeout)
        except ProtocolError as exc:
            raise BackendError(Failure.upstream, f"navigate: {exc.message}") from None
        if started.get("errorText"):
            raise BackendError(Failure.upstream, f"navigate to {url} failed: {started['errorText']}")
        loader = started.get("loaderId")
        if loader:  # a new document (a same-document navigation has none and is done already)
            session = self.session
            await self._await(lambda: session.main.loader_id == loader and session.dom_ready_loader == loader)
        return NavigateResult(self.session.main.url)

    @contextlib.asynccontextmanager
    async def _may_navigate(self) -> AsyncIterator[None]:
        """Around an action: if it made the page navigate (a link, a submit, Enter in a form), wait for the new
        document (DOMContentLoaded), bounded, as the other backends do."""
        before = self.session.requests
        yield
        if self.session.dialog is not None:
            return  # the action's effect is a dialog the user must answer; nothing navigates until then
        await self._flush()
        if self.session.requests != before:
            session = self.session
            try:
                await session.wait_until(lambda: not session.navigation_pending, self.navigation_timeout)
            except TimeoutError:
                why = f"the action started a navigation that did not finish within {self.navigation_timeout:g}s"
                raise BackendError(Failure.timeout, why) from None

    async def _flush(self) -> None:
        # A form submission is a task the page posts while handling the click, so its navigation request can reach
        # us after the input is acknowledged. A message-channel task posted now runs after it (same priority, later
        # enqueue order) and, unlike a timer, is not throttled in hidden pages: its answer follows the request.
        main = self.session.main
        try:
            context = await self.worlds.context(main.frame_id, main.loader_id)
            await self.session.send(
                "Runtime.evaluate",
                {"expression": FLUSH_JS, "contextId": context, "awaitPromise": True, "returnByValue": True},
                timeout=NAVIGATION_FLUSH_TIMEOUT,
            )
        except ProtocolError:
            pass  # the document is already gone: the navigation's own events tell the rest
        except BackendError as exc:
            if exc.kind != Failure.timeout:  # a page blocked by a dialog does not answer; the next call will say so
                raise

    async def _await(self, ready: Callable[[], bool]) -> None:
        try:
            await self.session.wait_until(ready, self.navigation_timeout)
        except TimeoutError:
            raise BackendError(Failure.timeout, f"the page did not load within {self.navigation_timeout:g}s") from None
