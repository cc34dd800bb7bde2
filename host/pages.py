"""The Pages feed: keeps the console's Pages list current from browser-level facts only.

The registry knows the Pages; the browser announces targets and their URLs, not the titles their documents set nor
window moves. So the feed re-reads the registry (window bounds by window id, the target list: never a call on a
Page) when a target changes, when a Page is registered, while a new Page loads (its title), and when asked (the
console regained focus, a model call took a fresh Page Context), and publishes a `pages` event only when what the
console shows has changed.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any

from host.cards import clip
from runtime.cdp import CDPError
from runtime.models import Page
from runtime.registry.pages import PageRegistry

TITLE_READS = 100
TITLE_INTERVAL = 0.1
"""How often, and how many times, a new Page's title is read while it loads (10 s at most)."""


class PagesFeed:
    """The console's Pages list: what each Page is (handle, relation, title, URL, access), kept current."""

    def __init__(self, registry: PageRegistry, publish: Callable[[dict[str, Any]], None]) -> None:
        self.registry = registry
        self.publish = publish
        self._shown: list[dict[str, Any]] | None = None
        self._refreshing: asyncio.Task[None] | None = None
        self._again = False
        self._tasks: set[asyncio.Task[Any]] = set()

    def show(self) -> None:
        """Publish the Pages as the registry has them now, if the console would see a difference."""
        registry = self.registry
        pages = []
        for page in registry.pages():
            if page.is_chat or registry.is_lost(page) or registry.is_reserved(page):
                continue  # a Page that navigated to the console is nothing the user may tick or grant
            info = registry.info(page)
            pages.append(
                {
                    "handle": info.handle,
                    "relation": info.relation,
                    "title": clip(info.title, 200),
                    "url": clip(info.url, 500),
                    "access": page.access_enabled,
                }
            )
        if pages != self._shown:  # most target changes (a load, a title) change nothing the console shows
            self._shown = pages
            self.publish({"type": "pages", "pages": pages})

    def on_page_event(self, page: Page, what: str) -> None:
        if what == "registered":
            self.refresh()
            self.follow_title(page)
        self.show()

    def on_cdp_event(self, method: str, params: dict[str, Any], session_id: str | None) -> None:
        if session_id is None and method == "Target.targetInfoChanged":
            target = (params.get("targetInfo") or {}).get("targetId")
            if any(page.cdp_target_id == target for page in self.registry.pages()):
                self.refresh()

    def refresh(self) -> asyncio.Task[None]:
        """Re-read every live Page; one refresh at a time, and changes during it get one more round."""
        if self._refreshing is None or self._refreshing.done():
            self._refreshing = asyncio.create_task(self._refresh())
        else:
            self._again = True
        return self._refreshing

    async def _refresh(self) -> None:
        registry = self.registry
        while True:
            self._again = False
            live = [p.registry_page_id for p in registry.pages() if not p.is_chat and not registry.is_lost(p)]
            try:
                await registry.refresh(live)
            except (CDPError, TimeoutError):
                return  # the browser is going away; the next event or request refreshes again
            self.show()
            if not self._again:
                return

    def follow_title(self, page: Page) -> None:
        """Show the new Page's title once its document has one (in the background)."""
        if page.is_chat:
            return
        task = asyncio.create_task(self.until_titled(page))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def until_titled(self, page: Page) -> bool:
        """Re-read the Page's title until its document has one, bounded; True once it has.

        Chromium announces a target's URL but not the title its document sets, so this reads the target list
        (browser-level: never a call on the Page) a few times while the Page loads."""
        for _ in range(TITLE_READS):
            try:
                await self.registry.refresh([page.registry_page_id])
            except (CDPError, TimeoutError):
                return False
            if page.title and page.title not in (page.url, page.url.split("://", 1)[-1]):
                self.show()
                return True
            await asyncio.sleep(TITLE_INTERVAL)
        return False

    async def close(self) -> None:
        for task in [*self._tasks, self._refreshing]:
            if task is not None and not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
