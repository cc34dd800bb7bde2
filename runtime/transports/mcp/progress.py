"""MCP progress for a long call: when a `tools/call` carries `_meta.progressToken`, each phase the call reaches
(its policy read, the backend's action, the re-observation…) goes to the client as one `notifications/progress`
while the call runs, so a client can show that an act taking seconds is still moving.

Bounded: a phase is reported once (a call has at most `len(PHASE_WORDS)` notifications) and the notifications all leave
before the result does. A call without a token costs nothing: no task, no queue (`with_progress` is not entered).
The phases come from the call's own marks (`runtime.phases.mark`); the runtime's rules do not know about
MCP.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Mapping
from typing import Any

from mcp.server.mcpserver import Context

from runtime.phases import call_progress

log = logging.getLogger(__name__)

PHASE_WORDS = {
    "token": "authorization checked",
    "session": "Page session ready",
    "policy": "policy read",
    "pointer": "pointer moved",
    "backend_act": "action done by the backend",
    "backend_snapshot": "Page read",
    "backend_diagnostics": "diagnostics read",
    "backend_screenshot": "screenshot taken",
    "frame": "observation built",
}
"""The phases reported, in words a client can show (`runtime.phases.PHASE_WORDS` names them)."""
FLUSH_TIMEOUT = 5.0
"""Seconds the last notifications may take to leave once the call has its result (a stalled client)."""


def progress_token(meta: Mapping[str, Any] | None) -> object | None:
    """The request's progress token, if it asked for progress (the SDK validates `_meta` into `progress_token`)."""
    if not meta:
        return None
    return meta.get("progress_token", meta.get("progressToken"))


class Reporter:
    """Sends the phases of one call as progress notifications, in order, from a task of its own: `mark` runs
    inside the call and cannot wait for the client."""

    def __init__(self, ctx: Context) -> None:
        self._ctx = ctx
        self._seen: set[str] = set()
        self._queue: asyncio.Queue[str | None] = asyncio.Queue()
        self._task = asyncio.create_task(self._send())

    def __call__(self, phase: str) -> None:
        if phase in PHASE_WORDS and phase not in self._seen:
            self._seen.add(phase)
            self._queue.put_nowait(phase)

    async def _send(self) -> None:
        sent = 0
        while (phase := await self._queue.get()) is not None:
            sent += 1
            try:
                await self._ctx.report_progress(sent, None, PHASE_WORDS[phase])
            except Exception:  # a client that went away: the call's result decides, not its progress
                log.debug("a progress notification could not be sent", exc_info=True)
                return

    async def close(self) -> None:
        """Let the notifications queued so far leave (bounded), then stop."""
        self._queue.put_nowait(None)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._task, FLUSH_TIMEOUT)  # cancels the sender when it times out

    def cancel(self) -> None:
        """The call ended without a result (cancelled, say): nothing more to tell."""
        self._task.cancel()


@contextlib.asynccontextmanager
async def with_progress(ctx: Context) -> AsyncIterator[None]:
    """Report the phases of the call run inside to `ctx`'s client."""
    reporter = Reporter(ctx)
    scope = call_progress.set(reporter)
    try:
        yield
    except BaseException:
        reporter.cancel()
        raise
    finally:
        call_progress.reset(scope)
    await reporter.close()
