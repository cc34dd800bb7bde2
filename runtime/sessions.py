"""The session manager: the one owner of ComputerSessions — open, reuse, bind, invalidate, evict, close.

Why one owner: a session holds real resources (a backend child, a scoped gateway with a listening port, a probe
session on the Page, a work dir). They must end the moment the session can no longer be used — its target is lost
or replaced, its Page hidden, transferred or disabled, or it is evicted — not at shutdown. The rules for what
invalidates a binding live here and nowhere else; the service only dispatches commands.

Target state has one owner too: the session's gateway sees every event of the bound target and reports loss,
crash and replacement here (`on_event`); the backend asks the same gateway (`BackendConfig.target_state`) and the
registry's browser-level events cover Pages with no session.

Lifecycle of a session:
- A session belongs to the (host, turn) that opened it: the chat's turn, or the turn of a client's grant (each grant
  is a host of its own). Another turn or host holding its id cannot use it (`check_owner`), even on a Page both may
  use; when that turn ends (a new turn, `Turn.end`, a grant revoked, denied, expired or its client gone), the
  context store tells `owner_ended` and its sessions close at once.
- `open(page, turn, host)`: a live session of the same Page, owner and backend setting is reused. Otherwise a new one
  is started, and at most one session per Page and backend is live: the previous one is closed first
  (`replace_previous`); if a call runs on it, the new one waits for that call to end (bounded by `lease_timeout`, the
  bound a write already waits for the Page) and is refused with `timeout` past it, never closing a session under
  a call. Past `max_sessions` live, the least recently used idle session is closed too.
- `acquire(id, context)` / `release(session)` bracket every call on a session (`busy`): a session invalidated
  while a call runs is closed when that call ends, never under it.
- A session unused for `Settings.session_idle` seconds closes (`expire_idle`, run by a sweeper and before every
  open).
- An invalidated, evicted, replaced or expired session leaves a tombstone (bounded), so a later call of its owner
  with its id gets the reason (`target_lost`, `page_context_stale`, `page_access_disabled`, `stale_observation`)
  and a hint that works instead of "no such session".
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
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from runtime.backend import Backend, BackendConfig, BackendError, Failure
from runtime.capability.authorization import require_authorized
from runtime.cdp import CDPConnection, CDPError
from runtime.computer_session import ComputerSession
from runtime.endpoint import BrowserEndpoint
from runtime.gateway import GatewayEvent, ScopedGateway
from runtime.models import Page
from runtime.reading.probe import PageProbe
from runtime.reasons import ReasonCode, Refusal
from runtime.registry.pages import PageRegistry

if TYPE_CHECKING:
    from runtime.capability.contexts import PageContext
    from runtime.settings import Settings

log = logging.getLogger(__name__)

BackendFactory = Callable[[BackendConfig], Backend]
GatewayFactory = Callable[..., ScopedGateway]

TOMBSTONES = 1024
"""How many ended sessions keep their reason for late callers; older ids become unknown."""

TARGET_LOST_MESSAGE = "the Page's target was closed, crashed or replaced"
EVICTED = "this session was closed to make room for newer ones; observe the Page again"
REPLACED = "a newer session of this Page (another turn or client observed it) closed this one; observe the Page again"
IDLE = "this session went unused for {seconds:g} s and was closed; observe the Page again"
ENDED = "the turn or grant that opened this session has ended; observe the Page again"
OBSERVE_AGAIN = (
    "Call observe with the Page's handle (page=..., from list_pages), not this computer_session_id: that opens a "
    "new session."
)
EARLIER_TURN = "this computer_session_id was opened by an earlier turn; sessions end with the turn that opened them"
NOT_YOURS = "this computer_session_id was opened by another chat or client; a session is only its opener's to use"
SWEEP = 1.0
"""Seconds at most between two looks for sessions idle past `Settings.session_idle`."""


@dataclass(frozen=True)
class Tombstone:
    """What is left of an ended session for late callers: its Page, its owner, and why it ended."""

    handle: str
    owner: tuple[str, str]
    code: ReasonCode
    message: str
    hint: str | None


async def register_popup(
    cdp: CDPConnection, registry: PageRegistry, session: ComputerSession, event: GatewayEvent
) -> None:
    """Register a popup the session's Page opened as a Page of its own (in its opener's workspace); the session's
    writes and verified results wait until it is (`popups_pending`)."""
    try:
        window = await cdp.send("Browser.getWindowForTarget", {"targetId": event.target_id})
        await registry.register(
            event.target_id,
            window["windowId"],
            workspace=session.page.workspace,
            opener_page_id=session.page.registry_page_id,
        )
    except (CDPError, TimeoutError) as exc:
        log.info("popup %s vanished before registration: %s", event.target_id, exc)
    finally:
        session.popups_pending -= 1


class SessionManager:
    def __init__(
        self,
        cdp_endpoint: str | BrowserEndpoint,
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
        self.ended: OrderedDict[str, Tombstone] = OrderedDict()
        self._gateway_factory = gateway_factory
        self._uses = itertools.count(1)
        self._tasks: set[asyncio.Future[None]] = set()
        self._opening: dict[tuple[str, str], asyncio.Lock] = {}
        """(Page handle, backend) -> held while a session of it is opened: one at a time, so at most one is live."""
        self._sweeper: asyncio.Task[None] | None = None
        registry.listen(self._on_registry_change)

    # -- open and reuse --------------------------------------------------------------------------------------

    async def open(self, page: Page, turn: str, host: str = "") -> ComputerSession:
        """The live session of this Page for this owner on the current backend setting, or a new one that replaces
        the Page's previous session of that backend."""
        backend_name = self.settings.backend  # frozen into the session from here on
        self.expire_idle()
        async with self._opening.setdefault((page.registry_page_id, backend_name), asyncio.Lock()):
            for session in self.live.values():
                if (
                    session.page is page
                    and session.owner == (host, turn)
                    and session.backend_name == backend_name
                    and session.invalid is None
                ):
                    return session
            await self.replace_previous(page, backend_name)
            await self._make_room()
            return await self.start(page, turn, backend_name, host)

    async def replace_previous(self, page: Page, backend_name: str) -> None:
        """Close the Page's live sessions of this backend (another owner's: its own would have been reused). One a
        call runs on is waited for, at most `lease_timeout`; then the new session is refused, never the call."""
        deadline = asyncio.get_running_loop().time() + self.settings.lease_timeout
        while True:
            previous = [s for s in self.live.values() if s.page is page and s.backend_name == backend_name]
            for session in previous:
                if not session.busy:
                    self.invalidate(session, ReasonCode.stale_observation, REPLACED, OBSERVE_AGAIN)
            busy = [s for s in previous if s.busy]
            if not busy:
                return
            left = deadline - asyncio.get_running_loop().time()
            if left <= 0:
                raise Refusal(
                    ReasonCode.timeout,
                    "another session is acting on this Page; nothing was done",
                    "Try again once the other turn or client has finished its action.",
                )
            waits = [asyncio.ensure_future(s.idle.wait()) for s in busy]
            try:
                await asyncio.wait(waits, timeout=left, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for wait in waits:
                    wait.cancel()

    async def start(self, page: Page, turn: str, backend_name: str, host: str = "") -> ComputerSession:
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
            host=host,
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
        session.idle_since = self.settings.clock()
        session.idle.set()
        self.live[session.id] = session
        if self._sweeper is None or self._sweeper.done():
            self._sweeper = asyncio.create_task(self._sweep())
        return session

    async def _make_room(self) -> None:
        while len(self.live) >= max(1, self.settings.max_sessions):
            idle = [s for s in self.live.values() if not s.busy]
            if not idle:
                raise Refusal(ReasonCode.timeout, "every live session is busy; try again when one has finished")
            oldest = min(idle, key=lambda s: s.last_used)
            oldest.invalidate(ReasonCode.stale_observation, EVICTED, OBSERVE_AGAIN)
            self._end(oldest, *oldest.invalid)  # type: ignore[misc]
            await self._close(oldest)

    # -- ending with the owner, and when idle ----------------------------------------------------------------

    def owner_ended(self, host: str, turn: str | None) -> None:
        """A turn ended (None: every turn of `host`): nothing can use its sessions any more, so they close now (one
        a call runs on, when that call ends)."""
        ended = [s for s in self.live.values() if s.host == host and (turn is None or s.turn == turn)]
        if not ended:
            return
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return  # a host collected at interpreter exit: no loop to close on; `close()` did or will
        for session in ended:
            self.invalidate(session, ReasonCode.page_context_stale, ENDED, OBSERVE_AGAIN)

    def expire_idle(self) -> None:
        """Close every session no call has used for `session_idle` seconds."""
        now = self.settings.clock()
        for session in list(self.live.values()):
            if not session.busy and now - session.idle_since >= self.settings.session_idle:
                message = IDLE.format(seconds=self.settings.session_idle)
                self.invalidate(session, ReasonCode.stale_observation, message, OBSERVE_AGAIN)

    async def _sweep(self) -> None:
        """Look for idle sessions while any is live: every `SWEEP` seconds, or sooner when one is due."""
        while self.live:
            now = self.settings.clock()
            due = min((s.idle_since + self.settings.session_idle for s in self.live.values() if not s.busy), default=0)
            await asyncio.sleep(min(SWEEP, max(due - now, SWEEP / 20)) if due else SWEEP)
            self.expire_idle()

    # -- calls on a session ----------------------------------------------------------------------------------

    def acquire(self, session_id: str, context: PageContext) -> ComputerSession:
        """The session a call names, checked against the call's Page Context, its owner and its binding; marked
        busy."""
        session = self.live.get(session_id)
        ended = self.ended.get(session_id)
        if session is None and ended is None:
            raise Refusal(ReasonCode.invalid_arguments, f"no ComputerSession {session_id!r}; observe a Page first")
        handle = session.page.registry_page_id if session is not None else ended.handle  # type: ignore[union-attr]
        require_authorized(handle, context)
        self.check_owner(session.owner if session is not None else ended.owner, context)  # type: ignore[union-attr]
        if session is None:
            raise Refusal(ended.code, ended.message, ended.hint)  # type: ignore[union-attr]
        self.check_binding(session)
        self.enter(session)
        return session

    def check_owner(self, owner: tuple[str, str], context: PageContext) -> None:
        """Only the turn that opened a session uses it: an earlier turn's id is stale, another host's not its own."""
        host, turn = owner
        if host != context.host:
            raise Refusal(ReasonCode.invalid_capability, NOT_YOURS, OBSERVE_AGAIN)
        if turn != context.turn:
            raise Refusal(ReasonCode.page_context_stale, EARLIER_TURN, OBSERVE_AGAIN)

    def enter(self, session: ComputerSession) -> None:
        session.busy += 1
        session.last_used = next(self._uses)
        session.idle.clear()

    def release(self, session: ComputerSession) -> None:
        session.busy -= 1
        if not session.busy:
            session.idle_since = self.settings.clock()
            session.idle.set()
        if session.invalid is not None and not session.busy:
            self._schedule_close(session)

    def check_binding(self, session: ComputerSession) -> None:
        """Refuse (and end the session) if what it is bound to changed: target, revision, access."""
        page = session.page
        if session.invalid is None:
            if self.registry.is_lost(page) or page.cdp_target_id != session.target_id:
                self.invalidate(session, ReasonCode.target_lost, TARGET_LOST_MESSAGE)
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

    def invalidate(self, session: ComputerSession, code: ReasonCode, message: str, hint: str | None = None) -> None:
        """The session can no longer be used: remember why, close its resources as soon as no call runs on it."""
        session.invalidate(code, message, hint)
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
        if what == "lost":
            for key in [k for k, lock in self._opening.items() if k[0] == page.registry_page_id and not lock.locked()]:
                del self._opening[key]
        for session in [s for s in self.live.values() if s.page.registry_page_id == page.registry_page_id]:
            if what in ("lost", "replaced"):
                self.invalidate(session, ReasonCode.target_lost, TARGET_LOST_MESSAGE)
            elif what == "revised":
                with contextlib.suppress(Refusal):
                    self.check_binding(session)

    def _on_gateway_event(self, session: ComputerSession, event: GatewayEvent) -> None:
        if event.kind in ("crashed", "destroyed", "detached", "upstream_lost"):
            self.invalidate(session, ReasonCode.target_lost, f"the Page's target is gone ({event.kind})")
        elif event.kind == "popup" and not session.closing:
            # A popup is a new Page. Until the host registers it, writes and verified results wait.
            session.popups_pending += 1
            self._spawn(register_popup(self.cdp, self.registry, session, event))

    # -- teardown --------------------------------------------------------------------------------------------

    def _end(self, session: ComputerSession, code: ReasonCode, message: str, hint: str | None = None) -> None:
        self.live.pop(session.id, None)
        self.ended[session.id] = Tombstone(session.page.registry_page_id, session.owner, code, message, hint)
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
        if self._sweeper is not None:
            self._sweeper.cancel()
        for session in sessions:
            session.invalidate(ReasonCode.target_lost, "the runtime closed")
            await self._close(session)
        await self.settle()
