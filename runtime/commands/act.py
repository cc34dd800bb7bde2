"""`act`: one Action on the latest frame, under the Page's write lease, after the runtime's own policy read; then
the new frame (or what changed). The frame is spent whatever happens once the action is sent."""

from __future__ import annotations

import asyncio

from runtime.arguments import ComputerUseArgs
from runtime.backend import BackendError, Element
from runtime.capability.host import PageContext
from runtime.commands.base import Outcome, mark
from runtime.commands.observe import Observing
from runtime.commit import Reading, read_commit
from runtime.failures import DIALOG_OPEN
from runtime.models import Action
from runtime.pointer import Rest, rest_on
from runtime.policy import needs_user
from runtime.probe import DialogOpen, FrameContext
from runtime.reasons import ReasonCode
from runtime.session import ComputerSession, Frame
from runtime.sessions import Refusal


class Acting(Observing):
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
            raise await self._backend_refusal(session, exc) from None
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

    async def _point(
        self, session: ComputerSession, action: Action, element: Element | None, frames: list[FrameContext]
    ) -> Rest:
        """A click's pointer goes where it will press before anything is read (runtime/pointer.py): the policy
        judges what the Page shows under the pointer, not what it showed before the pointer came."""
        return await rest_on(session.probe, frames, action, element)

    async def _check_policy(
        self, session: ComputerSession, action: Action, element: Element | None, context: PageContext
    ) -> None:
        """The runtime's own read of the Page and of what this write would commit, a moment before the input (for a
        click, once the pointer is where the click will press)."""
        authorized = context.pages.get(session.page.registry_page_id)
        if action.type == "navigate":  # no element and no structure: only the dialog watch must be on
            await self._read(session, session.probe.watch())
            structure, reading = None, Reading()
        else:  # one frame read (it attaches the probe too), shared by the pointer, the structure and the commit read
            frames = await self._read(session, session.probe.frames())
            rest = await self._read(session, self._point(session, action, element, frames))
            if rest is Rest.changed:
                raise Refusal(
                    ReasonCode.stale_observation,
                    "the element changed when the pointer reached it (renamed, covered or moved); nothing was "
                    "pressed: observe again to see it as it is now",
                )
            # Both reads sent together: they only read, and each waits on the browser, not on the other.
            structure, reading = await self._read(
                session,
                asyncio.gather(session.probe.structure(frames), read_commit(session.probe, action, element, frames)),
            )
            reading.hover_unread = rest is Rest.hidden
        if not reading.found and (action.type in ("click", "select") or (action.type == "type" and action.submit)):
            raise Refusal(
                ReasonCode.stale_observation,
                "the element is no longer on the Page as the frame showed it (renamed, moved or removed); "
                "nothing was done: observe again",
            )
        reason = needs_user(action, reading, structure, authorized.url if authorized is not None else "")
        if reason is not None:
            raise Refusal(ReasonCode.needs_user, reason)
