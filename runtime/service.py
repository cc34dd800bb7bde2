"""The service core: one set of rules behind every adapter (MCP server, HTTP API).

Every call goes: arguments (validated by the adapter) → capability (before any backend call) → Page resolution
and binding checks → policy → one backend action → runtime-side re-observation or verification. Reason codes
come from here only; a backend's words never decide a result.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import shutil
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from runtime.backend import Backend, BackendConfig, BackendError, Element
from runtime.capability.host import ContextStore, PageContext
from runtime.capability.token import CapabilityError
from runtime.capability.verifier import CapabilityVerifier, StaleContext
from runtime.cdp import CDPConnection, CDPError
from runtime.gateway import GatewayEvent, ScopedGateway
from runtime.models import Action, Assertion, ComputerUseResult, Page
from runtime.models.page import RELATIONS
from runtime.observation import render
from runtime.policy import needs_user
from runtime.probe import DialogOpen, PageProbe, Structure, TargetGone
from runtime.reasons import ReasonCode
from runtime.registry.registry import PageRegistry, UnknownPage
from runtime.session import ComputerSession, Frame
from runtime.verification import failures

log = logging.getLogger(__name__)

DIALOG_OPEN = "a dialog is open on the Page; the user must answer it (the runtime never does), then observe again"

BackendFactory = Callable[[BackendConfig], Backend]
Command = Literal["list_pages", "observe", "act", "verify"]
Detail = Literal["interactive", "full", "visual"]


class ComputerUseArgs(BaseModel):
    """The model's arguments to `computer_use` (the token is not among them: it travels in `_meta`)."""

    model_config = ConfigDict(extra="forbid")

    command: Command
    page: str | None = None
    detail: Detail = "interactive"
    offset: int = Field(0, ge=0)
    computer_session_id: str | None = None
    frame_id: str | None = None
    action: Action | None = None
    assertion: Assertion | None = None

    @model_validator(mode="after")
    def _fields_for_command(self) -> ComputerUseArgs:
        if self.command == "observe" and self.page is None and self.computer_session_id is None:
            raise ValueError("observe needs page (a handle from list_pages or a relation word) or computer_session_id")
        if self.command == "act" and (self.computer_session_id is None or self.frame_id is None or self.action is None):
            raise ValueError("act needs computer_session_id, frame_id (the latest) and action")
        if self.command == "verify" and (self.computer_session_id is None or self.assertion is None):
            raise ValueError("verify needs computer_session_id and assertion")
        if self.offset and self.command != "observe":
            raise ValueError("offset belongs to observe")
        return self


@dataclass
class Settings:
    """Runtime settings. `backend` is read once per new ComputerSession and then frozen in it."""

    backend: str = "playwright_mcp"
    act_timeout: float = 30.0
    observe_timeout: float = 30.0
    lease_timeout: float = 10.0
    workdir: Path = field(default_factory=lambda: Path(tempfile.gettempdir()))


@dataclass
class Outcome:
    result: ComputerUseResult
    image: bytes | None = None


class Refusal(Exception):
    def __init__(self, code: ReasonCode, message: str) -> None:
        super().__init__(message)
        self.code = code


