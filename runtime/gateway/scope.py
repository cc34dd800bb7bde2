"""Scope: what a client behind the gateway may see and do. One target exists for it, the bound page, and whatever
Chromium auto-attaches under it (its OOPIF iframes and workers).

A backend (the `@playwright/mcp` or `chrome-devtools-mcp` child, or our own adapter) is a general CDP client: left
alone it enumerates, attaches to and initializes every page of the browser. Here:

- HTTP discovery (`/json/version`, `/json/list`) names only the gateway and the bound page; `/json/new|activate|close`
  are refused.
- `Target.getTargets` and target events are filtered to the bound page; a browser-level `Target.setAutoAttach` is
  turned into one `Target.attachToTarget` of the bound page, so the client never learns other pages exist.
- Commands on sessions that are not the bound page's, and every method off the policy's allowlists (`allowlist.py`:
  one for the browser level, one for the page's sessions, built from what each backend sends), are refused with a
  CDP error that names the gateway.

The scope also tracks the bound page's current document from what its backend reads (`note_document`).
"""

from __future__ import annotations

import json
from collections import deque
from typing import Any
from urllib.parse import urlsplit

from aiohttp import web

from runtime.gateway.allowlist import FORWARD, Policy, Verdict, refusal_message, static_verdict
from runtime.gateway.records import GatewayClient, GatewayError, GatewayEvent, Ledger, PendingCommand
from runtime.gateway.upstream import Upstream

PAST_DOCUMENTS = 64
"""Replaced documents of the bound page the gateway remembers, so a late answer cannot bring one back."""
READ_ANSWERS = frozenset(
    {"Target.getTargets", "Page.getFrameTree", "Target.attachToTarget", "Browser.getWindowForTarget"}
)
"""Methods whose answers the gateway reads or rewrites (`TargetScope.rewrite_result`): parsed whole, always."""


