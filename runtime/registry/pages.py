"""The Page Registry: windows, panes, the chat Page, tabs, access and revisions, with real geometry.

Identity and lifecycle (docs/requirements.md, "Page identity and lifecycle"): a Page's `revision` bumps whenever
something an authorization depends on changes: its target is replaced, it is hidden or moved to another workspace
group, its access is toggled. Focus changes and pane moves inside the workspace do not bump it (they do change the
computed relation). A closed or crashed target is marked lost; sessions bound to it fail with `target_lost`
before the next side effect.

Reserved origins: the host names origins that are never a Page an agent may use (the app's console is the chat, and
its URL carries the console's secret). Pages navigate, so this is a property of a Page's *current* URL, not of how
it was opened: `reserved_now` reads it fresh, and the service checks it before and after every command, a Page on a
reserved origin is left out of every Page Context, and its preview is never read. The runtime knows nothing about
the host beyond this set of origins.

The registry reads only browser-level CDP (`Target.getTargets`, `Browser.getWindowBounds` by window id), so
keeping it current never touches an unauthorized Page.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import re
import socket
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

from runtime.cdp import CDPConnection, CDPError
from runtime.models.page import Geometry, Page, PageInfo
from runtime.registry.relation import relation

Listener = Callable[[Page, str], None]  # (page, what happened: "registered" | "lost" | "replaced" | "revised")


class UnknownPage(KeyError):
    pass


DEFAULT_PORTS = {"http": 80, "https": 443}
IPV4_FORMS = re.compile(r"[0-9a-fx.]+")


def origin(url: str) -> str:
    """The URL's http(s) origin as `scheme://host:port`, the way a browser resolves it: lower case, the default port
    spelled out, an IPv4 address in any form the browser accepts (`127.1`, `0x7f.0.0.1`, `2130706433`) dotted; ""
    when the URL has no http(s) origin."""
    try:
        parts = urlsplit(url.strip())
        host, port = (parts.hostname or ""), parts.port
    except ValueError:
        return ""
    scheme = parts.scheme.lower()
    if scheme not in DEFAULT_PORTS or not host:
        return ""
    if IPV4_FORMS.fullmatch(host):
        with contextlib.suppress(OSError):
            host = socket.inet_ntoa(socket.inet_aton(host))
    return f"{scheme}://{host}:{port if port is not None else DEFAULT_PORTS[scheme]}"


class WriteLease:
    """A Page's write lease: same-Page writes are exclusive across ComputerSessions.

    An `asyncio.Lock` that also knows how many calls wait for it, so a test can hold the lease, start several acts
    and know they are all queued (`queued(n)`) before it lets them go, instead of hoping the scheduler got there.
    """

    def __init__(self) -> None:
        self._lock = asyncio.Lock()
        self._watchers: list[asyncio.Future[None]] = []
        self.waiting = 0

    async def acquire(self) -> None:
        self.waiting += 1
        for watcher in self._watchers:
            if not watcher.done():
                watcher.set_result(None)
        self._watchers.clear()
        try:
            await self._lock.acquire()
        finally:
            self.waiting -= 1

    def release(self) -> None:
        self._lock.release()

    def locked(self) -> bool:
        return self._lock.locked()

    async def queued(self, count: int) -> None:
        """Return once at least `count` calls wait for the lease. Unbounded by itself: wrap it in a timeout."""
        while self.waiting < count:
            watcher: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._watchers.append(watcher)
            await watcher


class PageRegistry:
    def __init__(self, cdp: CDPConnection) -> None:
        self._cdp = cdp
        self._pages: dict[str, Page] = {}
        self._serial = itertools.count(1)
        self._lost: set[str] = set()  # target ids that were closed or crashed
        self._leases: dict[str, WriteLease] = {}
        self._listeners: list[Listener] = []
        self.access_revision = 1
        self.reserved_origins: set[str] = set()
        """Origins (as `origin` spells them) that are never a Page an agent may use: the host's to fill."""
        cdp.listen(self._on_event)

    async def start(self) -> None:
        # Target lifecycle events (browser-level): closes, crashes and replacements invalidate bindings.
        await self._cdp.send("Target.setDiscoverTargets", {"discover": True})

    def listen(self, listener: Listener) -> None:
        self._listeners.append(listener)

    # -- registration (the host's side) --------------------------------------------------------------------

    async def register(
        self,
        target_id: str,
        window_id: int,
        *,
        workspace: str = "main",
        is_chat: bool = False,
        tab_id: str | None = None,
        opener_page_id: str | None = None,
    ) -> Page:
        """Register a Page the host owns. The host knows its windows; geometry is read back from the browser."""
        handle = f"page-{next(self._serial)}"
        page = Page(
            registry_page_id=handle,
            tab_id=tab_id or f"tab-{handle}",
            window_id=window_id,
            cdp_target_id=target_id,
            workspace=workspace,
            geometry=await self._geometry(window_id),
            is_chat=is_chat,
            opener_page_id=opener_page_id,
        )
        self._pages[handle] = page
        for listener in list(self._listeners):
            listener(page, "registered")
        return page

    async def _geometry(self, window_id: int) -> Geometry:
        raw = (await self._cdp.send("Browser.getWindowBounds", {"windowId": window_id}))["bounds"]
        return Geometry(
            left=raw.get("left", 0),
            top=raw.get("top", 0),
            width=raw.get("width", 0),
            height=raw.get("height", 0),
            state=raw.get("windowState", "normal"),
        )

    def get(self, handle: str) -> Page:
        try:
            return self._pages[handle]
        except KeyError:
            raise UnknownPage(handle) from None

    def pages(self) -> list[Page]:
        return list(self._pages.values())

    @property
    def chat(self) -> Page | None:
        return next((p for p in self._pages.values() if p.is_chat), None)

    def is_lost(self, page: Page) -> bool:
        return page.cdp_target_id in self._lost

    def reserve(self, url: str) -> None:
        """Never let an agent use a Page while it shows `url`'s origin (the host's own console, say)."""
        if origin(url):
            self.reserved_origins.add(origin(url))

    def is_reserved(self, page: Page) -> bool:
        """The Page's URL as last read is on a reserved origin (see `reserved_now` for its current URL)."""
        return bool(self.reserved_origins) and origin(page.url) in self.reserved_origins

    async def reserved_now(self, page: Page) -> bool:
        """Read the Page's current URL (one browser-level `Target.getTargetInfo`, never a call on the Page) and say
        whether it is on a reserved origin. A target that is gone is not reserved: its caller finds it lost."""
        if not self.reserved_origins:
            return False
        try:
            info = (await self._cdp.send("Target.getTargetInfo", {"targetId": page.cdp_target_id}))["targetInfo"]
        except CDPError:
            return False
        page.url = info.get("url", page.url)
        return self.is_reserved(page)

    def lease(self, page: Page) -> WriteLease:
        """The Page's write lease: same-Page writes are exclusive across ComputerSessions."""
        return self._leases.setdefault(page.registry_page_id, WriteLease())

    # -- changes ---------------------------------------------------------------------------------------------

    def _revise(self, page: Page, what: str) -> None:
        page.revision += 1
        for listener in list(self._listeners):
            listener(page, what)

    def replace_target(self, handle: str, target_id: str, window_id: int) -> Page:
        """The host recreated the target behind a logical tab: same handle, new target, new revision."""
        page = self.get(handle)
        self._lost.add(page.cdp_target_id)
        page.cdp_target_id, page.window_id = target_id, window_id
        self._revise(page, "replaced")
        return page

    def set_access(self, handle: str, enabled: bool) -> None:
        page = self.get(handle)
        if page.access_enabled != enabled:
            page.access_enabled = enabled
            self.access_revision += 1
            self._revise(page, "revised")

    def hide(self, handle: str) -> None:
        self._revise(self.get(handle), "revised")

    def transfer(self, handle: str, workspace: str) -> None:
        page = self.get(handle)
        page.workspace = workspace
        self._revise(page, "revised")

    def _on_event(self, method: str, params: dict[str, Any], session_id: str | None) -> None:
        if session_id is not None:
            return
        if method in ("Target.targetDestroyed", "Target.targetCrashed"):
            target_id = params.get("targetId")
            for page in self._pages.values():
                if page.cdp_target_id == target_id and target_id not in self._lost:
                    self._lost.add(target_id)
                    for listener in list(self._listeners):
                        listener(page, "lost")

    # -- Page Context ----------------------------------------------------------------------------------------

    async def refresh(self, handles: list[str]) -> None:
        """Read current geometry (by window id) and title/URL (browser-level target list) for these Pages."""
        try:
            targets = (await self._cdp.send("Target.getTargets"))["targetInfos"]
        except CDPError:
            if not self._cdp.closed.is_set():
                raise
            targets = []  # the browser is gone, and every Page with it: lost, not a failed request
        infos = {t["targetId"]: t for t in targets}
        chat = self.chat
        for page in [self.get(h) for h in handles] + ([chat] if chat else []):
            info = infos.get(page.cdp_target_id)
            if info is None:
                self._lost.add(page.cdp_target_id)
                continue
            try:
                page.geometry = await self._geometry(page.window_id)
            except CDPError:  # closed between the target list and this read: lost, not a failed request
                self._lost.add(page.cdp_target_id)
                continue
            page.title, page.url = info.get("title", ""), info.get("url", "")

    def info(self, page: Page) -> PageInfo:
        chat = self.chat
        rel = (
            relation(page.geometry, chat.geometry, page.workspace == chat.workspace)
            if chat is not None
            else "other_window"
        )
        return PageInfo(
            handle=page.registry_page_id,
            relation=rel,
            title=page.title,
            url=page.url,
            preview=page.preview,
            revision=page.revision,
        )