class ComputerUseService:
    def __init__(
        self,
        cdp_endpoint: str,
        cdp: CDPConnection,
        registry: PageRegistry,
        store: ContextStore,
        backends: Mapping[str, BackendFactory],
        settings: Settings | None = None,
        sabotage: frozenset[str] = frozenset(),
    ) -> None:
        self.cdp_endpoint = cdp_endpoint
        self.cdp = cdp
        self.registry = registry
        self.store = store
        self.verifier = CapabilityVerifier(store, registry)
        self.backends = dict(backends)
        self.settings = settings or Settings()
        self.sessions: dict[str, ComputerSession] = {}
        self._tasks: set[asyncio.Future[None]] = set()
        # Deliberately broken variants for negative controls. Only tests construct a service with these;
        # no setting, flag or environment variable reaches them.
        self.sabotage = sabotage
        registry.listen(self._on_registry_change)

    # -- entry -----------------------------------------------------------------------------------------------

    async def handle(self, args: ComputerUseArgs, meta: Mapping[str, Any] | None, connection: object) -> Outcome:
        try:
            if "skip_capability" in self.sabotage:
                context = self.store.contexts[self.store.current_request[self.store.current_turn or ""]]
            else:
                context = self.verifier.verify(meta, connection)
        except CapabilityError as exc:
            return Outcome(ComputerUseResult.fail(ReasonCode.invalid_capability, str(exc)))
        except StaleContext as exc:
            return Outcome(ComputerUseResult.fail(ReasonCode.page_context_stale, str(exc)))
        try:
            if args.command == "list_pages":
                pages = list(context.pages.values())
                return Outcome(ComputerUseResult(status="ok", message=f"{len(pages)} authorized Page(s).", pages=pages))
            if args.command == "observe":
                return await self._observe(args, context)
            if args.command == "act":
                return await self._act(args, context)
            return await self._verify(args, context)
        except Refusal as refusal:
            return Outcome(ComputerUseResult.fail(refusal.code, str(refusal)))
        except Exception as exc:
            # Never a traceback to the client. Whatever broke (the browser connection, a backend child that
            # died), the Page is out of reach for this call; the log keeps the details.
            log.exception("computer_use %s failed unexpectedly", args.command)
            message = f"the Page could not be reached ({type(exc).__name__}); nothing further was done"
            return Outcome(ComputerUseResult.fail(ReasonCode.target_lost, message))

    # -- resolution and binding ------------------------------------------------------------------------------

    def _resolve(self, word: str, context: PageContext) -> Page:
        if word in context.revisions:  # authorized this turn (it may be gone since: the caller checks)
            return self.registry.get(word)
        if word in RELATIONS:
            matches = [h for h, info in context.pages.items() if info.relation == word]
            if len(matches) == 1:
                return self.registry.get(matches[0])
            if len(matches) > 1:
                raise Refusal(ReasonCode.ambiguous_page, f"{len(matches)} authorized Pages are {word} of the chat")
            raise Refusal(ReasonCode.ambiguous_page, f"no authorized Page is {word} of the chat")
        try:
            self.registry.get(word)
        except UnknownPage:
            raise Refusal(ReasonCode.invalid_arguments, f"no Page {word!r}; use a handle from list_pages") from None
        raise Refusal(ReasonCode.invalid_capability, f"Page {word} is not authorized for this request")

    def _session(self, session_id: str, context: PageContext) -> ComputerSession:
        session = self.sessions.get(session_id)
        if session is None:
            raise Refusal(ReasonCode.invalid_arguments, f"no ComputerSession {session_id!r}; observe a Page first")
        if session.page.registry_page_id not in context.revisions:
            raise Refusal(ReasonCode.invalid_capability, "this session's Page is not authorized for this request")
        self._check_binding(session)
        return session

    def _check_binding(self, session: ComputerSession) -> None:
        page = session.page
        if session.invalid is not None:
            raise Refusal(*session.invalid)
        if self.registry.is_lost(page) or page.cdp_target_id != session.target_id:
            session.invalidate(ReasonCode.target_lost, "the Page's target was closed, crashed or replaced")
            raise Refusal(*session.invalid)  # type: ignore[misc]
        if not page.access_enabled:
            raise Refusal(ReasonCode.page_access_disabled, "the user disabled access to this Page")
        if page.revision != session.revision:
            session.invalidate(
                ReasonCode.page_context_stale, "the Page was hidden, moved to another group or transferred"
            )
            raise Refusal(*session.invalid)  # type: ignore[misc]

    def _on_registry_change(self, page: Page, what: str) -> None:
        for session in self.sessions.values():
            if session.page.registry_page_id == page.registry_page_id and what in ("lost", "replaced"):
                session.invalidate(ReasonCode.target_lost, "the Page's target was closed, crashed or replaced")

    def _on_gateway_event(self, session: ComputerSession, event: GatewayEvent) -> None:
        if event.kind in ("crashed", "destroyed", "detached", "upstream_lost"):
            session.invalidate(ReasonCode.target_lost, f"the Page's target is gone ({event.kind})")
        elif event.kind == "popup":
            # A popup is a new Page. Until the host registers it, writes and verified results wait.
            session.popups_pending += 1
            task = asyncio.ensure_future(self._register_popup(session, event))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _register_popup(self, session: ComputerSession, event: GatewayEvent) -> None:
        try:
            window = await self.cdp.send("Browser.getWindowForTarget", {"targetId": event.target_id})
            await self.registry.register(
                event.target_id,
                window["windowId"],
                workspace=session.page.workspace,
                opener_page_id=session.page.registry_page_id,
            )
        except (CDPError, TimeoutError) as exc:
            log.info("popup %s vanished before registration: %s", event.target_id, exc)
        finally:
            session.popups_pending -= 1

    # -- observe ---------------------------------------------------------------------------------------------

    async def _observe(self, args: ComputerUseArgs, context: PageContext) -> Outcome:
        if args.computer_session_id is not None:
            session = self._session(args.computer_session_id, context)
            if args.offset:
                frame = session.latest
                if frame is None or frame.id != args.frame_id:
                    raise Refusal(ReasonCode.stale_observation, "offset continues the latest frame; pass its frame_id")
                return Outcome(self._observation(session, frame, args.offset))
        else:
            page = self._resolve(args.page or "", context)
            if not page.access_enabled:
                raise Refusal(ReasonCode.page_access_disabled, "the user disabled access to this Page")
            if self.registry.is_lost(page):
                raise Refusal(ReasonCode.target_lost, "the Page's target is gone")
            session = await self._open_session(page)
        return await self._observe_session(session, args.detail, context)

    async def _open_session(self, page: Page) -> ComputerSession:
        backend_name = self.settings.backend  # frozen into the session from here on
        factory = self.backends.get(backend_name)
        if factory is None:
            raise Refusal(ReasonCode.invalid_arguments, f"backend {backend_name!r} is not installed")
        workdir = Path(tempfile.mkdtemp(prefix=f"cu-{backend_name}-", dir=self.settings.workdir))
        holder: list[ComputerSession] = []
        gateway = ScopedGateway(
            self.cdp_endpoint,
            page.cdp_target_id,
            on_event=lambda event: holder and self._on_gateway_event(holder[0], event),
            sabotage_unscoped="gateway_unscoped" in self.sabotage,
        )
        endpoint = await gateway.start()
        backend = factory(BackendConfig(cdp_endpoint=endpoint, workdir=workdir))
        session = ComputerSession(
            page=page,
            target_id=page.cdp_target_id,
            revision=page.revision,
            backend_name=backend_name,
            backend=backend,
            probe=PageProbe(self.cdp, page.cdp_target_id),
            gateway=gateway,
            workdir=workdir,
        )
        holder.append(session)
        try:
            await asyncio.wait_for(backend.start(), self.settings.observe_timeout)
        except BaseException:
            await self._close_session(session)
            raise
        self.sessions[session.id] = session
        return session

    async def _observe_session(self, session: ComputerSession, detail: str, context: PageContext) -> Outcome:
        try:
            snapshot = await asyncio.wait_for(session.backend.snapshot(), self.settings.observe_timeout)
            image = None
            if detail == "visual" or "screenshot_always" in self.sabotage:
                image = await asyncio.wait_for(session.backend.screenshot(), self.settings.observe_timeout)
        except TimeoutError:
            raise Refusal(ReasonCode.timeout, "the Page did not answer the observation in time") from None
        except BackendError as exc:
            raise self._backend_refusal(session, exc) from None
        point_request = (context.turn, context.sequence + 1) if image is not None else None
        frame = session.new_frame(snapshot, detail, point_request)
        result = self._observation(session, frame, 0)
        result.screenshot_attached = image is not None
        return Outcome(result, image)

    def _observation(self, session: ComputerSession, frame: Frame, offset: int) -> ComputerUseResult:
        text, next_offset = render(frame.snapshot, frame.detail, offset)
        return ComputerUseResult(
            status="ok",
            message=f"Observed with backend {session.backend_name}.",
            computer_session_id=session.id,
            frame_id=frame.id,
            page=self.registry.info(session.page),
            observation=text,
            next_offset=next_offset,
        )

    def _backend_refusal(self, session: ComputerSession, exc: BackendError) -> Refusal:
        if exc.kind == "target_lost":
            session.invalidate(ReasonCode.target_lost, "the Page's target is gone")
            return Refusal(ReasonCode.target_lost, "the Page's target is gone")
        if exc.kind == "timeout":
            return Refusal(ReasonCode.timeout, "the backend did not finish in time")
        if exc.kind == "dialog":
            return Refusal(ReasonCode.needs_user, DIALOG_OPEN)
        detail = " ".join(str(exc).split())[:200]
        return Refusal(ReasonCode.stale_observation, f"the Page did not accept the action ({exc.kind}: {detail})")

    # -- act -------------------------------------------------------------------------------------------------

    async def _act(self, args: ComputerUseArgs, context: PageContext) -> Outcome:
        session = self._session(args.computer_session_id or "", context)
        action: Action = args.action  # type: ignore[assignment]
        frame = session.latest
        if frame is None or frame.id != args.frame_id:
            raise Refusal(ReasonCode.stale_observation, "frame_id is not the latest frame of this session")
        element = None
        if action.is_point and frame.point_request != (context.turn, context.sequence):
            raise Refusal(
                ReasonCode.stale_observation,
                "a point is valid only in the model request right after a screenshot (observe with detail=visual)",
            )
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
        try:
            # Under the lease: the structure the policy judges is the one the action will meet.
            if "no_policy" not in self.sabotage:
                reason = needs_user(action, element, await self._structure(session))
                if reason is not None:
                    raise Refusal(ReasonCode.needs_user, reason)
            session.latest = None  # the frame is spent: whatever happens next, observe before acting again
            if "bring_to_front" in self.sabotage:
                await session.probe.bring_to_front()
            await asyncio.wait_for(session.backend.act(action, element), self.settings.act_timeout)
        except TimeoutError:
            if "trust_backend" in self.sabotage:
                return Outcome(ComputerUseResult(status="ok", message="done"))
            if "switch_backend_on_failure" in self.sabotage:
                await self._sabotage_retry_on_another_backend(session, action, element)
            raise Refusal(
                ReasonCode.timeout, "the action did not finish in time; it may have partly happened"
            ) from None
        except BackendError as exc:
            if "switch_backend_on_failure" in self.sabotage:
                await self._sabotage_retry_on_another_backend(session, action, element)
            raise self._backend_refusal(session, exc) from None
        finally:
            lease.release()
        try:
            outcome = await self._observe_session(session, "interactive", context)
        except Refusal as refusal:
            if refusal.code is ReasonCode.needs_user and "answer_dialogs" in self.sabotage:
                await session.probe.accept_dialog()
                outcome = await self._observe_session(session, "interactive", context)
            else:
                raise Refusal(refusal.code, f"the action was sent, but re-observing failed: {refusal}") from None
        outcome.result.message = f"{action.type} done with backend {session.backend_name}; this is the new frame."
        return outcome

    async def _sabotage_retry_on_another_backend(
        self, session: ComputerSession, action: Action, element: Element | None
    ) -> None:
        """The `switch_backend_on_failure` sabotage only: exactly what the runtime must never do. On a failed or
        timed-out act it starts the backend the setting names now, finds the same element there and sends the
        action again (a second click, a second submit). The backend freeze proof's negative control."""
        with contextlib.suppress(Exception):
            fallback = await self._open_session(session.page)
            snapshot = await asyncio.wait_for(fallback.backend.snapshot(), self.settings.observe_timeout)
            again = None
            if element is not None:
                again = next((e for e in snapshot.elements if (e.role, e.name) == (element.role, element.name)), None)
            retry = action.model_copy(update={"ref": again.ref}) if again is not None else action
            await asyncio.wait_for(fallback.backend.act(retry, again), self.settings.act_timeout)

    async def _structure(self, session: ComputerSession) -> Structure:
        try:
            return await asyncio.wait_for(session.probe.structure(), self.settings.observe_timeout)
        except TargetGone:
            session.invalidate(ReasonCode.target_lost, "the Page's target is gone")
            raise Refusal(ReasonCode.target_lost, "the Page's target is gone") from None
        except TimeoutError:
            raise Refusal(ReasonCode.timeout, "the Page did not answer in time; nothing was done") from None
        except DialogOpen:
            raise Refusal(ReasonCode.needs_user, DIALOG_OPEN) from None

    # -- verify ----------------------------------------------------------------------------------------------

    async def _verify(self, args: ComputerUseArgs, context: PageContext) -> Outcome:
        session = self._session(args.computer_session_id or "", context)
        assertion: Assertion = args.assertion  # type: ignore[assignment]
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
            session.invalidate(ReasonCode.target_lost, "the Page's target is gone")
            raise Refusal(ReasonCode.target_lost, "the Page's target is gone") from None
        if "trust_backend" in self.sabotage:
            failed = []
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

    # -- teardown --------------------------------------------------------------------------------------------

    async def _close_session(self, session: ComputerSession) -> None:
        for closer in (session.backend.close, session.gateway.close, session.probe.close):
            with contextlib.suppress(Exception):
                await closer()
        shutil.rmtree(session.workdir, ignore_errors=True)

    async def close(self) -> None:
        sessions, self.sessions = list(self.sessions.values()), {}
        for session in sessions:
            await self._close_session(session)
