"""The service core: one set of rules behind every adapter (today the MCP server, `runtime/mcp/server.py`).

Every call goes: arguments (validated by the adapter) → capability (before any backend call) → Page resolution
and binding checks (the session manager, `runtime/sessions.py`) → policy → one backend action → runtime-side
re-observation or verification. Reason codes come from here (and `runtime/failures.py` for a backend's failure);
a backend's words never decide a result.
Every call's outcome, a cancelled one included, is recorded in `journal` (the protocol answers nothing to a
cancelled request, so the server's own record is where it shows).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from collections import deque
from collections.abc import Awaitable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, TypeVar

from runtime.arguments import ComputerUseArgs
from runtime.backend import BackendError, Element, Failure, Snapshot
from runtime.capability.host import ContextStore, PageContext
from runtime.capability.token import CapabilityError
from runtime.capability.verifier import CapabilityVerifier, StaleContext
from runtime.cdp import CDPConnection, CDPError
from runtime.commit import Reading, read_commit
from runtime.failures import DIALOG_OPEN, GONE, reason_for
from runtime.gateway import ScopedGateway
from runtime.models import Action, Assertion, ComputerUseResult, Page
from runtime.models.page import RELATIONS
from runtime.observation import render, render_delta
from runtime.policy import needs_user
from runtime.probe import DialogOpen, TargetGone
from runtime.reasons import ReasonCode
from runtime.registry.registry import PageRegistry, UnknownPage
from runtime.session import ComputerSession, Frame
from runtime.sessions import BackendFactory, GatewayFactory, Refusal, SessionManager
from runtime.settings import Settings
from runtime.verification import failures
from runtime.viewport import IN_VIEW_JS, in_view_first

log = logging.getLogger(__name__)

T = TypeVar("T")
JOURNAL = 1000
"""Calls the journal keeps (the newest)."""
STALE_DIALOG_READS = 5
"""Snapshots asked again while an upstream still reports a dialog the runtime's probe saw close."""
IN_VIEW_TIMEOUT = 2.0
"""Seconds the probe may take to list the elements in the viewport; past it the frame stays in document order."""


@dataclass
class Outcome:
    result: ComputerUseResult
    image: bytes | None = None
    changes_only: bool = False
    """The observation tells what changed since the act's frame (`runtime/delta.py`), not the whole frame."""


@dataclass(frozen=True)
class CallRecord:
    """One call as the server saw it end: `code` is "ok", a reason code, or "cancelled"."""

    command: str
    code: str
    session_id: str | None
    message: str
    phases: dict[str, float] = field(default_factory=dict)
    """Milliseconds per phase of the call, in order (`PHASES`): where the runtime's time went, for the overhead
    benchmark (`suites/bench/test_overhead.py`): the backend's own work is `backend_act` + `backend_snapshot`."""


PHASES = ("token", "session", "policy", "backend_act", "backend_snapshot", "backend_screenshot", "frame", "result")
_marks: ContextVar[list[tuple[str, float]] | None] = ContextVar("computer_use_phase_marks", default=None)


def mark(phase: str) -> None:
    """The current call reached the end of `phase` (a no-op outside a call)."""
    marks = _marks.get()
    if marks is not None:
        marks.append((phase, time.perf_counter()))


def _durations(marks: list[tuple[str, float]]) -> dict[str, float]:
    spent: dict[str, float] = {}
    for (_, before), (phase, at) in itertools.pairwise(marks):
        spent[phase] = round(spent.get(phase, 0.0) + (at - before) * 1000, 3)
    return spent


