"""The service core: one set of rules behind every adapter (the MCP server, `runtime/mcp/server.py`, and the plain
HTTP API, `runtime/http_api.py`, both through `runtime/adapter.py`).

Every call goes: arguments (validated by the adapter) → capability (before any backend call) → Page resolution
and binding checks (the session manager, `runtime/sessions.py`) → the command's rules (`runtime/commands/`: policy,
one backend action, runtime-side re-observation or verification). This module only dispatches. Reason codes come
from the runtime (`runtime/failures.py` for a backend's failure); a backend's words never decide a result.
Every call's outcome, a cancelled one included, is recorded in `journal` (the protocol answers nothing to a
cancelled request, so the server's own record is where it shows).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from runtime.arguments import ComputerUseArgs
from runtime.capability.approval import APPROVAL_KEY
from runtime.capability.host import ContextStore, PageContext
from runtime.capability.token import CapabilityError
from runtime.capability.verifier import CapabilityVerifier, StaleContext
from runtime.cdp import CDPConnection
from runtime.commands.act import Acting
from runtime.commands.base import (
    RESERVED_AFTER,
    RESERVED_HINT,
    RESERVED_NAVIGATION,
    Outcome,
    call_approval,
)
from runtime.commands.verify import Verifying
from runtime.endpoint import BrowserEndpoint
from runtime.failures import GONE
from runtime.gateway import ScopedGateway
from runtime.models import ComputerUseResult, Page
from runtime.models.page import RELATIONS
from runtime.phases import call_marks, durations, mark
from runtime.reasons import ReasonCode
from runtime.registry.registry import PageRegistry, UnknownPage, origin
from runtime.session import ComputerSession
from runtime.sessions import BackendFactory, GatewayFactory, Refusal, SessionManager
from runtime.settings import Settings

log = logging.getLogger(__name__)

JOURNAL = 1000
"""Calls the journal keeps (the newest)."""


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


class ComputerUseService(Acting, Verifying):
    """The capability check, the Page or session a call names, and the command it asks for. Each rule is a method
    of its command's class, so a subclass can change exactly one."""

    session_manager_class: type[SessionManager] = SessionManager
    """The sessions' owner (a subclass swaps it: the suites' broken variants)."""

    def __init__(
        self,
        cdp_endpoint: str | BrowserEndpoint,
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
        self.sessions = self.session_manager_class(
            cdp_endpoint, cdp, registry, backends, self.settings, gateway_factory=gateway_factory
        )
        store.listen(self.sessions.owner_ended)  # a turn or grant that ends ends its sessions
        self.journal: deque[CallRecord] = deque(maxlen=JOURNAL)

    # -- entry -----------------------------------------------------------------------------------------------

    async def handle(self, args: ComputerUseArgs, meta: Mapping[str, Any] | None, connection: object) -> Outcome:
        marks = [("start", time.perf_counter())]
        scope = call_marks.set(marks)
        approval = call_approval.set(meta.get(APPROVAL_KEY) if isinstance(meta, Mapping) else None)
        try:
            outcome = await self._handle(args, meta, connection)
        except asyncio.CancelledError:
            # The lease is released and the frame spent by the code that was interrupted; say so on our side.
            self.journal.append(CallRecord(args.command, "cancelled", args.computer_session_id, "the client cancelled"))
            raise
        finally:
            call_marks.reset(scope)
            call_approval.reset(approval)
        result = outcome.result
        marks.append(("result", time.perf_counter()))
        result.elapsed_ms = round((marks[-1][1] - marks[0][1]) * 1000)
        code = result.reason_code.value if result.reason_code is not None else "ok"
        record = CallRecord(args.command, code, result.computer_session_id, result.message, durations(marks))
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
                pages = [info for info in context.pages.values() if not await self._reserved(info.handle)]
                return Outcome(ComputerUseResult(status="ok", message=f"{len(pages)} authorized Page(s).", pages=pages))
            if args.command == "observe" and args.detail == "diagnostics" and not args.offset:
                self.refuse_without_diagnostics(args.computer_session_id)
            if args.command == "observe" and args.computer_session_id is None:
                page = self._resolve(args.page or "", context)
                await self.refuse_reserved(page)
                session = await self.sessions.open(page, context.turn, context.host)
                self.sessions.enter(session)
                if self.store.turns.get(context.host) != context.turn:  # the turn ended while the session started
                    self.sessions.owner_ended(context.host, context.turn)
            else:
                session = self.sessions.acquire(args.computer_session_id or "", context)
                await self.refuse_reserved(session.page)
                if args.action is not None and args.action.type == "navigate":
                    self.refuse_reserved_url(args.action.url or "")
            mark("session")
            if args.command == "observe":
                outcome = await self._observe(session, args, context)
            elif args.command == "act":
                outcome = await self._act(session, args, context)
            else:
                outcome = await self._verify(session, args.assertion)  # type: ignore[arg-type]
            await self.refuse_reserved(session.page, RESERVED_AFTER)  # it may have navigated there meanwhile
            if outcome.result.computer_session_id == session.id:
                outcome.result.backend = session.backend_name
                outcome.result.screenshots = session.screenshots
            return outcome
        except Refusal as refusal:
            return Outcome(ComputerUseResult.fail(refusal.code, str(refusal), refusal.hint))
        except Exception as exc:
            # Never a traceback to the client. Whatever broke (the browser connection, a backend child that
            # died), the Page is out of reach for this call; the log keeps the details.
            log.exception("computer_use %s failed unexpectedly", args.command)
            message = f"the Page could not be reached ({type(exc).__name__}); nothing further was done"
            return Outcome(ComputerUseResult.fail(ReasonCode.target_lost, message))
        finally:
            if session is not None:
                self.sessions.release(session)

    async def _reserved(self, handle: str) -> bool:
        try:
            return await self.registry.reserved_now(self.registry.get(handle))
        except UnknownPage:
            return False

    def refuse_reserved_url(self, url: str) -> None:
        """Refuse a navigation to a reserved origin before it happens (the check after the command would only
        catch it once the Page shows it)."""
        if origin(url) in self.registry.reserved_origins:
            raise Refusal(ReasonCode.page_access_disabled, RESERVED_NAVIGATION, RESERVED_HINT)

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

    async def close(self) -> None:
        await self.sessions.close()
