"""Which target each CDP message is about, per client connection — tracked the way Playwright's crConnection does.

A connection has a root session (no `sessionId`): the browser for `/devtools/browser/…`, the page itself for
`/devtools/page/<id>`. Child sessions are created *before* any message on them can be dispatched: from a
`Target.attachedToTarget` event, or from the answer to `Target.attachToTarget`, both of which Chromium sends before
it delivers anything on the new session. A detached or crashed session keeps its target, so late traffic is still
attributed to the right page.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

BROWSER = "browser"
"""The target name for browser-level traffic that names no page."""

UNKNOWN = "unknown-session:"
"""Prefix of the target of traffic on a session the tracker never saw created: a leak could hide here."""


@dataclass
class Session:
    target: str
    target_type: str = "page"
    detached: bool = False
    crashed: bool = False


class SessionTracker:
    def __init__(self, root_target: str) -> None:
        self.root_target = root_target
        self.sessions: dict[str, Session] = {}
        self._pending_attach: dict[tuple[str | None, int], str] = {}
        self.crashed: set[str] = set()

    def target_of(self, session_id: str | None, params: dict[str, Any] | None = None) -> str:
        """The target a command or event is about."""
        if session_id is None:
            # Browser-level calls that name a page (activateTarget, closeTarget, attachToTarget,
            # getWindowForTarget, …) or one of its sessions (detachFromTarget, …) are about that page.
            if self.root_target == BROWSER and params:
                if isinstance(params.get("targetId"), str):
                    return params["targetId"]
                info = params.get("targetInfo")
                if isinstance(info, dict) and isinstance(info.get("targetId"), str):
                    return info["targetId"]  # events announcing a target are about it
                named = self.sessions.get(params.get("sessionId")) if isinstance(params.get("sessionId"), str) else None
                if named is not None:
                    return named.target
            return self.root_target
        session = self.sessions.get(session_id)
        return session.target if session else f"{UNKNOWN}{session_id}"

    def on_command(self, message: dict[str, Any]) -> None:
        method = message.get("method")
        key = (message.get("sessionId"), message["id"])
        if method == "Target.attachToTarget":
            target = message.get("params", {}).get("targetId")
            if isinstance(target, str):
                self._pending_attach[key] = target
        elif method == "Target.attachToBrowserTarget":
            self._pending_attach[key] = BROWSER

    def awaits_attach(self, key: tuple[str | None, int]) -> bool:
        """Whether the answer to command `key` ((sessionId, id)) creates a session: `on_response` must read it."""
        return key in self._pending_attach

    def on_response(self, message: dict[str, Any]) -> None:
        target = self._pending_attach.pop((message.get("sessionId"), message["id"]), None)
        session_id = (message.get("result") or {}).get("sessionId")
        if target is not None and isinstance(session_id, str):
            self.sessions.setdefault(session_id, Session(target))

    def on_event(self, message: dict[str, Any]) -> None:
        method = message.get("method")
        params = message.get("params") or {}
        if method == "Target.attachedToTarget":
            info = params.get("targetInfo") or {}
            self.sessions[params["sessionId"]] = Session(info.get("targetId", "?"), info.get("type", "?"))
        elif method == "Target.detachedFromTarget":
            session = self.sessions.get(params.get("sessionId", ""))
            if session is not None:
                session.detached = True
        elif method == "Inspector.targetCrashed":
            target = self.target_of(message.get("sessionId"))
            self.crashed.add(target)
            for session in self.sessions.values():
                if session.target == target:
                    session.crashed = True
        elif method == "Target.targetCrashed":
            self.crashed.add(params.get("targetId", "?"))
