"""Know when the bound page is gone, without asking the upstream.

Why: an upstream MCP server does not reliably say "your page is gone". @playwright/mcp 0.0.83, when the page it
acts on closes, runs `ensureTab()` on its next call and answers from a *new* page (a snapshot "succeeds" on
about:blank, a click says "Ref e3 not found"); chrome-devtools-mcp 1.11.0 drops the page from its list and answers
"No page found" or selects whatever page is left. Only the call that races the close reports the loss itself.

So the backend watches the target itself, over the same CDP endpoint the upstream uses (the gateway shows it the
bound page only): one browser-level connection, `Target.setDiscoverTargets` + `Target.getTargets` at start, then
only events (`targetDestroyed`, `targetCrashed`). Zero calls reach the page. If exactly one page is visible at
start, that page is bound; otherwise (an unscoped endpoint with several pages) the watcher binds nothing and the
backend relies on the upstream's error texts alone.
"""

from __future__ import annotations

import logging
from typing import Any

from runtime.cdp import CDPConnection

log = logging.getLogger(__name__)

CONNECT_TIMEOUT = 10.0


class TargetWatcher:
    def __init__(self, cdp_endpoint: str, timeout: float = CONNECT_TIMEOUT, label: str = "backend") -> None:
        self.label = label
        self.cdp_endpoint = cdp_endpoint.rstrip("/")
        self.timeout = timeout
        self.bound: str | None = None
        self._lost: str | None = None
        self._cdp: CDPConnection | None = None

    @property
    def lost(self) -> str | None:
        """Why the bound page is gone, once it is."""
        if self._lost is None and self.bound is not None and self._cdp is not None and self._cdp.closed.is_set():
            self._lost = "the CDP connection to the page closed"
        return self._lost

    async def start(self) -> str | None:
        """Connect and bind the only visible page. Returns its target id, or None if there was not exactly one."""
        self._cdp = await CDPConnection.connect(self.cdp_endpoint, self.timeout)
        self._cdp.listen(self._on_event)
        await self._cdp.send("Target.setDiscoverTargets", {"discover": True}, timeout=self.timeout)
        infos = (await self._cdp.send("Target.getTargets", timeout=self.timeout))["targetInfos"]
        pages = [info["targetId"] for info in infos if info.get("type") == "page"]
        self.bound = pages[0] if len(pages) == 1 else None
        return self.bound

    def _on_event(self, method: str, params: dict[str, Any], session_id: str | None) -> None:
        if self.bound is None or self._lost is not None or session_id is not None:
            return
        target = params.get("targetId") or params.get("targetInfo", {}).get("targetId")
        if target != self.bound:
            return
        if method == "Target.targetDestroyed":
            self._lost = "the page was closed"
        elif method == "Target.targetCrashed":
            self._lost = f"the page crashed ({params.get('status', 'unknown')})"

    async def close(self) -> None:
        if self._cdp is not None:
            await self._cdp.close()


async def start_watcher(cdp_endpoint: str, label: str) -> TargetWatcher | None:
    """A started watcher of the bound page, or None: an endpoint that shows no single page or refuses discovery
    leaves the backend relying on the upstream's error texts alone (logged, not fatal)."""
    watcher = TargetWatcher(cdp_endpoint, label=label)
    try:
        if await watcher.start() is not None:
            return watcher
        log.warning("%s: the CDP endpoint shows no single page; target loss via errors only", label)
    except Exception as exc:
        log.warning("%s: cannot watch the target (%r); target loss via errors only", label, exc)
    await watcher.close()
    return None
