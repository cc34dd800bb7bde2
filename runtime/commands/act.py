"""`act`: one Action on the latest frame, under the Page's write lease, after the runtime's own policy read; then
the new frame (or what changed). The frame is spent whatever happens once the action is sent; an action the backend
refuses before sending anything, because it cannot express it (`Failure.unsupported`), leaves it the latest.

`type` with `submit` means the same on every backend: where a backend cannot type and press Enter in one call
(`Backend.types_and_submits` is False), the runtime does it as the one Action (`_type_then_enter`)."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Awaitable, Callable
from typing import TypeVar

from runtime.arguments import ComputerUseArgs
from runtime.backend import Backend, BackendError, Element, Failure
from runtime.capability.approval import Binding
from runtime.capability.contexts import ContextStore, PageContext
from runtime.commands.base import READ, SEND, Answer, Reach, call_approval
from runtime.commands.observe import Observe
from runtime.computer_session import ComputerSession, Frame
from runtime.failures import DIALOG_OPEN
from runtime.models import Action
from runtime.phases import mark
from runtime.pointer import Pointed, Rest, hovered, rest_on
from runtime.policy import Handover, needs_user
from runtime.reading.commit import CommitTargets, holds_focus, read_commit
from runtime.reading.probe import DialogOpen, FrameContext, PageProbe
from runtime.reasons import ReasonCode
from runtime.sessions import Refusal

log = logging.getLogger(__name__)

T = TypeVar("T")

Pointer = Callable[[PageProbe, list[FrameContext], Action, Element | None], Awaitable[Pointed]]
"""Puts a click's pointer where it will press and says what is under it once the Page has answered
(`runtime.pointer.rest_on`)."""
Hovered = Callable[[PageProbe], Awaitable[None]]
"""Waits until the Page has answered a hover (`runtime.pointer.hovered`)."""
FocusCheck = Callable[[PageProbe, CommitTargets], Awaitable[bool]]
"""Whether Enter, pressed now, goes to an element the policy read found (`runtime.reading.commit.holds_focus`)."""

ENTER = Action(type="press", key="Enter")
TYPED = "the text was typed, but Enter was not pressed"
FOCUS_MOVED = (
    f"{TYPED}: the Page moved the focus away from the field while the text went in, and Enter goes to the focused "
    "element (it would have committed something else)"
)
FOCUS_MOVED_HINT = (
    "Observe, then submit with the form's own button (click it by ref), or click the field and press Enter; the text "
    "is already in the field."
)


def types_and_submits(backend: Backend) -> bool:
    """The backend's declared capability; one that declares nothing gets the runtime's composition (always safe)."""
    return bool(getattr(backend, "types_and_submits", False))


class Act:
    """`act`. Its seams, what a broken variant may replace: the pointer, the hover wait and the focus check
    (functions, `Parts.pointer`, `Parts.hovered`, `Parts.holds_focus`), and, in a subclass passed as `Parts.act`,
    `run` (the whole act), `check_policy` (the runtime's read before a write), `recheck` (the checks under the write
    lease), `send` (the one way an action reaches the backend) and `after` (what the act answers)."""

    def __init__(
        self,
        reach: Reach,
        observe: Observe,
        store: ContextStore,
        *,
        pointer: Pointer = rest_on,
        hovered: Hovered = hovered,
        holds_focus: FocusCheck = holds_focus,
    ) -> None:
        self.reach = reach
        self.observe = observe
        self.store = store
        self.registry = reach.registry
        self.sessions = reach.sessions
        self.settings = reach.settings
        self.pointer = pointer
        self.hovered = hovered
        self.holds_focus = holds_focus

    async def run(self, session: ComputerSession, args: ComputerUseArgs, context: PageContext) -> Answer:
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
            async with self.reach.refusing(session, SEND):
                try:
                    self.recheck(session, args.frame_id)
                    reading = await self.check_policy(session, action, element, context)
                    mark("policy")
                    session.latest = None  # the frame is spent: whatever happens next, observe before acting again
                    sent = True
                    if action.type == "type" and action.submit and not types_and_submits(session.backend):
                        await self._type_then_enter(session, action, element, reading)
                    else:
                        await self.send(session, action, element)
                    if action.type == "scroll" and element is not None:  # a hover: its answer is in the act's answer
                        await self._read(session, self.hovered(session.probe))
                    mark("backend_act")
                except DialogOpen:
                    blocked = True  # the action reached the Page, and the Page now waits for the user
                except BackendError as exc:
                    if exc.kind is Failure.unsupported:  # refused before anything was sent: the frame still holds
                        session.latest, sent = frame, False
                    raise
        finally:
            if sent:  # other sessions' frames of this Page, even those taken during the write, are stale now
                self.sessions.spend_frames_of_others(session)
            lease.release()
        try:
            answer = await self.after(session, context, frame, blocked)
        except Refusal as refusal:
            message = f"the action was sent, but re-observing failed: {refusal}"
            raise Refusal(refusal.code, message, refusal.hint) from None
        told = "what changed" if answer.changes_only else "the new frame"
        # The agent knows the Page; a changed url or title is in the observation.
        return dataclasses.replace(answer, message=f"{action.type} done; the observation is {told}.", page=None)

    async def send(self, session: ComputerSession, action: Action, element: Element | None) -> None:
        """The one place an action goes to the backend: once, on the session's own backend, bounded."""
        await self.reach.until_stopped(session, session.backend.act(action, element), self.settings.act_timeout)

    async def _type_then_enter(
        self, session: ComputerSession, action: Action, element: Element | None, reading: CommitTargets
    ) -> None:
        """`type` with `submit` where the backend cannot do both in one call: the text (without submit), then Enter,
        as the one Action the policy read in submit mode, under the lease the caller holds. A backend presses a key
        on the focused element, so Enter is pressed only while the focus is on an element that read found (the
        field typed into): a Page that moved the focus while the text went in would have Enter commit something
        else. If typing fails, nothing is pressed; a failure after it says the text was typed."""
        await self.send(session, action.model_copy(update={"submit": False}), element)
        try:
            held = await self._read(session, self.holds_focus(session.probe, reading))
        except Refusal as refusal:
            raise Refusal(refusal.code, f"{TYPED}: {refusal}") from None
        if not held:
            raise Refusal(ReasonCode.stale_observation, FOCUS_MOVED, FOCUS_MOVED_HINT)
        try:
            await self.send(session, ENTER, None)
        except BackendError as exc:
            refusal = await self.reach.backend_refusal(exc, session, SEND)
            raise Refusal(refusal.code, f"{TYPED} ({refusal})", refusal.hint) from None

    async def after(self, session: ComputerSession, context: PageContext, frame: Frame, blocked: bool) -> Answer:
        """What the act answers: the Page's new frame (or what changed since `frame`); a dialog the action opened
        is the user's to answer (`needs_user`), never the runtime's."""
        if blocked:
            raise Refusal(ReasonCode.needs_user, DIALOG_OPEN)
        return await self.observe.frame(session, "interactive", context, since=frame)

    def recheck(self, session: ComputerSession, frame_id: str | None) -> None:
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

    async def _read(self, session: ComputerSession, read: Awaitable[T]) -> T:
        """A read of the Page before or around the action (the policy's, the hover's, the focus check), bounded;
        nothing is sent while it runs, so its refusal says nothing was done."""
        async with self.reach.refusing(session, READ):
            return await asyncio.wait_for(read, self.settings.observe_timeout)

    async def _point(
        self, session: ComputerSession, action: Action, element: Element | None, frames: list[FrameContext]
    ) -> Pointed:
        """A click's pointer goes where it will press before anything is read (runtime/pointer.py): the policy
        judges what the Page shows under the pointer, not what it showed before the pointer came."""
        return await self.pointer(session.probe, frames, action, element)

    async def check_policy(
        self, session: ComputerSession, action: Action, element: Element | None, context: PageContext
    ) -> CommitTargets:
        """The runtime's own read of the Page and of what this write would commit, a moment before the input (for a
        click, once the pointer is where the click will press); the live elements it read (`_type_then_enter`
        presses Enter only on one of them)."""
        authorized = context.pages.get(session.page.registry_page_id)
        if action.type == "navigate":  # no element and no structure: only the dialog watch must be on
            await self._read(session, session.probe.watch())
            structure, reading = None, CommitTargets()
        else:  # one frame read (it attaches the probe too), shared by the pointer, the structure and the commit read
            frames = await self._read(session, session.probe.frames())
            pointed = await self._read(session, self._point(session, action, element, frames))
            if pointed.rest is Rest.changed:
                raise Refusal(
                    ReasonCode.stale_observation,
                    "the element changed when the pointer reached it (renamed, covered or moved); nothing was "
                    "pressed: observe again to see it as it is now",
                )
            # Both reads sent together: they only read, and each waits on the browser, not on the other. The top
            # document's elements the pointer read once the Page answered it are the commit read's there.
            commit = read_commit(session.probe, action, element, frames, pointed.named)
            structure, reading = await self._read(session, asyncio.gather(session.probe.structure(frames), commit))
            reading.hover_unread = pointed.rest is Rest.hidden
        if not reading.found and (action.type in ("click", "select") or (action.type == "type" and action.submit)):
            raise Refusal(
                ReasonCode.stale_observation,
                "the element is no longer on the Page as the frame showed it (renamed, moved or removed); "
                "nothing was done: observe again",
            )
        handover = needs_user(action, reading, structure, authorized.url if authorized is not None else "")
        if handover is None or (handover.concept is not None and self._approved(session, action, context, handover)):
            return reading
        raise Refusal(ReasonCode.needs_user, handover.message)

    def _approved(self, session: ComputerSession, action: Action, context: PageContext, handover: Handover) -> bool:
        """Whether the call carries the user's approval of exactly this write as the runtime reads it now; if not,
        the write is recorded as one the user may allow once (`runtime/capability/approval.py`)."""
        binding = Binding(context.host, session.id, session.latest.id, action.model_dump_json(exclude_none=True))  # type: ignore[union-attr]
        target = handover.target
        control = f'{target.role} "{target.accessible_name or next(iter(target.names), "")}"' if target else ""
        if self.store.approvals.redeem(call_approval.get(), binding, handover.concept or "", control):
            log.info("the user allowed %s once on %s", action.type, session.page.registry_page_id)
            return True
        commits_to = (target.form.action if target.form and target.commits_form else target.href) if target else ""
        where = commits_to or (action.url or "")
        self.store.approvals.offer(binding, session.page.registry_page_id, handover.concept or "", control, where)
        return False
