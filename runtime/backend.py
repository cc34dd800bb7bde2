"""The contract every execution backend fulfils. A backend turns one canonical Action into one upstream action
and nothing else: no retries, no fallbacks, no second write. Everything else (identity, permission, policy,
frames, verification) is the runtime's.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

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


def _alive() -> str | None:
    return None


NODE_BIN_ENV = "COMPUTER_USE_NODE_BIN"


def node_bin() -> Path:
    """Where the pinned npm MCP servers are: `$COMPUTER_USE_NODE_BIN`, else a checkout's `backends/node_modules/.bin`.

    A wheel does not carry the npm servers (they are installed by `npm ci` from backends/package-lock.json), so an
    installed runtime is told where a pinned install lives."""
    explicit = os.environ.get(NODE_BIN_ENV, "").strip()
    if explicit:
        return Path(explicit)
    return Path(__file__).resolve().parent.parent / "backends" / "node_modules" / ".bin"


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
    node_bin: Path = field(default_factory=lambda: node_bin())


class BackendError(Exception):
    """An upstream failure, classified. The runtime maps `kind` to a reason code; the text is never shown as one.

    kind: "target_lost" (page closed/crashed/detached), "timeout", "element" (the ref did not resolve or the
    element could not be acted on), "dialog" (a JavaScript dialog or file chooser blocks the page: no backend ever
    answers one, the user must), "upstream" (anything else the upstream reported).
    """

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


class Backend(Protocol):
    name: str

    async def start(self) -> None: ...

    async def snapshot(self) -> Snapshot: ...

    async def act(self, action: Action, element: Element | None) -> None:
        """Perform exactly one upstream action. `element` is the resolved target for ref-based actions."""
        ...

    async def screenshot(self) -> bytes:
        """One PNG of the viewport, for visual checks and canvas only."""
        ...

    async def close(self) -> None: ...
