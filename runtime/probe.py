"""The runtime's own eyes on the bound Page: structure for policy, and the live state assertions are checked on.

It never trusts the backend's account of the Page: it attaches its own CDP session to the bound target and
reads in an isolated world, so page scripts cannot redefine what it calls. It reads; it never writes.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from runtime.cdp import CDPConnection, CDPError

LOST = re.compile(r"session|target|closed", re.I)  # Chromium's words when the attached target is gone
CAPTCHA_FRAME = re.compile(r"captcha|recaptcha|hcaptcha|turnstile|challenges\.cloudflare", re.I)

STRUCTURE_JS = r"""
(() => {
  const visible = el => !!(el.offsetWidth || el.offsetHeight || el.getClientRects().length);
  const frames = [...document.querySelectorAll('iframe')].map(f => (f.title || '') + ' ' + (f.src || ''));
  const robot = [...document.querySelectorAll('[role=checkbox],input[type=checkbox]')]
      .some(el => /not a robot/i.test(
          (el.getAttribute('aria-label') || '') + ' ' + (el.labels?.[0]?.textContent || '')));
  return {
    url: location.href,
    title: document.title,
    password: [...document.querySelectorAll('input[type=password]')].some(visible),
    payment: !!document.querySelector('input[autocomplete^="cc-"]'),
    frames, robot,
  };
})()
"""


@dataclass(frozen=True)
class Structure:
    url: str
    title: str
    has_password: bool
    has_captcha: bool
    has_payment_fields: bool


class TargetGone(Exception):
    """The bound target no longer answers (closed, crashed, replaced)."""


class DialogOpen(Exception):
    """A JavaScript dialog is open on the Page: its renderer answers no read until the user answers the dialog."""


class PageProbe:
    def __init__(
        self,
        cdp: CDPConnection,
        target_id: str,
        *,
        watch_dialogs: bool = True,
        target_state: Callable[[], str | None] = lambda: None,
    ) -> None:
        """`watch_dialogs`: enable Page events on the probe's session to learn of dialogs (a session's probe lives
        as long as the session; a one-off read such as a preview does without). `target_state`: the session
        gateway's word on the target (None while it lives); a gone target is refused before anything is sent."""
        self._cdp = cdp
        self._target_state = target_state
        self.target_id = target_id
        self._session: str | None = None
        self._watch_dialogs = watch_dialogs
        self.dialog: str | None = None
        """"type: message" of the dialog open on the Page, from the Page events of this probe's session."""
        self.dialog_open = asyncio.Event()
        """Set while `dialog` is: what an act in progress waits on beside its backend's answer."""

    async def _send(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
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
            if self.dialog is not None:
                # The user may have answered it a moment ago. Chromium sends `javascriptDialogClosed` before the
                # answer to any later command on this connection, so one browser-side round trip settles it.
                await self._cdp.send("Target.getTargetInfo", {"targetId": self.target_id})
                if self.dialog is not None:
                    raise DialogOpen(self.dialog)
            return await self._cdp.send(method, params, session_id=self._session)
        except CDPError as exc:
            if not LOST.search(str(exc)):
                raise
            self._session = None
            raise TargetGone(str(exc)) from exc

    async def _world(self) -> int:
        # A fresh isolated world per read: navigation destroys the previous one, and creating it is cheap.
        tree = await self._send("Page.getFrameTree")
        frame_id = tree["frameTree"]["frame"]["id"]
        world = await self._send("Page.createIsolatedWorld", {"frameId": frame_id, "worldName": "computer_use_probe"})
        return world["executionContextId"]

    async def evaluate(self, expression: str) -> Any:
        result = await self._send(
            "Runtime.evaluate",
            {"expression": expression, "contextId": await self._world(), "returnByValue": True},
        )
        if "exceptionDetails" in result:
            raise CDPError(f"probe expression failed: {result['exceptionDetails'].get('text')}")
        return result["result"].get("value")

    async def structure(self) -> Structure:
        raw = await self.evaluate(STRUCTURE_JS)
        tree = await self._send("Page.getFrameTree")
        frame_urls = [child["frame"].get("url", "") for child in tree["frameTree"].get("childFrames", [])]
        captcha = raw["robot"] or any(CAPTCHA_FRAME.search(text) for text in [*raw["frames"], *frame_urls])
        return Structure(raw["url"], raw["title"], raw["password"], captcha, raw["payment"])

    async def text(self, limit: int = 200_000) -> str:
        return await self.evaluate(f"(document.body ? document.body.innerText : '').slice(0, {int(limit)})") or ""

    async def ax_nodes(self, role: str, name: str | None) -> list[dict[str, Any]]:
        """Accessibility nodes matching role (and exact accessible name), from the browser's own AX tree."""
        document = await self._send("Runtime.evaluate", {"expression": "document", "contextId": await self._world()})
        params: dict[str, Any] = {"objectId": document["result"]["objectId"], "role": role}
        if name is not None:
            params["accessibleName"] = name
        nodes = (await self._send("Accessibility.queryAXTree", params))["nodes"]
        return [n for n in nodes if not n.get("ignored")]

    async def is_visible(self, backend_node_id: int) -> bool:
        try:
            await self._send("DOM.getBoxModel", {"backendNodeId": backend_node_id})
        except CDPError:  # "Could not compute box model": not rendered
            return False
        return True

    async def accept_dialog(self) -> None:
        """Only the `answer_dialogs` sabotage calls this: the runtime never answers a dialog, the user does."""
        self.dialog = None
        self.dialog_open.clear()
        await self._send("Page.handleJavaScriptDialog", {"accept": True})

    async def bring_to_front(self) -> None:
        """Only the `bring_to_front` sabotage calls this: the runtime never raises or focuses a window."""
        await self._send("Page.bringToFront")

    def _on_event(self, method: str, params: dict[str, Any], session_id: str | None) -> None:
        if session_id != self._session:
            return
        if method == "Page.javascriptDialogOpening":
            self.dialog = f"{params.get('type', 'dialog')}: {params.get('message', '')}"
            self.dialog_open.set()
        elif method == "Page.javascriptDialogClosed":
            self.dialog = None
            self.dialog_open.clear()

    async def close(self) -> None:
        self._cdp.unlisten(self._on_event)
        if self._session is not None:
            session, self._session = self._session, None
            with contextlib.suppress(CDPError, TimeoutError):  # the target may already be gone
                await self._cdp.send("Target.detachFromTarget", {"sessionId": session})


def ax_property(node: dict[str, Any], name: str) -> Any:
    for prop in node.get("properties", []):
        if prop.get("name") == name:
            return prop.get("value", {}).get("value")
    return None


async def read_preview(cdp: CDPConnection, target_id: str, chars: int = 160, timeout: float = 2.0) -> str:
    """The first words of a Page's text, for the Page Context. Untrusted content, shown as data.

    Best effort and briefly bounded: a Page in the middle of a navigation may not answer, and a model request
    must not wait for it (the preview is then empty).
    """
    probe = PageProbe(cdp, target_id, watch_dialogs=False)
    expression = f"(document.body ? document.body.innerText : '').slice(0, {chars * 2})"
    try:
        text = await asyncio.wait_for(probe.evaluate(expression), timeout)
    except (TargetGone, CDPError, TimeoutError):
        return ""
    finally:
        await probe.close()
    return " ".join((text or "").split())[:chars]
