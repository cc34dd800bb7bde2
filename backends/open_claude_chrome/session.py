"""The adapter's one CDP session on the bound page, through the scoped gateway.

Why a session object of its own: every call must be bounded, must fail as `target_lost` the moment the page is
closed, crashes or is detached (not after a timeout), and must never go out again once the page is gone. The
runtime's `CDPConnection` carries the frames; this wraps it with the page's lifecycle, the frame table (which
document each frame shows, by loader id) and the page's loading state, all learnt from events rather than asked
for before each call.

Start-up, all through the endpoint the gateway gives us: at browser level `Target.setDiscoverTargets` (so the
page's destruction and crash reach us as events) and `Target.getTargets` (the gateway lists the bound page only),
`Target.attachToTarget {flatten}` of that one page; on the page `Page.enable`, `Page.getFrameTree` and
`Target.setAutoAttach` for iframes only. Cross-site iframes run in other renderers: Chromium attaches each as a
child session of the page (the gateway lets the bound page's children through), and each gets `Page.enable`,
`Page.getFrameTree` and its own iframe auto-attach. No `Runtime.enable` (it is visible to page scripts and floods
us with console events), no focus or window call.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from runtime.backend import BackendError, Failure
from runtime.cdp import CDPConnection, CDPError

LOST_TEXT = re.compile(r"session with given id not found|no target with given id|target closed|target crashed", re.I)
"""Chromium's words when a command's session or target is gone."""


class ProtocolError(Exception):
    """A CDP error answer on a page that is still there: the caller decides what it means (stale ref, bad value)."""

    def __init__(self, method: str, message: str) -> None:
        super().__init__(f"{method}: {message}")
        self.method = method
        self.message = message


@dataclass
class FrameState:
    frame_id: str
    loader_id: str
    url: str
    parent_id: str | None = None
    session_id: str = ""
    """The CDP session whose renderer holds this frame's document (the page's, or an out-of-process iframe's)."""


@dataclass
class ChildTarget:
    """An out-of-process iframe, auto-attached under the page or under another such iframe."""

    session_id: str
    frame_id: str  # an OOPIF's target id is its frame id
    parent_session: str
    ready: asyncio.Future[bool] | None = None
    """Resolves True once its frames are known, False if it went away first."""


AUTO_ATTACH = {"autoAttach": True, "waitForDebuggerOnStart": False, "flatten": True, "filter": [{"type": "iframe"}]}


