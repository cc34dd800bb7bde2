"""What every command shares: the outcome a command returns, the approval a call carries, and the bounded ways a
command reaches its session's backend and Page, each turning a failure into the runtime's own reason code."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TypeVar

from runtime.backend import BackendError, Failure
from runtime.capability.host import ContextStore
from runtime.cdp import CDPError
from runtime.failures import DIALOG_OPEN, GONE, reason_for
from runtime.models import ComputerUseResult, Page
from runtime.probe import DialogOpen, TargetGone
from runtime.reasons import ReasonCode
from runtime.registry.registry import PageRegistry
from runtime.session import ComputerSession
from runtime.sessions import Refusal, SessionManager
from runtime.settings import Settings

log = logging.getLogger(__name__)

T = TypeVar("T")

RESERVED = "this Page is showing the host app's own console, which no agent may read or use; nothing was done"
RESERVED_AFTER = (
    "this Page went to the host app's own console during the command, which no agent may read or use: its answer "
    "is withheld (an act may have taken effect before it got there)"
)
RESERVED_NAVIGATION = "that URL is the host app's own console, which no agent may open; nothing was done"
RESERVED_HINT = (
    "Call list_pages for the Pages you may use. If you need this Page, ask the user to open its site in it again."
)


@dataclass
class Outcome:
    result: ComputerUseResult
    image: bytes | None = None
    changes_only: bool = False
    """The observation tells what changed since the act's frame (`runtime/delta.py`), not the whole frame."""


call_approval: ContextVar[object] = ContextVar("computer_use_approval", default=None)
"""The approval the current call carries in its `_meta` (`runtime/capability/approval.py`), as it came."""


class Command:
    """The parts a command works with (the service assembles them) and the bounded calls every command makes."""

    registry: PageRegistry
    settings: Settings
    sessions: SessionManager
    store: ContextStore

    async def refuse_reserved(self, page: Page, message: str = RESERVED) -> None:
        """Refuse the call while the Page shows a reserved origin (`PageRegistry.reserved_origins`: the host app's
        own console), read fresh: Pages navigate, so a Page authorized on a site may be on the console by now."""
        if await self.registry.reserved_now(page):
            raise Refusal(ReasonCode.page_access_disabled, message, RESERVED_HINT)

    async def _until_stopped(self, session: ComputerSession, call: Awaitable[T], timeout: float) -> T:
        """Run one backend call, bounded by `timeout` and by the Page: a Page whose target is gone, or that a dialog
        blocks, answers nothing more, and a backend may wait for it (a load, an input ack) until its own timeout.
        Whichever comes first ends the wait: the answer, a dialog (`DialogOpen`: the user's turn), the session's end
        (its refusal), or the bound (`TimeoutError`). An abandoned action may have partly happened."""
        task = asyncio.ensure_future(call)
        stops = [asyncio.ensure_future(session.ended.wait())]
        # Only a dialog that opens during the call: one the probe already knew of may have closed a moment ago on
        # another connection (the user answered it), and if it has not, the backend says so itself.
        if not session.probe.dialog_open.is_set():
            stops.append(asyncio.ensure_future(session.probe.dialog_open.wait()))
        try:
            done, _ = await asyncio.wait({task, *stops}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for stop in stops:
                stop.cancel()
            if not task.done():
                task.cancel()
                await asyncio.wait({task})
        if task in done:
            return task.result()
        if session.invalid is not None:
            raise Refusal(*session.invalid)
        if len(stops) > 1 and stops[1] in done:
            raise DialogOpen(session.probe.dialog or "dialog")
        raise TimeoutError

    async def _backend_refusal(self, session: ComputerSession, exc: BackendError, reading: bool = False) -> Refusal:
        code, message, hint = reason_for(exc, reading=reading)
        if exc.kind is Failure.upstream and await session.probe.gone():
            # A failure the backend could not name, on a target that is gone: the browser died or closed the Page
            # under it, and its words came before the gateway read the end of its own connection.
            code, message = ReasonCode.target_lost, GONE
        if code is ReasonCode.target_lost:
            self.sessions.invalidate(session, code, message)
        # The upstream's words may echo page text: they go to the log, never into a message the model reads.
        log.info("backend refused %s: %s", exc.kind, " ".join(str(exc).split())[:500])
        return Refusal(code, message, hint)

    async def _read(self, session: ComputerSession, read: Awaitable[T]) -> T:
        try:
            return await asyncio.wait_for(read, self.settings.observe_timeout)
        except TargetGone:
            self.sessions.invalidate(session, ReasonCode.target_lost, GONE)
            raise Refusal(ReasonCode.target_lost, GONE) from None
        except TimeoutError:
            raise Refusal(ReasonCode.timeout, "the Page did not answer in time; nothing was done") from None
        except DialogOpen:
            raise Refusal(ReasonCode.needs_user, DIALOG_OPEN) from None
        except CDPError:
            log.warning("policy read failed", exc_info=True)
            raise Refusal(
                ReasonCode.stale_observation, "the runtime could not read the Page before acting; nothing was done"
            ) from None
