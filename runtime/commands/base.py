"""What every command shares: the answer a command gives, the approval a call carries, the bounded ways a command
reaches its session's backend and Page (`Reach`), and the one way a failure there becomes the runtime's own refusal
(`Reach.refusal`)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TypeVar

from runtime.backend import BackendError, Failure
from runtime.cdp import CDPError
from runtime.computer_session import ComputerSession
from runtime.failures import DIALOG_OPEN, GONE, reason_for
from runtime.models import ComputerUseResult, Page, PageInfo
from runtime.reading.probe import DialogOpen, TargetGone
from runtime.reasons import ReasonCode
from runtime.registry.pages import PageRegistry
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
    """A call's result as the adapters send it: the result, and the screenshot that goes with it."""

    result: ComputerUseResult
    image: bytes | None = None


@dataclass(frozen=True)
class Answer:
    """What a command answers, before it is a result: the service makes the call's one `ComputerUseResult` from it
    (`ComputerUseService.result`), adding what every answer on a session carries (its id, backend and screenshots)
    and the call's time. Frozen: a command that changes an answer makes a new one (`dataclasses.replace`)."""

    message: str
    session: ComputerSession | None = None
    code: ReasonCode | None = None
    hint: str | None = None
    pages: list[PageInfo] | None = None
    frame_id: str | None = None
    page: PageInfo | None = None
    observation: str | None = None
    next_offset: int | None = None
    verified: bool | None = None
    failures: list[str] | None = None
    image: bytes | None = None
    changes_only: bool = False
    """The observation tells what changed since the act's frame (`runtime/delta.py`), not the whole frame."""

    @classmethod
    def refused(cls, refusal: Refusal) -> Answer:
        return cls(str(refusal), code=refusal.code, hint=refusal.hint)


call_approval: ContextVar[object] = ContextVar("computer_use_approval", default=None)
"""The approval the current call carries in its `_meta` (`runtime/capability/approval.py`), as it came."""


@dataclass(frozen=True)
class Step:
    """What a command was doing when a failure ended it: the words of its refusal (`Reach.refusal`)."""

    timeout: str
    reading: bool = False
    """Only reading (nothing sent): a backend's failure is worded as a read's (`runtime.failures.reason_for`)."""
    unreadable: str | None = None
    """The refusal's words when the runtime's own browser connection could not read the Page (`CDPError`); None:
    such a failure is not this step's to name, and the service answers it as a Page out of reach."""


READ = Step(
    "the Page did not answer in time; nothing was done",
    unreadable="the runtime could not read the Page before acting; nothing was done",
)
OBSERVE = Step("the Page did not answer the observation in time", reading=True)
VERIFY = Step("the Page did not answer the verification in time")
SEND = Step("the action did not finish in time; it may have partly happened")


class Reach:
    """How a command reaches its session's backend and Page: bounded, stopped by the Page (a dialog, the session's
    end), and refused in the runtime's own words. The service gives every command the same one."""

    def __init__(self, registry: PageRegistry, sessions: SessionManager, settings: Settings) -> None:
        self.registry = registry
        self.sessions = sessions
        self.settings = settings

    async def refuse_reserved(self, page: Page, message: str = RESERVED) -> None:
        """Refuse the call while the Page shows a reserved origin (`PageRegistry.reserved_origins`: the host app's
        own console), read fresh: Pages navigate, so a Page authorized on a site may be on the console by now."""
        if await self.registry.reserved_now(page):
            raise Refusal(ReasonCode.page_access_disabled, message, RESERVED_HINT)

    async def until_stopped(self, session: ComputerSession, call: Awaitable[T], timeout: float) -> T:
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

    @contextlib.asynccontextmanager
    async def refusing(self, session: ComputerSession, step: Step) -> AsyncIterator[None]:
        """Within it, a failure of `step` on the session's Page leaves as the runtime's refusal (`refusal`)."""
        try:
            yield
        except (TimeoutError, DialogOpen, TargetGone, CDPError, BackendError) as exc:
            refusal = await self.refusal(exc, session, step)
            if refusal is None:
                raise
            raise refusal from None

    async def refusal(self, exc: Exception, session: ComputerSession, step: Step) -> Refusal | None:
        """The one way a failure becomes a refusal: its reason code and the runtime's own words for `step`; a
        target that is gone also ends the session. None: not a failure `step` can name (the service answers it)."""
        if isinstance(exc, TimeoutError):
            return Refusal(ReasonCode.timeout, step.timeout)
        if isinstance(exc, DialogOpen):
            return Refusal(ReasonCode.needs_user, DIALOG_OPEN)
        if isinstance(exc, TargetGone):
            self.sessions.invalidate(session, ReasonCode.target_lost, GONE)
            return Refusal(ReasonCode.target_lost, GONE)
        if isinstance(exc, CDPError):
            if step.unreadable is None:
                return None
            log.warning("policy read failed", exc_info=exc)
            return Refusal(ReasonCode.stale_observation, step.unreadable)
        if isinstance(exc, BackendError):
            return await self.backend_refusal(exc, session, step)
        return None

    async def backend_refusal(self, exc: BackendError, session: ComputerSession, step: Step) -> Refusal:
        """`refusal`'s rung for a backend's failure: its kind decides the code (`runtime.failures.reason_for`)."""
        code, message, hint = reason_for(exc, reading=step.reading)
        if exc.kind is Failure.upstream and await session.probe.gone():
            # A failure the backend could not name, on a target that is gone: the browser died or closed the Page
            # under it, and its words came before the gateway read the end of its own connection.
            code, message = ReasonCode.target_lost, GONE
        if code is ReasonCode.target_lost:
            self.sessions.invalidate(session, code, message)
        # The upstream's words may echo page text: they go to the log, never into a message the model reads.
        log.info("backend refused %s: %s", exc.kind, " ".join(str(exc).split())[:500])
        return Refusal(code, message, hint)