class TargetScope:
    """The bound target, its children and windows, and the rules on what a client may name, hear and read."""

    def __init__(self, target_id: str, ledger: Ledger, policy: Policy = static_verdict) -> None:
        """`policy`: the static method table (`allowlist.static_verdict`); the target checks are the scope's own."""
        self.target_id = target_id
        self.ledger = ledger
        self.policy = policy
        self.children: set[str] = set()
        """Targets Chromium auto-attached under the bound page (or under one of them)."""
        self.windows: set[int] = set()
        """Windows the bound page was seen in: the only ones whose bounds a client may read."""
        self.document: str | None = None
        """The loaderId of the bound page's current document, as the backend's own traffic shows it (see
        `note_document`); None until the backend has read the frame tree."""
        self.documents = 0
        """How many documents of the bound page the gateway has seen (`document` is the latest)."""
        self._past_documents: deque[str] = deque(maxlen=PAST_DOCUMENTS)

    def visible(self, target_id: str | None) -> bool:
        """The bound target and the children Chromium auto-attached under it; nothing else exists for a client."""
        return target_id == self.target_id or target_id in self.children

    # -- commands ----------------------------------------------------------------------------------------------

    def decide(self, client: GatewayClient, method: str, params: dict[str, Any], session_id: str | None) -> Verdict:
        """Forward, refuse, absorb or turn into the bound page's attach: the policy's table, then the target rules."""
        if session_id is not None and session_id not in client.sessions:
            return Verdict("refuse", "the session is not the bound page's")
        browser_level = client.browser_level and session_id is None
        verdict = self.policy(method, params, browser_level)
        if verdict.action != "forward":
            return verdict
        return self.target_verdict(client, method, params, session_id, browser_level)

    def target_verdict(
        self, client: GatewayClient, method: str, params: dict[str, Any], session_id: str | None, browser_level: bool
    ) -> Verdict:
        other = Verdict("refuse", "it names a target other than the bound page")
        target = params.get("targetId")
        if method == "Target.setAutoAttach" and browser_level:
            return Verdict("auto_attach")
        if method in ("Target.attachToTarget", "Target.autoAttachRelated"):
            if not self.visible(target):
                return other
            if method == "Target.attachToTarget" and params.get("flatten") is not True:
                return Verdict("refuse", "only flatten sessions; non-flatten messages would bypass the gateway")
            return FORWARD
        if method == "Target.getTargetInfo":
            return FORWARD if target is None or self.visible(target) else other
        if method == "Target.detachFromTarget":
            named = params.get("sessionId")
            if named in client.sessions or (named is None and self.visible(target)):
                return FORWARD
            return Verdict("refuse", "the session is not the bound page's")
        if method == "Browser.getWindowForTarget":
            # Without a targetId it means the session's own target, which at browser level is no page at all.
            if target is None and browser_level:
                return other
            return FORWARD if target is None or self.visible(target) else other
        if method == "Browser.getWindowBounds":
            if params.get("windowId") in self.windows:
                return FORWARD
            return Verdict("refuse", "it names a window other than the bound page's")
        return FORWARD

    # -- answers and events ------------------------------------------------------------------------------------

    def rewrite_result(self, client: GatewayClient, pending: PendingCommand, result: dict[str, Any]) -> dict[str, Any]:
        """The result the client gets for `pending`; learns the sessions and windows it names."""
        method, params = pending.method, pending.params
        if pending.auto_attach:
            if isinstance(result.get("sessionId"), str):
                client.sessions.setdefault(result["sessionId"], self.target_id)
            return {}
        if method not in READ_ANSWERS:  # passed on unparsed (`Relay.pass_answer`): a branch below must be listed
            return result
        if method == "Target.getTargets":
            infos = [info for info in result.get("targetInfos", []) if self.visible(info.get("targetId"))]
            return {**result, "targetInfos": infos}
        if method == "Page.getFrameTree":
            self.note_document(client, pending.session_id, (result.get("frameTree") or {}).get("frame"))
        if method == "Target.attachToTarget" and isinstance(result.get("sessionId"), str):
            client.sessions.setdefault(result["sessionId"], params.get("targetId", self.target_id))
        elif method == "Browser.getWindowForTarget" and isinstance(result.get("windowId"), int):
            about = params.get("targetId") or (client.sessions.get(pending.session_id or "") or self.target_id)
            if about == self.target_id:
                self.windows.add(result["windowId"])
        return result

    def allow_event(self, client: GatewayClient, message: dict[str, Any]) -> bool:
        """Whether an upstream event may reach the client; tracks the sessions it creates or ends."""
        method: str = message.get("method", "")
        params: dict[str, Any] = message.get("params") or {}
        session_id = message.get("sessionId")
        if session_id is not None and session_id not in client.sessions:
            return False
        # The target of the session the event arrived on; None for the browser's own root session.
        parent = client.sessions[session_id] if session_id is not None else (None if client.browser_level else "")
        if method == "Target.attachedToTarget":
            child_session = params.get("sessionId")
            child = (params.get("targetInfo") or {}).get("targetId")
            if parent is not None and isinstance(child, str):
                # Auto-attached under the bound page (or under one of its children): its iframe or worker.
                self.children.add(child)
            elif not self.visible(child):
                return False
            if isinstance(child_session, str):
                client.sessions[child_session] = child
            return True
        if method == "Target.detachedFromTarget":
            ended = params.get("sessionId")
            if ended not in client.sessions:
                return False
            # The session stays usable on paper, so late commands get Chromium's own error rather than ours.
            if client.sessions[ended] == self.target_id and ended not in client.detaching:
                client.detaching.add(ended)
                self.ledger.emit(GatewayEvent("detached", self.target_id, f"client {client.conn} session {ended}"))
            return True
        if method in ("Target.targetCreated", "Target.targetInfoChanged"):
            return self.visible((params.get("targetInfo") or {}).get("targetId"))
        if method in ("Target.targetDestroyed", "Target.targetCrashed"):
            return self.visible(params.get("targetId"))
        if method == "Target.receivedMessageFromTarget":
            return False
        if parent is None:
            # The browser's root session: everything else there is browser-wide (downloads of any page, …).
            return method.startswith("Inspector.")
        return True

    def note_document(self, client: GatewayClient, session_id: str | None, frame: Any) -> None:
        """Track the bound page's document from what its backend reads: the main frame of a `Page.getFrameTree`
        answer or a `Page.frameNavigated` event on the page's own session. Both travel on the connection the
        backend's snapshot comes back on, in order, so when a snapshot reaches the runtime the document it was read
        from is already noted. A document once replaced is never taken back (a late answer on another connection)."""
        on_page = client.sessions.get(session_id) == self.target_id if session_id else not client.browser_level
        if not on_page or not isinstance(frame, dict) or "parentId" in frame:
            return
        loader = frame.get("loaderId")
        if not isinstance(loader, str) or not loader or loader == self.document or loader in self._past_documents:
            return
        if self.document is not None:
            self._past_documents.append(self.document)
        self.document = loader
        self.documents += 1

    # -- HTTP discovery ----------------------------------------------------------------------------------------

    async def serve_json(self, path: str, upstream: Upstream, base: str) -> web.Response:
        """`/json/version` and `/json/list` as the browser answers them, cut to the bound page, every URL pointing
        at the gateway (`base`: its address and secret); the rest refused or unknown."""
        parts = [part for part in path.split("/") if part]  # ["json", "version"], ["json"], …
        name = parts[1] if len(parts) > 1 else "list"
        if name in ("new", "activate", "close"):
            reason = "a client behind the gateway may not open, focus or close pages"
            self.ledger.refuse(0, f"HTTP /json/{name}", reason, None)
            return web.Response(status=403, text=refusal_message(f"/json/{name}", reason))
        try:
            if name == "version" and len(parts) == 2:
                version = await upstream.json("/json/version")
                browser = urlsplit(version.get("webSocketDebuggerUrl", "")).path or "/devtools/browser/gateway"
                version["webSocketDebuggerUrl"] = f"ws://{base}{browser}"
                return web.json_response(version)
            if name == "list" and len(parts) <= 2:
                listing = [t for t in await upstream.json("/json/list") if self.visible(t.get("id"))]
                return web.json_response(json.loads(json.dumps(listing).replace(upstream.hostport, base)))
        except GatewayError as exc:
            return web.Response(status=502, text=str(exc))
        return web.Response(status=404, text=f"computer_use gateway: no such endpoint {path}")
