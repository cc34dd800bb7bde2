"""ComputerSession: one exact Page, one frozen backend, a sequence of Frames.

Created by the first `observe` of a Page in a turn. The backend is the one the setting named at that moment;
changing the setting later affects only new sessions. Every observation is a new Frame; `act` must carry the
latest frame's id, and any write consumes the frame (the runtime re-observes, so the answer to `act` carries the
next one). A session owns a backend, a gateway, a probe and a work dir; the session manager (`runtime/sessions.py`)
closes them the moment the session is invalidated, evicted, replaced, idle too long, its turn ends or the runtime
closes.

Refs are the runtime's own: a random prefix drawn per frame and the element's position in it (`qfz12`). A
backend's refs are predictable (`e12`, `1_12`, `ref_12`), so page text could plant one that resolves; the runtime's
cannot be known before the frame exists, and `Frame.element` maps one back to the backend's Element, which is what
the backend acts on. A planted ref resolves to nothing: `stale_observation`. The frame an act re-observes carries
over the refs of the elements that are still the same (`runtime/delta.py`), so the agent, told only what changed,
goes on with the refs it holds; any other ref of an earlier frame resolves to nothing. A region of the frame (what
`within` scopes an observation to, `runtime/scope.py`) has a ref of the same prefix and an `r` (`qfzr2`), so it can
never be taken for an element's; an act's frame keeps the refs of the regions still there (the same role and name,
as many alike before it), so the agent reads the same list `within` the ref it holds after acting in it.
"""

from __future__ import annotations

import asyncio
import itertools
import secrets
import string
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from runtime.backend import Backend, Element, Region, Snapshot
from runtime.delta import Delta, carry
from runtime.gateway import ScopedGateway
from runtime.models.page import Page
from runtime.reading.probe import PageProbe
from runtime.reasons import ReasonCode
from runtime.scope import Scope

PREFIX_LETTERS = string.ascii_lowercase
PREFIX_CHARS = 3
"""26^3 = 17,576 prefixes (≈ 2^14) per frame. Measured on the catalogue (978 elements, o200k, docs/mcp.md): 2, 3 and
4 letters cost 12.3, 12.5 and 13.2 tokens per element on average (the backend's own refs 12.2 to 14.1); 3 is the
cheapest with at least 2^14."""
NONCE_BYTES = 3


@dataclass(frozen=True)
class View(Snapshot):
    """A frame's snapshot as the agent reads it: the runtime's refs, and the nonce of the frame's marker lines."""

    nonce: str = ""


@dataclass
class Frame:
    id: str
    snapshot: View
    """What the agent is shown (`render` reads it); `upstream` is the backend's own snapshot behind it."""
    detail: str
    upstream: Snapshot
    point_request: tuple[str, int] | None = None
    """(turn, sequence) of the one provider request whose act may use coordinates from this frame's screenshot:
    the image reaches only the next model request, and the permission ends with it."""
    document: str | None = None
    """The Page's document the snapshot was read from (`ScopedGateway.document`), None if it changed during the
    read or is unknown: refs are carried over only between frames of one known document."""
    delta: Delta | None = None
    """What changed since the frame the act that made this one was sent on (None for a full observation)."""
    order: list[int] | None = None
    """The positions of the elements as observations show them, the viewport's first (`runtime/reading/viewport.py`);
    None for document order."""
    scope: Scope | None = None
    """What the observe that made it asked to read (`runtime/scope.py`); its continuations read the same. The frame
    itself is the whole Page either way."""
    _by_ref: dict[str, Element] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        pairs = zip(self.snapshot.elements, self.upstream.elements, strict=True)
        self._by_ref = {shown.ref: own for shown, own in pairs}

    def element(self, ref: str) -> Element | None:
        """The backend's Element behind a ref of this frame; None for any other string (planted, another frame's)."""
        return self._by_ref.get(ref)

    def region(self, ref: str) -> Region | None:
        """The region of this frame a ref names; None for any other string (an element's, planted, another frame's)."""
        return next((r for r in self.snapshot.regions if r.ref == ref), None)

    def ordinal(self, element: Element) -> int:
        """Which of the same-role, same-name elements this backend Element is (to find it again in the live AX tree)."""
        same = [e for e in self.upstream.elements if e.role == element.role and e.name == element.name]
        return same.index(element)


def new_prefix(avoid: set[str]) -> str:
    """A random ref prefix none of `avoid` (the previous frame's, and those of refs carried over)."""
    while True:
        prefix = "".join(secrets.choice(PREFIX_LETTERS) for _ in range(PREFIX_CHARS))
        if prefix not in avoid:
            return prefix


