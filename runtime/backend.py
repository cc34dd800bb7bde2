"""The contract every execution backend fulfils. A backend turns one canonical Action into one upstream action
and nothing else: no retries, no fallbacks, no second write. Everything else (identity, permission, policy,
frames, verification) is the runtime's.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import LiteralString, Protocol

from runtime.models import Action


@dataclass(frozen=True)
class Element:
    """One interactive element of a snapshot, addressed by the backend's own ref."""

    ref: str
    role: str
    name: str
    value: str | None = None
    checked: bool | None = None
    disabled: bool = False
    level: int = 0  # nesting depth in the upstream tree, kept for compact rendering
    near: str = ""
    """The text of the row, item or card it sits in (bounded; `backends.common.structure`): what a `query` of a
    scoped observation matches besides the name and value, so "Lagoon" finds that card's buttons too."""


@dataclass(frozen=True)
class Region:
    """A part of the Page an observation can be scoped to (`within`): a landmark, a form, a dialog, a list or a table
    (`runtime.roles.REGION_ROLES`). `start`, `end`: the positions of the elements it holds in the snapshot's
    element list (document order, so they are one run); `text`: its own text lines, bounded."""

    ref: str
    role: str
    name: str
    start: int
    end: int
    text: str = ""


@dataclass(frozen=True)
class Diagnostics:
    """The bound Page's recent console errors and failed requests, as its backend read them: page-controlled text,
    which the runtime bounds, cleans and frames (`runtime/observation.py`). Never bodies, cookies or headers."""

    errors: tuple[str, ...] = ()
    """The latest console errors and uncaught exceptions, oldest first."""
    failed: tuple[tuple[str, str, str], ...] = ()
    """The latest failed requests (status >= 400 or no response), oldest first: (method, url, status or error)."""
    errors_total: int = 0
    failed_total: int = 0


@dataclass(frozen=True)
class Snapshot:
    """A normalized observation: bounded text plus the interactive elements in document order."""

    url: str
    title: str
    text: str
    elements: tuple[Element, ...]
    upstream_chars: int = 0  # size of what the upstream returned, for cost benchmarks
    elements_dropped: int = 0
    """Interactive elements past the backend's cap (tens of thousands), said by the runtime, not by page text."""
    diagnostics: Diagnostics | None = None
    """Set by the runtime on a `detail=diagnostics` observation, from `Backend.diagnostics()`."""
    regions: tuple[Region, ...] = ()
    """The Page's regions in document order (an outer one before those inside it); refs are the runtime's, per frame."""


def _alive() -> str | None:
    return None


@dataclass(frozen=True)
class BackendConfig:
    """What a backend is given: a CDP endpoint that shows it exactly the bound Page, a private folder, and the
    runtime's word on whether that Page is still there.

    `target_state()` is None while the bound Page lives and says why once it is gone (closed, crashed, replaced,
    the browser lost). The scoped gateway owns that state (it sees every event of the target); a backend asks it
    before and after each upstream call instead of watching the target on a connection of its own, because an
    upstream does not reliably say "your page is gone" (it may answer from a new blank page instead).
    """

    cdp_endpoint: str
    workdir: Path
    target_state: Callable[[], str | None] = _alive


class Failure(StrEnum):
    """What kind of failure a backend reports. The runtime alone maps it to a reason code (`runtime/failures.py`)."""

    target_lost = "target_lost"
    """The bound page is closed, crashed or detached."""
    timeout = "timeout"
    """The upstream did not finish in time."""
    element = "element"
    """The element could not be resolved or could not take the action."""
    stale = "stale"
    """A ref no longer names the element it named when it was read (moved, replaced, another document)."""
    dialog = "dialog"
    """A JavaScript dialog or file chooser blocks the page: no backend ever answers one, the user must."""
    unsupported = "unsupported"
    """The backend cannot express this action as asked (its shape, not the Page: a key pressed on a ref, a point
    scroll, several options in one select...): refused before anything is sent. `BackendError.advice` says what
    would work instead; asking again the same way, or after observing again, cannot help."""
    upstream = "upstream"
    """Anything else the upstream reported (its text is for the log, never for the agent)."""


class BackendError(Exception):
    """An upstream failure, classified. The message is for the log: it may carry upstream or page text, so it
    never reaches the agent, and it never speaks in reason codes (the runtime chooses those from `kind`).

    `advice` (with `Failure.unsupported`) is what the agent may do instead, in the adapter's own words: a constant
    string of its source (`LiteralString`), never built from upstream or page text, so the runtime may show it."""

    def __init__(self, kind: Failure, message: str, *, advice: LiteralString = "") -> None:
        super().__init__(message)
        self.kind = Failure(kind)
        self.advice = advice


class Backend(Protocol):
    name: str
    types_and_submits: bool
    """True when `act` performs `type` with `submit` itself: one upstream call types the text and presses Enter on
    that field. False: the backend is never sent `submit`; the runtime types, checks that the field still has the
    focus, then presses Enter (`runtime/commands/act.py`), so `submit` means the same on every backend."""

    screenshot_fallback: bool
    """True when the backend's observation is page structure and refs plus "one viewport screenshot when semantic
    location is not enough" (the spec's open_claude_chrome): an `observe` whose Page shows a drawn surface in its
    viewport (`runtime/reading/viewport.py` `DRAWN_JS`, the runtime's probe decides) carries one screenshot without
    `detail=visual`. An act's re-observation never does."""
    diagnoses: bool
    """True when the backend reads the bound Page's console errors and failed requests (`diagnostics`); the runtime
    refuses `detail=diagnostics` on any other before anything is sent."""

    async def start(self) -> None: ...

    async def snapshot(self) -> Snapshot: ...

    async def act(self, action: Action, element: Element | None) -> None:
        """Perform exactly one upstream action. `element` is the resolved target for ref-based actions."""
        ...

    async def screenshot(self) -> bytes:
        """One PNG of the viewport, for visual checks and canvas only."""
        ...

    async def diagnostics(self) -> Diagnostics:
        """The bound Page's recent console errors and failed requests; called only when `diagnoses` is True."""
        ...

    async def close(self) -> None: ...