class PageSession:
    def __init__(
        self,
        endpoint: str,
        *,
        call_timeout: float = 15.0,
        connect_timeout: float = 10.0,
        target_state: Callable[[], str | None] = lambda: None,
    ) -> None:
        """`target_state`: the runtime's word on the bound page (`BackendConfig.target_state`), asked before every
        call; this session's own events and errors only add what its connection sees first."""
        self.endpoint = endpoint
        self._target_state = target_state
        self.call_timeout = call_timeout
        self.connect_timeout = connect_timeout
        self.cdp: CDPConnection | None = None
        self.target_id = ""
        self.session_id = ""
        self.main_frame_id = ""
        self.frames: dict[str, FrameState] = {}
        self.children: dict[str, ChildTarget] = {}
        """Out-of-process iframes by session id."""
        self.lost: str | None = None
        """Why the page is gone, once it is. Sticky: nothing more is sent after that."""
        self.loading = False
        """The main frame started loading and has not stopped (a navigation in flight)."""
        self.dom_ready_loader = ""
        """Loader id of the main-frame document whose DOMContentLoaded fired last."""
        self._lost_event = asyncio.Event()
        self._changed = asyncio.Event()
        self.navigations = 0
        """Main-frame navigations seen (new documents and same-document URL changes)."""
        self.requests = 0
        """Main-frame navigations the page asked for in this tab (a link, a form, a script)."""
        self.navigation_pending = False
        """The last requested main-frame navigation has not yet reached DOMContentLoaded, a same-document change or
        the end of loading (cancelled, 204, download)."""
        self.dialog: str | None = None
        """The JavaScript dialog (alert, confirm, prompt, beforeunload) open on the page, if any: "type: message".
        The backend never answers one (that is the user's decision), and while it is open the page's renderer
        answers nothing, so every call on the page is refused up front instead of hanging until its timeout."""
        self._dialog_event = asyncio.Event()
        self._watch: asyncio.Task[None] | None = None

    # -- lifecycle ---------------------------------------------------------------------------------------------

    async def start(self) -> None:
        try:
            self.cdp = await asyncio.wait_for(CDPConnection.connect(self.endpoint), self.connect_timeout)
        except Exception as exc:  # OSError, aiohttp's errors, a timeout, a discovery answer without a ws URL
            raise BackendError(
                Failure.upstream, f"cannot connect to the CDP endpoint {self.endpoint}: {exc!r}"
            ) from None
        self.cdp.listen(self._on_message)
        self._watch = asyncio.ensure_future(self._watch_connection(self.cdp))
        try:
            await self._attach()
        except ProtocolError as exc:
            raise BackendError(Failure.upstream, f"cannot attach to the page: {exc}") from None

    async def _attach(self) -> None:
        await self._browser("Target.setDiscoverTargets", {"discover": True})
        infos = (await self._browser("Target.getTargets"))["targetInfos"]
        pages = [info for info in infos if info.get("type") == "page"]
        if len(pages) != 1:
            # Refuse rather than guess: acting on "the first page" is exactly the mistake the gateway exists to stop.
            raise BackendError(
                Failure.upstream, f"the CDP endpoint shows {len(pages)} pages; a scoped endpoint shows one"
            )
        self.target_id = pages[0]["targetId"]
        attached = await self._browser("Target.attachToTarget", {"targetId": self.target_id, "flatten": True})
        self.session_id = attached["sessionId"]
        await self.send("Page.enable")
        tree = (await self.send("Page.getFrameTree"))["frameTree"]
        self._load_frame_tree(tree, None, self.session_id)
        self.main_frame_id = tree["frame"]["id"]
        self.dom_ready_loader = self.frames[self.main_frame_id].loader_id
        await self.send("Target.setAutoAttach", AUTO_ATTACH)

    async def close(self) -> None:
        cdp, self.cdp = self.cdp, None
        if self._watch is not None:
            self._watch.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watch
            self._watch = None
        if cdp is not None:
            # Closing the connection detaches the session; Chromium drops our overlay with it.
            await cdp.close()

    def _load_frame_tree(self, tree: dict[str, Any], parent: str | None, session_id: str) -> None:
        frame = tree["frame"]
        self.frames[frame["id"]] = FrameState(
            frame["id"], frame.get("loaderId", ""), frame.get("url", ""), frame.get("parentId", parent), session_id
        )
        for child in tree.get("childFrames", []):
            self._load_frame_tree(child, frame["id"], session_id)

    async def _init_child(self, child: ChildTarget) -> bool:
        try:
            await self.send("Page.enable", session=child.session_id)
            tree = (await self.send("Page.getFrameTree", session=child.session_id))["frameTree"]
            self._load_frame_tree(tree, None, child.session_id)
            await self.send("Target.setAutoAttach", AUTO_ATTACH, session=child.session_id)
        except (ProtocolError, BackendError):
            return False  # detached (or the page lost) while we asked: it has nothing to read
        return child.session_id in self.children

    async def children_ready(self) -> list[ChildTarget]:
        """The out-of-process iframes whose frames are known (waiting, bounded, for any still starting)."""
        pending = [c.ready for c in self.children.values() if c.ready is not None and not c.ready.done()]
        if pending:
            await asyncio.wait(pending, timeout=self.call_timeout)
        return [
            c
            for c in list(self.children.values())
            if c.ready is not None and c.ready.done() and not c.ready.cancelled() and c.ready.result()
        ]

    def session_of(self, frame_id: str) -> str:
        state = self.frames.get(frame_id)
        return state.session_id if state is not None and state.session_id else self.session_id

    # -- calls -------------------------------------------------------------------------------------------------

    def check(self) -> None:
        if self.lost is None and (why := self._target_state()) is not None:
            self._set_lost(why)
        if self.lost is not None:
            raise BackendError(Failure.target_lost, self.lost)

    def check_dialog(self) -> None:
        if self.dialog is not None:
            raise BackendError(
                Failure.dialog,
                f"a JavaScript dialog is open ({self.dialog}); the runtime never answers one: the user must",
            )

    async def _browser(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        return await self._call(method, params, None, self.connect_timeout)

    async def send(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        timeout: float | None = None,
        session: str | None = None,
    ) -> dict[str, Any]:
        """One command on the bound page (or, with `session`, on one of its out-of-process iframes).
        Raises BackendError (target_lost, timeout) or ProtocolError."""
        if not self.session_id:
            raise BackendError(Failure.upstream, "the backend is not started")
        return await self._call(method, params, session or self.session_id, timeout or self.call_timeout)

    async def _call(
        self, method: str, params: dict[str, Any] | None, session_id: str | None, timeout: float
    ) -> dict[str, Any]:
        self.check()
        if session_id is not None:
            self.check_dialog()
        cdp = self.cdp
        if cdp is None:
            raise BackendError(Failure.upstream, "the backend is not started")
        call = asyncio.ensure_future(cdp.send(method, params, session_id=session_id, timeout=timeout))
        lost = asyncio.ensure_future(self._lost_event.wait())
        dialog = asyncio.ensure_future(self._dialog_event.wait())
        try:
            await asyncio.wait({call, lost, dialog}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            lost.cancel()
            dialog.cancel()
            if not call.done():
                call.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await call
        if not call.done() or call.cancelled():
            self.check()
            if method.startswith("Input."):
                # The renderer opened the dialog from inside this event's handler and acknowledges the event only
                # once the dialog closes: the dialog is the proof the input was delivered.
                return {}
            self.check_dialog()
        try:
            return call.result()
        except TimeoutError:
            self.check()  # a crash often shows first as a command nobody answers
            raise BackendError(Failure.timeout, f"{method}: no answer within {timeout:g}s") from None
        except CDPError as exc:
            self.check()
            text = str(exc)
            if (session_id in (None, self.session_id) and LOST_TEXT.search(text)) or cdp.closed.is_set():
                self._set_lost(f"the page is gone ({method}: {text})")
                self.check()
            raise ProtocolError(method, text) from None

    # -- waiting -----------------------------------------------------------------------------------------------

    async def wait_until(self, predicate: Callable[[], bool], timeout: float) -> None:
        """Wait (bounded) until `predicate()` holds, re-checked on every page event; target loss ends it early."""
        async with asyncio.timeout(timeout):
            while not predicate():
                self.check()
                self._changed.clear()
                changed = asyncio.ensure_future(self._changed.wait())
                lost = asyncio.ensure_future(self._lost_event.wait())
                try:
                    await asyncio.wait({changed, lost}, return_when=asyncio.FIRST_COMPLETED)
                finally:
                    changed.cancel()
                    lost.cancel()
        self.check()

    async def settle(self, timeout: float) -> None:
        """Let a main-frame load in flight (the navigation a click just started) finish before a read, up to
        `timeout`; then read anyway. Why not fail here: a page whose load never completes (a stalled image) is still
        readable; a read that cannot be answered at all fails on its own bound."""
        if not self.loading:
            return
        with contextlib.suppress(TimeoutError):
            await self.wait_until(lambda: not self.loading, timeout)

    # -- events ------------------------------------------------------------------------------------------------

    def _set_lost(self, why: str) -> None:
        if self.lost is None:
            self.lost = why
            self._lost_event.set()

    def _on_message(self, method: str, params: dict[str, Any], session_id: str | None) -> None:
        if session_id is None:
            self._on_browser_event(method, params)
        elif session_id == self.session_id or session_id in self.children:
            self._on_page_event(method, params, session_id)
        self._changed.set()

    def _on_browser_event(self, method: str, params: dict[str, Any]) -> None:
        if not self.target_id:
            return
        if method == "Target.targetDestroyed" and params.get("targetId") == self.target_id:
            self._set_lost("the page was closed")
        elif method == "Target.targetCrashed" and params.get("targetId") == self.target_id:
            self._set_lost(f"the page crashed ({params.get('status', 'unknown')})")
        elif method == "Target.detachedFromTarget" and params.get("sessionId") == self.session_id:
            self._set_lost("the page was detached from this backend")

    def _on_page_event(self, method: str, params: dict[str, Any], session_id: str) -> None:
        main = session_id == self.session_id
        if method == "Target.attachedToTarget" and params.get("targetInfo", {}).get("type") == "iframe":
            child = ChildTarget(params["sessionId"], params["targetInfo"]["targetId"], session_id)
            self.children[child.session_id] = child
            child.ready = asyncio.ensure_future(self._init_child(child))
        elif method == "Target.detachedFromTarget" and params.get("sessionId") in self.children:
            gone = self.children.pop(params["sessionId"])
            if gone.ready is not None and not gone.ready.done():
                gone.ready.cancel()
            for frame_id, state in list(self.frames.items()):
                if state.session_id == gone.session_id:
                    del self.frames[frame_id]
        elif method == "Page.frameNavigated":
            frame = params["frame"]
            self.frames[frame["id"]] = FrameState(
                frame["id"], frame.get("loaderId", ""), frame.get("url", ""), frame.get("parentId"), session_id
            )
            self.navigations += frame["id"] == self.main_frame_id
        elif method == "Page.navigatedWithinDocument":
            state = self.frames.get(params.get("frameId", ""))
            if state is not None:
                state.url = params.get("url", state.url)
            if params.get("frameId") == self.main_frame_id:
                self.navigations += 1
                self.navigation_pending = False
        elif method == "Page.javascriptDialogOpening":
            self.dialog = f"{params.get('type', 'dialog')}: {params.get('message', '')}"
            self._dialog_event.set()
        elif method == "Page.javascriptDialogClosed":
            self.dialog = None
            self._dialog_event.clear()
        elif method == "Page.frameDetached":
            state = self.frames.get(params.get("frameId", ""))
            # "swap": the frame moved to another renderer, whose session now reports it; the frame lives on.
            if state is not None and state.session_id == session_id and params.get("reason") != "swap":
                del self.frames[state.frame_id]
        elif not main:
            return
        elif method == "Page.frameRequestedNavigation" and params.get("frameId") == self.main_frame_id:
            if params.get("disposition", "currentTab") == "currentTab":
                self.requests += 1
                self.navigation_pending = True
        elif method == "Page.frameStartedLoading" and params.get("frameId") == self.main_frame_id:
            self.loading = True
        elif method == "Page.frameStoppedLoading" and params.get("frameId") == self.main_frame_id:
            self.loading = False
            self.navigation_pending = False
        elif method == "Page.domContentEventFired" and self.main_frame_id in self.frames:
            self.dom_ready_loader = self.frames[self.main_frame_id].loader_id
            self.navigation_pending = False
        elif method == "Inspector.targetCrashed":
            self._set_lost("the page crashed")

    async def _watch_connection(self, cdp: CDPConnection) -> None:
        """The connection closing (the gateway or the browser went away) loses the page too."""
        await cdp.closed.wait()
        self._set_lost("the connection to the page closed")

    @property
    def main(self) -> FrameState:
        return self.frames[self.main_frame_id]
