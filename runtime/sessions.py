"""The session manager: the one owner of ComputerSessions — open, reuse, bind, invalidate, evict, close.

Why one owner: a session holds real resources (a backend child, a scoped gateway with a listening port, a probe
session on the Page, a work dir). They must end the moment the session can no longer be used — its target is lost
or replaced, its Page hidden, transferred or disabled, or it is evicted — not at shutdown. The rules for what
invalidates a binding live here and nowhere else; the service only dispatches commands.

Target state has one owner too: the session's gateway sees every event of the bound target and reports loss,
crash and replacement here (`on_event`); the backend asks the same gateway (`BackendConfig.target_state`) and the
registry's browser-level events cover Pages with no session.

Lifecycle of a session:
- `open(page, turn)`: a live session of the same Page, turn and backend setting is reused; otherwise a new one is
  started, after the least recently used idle session is closed if `max_sessions` are live.
- `acquire(id, context)` / `release(session)` bracket every call on a session (`busy`): a session invalidated
  while a call runs is closed when that call ends, never under it.
- An invalidated or evicted session leaves a tombstone (bounded), so a later call with its id gets the reason
  (`target_lost`, `page_context_stale`, `page_access_disabled`, `stale_observation` for an evicted one) instead of
  "no such session".
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import shutil
import tempfile
from collections import OrderedDict
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from runtime.backend import Backend, BackendConfig, BackendError, Failure
from runtime.cdp import CDPConnection, CDPError
from runtime.gateway import GatewayEvent, ScopedGateway
from runtime.models import Page
from runtime.probe import PageProbe
from runtime.reasons import ReasonCode
from runtime.registry.registry import PageRegistry
from runtime.session import ComputerSession

if TYPE_CHECKING:
    from runtime.capability.host import PageContext
    from runtime.settings import Settings

log = logging.getLogger(__name__)

BackendFactory = Callable[[BackendConfig], Backend]
GatewayFactory = Callable[..., ScopedGateway]

TOMBSTONES = 1024
"""How many ended sessions keep their reason for late callers; older ids become unknown."""

LOST = "the Page's target was closed, crashed or replaced"
EVICTED = "this session was closed to make room for newer ones; observe the Page again"


class Refusal(Exception):
    """A call the runtime answers with a reason code; nothing further is done. `hint`: what would work instead, when
    the code's own hint (`runtime.reasons.HINTS`) would mislead."""

    def __init__(self, code: ReasonCode, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.hint = hint


class SessionManager:
    def __init__(
        self,
        cdp_endpoint: str,
        cdp: CDPConnection,
        registry: PageRegistry,
        backends: Mapping[str, BackendFactory],
        settings: Settings,
        *,
        gateway_factory: GatewayFactory = ScopedGateway,
    ) -> None:
        self.cdp_endpoint = cdp_endpoint
        self.cdp = cdp
        self.registry = registry
        self.backends = dict(backends)
        self.settings = settings
        self.live: dict[str, ComputerSession] = {}
        self.ended: OrderedDict[str, tuple[str, ReasonCode, str]] = OrderedDict()
        """Tombstones: session id -> (its Page's handle, why it ended)."""
        self._gateway_factory = gateway_factory
        self._uses = itertools.count(1)
        self._tasks: set[asyncio.Future[None]] = set()
        registry.listen(self._on_registry_change)

    # -- open and reuse --------------------------------------------------------------------------------------

    async def open(self, page: Page, turn: str) -> ComputerSession:
        """The live session of this Page for this turn on the current backend setting, or a new one."""
        backend_name = self.settings.backend  # frozen into the session from here on
        for session in self.live.values():
            if (
                session.page is page
                and session.turn == turn
                and session.backend_name == backend_name
                and session.invalid is None
            ):
                return session
        await self._make_room()
        return await self.start(page, turn, backend_name)

    async def start(self, page: Page, turn: str, backend_name: str) -> ComputerSession:
        """Start a new session on `page` with `backend_name` (never reused): gateway, backend, probe, work dir."""
        factory = self.backends.get(backend_name)
        if factory is None:
            raise Refusal(ReasonCode.invalid_arguments, f"backend {backend_name!r} is not installed")
        workdir = Path(tempfile.mkdtemp(prefix=f"cu-{backend_name}-", dir=self.settings.workdir))
        holder: list[ComputerSession] = []
        gateway = self._gateway_factory(
            self.cdp_endpoint,
            page.cdp_target_id,
            on_event=lambda event: holder and self._on_gateway_event(holder[0], event),
        )
        try:
            endpoint = await gateway.start()
        except BaseException:
            shutil.rmtree(workdir, ignore_errors=True)
            raise
        config = BackendConfig(cdp_endpoint=endpoint, workdir=workdir, target_state=lambda: gateway.lost)
        session = ComputerSession(
            page=page,
            target_id=page.cdp_target_id,
            revision=page.revision,
            backend_name=backend_name,
            backend=factory(config),
            probe=PageProbe(self.cdp, page.cdp_target_id, target_state=lambda: gateway.lost),
            gateway=gateway,
            workdir=workdir,
            turn=turn,
        )
        holder.append(session)
        try:
            await asyncio.wait_for(session.backend.start(), self.settings.observe_timeout)
        except (TimeoutError, BackendError) as exc:
            await self._close(session)
            if isinstance(exc, BackendError) and exc.kind is not Failure.timeout:
                raise
            # A Page that does not answer (a dialog that opened before anyone listened, a hung script) is not lost.
            raise Refusal(ReasonCode.timeout, "the Page did not answer while its session started") from None
        except BaseException:
            await self._close(session)
            raise
        session.last_used = next(self._uses)
        self.live[session.id] = session
        return session

    async def _make_room(self) -> None:
        while len(self.live) >= max(1, self.settings.max_sessions):
            idle = [s for s in self.live.values() if not s.busy]
            if not idle:
                raise Refusal(ReasonCode.timeout, "every live session is busy; try again when one has finished")
            oldest = min(idle, key=lambda s: s.last_used)
            oldest.invalidate(ReasonCode.stale_observation, EVICTED)
            self._end(oldest, ReasonCode.stale_observation, EVICTED)
            await self._close(oldest)

    # -- calls on a session ----------------------------------------------------------------------------------

    def acquire(self, session_id: str, context: PageContext) -> ComputerSession:
        """The session a call names, checked against the call's Page Context and its binding; marked busy."""
        session = self.live.get(session_id)
        ended = self.ended.get(session_id)
        if session is None and ended is None:
            raise Refusal(ReasonCode.invalid_arguments, f"no ComputerSession {session_id!r}; observe a Page first")
        handle = session.page.registry_page_id if session is not None else ended[0]  # type: ignore[index]
        if handle not in context.revisions:
            raise Refusal(ReasonCode.invalid_capability, "this session's Page is not authorized for this request")
        if session is None:
            raise Refusal(ended[1], ended[2])  # type: ignore[index]
        self.check_binding(session)
        self.enter(session)
        return session

    def enter(self, session: ComputerSession) -> None:
        session.busy += 1
        session.last_used = next(self._uses)

    def release(self, session: ComputerSession) -> None:
        session.busy -= 1
        if session.invalid is not None and not session.busy:
            self._schedule_close(session)

    def check_binding(self, session: ComputerSession) -> None:
        """Refuse (and end the session) if what it is bound to changed: target, revision, access."""
        page = session.page
        if session.invalid is None:
            if self.registry.is_lost(page) or page.cdp_target_id != session.target_id:
                self.invalidate(session, ReasonCode.target_lost, LOST)
            elif not page.access_enabled:
                self.invalidate(session, ReasonCode.page_access_disabled, "the user disabled access to this Page")
            elif page.revision != session.revision:
                self.invalidate(
                    session,
                    ReasonCode.page_context_stale,
                    "the Page was hidden, moved to another group or transferred; observe it again",
                )
        if session.invalid is not None:
            raise Refusal(*session.invalid)

    def invalidate(self, session: ComputerSession, code: ReasonCode, message: str) -> None:
        """The session can no longer be used: remember why, close its resources as soon as no call runs on it."""
        session.invalidate(code, message)
        if session.id in self.live:
            self._end(session, *session.invalid)  # type: ignore[misc]
        if not session.busy:
            self._schedule_close(session)

    def spend_frames_of_others(self, session: ComputerSession) -> None:
        """After a write, every other session's frame of the same Page describes a Page that no longer is."""
        for other in self.live.values():
            if other is not session and other.page is session.page:
                other.latest = None

    # -- events ----------------------------------------------------------------------------------------------

    def _on_registry_change(self, page: Page, what: str) -> None:
        for session in [s for s in self.live.values() if s.page.registry_page_id == page.registry_page_id]:
            if what in ("lost", "replaced"):
                self.invalidate(session, ReasonCode.target_lost, LOST)
            elif what == "revised":
                with contextlib.suppress(Refusal):
                    self.check_binding(session)

    def _on_gateway_event(self, session: ComputerSession, event: GatewayEvent) -> None:
        if event.kind in ("crashed", "destroyed", "detached", "upstream_lost"):
            self.invalidate(session, ReasonCode.target_lost, f"the Page's target is gone ({event.kind})")
        elif event.kind == "popup" and not session.closing:
            # A popup is a new Page. Until the host registers it, writes and verified results wait.
            session.popups_pending += 1
            self._spawn(self._register_popup(session, event))

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

    # -- teardown --------------------------------------------------------------------------------------------

    def _end(self, session: ComputerSession, code: ReasonCode, message: str) -> None:
        self.live.pop(session.id, None)
        self.ended[session.id] = (session.page.registry_page_id, code, message)
        while len(self.ended) > TOMBSTONES:
            self.ended.popitem(last=False)

    def _schedule_close(self, session: ComputerSession) -> None:
        if not session.closing:
            self._spawn(self._close(session))

    def _spawn(self, coroutine: object) -> None:
        task = asyncio.ensure_future(coroutine)  # type: ignore[arg-type]
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _close(self, session: ComputerSession) -> None:
        if session.closing:
            return
        session.closing = True
        for closer in (session.backend.close, session.gateway.close, session.probe.close):
            try:
                await closer()
            except Exception:
                log.warning("closing session %s: %s failed", session.id, closer.__qualname__, exc_info=True)
        shutil.rmtree(session.workdir, ignore_errors=True)
        session.closed.set()

    async def settle(self) -> None:
        """Wait for closes and popup registrations already under way (bounded by each one's own timeouts)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    async def close(self) -> None:
        """Close every session (the runtime is closing)."""
        sessions, self.live = list(self.live.values()), {}
        for session in sessions:
            session.invalidate(ReasonCode.target_lost, "the runtime closed")
            await self._close(session)
        await self.settle()
