"""The runtime's own eyes on the bound Page: structure for policy, and the live state assertions are checked on.

It never trusts the backend's account of the Page: it attaches its own CDP session to the bound target and
reads in an isolated world, so page scripts cannot redefine what it calls. It reads; it never writes. (The one
input the runtime sends itself, a click's pointer move, goes through its session from runtime/pointer.py.)
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from runtime.cdp import CDPConnection, CDPError
from runtime.composed import COMPOSED, page_text
from runtime.roles import chromium_roles

TARGET_GONE_WORDS = re.compile(r"session|target|closed", re.I)  # Chromium's words when the attached target is gone
NO_CONTEXT = re.compile(r"Cannot find context", re.I)  # Chromium's words for an execution context that is gone
CAPTCHA_FRAME = re.compile(r"captcha|recaptcha|hcaptcha|turnstile|challenges\.cloudflare", re.I)

STRUCTURE_JS = (
    "(() => {"
    + COMPOSED
    + r"""
  // One frame's document, open shadow roots included (a login form in a web component is still a login form).
  const roots = composed.roots(document);
  const all = selector => composed.all(selector, roots);
  const visible = el => !!(el.offsetWidth || el.offsetHeight || el.getClientRects().length);
  const fields = all('input:not([type=hidden]),select,textarea');
  const words = el => ['name', 'id', 'placeholder', 'aria-label'].map(a => el.getAttribute(a) || '').join(' ');
  const payment = fields.some(el =>
      (el.getAttribute('autocomplete') || '').toLowerCase().split(/\s+/).some(t => t.startsWith('cc-')) ||
      (/numeric|decimal|tel/i.test((el.getAttribute('inputmode') || '') + ' ' + el.type) &&
       /card.?(number|num|no)|cc.?(number|num)|cvc|cvv|csc|security.?code/i.test(words(el))));
  const frames = all('iframe,frame').map(f => [f.getAttribute('src') || '', f.title || '', f.name || ''].join(' '));
  const robot = all('[role=checkbox],input[type=checkbox]').some(el => /not a robot|captcha/i.test(
      (el.getAttribute('aria-label') || '') + ' ' + [...(el.labels || [])].map(l => l.textContent).join(' ')));
  const widget = all('.g-recaptcha,.h-captcha,.cf-turnstile,[data-sitekey]').length > 0;
  return {
    url: location.href, origin: location.origin, title: document.title,
    password: all('input[type=password]').some(visible),
    payment, frames, captcha: robot || widget, fields: fields.filter(visible).length,
  };
})()
"""
)


@dataclass(frozen=True)
class Structure:
    """What the Page is, read across all its frames (same-process, out-of-process, open shadow roots)."""

    url: str
    title: str
    has_password: bool
    has_captcha: bool
    has_payment_fields: bool
    foreign_forms: frozenset[str] = frozenset()
    """Frames of another origin than the top document that hold visible form fields (a third party's form)."""


@dataclass(frozen=True)
class FrameContext:
    """One frame of the Page as the probe reaches it: the CDP session it lives in and an isolated world in it."""

    session: str
    frame_id: str
    url: str
    world: int
    top: bool


PAYMENT_FRAME = re.compile(
    r"js\.stripe\.com|checkout\.stripe\.com|stripe\.network|braintreegateway\.com|braintree-api\.com|paypal\.com|"
    r"adyen\.com|checkoutshopper|checkout\.com|squareup\.com|squarecdn\.com|klarna\.com|pay\.google\.com|"
    r"authorize\.net|worldpay\.com|mollie\.com|razorpay\.com|secure (payment|card) (input )?frame",
    re.I,
)
GONE_CHECK_TIMEOUT = 5.0
"""Seconds `PageProbe.gone` waits for the browser's word on the target."""
MAX_FRAMES = 32
"""Frames a read visits; a Page with more is read as far as this (see docs/policy.md, "Known limits")."""


class TargetGone(Exception):
    """The bound target no longer answers (closed, crashed, replaced)."""


class DialogOpen(Exception):
    """A JavaScript dialog is open on the Page: its renderer answers no read until the user answers the dialog."""


class Worlds:
    """The probe's isolated world in each document of the Page, and each world's document object.

    One per document, kept while it lives: a document's worlds live as long as it does, and every new document
    comes with a new `loaderId` in the frame tree, so a world cached by (session, frame, loader) is never one
    a navigation destroyed; a lookup of a new document drops the frame's older entries."""

    def __init__(self, send: Callable[..., Awaitable[dict[str, Any]]]) -> None:
        self._send = send
        self._worlds: dict[tuple[str, str, str], int] = {}
        """(session, frame id, loader id) -> the probe's isolated world in that document."""
        self.documents: dict[int, str] = {}
        """Isolated world -> the object id of its document (`PageProbe.document`): it lives as long as the world."""

    async def world_in(self, session: str, frame: dict[str, Any]) -> int | None:
        """The probe's isolated world in one frame's current document; None if the frame cannot have one now."""
        key = (session, frame["id"], frame.get("loaderId", ""))
        if key in self._worlds:
            return self._worlds[key]
        try:
            world = await self.create(session, frame["id"])
        except CDPError:
            return None  # a frame still loading, or gone
        self.forget(session, frame["id"])
        self._worlds[key] = world
        return world

    async def create(self, session: str, frame_id: str) -> int:
        """A new isolated world in the frame's current document."""
        params = {"frameId": frame_id, "worldName": "computer_use_probe"}
        return (await self._send("Page.createIsolatedWorld", params, session=session))["executionContextId"]

    def forget(self, session: str, frame_id: str) -> None:
        """The frame's worlds (and their documents) are gone with its document."""
        for key in [k for k in self._worlds if k[:2] == (session, frame_id)]:
            self.documents.pop(self._worlds.pop(key), None)


class PageProbe:
    def __init__(
        self,
        cdp: CDPConnection,
        target_id: str,
        *,
        watch_dialogs: bool = True,
        target_state: Callable[[], str | None] = lambda: None,
    ) -> None:
        """`watch_dialogs`: enable Page events on the probe's session to learn of dialogs and attach to the Page's
        out-of-process frames (a session's probe lives as long as the session; a one-off read such as a preview
        does without). `target_state`: the session gateway's word on the target (None while it lives); a gone
        target is refused before anything is sent."""
        self._cdp = cdp
        self._target_state = target_state
        self.target_id = target_id
        self._session: str | None = None
        self._watch_dialogs = watch_dialogs
        self._children: dict[str, str] = {}
        """Out-of-process frames of the Page (auto-attached): CDP session id -> frame (target) id."""
        self._attaching: set[asyncio.Future[None]] = set()
        self._worlds = Worlds(self._send)
        self.dialog: str | None = None
        """"type: message" of the dialog open on the Page, from the Page events of this probe's session."""
        self.dialog_open = asyncio.Event()
        """Set while `dialog` is: what an act in progress waits on beside its backend's answer."""

    async def _send(
        self, method: str, params: dict[str, Any] | None = None, session: str | None = None
    ) -> dict[str, Any]:
        gone = self._target_state()
        if gone is not None:
            raise TargetGone(gone)
        try:
            if self._session is None:
                attached = await self._cdp.send("Target.attachToTarget", {"targetId": self.target_id, "flatten": True})
                self._session = attached["sessionId"]
                if self._watch_dialogs:
                    self._cdp.listen(self._on_event)
                    # Page events tell the probe when a dialog opens; a read sent after that would wait for the
                    # user. (A dialog already open before this attach is not reported: such reads time out.)
                    await self._cdp.send("Page.enable", session_id=self._session)
                    await self._cdp.send("Accessibility.enable", session_id=self._session)
                    await self._auto_attach(self._session)
            if self.dialog is not None:
                # The user may have answered it a moment ago. Chromium sends `javascriptDialogClosed` before the
                # answer to any later command on this connection, so one browser-side round trip settles it.
                await self._cdp.send("Target.getTargetInfo", {"targetId": self.target_id})
                if self.dialog is not None:
                    raise DialogOpen(self.dialog)
        except CDPError as exc:
            if not TARGET_GONE_WORDS.search(str(exc)):
                raise
            self._session = None
            raise TargetGone(str(exc)) from exc
        try:
            return await self._cdp.send(method, params, session_id=session or self._session)
        except CDPError as exc:
            if session is not None and session != self._session:
                raise  # a child frame that went away (navigated, removed) is not the Page being gone
            if not TARGET_GONE_WORDS.search(str(exc)):
                raise
            self._session = None
            raise TargetGone(str(exc)) from exc

    async def watch(self) -> None:
        """Be attached, with Page events on, before a write: a dialog the write opens (a page that asks `confirm()`
        as it loads) is heard the moment it opens, and the write's wait ends there."""
        await self._send("Page.getFrameTree")

    async def dialog_closed(self) -> bool:
        """True when this probe, listening to the Page's dialog events, knows no dialog is open (settled by one
        browser-side round trip: Chromium sends `javascriptDialogClosed` before its answer); False when one is open
        or the probe has not been listening."""
        if self._session is None or not self._watch_dialogs:
            return False
        await self._cdp.send("Target.getTargetInfo", {"targetId": self.target_id})
        return self.dialog is None

    async def _auto_attach(self, session: str) -> None:
        # Out-of-process frames (another site's iframe) are targets of their own; Chromium announces each one, and
        # the ones nested in it, with `Target.attachedToTarget` on the parent's session before this call answers.
        await self._cdp.send(
            "Target.setAutoAttach",
            {"autoAttach": True, "waitForDebuggerOnStart": False, "flatten": True},
            session_id=session,
        )

    async def _top(self) -> FrameContext:
        """The top document, with the probe's world in it."""
        frame = (await self._send("Page.getFrameTree"))["frameTree"]["frame"]
        world = await self._worlds.world_in(self._session, frame)  # type: ignore[arg-type]
        if world is None:
            raise CDPError("probe could not reach the top document")
        return FrameContext(self._session, frame["id"], frame.get("url", ""), world, True)  # type: ignore[arg-type]

    async def frames(self) -> list[FrameContext]:
        """Every frame of the Page, each with the probe's isolated world: the top document first, then its
        same-process frames, then each out-of-process frame and its own children. At most `MAX_FRAMES`."""
        contexts: list[FrameContext] = []
        top_tree = await self._send("Page.getFrameTree")  # attaches (and auto-attaches the children) on first use
        if self._attaching:  # children of out-of-process frames, announced a moment ago
            await asyncio.wait(set(self._attaching), timeout=2.0)
        sessions = [self._session, *self._children]
        for session in sessions:
            if session is None or len(contexts) >= MAX_FRAMES:
                continue
            try:
                tree = top_tree if session == self._session else await self._send("Page.getFrameTree", session=session)
            except CDPError:
                continue  # a child frame that went away in the meantime
            pending = [tree["frameTree"]]
            while pending and len(contexts) < MAX_FRAMES:
                node = pending.pop(0)
                frame = node["frame"]
                pending.extend(node.get("childFrames", []))
                context = await self._worlds.world_in(session, frame)
                if context is None:
                    continue
                top = session == self._session and frame.get("parentId") is None
                contexts.append(FrameContext(session, frame["id"], frame.get("url", ""), context, top))
        return contexts

    async def evaluate(self, expression: str) -> Any:
        """An expression in the top document's isolated world: its value."""
        return await self.evaluate_in(await self._top(), expression)

    async def evaluate_in(self, frame: FrameContext, expression: str, by_value: bool = True) -> Any:
        """An expression in one frame's isolated world: its value, or (`by_value=False`) its remote object."""
        params = {"expression": expression, "contextId": frame.world, "returnByValue": by_value}
        try:
            result = await self._send("Runtime.evaluate", params, session=frame.session)
        except CDPError as exc:
            if not NO_CONTEXT.search(str(exc)):
                raise
            # The document went away between the frame read and this one (or a cached world did with it): a world
            # of the frame's document now, once.
            self._worlds.forget(frame.session, frame.frame_id)
            params["contextId"] = await self._worlds.create(frame.session, frame.frame_id)
            result = await self._send("Runtime.evaluate", params, session=frame.session)
        if "exceptionDetails" in result:
            raise CDPError(f"probe expression failed: {result['exceptionDetails'].get('text')}")
        return result["result"].get("value") if by_value else result["result"]

    async def document(self, frame: FrameContext, fresh: bool = False) -> str:
        """The object id of `frame`'s document in the probe's world: one per world (`fresh`: ask again)."""
        documents = self._worlds.documents
        if fresh or frame.world not in documents:
            documents[frame.world] = (await self.evaluate_in(frame, "document", by_value=False))["objectId"]
        return documents[frame.world]

    async def call_on(self, frame: FrameContext, object_id: str, function: str, *args: Any) -> Any:
        """`function` called with `this` = the remote object, in the object's frame; returns its value."""
        result = await self._send(
            "Runtime.callFunctionOn",
            {
                "objectId": object_id,
                "functionDeclaration": function,
                "arguments": [{"value": arg} for arg in args],
                "returnByValue": True,
            },
            session=frame.session,
        )
        if "exceptionDetails" in result:
            raise CDPError(f"probe function failed: {result['exceptionDetails'].get('text')}")
        return result["result"].get("value")

    async def send_in(self, frame: FrameContext, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """One CDP command on the session a frame lives in (DOM, Accessibility, DOMDebugger reads; the pointer's
        move)."""
        return await self._send(method, params, session=frame.session)

    async def structure(self, frames: list[FrameContext] | None = None) -> Structure:
        """The Page's structure across `frames` (read now if not given)."""
        frames = await self.frames() if frames is None else frames

        async def read(frame: FrameContext) -> tuple[FrameContext, dict[str, Any]] | None:
            try:
                return frame, await self.evaluate_in(frame, STRUCTURE_JS)
            except CDPError:
                return None  # a frame that navigated away between the two calls

        # Every frame's read sent at once (a frame in another process answers in parallel), in frame order.
        reads = [found for found in await asyncio.gather(*(read(frame) for frame in frames)) if found is not None]
        if not reads or not reads[0][0].top:
            raise CDPError("probe could not read the top document")
        top = reads[0][1]
        texts = [frame.url for frame, _ in reads] + [text for _, raw in reads for text in raw["frames"]]
        captcha = any(raw["captcha"] for _, raw in reads) or any(CAPTCHA_FRAME.search(t) for t in texts)
        payment = any(raw["payment"] for _, raw in reads) or any(PAYMENT_FRAME.search(t) for t in texts)
        foreign = frozenset(
            frame.frame_id for frame, raw in reads if raw["origin"] != top["origin"] and raw["fields"] > 0
        )
        return Structure(top["url"], top["title"], any(raw["password"] for _, raw in reads), captcha, payment, foreign)

    async def text(self, limit: int = 200_000) -> str:
        """The Page's rendered text across its frames, the top document first, at most `limit` characters in all:
        what the user reads on the Page includes what its iframes and open shadow roots show (text in a frame or a
        web component is the Page's text), in the order it is shown (`runtime/composed.py`)."""
        frames = await self.frames()
        if not frames or not frames[0].top:
            raise CDPError("probe could not read the top document")
        parts: list[str] = []
        left = int(limit)
        for frame in frames:
            if left <= 0:
                break
            try:
                part = await self.evaluate_in(frame, page_text(left))
            except CDPError:
                if frame.top:
                    raise
                continue  # a child frame that navigated away between the two calls
            parts.append(part or "")
            left -= len(part or "")
        return "\n".join(parts)

    async def ax_nodes(self, role: str, name: str | None) -> list[dict[str, Any]]:
        """Accessibility nodes of the top document with `role` and exactly `name`, from the browser's own AX tree, in
        the tree's order. `role` is the one vocabulary's word (`runtime/roles.py`), the word an observation shows: a
        `textbox` is also a date, time or colour field, which Chromium calls `Date`, `InputTime`, `ColorWell`."""
        top = await self._top()
        roles = chromium_roles(role)
        if len(roles) > 1 and name:
            # One query by name, the roles picked here, so the nodes stay in the tree's order (`Frame.ordinal` counts
            # in it). An empty name matches every nameless node of the Page: then one query per role instead.
            nodes = [n for n in await self.query_ax(top, None, name) if _role(n) in roles]
        else:
            nodes = [n for theirs in sorted(roles) for n in await self.query_ax(top, theirs, name)]
        return [n for n in nodes if not n.get("ignored")]

    async def query_ax(self, frame: FrameContext, role: str | None, name: str | None = None) -> list[dict[str, Any]]:
        """`Accessibility.queryAXTree` under the frame's document as the probe's world holds it (asked once per
        world; a held document that went away is asked for again, once). `role` is Chromium's own word."""
        params: dict[str, Any] = {"objectId": await self.document(frame)}
        if role is not None:
            params["role"] = role
        if name is not None:
            params["accessibleName"] = name
        try:
            return (await self.send_in(frame, "Accessibility.queryAXTree", params))["nodes"]
        except CDPError:
            params["objectId"] = await self.document(frame, fresh=True)
            return (await self.send_in(frame, "Accessibility.queryAXTree", params))["nodes"]

    async def gone(self) -> bool:
        """Whether the bound target is out of reach now, asked of the browser: one browser-level round trip. A backend
        whose browser died can report an unnamed failure before the session gateway has read the end of its own
        connection; this answer does not wait for that."""
        if self._target_state() is not None:
            return True
        try:
            await self._cdp.send("Target.getTargetInfo", {"targetId": self.target_id}, timeout=GONE_CHECK_TIMEOUT)
        except (CDPError, OSError):  # no such target, or the connection is closed (or closes before the answer)
            return True
        except TimeoutError:
            return False  # a browser too busy to answer is not a gone one
        return self._target_state() is not None

    async def is_visible(self, backend_node_id: int) -> bool:
        try:
            await self._send("DOM.getBoxModel", {"backendNodeId": backend_node_id})
        except CDPError:  # "Could not compute box model": not rendered
            return False
        return True

    def _on_event(self, method: str, params: dict[str, Any], session_id: str | None) -> None:
        if method == "Target.attachedToTarget" and (session_id == self._session or session_id in self._children):
            info = params.get("targetInfo", {})
            if info.get("type") == "iframe":
                child = params["sessionId"]
                self._children[child] = info.get("targetId", "")
                task = asyncio.ensure_future(self._attach_child(child))
                self._attaching.add(task)
                task.add_done_callback(self._attaching.discard)
            return
        if method == "Target.detachedFromTarget":
            self._children.pop(params.get("sessionId", ""), None)
            return
        if session_id != self._session:
            return
        if method == "Page.javascriptDialogOpening":
            self.dialog = f"{params.get('type', 'dialog')}: {params.get('message', '')}"
            self.dialog_open.set()
        elif method == "Page.javascriptDialogClosed":
            self.dialog = None
            self.dialog_open.clear()

    async def _attach_child(self, session: str) -> None:
        with contextlib.suppress(CDPError, TimeoutError):  # the frame may be gone already
            await self._auto_attach(session)

    async def close(self) -> None:
        self._cdp.unlisten(self._on_event)
        self._children.clear()
        if self._session is not None:
            session, self._session = self._session, None
            with contextlib.suppress(CDPError, TimeoutError):  # the target may already be gone
                await self._cdp.send("Target.detachFromTarget", {"sessionId": session})


def _role(node: dict[str, Any]) -> str:
    return str((node.get("role") or {}).get("value", ""))


def ax_property(node: dict[str, Any], name: str) -> Any:
    for prop in node.get("properties", []):
        if prop.get("name") == name:
            return prop.get("value", {}).get("value")
    return None


async def read_preview(cdp: CDPConnection, target_id: str, chars: int = 160, timeout: float = 2.0) -> str:
    """The first words of a Page's text (its top document's, open shadow roots included, as `PageProbe.text` reads
    it), for the Page Context. Untrusted content, shown as data.

    Best effort and briefly bounded: a Page in the middle of a navigation may not answer, and a model request
    must not wait for it (the preview is then empty).
    """
    probe = PageProbe(cdp, target_id, watch_dialogs=False)
    # Cut on a code-point boundary: a slice through a surrogate pair would leave half a character.
    expression = f"{page_text(chars * 2)}.replace(/[\\uD800-\\uDBFF]$/, '')"
    try:
        text = await asyncio.wait_for(probe.evaluate(expression), timeout)
    except (TargetGone, CDPError, TimeoutError):
        return ""
    finally:
        await probe.close()
    return " ".join((text or "").split())  # PageInfo cleans it and cuts it, with the marker, to its limit
