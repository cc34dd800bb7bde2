"""ComputerSession: one exact Page, one frozen backend, a sequence of Frames.

Created by the first `observe` of a Page in a turn. The backend is the one the setting named at that moment;
changing the setting later affects only new sessions. Every observation is a new Frame; `act` must carry the
latest frame's id, and any write consumes the frame (the runtime re-observes, so the answer to `act` carries the
next one). A session owns a backend, a gateway, a probe and a work dir; the session manager (`runtime/sessions.py`)
closes them the moment the session is invalidated, evicted or the runtime closes.
"""

from __future__ import annotations

import asyncio
import itertools
import secrets
from dataclasses import dataclass, field
from pathlib import Path

from runtime.backend import Backend, Element, Snapshot
from runtime.gateway import ScopedGateway
from runtime.models.page import Page
from runtime.probe import PageProbe
from runtime.reasons import ReasonCode


@dataclass
class Frame:
    id: str
    snapshot: Snapshot
    detail: str
    screenshot: bool = False
    point_request: tuple[str, int] | None = None
    """(turn, sequence) of the one provider request whose act may use coordinates from this frame's screenshot:
    the image reaches only the next model request, and the permission ends with it."""

    def element(self, ref: str) -> Element | None:
        return next((e for e in self.snapshot.elements if e.ref == ref), None)

    def ordinal(self, element: Element) -> int:
        """Which of the same-role, same-name elements this is (to find it again in the live AX tree)."""
        same = [e for e in self.snapshot.elements if e.role == element.role and e.name == element.name]
        return same.index(element)


@dataclass
class ComputerSession:
    page: Page
    target_id: str  # the canonical binding: the cdp target at creation time
    revision: int
    backend_name: str
    backend: Backend
    probe: PageProbe
    gateway: ScopedGateway
    workdir: Path
    turn: str = ""
    """The turn whose first observe of the Page opened this session; a later observe in that turn reuses it."""
    id: str = field(default_factory=lambda: "cs_" + secrets.token_hex(6))
    latest: Frame | None = None
    invalid: tuple[ReasonCode, str] | None = None
    popups_pending: int = 0
    busy: int = 0
    """Calls on this session in progress; its resources are closed only once none is."""
    last_used: int = 0
    """The manager's use counter at this session's last call: the least recently used idle session goes first."""
    ended: asyncio.Event = field(default_factory=asyncio.Event)
    """Set when the session is invalidated: a call in progress on it stops waiting for its backend."""
    closing: bool = False
    closed: asyncio.Event = field(default_factory=asyncio.Event)
    """Set once its backend, gateway, probe and work dir are gone."""
    _frames: itertools.count = field(default_factory=lambda: itertools.count(1))

    def new_frame(self, snapshot: Snapshot, detail: str, point_request: tuple[str, int] | None = None) -> Frame:
        frame_id = f"{self.id}-f{next(self._frames)}"
        self.latest = Frame(frame_id, snapshot, detail, point_request is not None, point_request)
        return self.latest

    def invalidate(self, code: ReasonCode, message: str) -> None:
        if self.invalid is None:
            self.invalid = (code, message)
            self.latest = None
        self.ended.set()
