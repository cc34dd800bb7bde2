"""The service core: one set of rules behind every adapter (the MCP server, `runtime/transports/mcp/server.py`, and the
plain HTTP API, `runtime/transports/http_api.py`, both through `runtime/transports/adapter.py`).

Every call goes: arguments (validated by the adapter) → capability (before any backend call) → the Page it names,
authorized (`runtime/capability/authorization.py`), and its session with its binding checks (the session manager,
`runtime/sessions.py`) → the command (`runtime/commands/`: `Observe`, `Act`, `Verify`, objects the service makes
from its `Parts` and dispatches to from a table) → the call's one result, made from the command's answer. This
module composes and dispatches; the rules are the commands'. Reason codes come
from the runtime (`runtime/failures.py` for a backend's failure); a backend's words never decide a result.
Every call's outcome, a cancelled one included, is recorded in `journal` (the protocol answers nothing to a
cancelled request, so the server's own record is where it shows).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from runtime.arguments import ComputerUseArgs
from runtime.capability.approval import APPROVAL_KEY
from runtime.capability.authorization import authorized_page
from runtime.capability.contexts import ContextStore, PageContext
from runtime.capability.token import CapabilityError
from runtime.capability.verifier import CapabilityVerifier, StaleContext
from runtime.cdp import CDPConnection
from runtime.commands.act import Act, FocusCheck, Hovered, Pointer
from runtime.commands.base import (
    RESERVED_AFTER,
    RESERVED_HINT,
    RESERVED_NAVIGATION,
    Answer,
    Outcome,
    Reach,
    call_approval,
)
from runtime.commands.observe import Observe
from runtime.commands.verify import Verify
from runtime.computer_session import ComputerSession
from runtime.endpoint import BrowserEndpoint
from runtime.gateway import ScopedGateway
from runtime.models import ComputerUseResult
from runtime.phases import call_marks, durations, mark
from runtime.pointer import hovered, rest_on
from runtime.reading.commit import holds_focus
from runtime.reasons import ReasonCode, Refusal
from runtime.registry.pages import PageRegistry, UnknownPage, origin
from runtime.sessions import BackendFactory, GatewayFactory, SessionManager
from runtime.settings import Settings

log = logging.getLogger(__name__)

JOURNAL = 1000
"""Calls the journal keeps (the newest)."""
UNREACHABLE = "the Page could not be reached ({name}); nothing further was done"

Command = Callable[[ComputerSession, ComputerUseArgs, PageContext], Awaitable[Answer]]


@dataclass(frozen=True)
class Parts:
    """The service's replaceable parts, each named and passed in, as the gateway factory is.

    The real runtime takes the defaults. A deliberately broken runtime, assembled in the suites, passes one part of
    its own here: a factory, a function, or a subclass overriding a command's public seam (each command's docstring
    names its seams); never an override of a private method (`suites/lab/test_seams.py` checks)."""

    verifier: Callable[[ContextStore, PageRegistry], CapabilityVerifier] = CapabilityVerifier
    """Checks a call's token and returns its Page Context."""
    sessions: type[SessionManager] = SessionManager
    """The sessions' owner: opens, reuses, binds and ends them."""
    observe: type[Observe] = Observe
    act: type[Act] = Act
    verify: type[Verify] = Verify
    pointer: Pointer = rest_on
    """Moves a click's pointer where it will press, before the policy reads the Page."""
    hovered: Hovered = hovered
    """Waits for the Page's answer to a hover."""
    holds_focus: FocusCheck = holds_focus
    """Whether the field typed into still has the focus, before the runtime's own Enter."""


@dataclass(frozen=True)
class CallRecord:
    """One call as the server saw it end: `code` is "ok", a reason code, or "cancelled"."""

    command: str
    code: str
    session_id: str | None
    message: str
    phases: dict[str, float] = field(default_factory=dict)
    """Milliseconds per phase of the call, in order (`runtime.phases.PHASES`): where the runtime's time went,
    for the overhead benchmark (`suites/bench/test_act_latency.py`): the backend's own work is `backend_act` +
    `backend_snapshot`."""