class ComputerUseService:
    def __init__(
        self,
        cdp_endpoint: str,
        cdp: CDPConnection,
        registry: PageRegistry,
        store: ContextStore,
        backends: Mapping[str, BackendFactory],
        settings: Settings | None = None,
        gateway_factory: GatewayFactory = ScopedGateway,
    ) -> None:
        self.cdp = cdp
        self.registry = registry
        self.store = store
        self.verifier = CapabilityVerifier(store, registry)
        self.settings = settings or Settings()
        self.sessions = SessionManager(
            cdp_endpoint, cdp, registry, backends, self.settings, gateway_factory=gateway_factory
        )
        self.journal: deque[CallRecord] = deque(maxlen=JOURNAL)

    # -- entry -----------------------------------------------------------------------------------------------

    async def handle(self, args: ComputerUseArgs, meta: Mapping[str, Any] | None, connection: object) -> Outcome:
        marks = [("start", time.perf_counter())]
        scope = _marks.set(marks)
        try:
            outcome = await self._handle(args, meta, connection)
        except asyncio.CancelledError:
            # The lease is released and the frame spent by the code that was interrupted; say so on our side.
            self.journal.append(CallRecord(args.command, "cancelled", args.computer_session_id, "the client cancelled"))
            raise
        finally:
            _marks.reset(scope)
        result = outcome.result
        marks.append(("result", time.perf_counter()))
        result.elapsed_ms = round((marks[-1][1] - marks[0][1]) * 1000)
        code = result.reason_code.value if result.reason_code is not None else "ok"
        record = CallRecord(args.command, code, result.computer_session_id, result.message, _durations(marks))
        self.journal.append(record)
        return outcome

    async def _handle(self, args: ComputerUseArgs, meta: Mapping[str, Any] | None, connection: object) -> Outcome:
        try:
            context = self.verifier.verify(meta, connection)
            mark("token")
        except CapabilityError as exc:
            return Outcome(ComputerUseResult.fail(ReasonCode.invalid_capability, str(exc)))
        except StaleContext as exc:
            return Outcome(ComputerUseResult.fail(ReasonCode.page_context_stale, str(exc)))
        session: ComputerSession | None = None
        try:
            if args.command == "list_pages":
                pages = list(context.pages.values())
                return Outcome(ComputerUseResult(status="ok", message=f"{len(pages)} authorized Page(s).", pages=pages))
            if args.command == "observe" and args.computer_session_id is None:
                session = await self.sessions.open(self._resolve(args.page or "", context), context.turn)
                self.sessions.enter(session)
            else:
                session = self.sessions.acquire(args.computer_session_id or "", context)
            mark("session")
            if args.command == "observe":
                outcome = await self._observe(session, args, context)
            elif args.command == "act":
                outcome = await self._act(session, args, context)
            else:
                outcome = await self._verify(session, args.assertion)  # type: ignore[arg-type]
            if outcome.result.computer_session_id == session.id:
                outcome.result.backend = session.backend_name
                outcome.result.screenshots = session.screenshots
            return outcome
        except Refusal as refusal:
            return Outcome(ComputerUseResult.fail(refusal.code, str(refusal)))
        except Exception as exc:
            # Never a traceback to the client. Whatever broke (the browser connection, a backend child that
            # died), the Page is out of reach for this call; the log keeps the details.
            log.exception("computer_use %s failed unexpectedly", args.command)
            message = f"the Page could not be reached ({type(exc).__name__}); nothing further was done"
            return Outcome(ComputerUseResult.fail(ReasonCode.target_lost, message))
        finally:
            if session is not None:
                self.sessions.release(session)

    def _resolve(self, word: str, context: PageContext) -> Page:
        page = self._authorized(word, context)
        if not page.access_enabled:
            raise Refusal(ReasonCode.page_access_disabled, "the user disabled access to this Page")
        if self.registry.is_lost(page):
            raise Refusal(ReasonCode.target_lost, GONE)
        return page

    def _authorized(self, word: str, context: PageContext) -> Page:
        if word in context.revisions:  # authorized this turn (it may be gone since: the caller checks)
            return self.registry.get(word)
        if word in RELATIONS:
            matches = [h for h, info in context.pages.items() if info.relation == word]
            if len(matches) == 1:
                return self.registry.get(matches[0])
            where = f"{len(matches)} authorized Pages are" if matches else "no authorized Page is"
            raise Refusal(ReasonCode.ambiguous_page, f"{where} {word} of the chat")
        try:
            self.registry.get(word)
        except UnknownPage:
            raise Refusal(ReasonCode.invalid_arguments, f"no Page {word!r}; use a handle from list_pages") from None
        raise Refusal(ReasonCode.invalid_capability, f"Page {word} is not authorized for this request")

    # -- observe ---------------------------------------------------------------------------------------------

    async def _observe(self, session: ComputerSession, args: ComputerUseArgs, context: PageContext) -> Outcome:
        if args.offset:
            frame = session.latest
            if frame is None or frame.id != args.frame_id:
                raise Refusal(ReasonCode.stale_observation, "offset continues the latest frame; pass its frame_id")
            return Outcome(self._observation(session, frame, args.offset))
        return await self._observe_session(session, args.detail, context)

    async def _observe_session(
        self, session: ComputerSession, detail: str, context: PageContext, since: Frame | None = None
    ) -> Outcome:
        """A new frame of the session's Page; after an act (`since`: the frame the act was sent on), the result
        tells what changed since, when that is shorter than the frame."""
        timeout = self.settings.observe_timeout
        try:
            documents = session.gateway.documents
            snapshot = await self._until_stopped(session, self._snapshot(session), timeout)
            mark("backend_snapshot")
            # The document the snapshot was read from: known if none replaced another during the read (a backend's
            # first read is also when it first reads the frame tree, which is the gateway's first document).
            read_one = session.gateway.documents - documents == 0 or session.gateway.documents == 1
            document = session.gateway.document if read_one else None
            image = None
            if detail == "visual":
                image = await self._until_stopped(session, session.screenshot(), timeout)
                mark("backend_screenshot")
        except TimeoutError:
            raise Refusal(ReasonCode.timeout, "the Page did not answer the observation in time") from None
        except DialogOpen:
            raise Refusal(ReasonCode.needs_user, DIALOG_OPEN) from None
        except BackendError as exc:
            raise self._backend_refusal(session, exc, reading=True) from None
        point_request = (context.turn, context.sequence + 1) if image is not None else None
        frame = session.new_frame(snapshot, detail, point_request, document=document, since=since)
        result = self._observation(session, frame, 0)
        outcome = Outcome(result, image)
        cap = self.settings.observation_tokens
        changes = None
        if since is not None and frame.delta is not None:
            changes = render_delta(frame.snapshot, since.snapshot, frame.delta, detail, cap)
        if changes is not None and len(changes) < len(result.observation or ""):
            result.observation, result.next_offset = changes, None
            outcome.changes_only = True
        elif result.next_offset is not None:
            frame.order = await self._in_view_first(session, frame)
            if frame.order is not None:
                outcome.result = self._observation(session, frame, 0)
        mark("frame")
        return outcome

    @staticmethod
    async def _in_view_first(session: ComputerSession, frame: Frame) -> list[int] | None:
        """The frame's elements in the viewport first (`runtime/viewport.py`); None (document order) when the
        probe cannot tell in time. Only the order of what is shown depends on it."""
        try:
            seen = await asyncio.wait_for(session.probe.evaluate(IN_VIEW_JS), IN_VIEW_TIMEOUT)
        except (CDPError, TargetGone, DialogOpen, TimeoutError):
            return None
        if not isinstance(seen, dict) or not isinstance(seen.get("items"), list):
            return None
        return in_view_first(frame.upstream.elements, int(seen.get("total") or 0), seen["items"])

    @staticmethod
    async def _snapshot(session: ComputerSession) -> Snapshot:
        """The backend's snapshot. An upstream that saw a dialog open may answer "dialog" a moment after the user
        answered it (its close event still on the way); when the runtime's own probe knows no dialog is open, the
        read is asked again, a bounded number of times. Only a read: nothing is ever sent twice to the Page."""
        for _ in range(STALE_DIALOG_READS):
            try:
                return await session.backend.snapshot()
            except BackendError as exc:
                if exc.kind is not Failure.dialog or not await session.probe.dialog_closed():
                    raise
        return await session.backend.snapshot()

    def _observation(self, session: ComputerSession, frame: Frame, offset: int) -> ComputerUseResult:
        text, next_offset = render(
            frame.snapshot, frame.detail, offset, cap=self.settings.observation_tokens, order=frame.order
        )
        return ComputerUseResult(
            status="ok",
            message=f"Observed with backend {session.backend_name}.",
            computer_session_id=session.id,
            frame_id=frame.id,
            page=self.registry.info(session.page),
            observation=text,
            next_offset=next_offset,
        )

    def _backend_refusal(self, session: ComputerSession, exc: BackendError, reading: bool = False) -> Refusal:
        code, message = reason_for(exc, reading=reading)
        if code is ReasonCode.target_lost:
            self.sessions.invalidate(session, code, message)
        # The upstream's words may echo page text: they go to the log, never into a message the model reads.
        log.info("backend refused %s: %s", exc.kind, " ".join(str(exc).split())[:500])
        return Refusal(code, message)

    # -- act -------------------------------------------------------------------------------------------------

    async def _act(self, session: ComputerSession, args: ComputerUseArgs, context: PageContext) -> Outcome:
        action: Action = args.action  # type: ignore[assignment]
        frame = self._latest(session, args.frame_id)
        if action.is_point and frame.point_request != (context.turn, context.sequence):
            raise Refusal(
                ReasonCode.stale_observation,
                "a point is valid only in the model request right after a screenshot (observe with detail=visual)",
            )
        element = None
        if action.ref is not None:
            element = frame.element(action.ref)
            if element is None:
                raise Refusal(ReasonCode.stale_observation, f"ref {action.ref} is not in the latest frame")
        if session.popups_pending and action.is_write:
            raise Refusal(ReasonCode.page_context_stale, "a popup opened by this Page is not registered yet")
        lease = self.registry.lease(session.page)
        try:
            await asyncio.wait_for(lease.acquire(), self.settings.lease_timeout)
        except TimeoutError:
            raise Refusal(ReasonCode.timeout, "another session is writing to this Page") from None
        sent = blocked = False
        try:
            self._recheck(session, args.frame_id)
            await self._check_policy(session, action, element, context)
            mark("policy")
            session.latest = None  # the frame is spent: whatever happens next, observe before acting again
            sent = True
            await self._send(session, action, element)
            mark("backend_act")
        except DialogOpen:
            blocked = True  # the action reached the Page, and the Page now waits for the user
        except TimeoutError:
            raise Refusal(
                ReasonCode.timeout, "the action did not finish in time; it may have partly happened"
            ) from None
        except BackendError as exc:
            raise self._backend_refusal(session, exc) from None
        finally:
            if sent:  # other sessions' frames of this Page, even those taken during the write, are stale now
                self.sessions.spend_frames_of_others(session)
            lease.release()
        try:
            outcome = await self._after_act(session, context, frame, blocked)
        except Refusal as refusal:
            raise Refusal(refusal.code, f"the action was sent, but re-observing failed: {refusal}") from None
        told = "what changed" if outcome.changes_only else "the new frame"
        outcome.result.message = f"{action.type} done; the observation is {told}."
        outcome.result.page = None  # the agent knows the Page; a changed url or title is in the observation
        return outcome

    async def _send(self, session: ComputerSession, action: Action, element: Element | None) -> None:
        """The one place an action goes to the backend: once, on the session's own backend, bounded."""
        await self._until_stopped(session, session.backend.act(action, element), self.settings.act_timeout)

    async def _after_act(self, session: ComputerSession, context: PageContext, frame: Frame, blocked: bool) -> Outcome:
        """What the act returns: the Page's new frame (or what changed since `frame`); a dialog the action opened
        is the user's to answer (`needs_user`), never the runtime's."""
        if blocked:
            raise Refusal(ReasonCode.needs_user, DIALOG_OPEN)
        return await self._observe_session(session, "interactive", context, since=frame)

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

    def _recheck(self, session: ComputerSession, frame_id: str | None) -> None:
        """Under the lease, everything is checked again: while this call waited for it, another call may have
        spent the frame or written to the Page, or the user may have disabled access or hidden the Page."""
        self.sessions.check_binding(session)
        self._latest(session, frame_id)

    @staticmethod
    def _latest(session: ComputerSession, frame_id: str | None) -> Frame:
        frame = session.latest
        if frame is None or frame.id != frame_id:
            raise Refusal(ReasonCode.stale_observation, "frame_id is not the latest frame of this session")
        return frame

    async def _check_policy(
        self, session: ComputerSession, action: Action, element: Element | None, context: PageContext
    ) -> None:
        """The runtime's own read of the Page and of what this write would commit, a moment before the input."""
        authorized = context.pages.get(session.page.registry_page_id)
        if action.type == "navigate":  # no element and no structure: only the dialog watch must be on
            await self._read(session, session.probe.watch())
            structure, reading = None, Reading()
        else:  # one frame read (it attaches the probe too), shared by the structure and the commit read
            frames = await self._read(session, session.probe.frames())
            # Both reads sent together: they only read, and each waits on the browser, not on the other.
            structure, reading = await self._read(
                session,
                asyncio.gather(session.probe.structure(frames), read_commit(session.probe, action, element, frames)),
            )
        if not reading.found and (action.type in ("click", "select") or (action.type == "type" and action.submit)):
            raise Refusal(
                ReasonCode.stale_observation,
                "the element is no longer on the Page as the frame showed it (renamed, moved or removed); "
                "nothing was done: observe again",
            )
        reason = needs_user(action, reading, structure, authorized.url if authorized is not None else "")
        if reason is not None:
            raise Refusal(ReasonCode.needs_user, reason)

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

    # -- verify ----------------------------------------------------------------------------------------------

    async def _verify(self, session: ComputerSession, assertion: Assertion) -> Outcome:
        if session.popups_pending:
            raise Refusal(ReasonCode.page_context_stale, "a popup opened by this Page is not registered yet")
        try:
            failed = await asyncio.wait_for(
                failures(assertion, session.probe, session.latest), self.settings.observe_timeout
            )
        except TimeoutError:
            raise Refusal(ReasonCode.timeout, "the Page did not answer the verification in time") from None
        except DialogOpen:
            raise Refusal(ReasonCode.needs_user, DIALOG_OPEN) from None
        except TargetGone:
            self.sessions.invalidate(session, ReasonCode.target_lost, GONE)
            raise Refusal(ReasonCode.target_lost, GONE) from None
        if failed:
            return Outcome(
                ComputerUseResult.fail(
                    ReasonCode.verification_failed,
                    "the assertion does not hold on the live Page",
                    computer_session_id=session.id,
                    verified=False,
                    failures=failed,
                )
            )
        return Outcome(
            ComputerUseResult(
                status="ok", message="verified on the live Page", computer_session_id=session.id, verified=True
            )
        )

    async def close(self) -> None:
        await self.sessions.close()