def view(
    snapshot: Snapshot,
    prefix: str,
    elements: tuple[Element, ...] | None = None,
    held: Sequence[Region] = (),
) -> View:
    """The agent's view of a backend snapshot, with a fresh nonce: `elements` as given (refs carried over), else
    refs `prefix` + each element's 1-based position; regions `prefix` + `r` + theirs, except that a region of
    `held` (the act's frame's, same document) that is still there keeps its ref (`kept_regions`)."""
    if elements is None:
        elements = tuple(replace(e, ref=f"{prefix}{i}") for i, e in enumerate(snapshot.elements, 1))
    kept = kept_regions(held, snapshot.regions)
    regions = tuple(replace(r, ref=kept.get(i, f"{prefix}r{i}")) for i, r in enumerate(snapshot.regions, 1))
    fields = {**vars(snapshot), "elements": elements, "regions": regions}
    return View(**fields, nonce=secrets.token_hex(NONCE_BYTES))


def kept_regions(held: Sequence[Region], regions: Sequence[Region]) -> dict[int, str]:
    """The 1-based positions in `regions` of those that are one of `held` (the same role and name, as many alike
    before it), each with the ref it had: a region is a place on the Page, so after an act the agent reads the
    same list `within` the ref it holds, whatever the act changed inside it."""

    def keys(seq: Sequence[Region]) -> list[tuple[str, str, int]]:
        seen: dict[tuple[str, str], int] = {}
        out = []
        for r in seq:
            n = seen[(r.role, r.name)] = seen.get((r.role, r.name), -1) + 1
            out.append((r.role, r.name, n))
        return out

    refs = {key: r.ref for key, r in zip(keys(held), held, strict=True)}
    return {i: refs[key] for i, key in enumerate(keys(regions), 1) if key in refs}


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
    host: str = ""
    """The host (a chat, a client's grant) whose turn that is. (host, turn) owns the session: no other turn or
    host may use it, and it closes when that turn ends (`SessionManager.owner_ended`)."""
    id: str = field(default_factory=lambda: "cs_" + secrets.token_hex(6))
    latest: Frame | None = None
    invalid: tuple[ReasonCode, str, str | None] | None = None
    """Why the session can no longer be used: (code, message, hint or None for the code's own)."""
    popups_pending: int = 0
    busy: int = 0
    """Calls on this session in progress; its resources are closed only once none is."""
    last_used: int = 0
    """The manager's use counter at this session's last call: the least recently used idle session goes first."""
    idle_since: float = 0.0
    """When its last call ended (on `Settings.clock`): past `Settings.session_idle` unused, it closes."""
    idle: asyncio.Event = field(default_factory=asyncio.Event)
    """Set while no call runs on it (`busy` is 0): what a new session of its Page waits for before closing it."""
    ended: asyncio.Event = field(default_factory=asyncio.Event)
    """Set when the session is invalidated: a call in progress on it stops waiting for its backend."""
    closing: bool = False
    closed: asyncio.Event = field(default_factory=asyncio.Event)
    """Set once its backend, gateway, probe and work dir are gone."""
    screenshots: int = 0
    """Screenshots this session has asked its backend for: every result about the session reports it, so the
    number of screenshots is the runtime's own property, which the lab compares with what reached the browser."""
    _frames: itertools.count = field(default_factory=lambda: itertools.count(1))
    _prefix: str = ""
    """The latest frame's ref prefix: the next frame draws another, so no ref of one frame resolves in the next."""

    def new_frame(
        self,
        snapshot: Snapshot,
        detail: str,
        point_request: tuple[str, int] | None = None,
        *,
        document: str | None = None,
        since: Frame | None = None,
        scope: Scope | None = None,
    ) -> Frame:
        """The session's next frame. With `since` (the frame an act was sent on) of the same known document, the
        elements that are still the same keep their refs and the frame carries the delta. `scope` is what its
        reads show; a region in it is the new frame's (the caller found it in `snapshot`)."""
        frame_id = f"{self.id}-f{next(self._frames)}"
        delta = None
        if since is not None and document is not None and since.document == document:
            held = [*since.snapshot.elements, *since.snapshot.regions]
            avoid = {self._prefix, *(item.ref[:PREFIX_CHARS] for item in held)}
            self._prefix = new_prefix(avoid)
            delta = carry(since.snapshot.elements, since.upstream.elements, snapshot.elements, self._prefix)
            shown = view(snapshot, self._prefix, delta.elements, since.snapshot.regions)
        else:
            self._prefix = new_prefix({self._prefix})
            shown = view(snapshot, self._prefix)
        if scope is not None and scope.region is not None:
            scope = replace(scope, region=shown.regions[snapshot.regions.index(scope.region)])
        self.latest = Frame(frame_id, shown, detail, snapshot, point_request, document, delta, scope=scope)
        return self.latest

    async def screenshot(self) -> bytes:
        """The backend's one viewport PNG. The only way the runtime takes a screenshot, so `screenshots` counts all."""
        # Counted when asked, not when answered: a call that times out may still have reached the browser.
        self.screenshots += 1
        return await self.backend.screenshot()

    @property
    def owner(self) -> tuple[str, str]:
        return (self.host, self.turn)

    def invalidate(self, code: ReasonCode, message: str, hint: str | None = None) -> None:
        if self.invalid is None:
            self.invalid = (code, message, hint)
            self.latest = None
        self.ended.set()