class ComputerUseService:
    """What serves a call: the capability check, the session it runs on, the command it asks for (`commands`, a
    table of the three command objects), the call's one result, and the journal of how each call ended."""

    def __init__(
        self,
        cdp_endpoint: str | BrowserEndpoint,
        cdp: CDPConnection,
        registry: PageRegistry,
        store: ContextStore,
        backends: Mapping[str, BackendFactory],
        settings: Settings | None = None,
        gateway_factory: GatewayFactory = ScopedGateway,
        parts: Parts | None = None,
    ) -> None:
        parts = parts or Parts()
        self.cdp = cdp
        self.registry = registry
        self.store = store
        self.settings = settings or Settings()
        self.verifier = parts.verifier(store, registry)
        self.sessions = parts.sessions(
            cdp_endpoint, cdp, registry, backends, self.settings, gateway_factory=gateway_factory
        )
        store.listen(self.sessions.owner_ended)  # a turn or grant that ends ends its sessions
        self.reach = Reach(registry, self.sessions, self.settings)
        self.observe = parts.observe(self.reach, registry, self.settings)
        self.act = parts.act(
            self.reach, self.observe, store, pointer=parts.pointer, hovered=parts.hovered, holds_focus=parts.holds_focus
        )
        self.verify = parts.verify(self.reach, self.settings)
        self.commands: dict[str, Command] = {
            "observe": self.observe.run,
            "act": self.act.run,
            "verify": self.verify.run,
        }
        self.journal: deque[CallRecord] = deque(maxlen=JOURNAL)

    async def handle(self, args: ComputerUseArgs, meta: Mapping[str, Any] | None, connection: object) -> Outcome:
        """One call, timed and journaled: its answer (`dispatch`) made into its one result (`result`)."""
        marks = [("start", time.perf_counter())]
        scope = call_marks.set(marks)
        approval = call_approval.set(meta.get(APPROVAL_KEY) if isinstance(meta, Mapping) else None)
        try:
            answer = await self.dispatch(args, meta, connection)
        except asyncio.CancelledError:
            # The lease is released and the frame spent by the code that was interrupted; say so on our side.
            self.journal.append(CallRecord(args.command, "cancelled", args.computer_session_id, "the client cancelled"))
            raise
        finally:
            call_marks.reset(scope)
            call_approval.reset(approval)
        marks.append(("result", time.perf_counter()))
        result = self.result(answer, round((marks[-1][1] - marks[0][1]) * 1000))
        code = result.reason_code.value if result.reason_code is not None else "ok"
        record = CallRecord(args.command, code, result.computer_session_id, result.message, durations(marks))
        self.journal.append(record)
        return Outcome(result, answer.image)

    async def dispatch(self, args: ComputerUseArgs, meta: Mapping[str, Any] | None, connection: object) -> Answer:
        """The call without its journal: the capability, the session, the command; every failure an answer."""
        try:
            context = self.verifier.verify(meta, connection)
            mark("token")
        except CapabilityError as exc:
            return Answer(str(exc), code=ReasonCode.invalid_capability)
        except StaleContext as exc:
            return Answer(str(exc), code=ReasonCode.page_context_stale)
        session: ComputerSession | None = None
        try:
            if args.command == "list_pages":
                pages = [info for info in context.pages.values() if not await self._reserved(info.handle)]
                return Answer(f"{len(pages)} authorized Page(s).", pages=pages)
            session = await self._session(args, context)
            mark("session")
            answer = await self.commands[args.command](session, args, context)
            await self.reach.refuse_reserved(session.page, RESERVED_AFTER)  # it may have navigated there meanwhile
            return answer
        except Refusal as refusal:
            return Answer.refused(refusal)
        except Exception as exc:
            # Never a traceback to the client. Whatever broke (the browser connection, a backend child that
            # died), the Page is out of reach for this call; the log keeps the details.
            log.exception("computer_use %s failed unexpectedly", args.command)
            return Answer(UNREACHABLE.format(name=type(exc).__name__), code=ReasonCode.target_lost)
        finally:
            if session is not None:
                self.sessions.release(session)

    @staticmethod
    def result(answer: Answer, elapsed_ms: int) -> ComputerUseResult:
        """The call's one result: the command's answer, what every answer on a session carries (its id, backend and
        screenshots so far), and the call's time."""
        session = answer.session
        fields: dict[str, Any] = {
            "pages": answer.pages,
            "computer_session_id": session.id if session is not None else None,
            "backend": session.backend_name if session is not None else None,
            "screenshots": session.screenshots if session is not None else None,
            "frame_id": answer.frame_id,
            "page": answer.page,
            "observation": answer.observation,
            "next_offset": answer.next_offset,
            "verified": answer.verified,
            "failures": answer.failures,
            "elapsed_ms": elapsed_ms,
        }
        if answer.code is None:
            return ComputerUseResult(status="ok", message=answer.message, **fields)
        return ComputerUseResult.fail(answer.code, answer.message, answer.hint, **fields)

    async def _session(self, args: ComputerUseArgs, context: PageContext) -> ComputerSession:
        """The session the call runs on, marked busy (`dispatch` releases it): for `observe` with a Page, its
        session for this turn (reused or new); otherwise the one the call names."""
        if args.command == "observe" and args.detail == "diagnostics" and not args.offset:
            self.observe.refuse_without_diagnostics(args.computer_session_id)
        if args.command == "observe" and args.computer_session_id is None:
            page = authorized_page(args.page or "", context, self.registry)
            await self.reach.refuse_reserved(page)
            session = await self.sessions.open(page, context.turn, context.host)
            self.sessions.enter(session)
            if self.store.turns.get(context.host) != context.turn:  # the turn ended while the session started
                self.sessions.owner_ended(context.host, context.turn)
            return session
        session = self.sessions.acquire(args.computer_session_id or "", context)
        try:
            await self.reach.refuse_reserved(session.page)
            if args.action is not None and args.action.type == "navigate":
                self._refuse_reserved_url(args.action.url or "")
        except BaseException:
            self.sessions.release(session)
            raise
        return session

    async def _reserved(self, handle: str) -> bool:
        try:
            return await self.registry.reserved_now(self.registry.get(handle))
        except UnknownPage:
            return False

    def _refuse_reserved_url(self, url: str) -> None:
        """Refuse a navigation to a reserved origin before it happens (the check after the command would only
        catch it once the Page shows it)."""
        if origin(url) in self.registry.reserved_origins:
            raise Refusal(ReasonCode.page_access_disabled, RESERVED_NAVIGATION, RESERVED_HINT)

    async def close(self) -> None:
        await self.sessions.close()
