"""`observe`: a new frame of the session's Page from its backend, rendered within the observation cap, the
viewport's elements first; after an act, only what changed when that is shorter. A screenshot comes with it for
`detail=visual`, or, on a backend with the screenshot fallback, when the viewport shows a drawn surface. A `query` or
`within` scopes what the frame's reads show (`runtime/scope.py`), never what the frame holds."""

from __future__ import annotations

import asyncio
import dataclasses

from runtime.arguments import ComputerUseArgs
from runtime.backend import BackendError, Failure, Region, Snapshot
from runtime.capability.contexts import PageContext
from runtime.cdp import CDPError
from runtime.commands.base import OBSERVE, RESERVED, RESERVED_AFTER, Answer, Reach
from runtime.computer_session import ComputerSession, Frame
from runtime.observation import render, render_delta
from runtime.phases import mark
from runtime.reading.probe import DialogOpen, TargetGone
from runtime.reading.viewport import DRAWN_JS, IN_VIEW_JS, in_view_first
from runtime.reasons import ReasonCode
from runtime.registry.pages import PageRegistry
from runtime.scope import Scope, same_region, words_of
from runtime.sessions import Refusal
from runtime.settings import Settings

STALE_DIALOG_READS = 5
"""Snapshots asked again while an upstream still reports a dialog the runtime's probe saw close."""
NO_DIAGNOSTICS = "observe with detail interactive, full or visual: this backend reads no console or network diagnostics"
IN_VIEW_TIMEOUT = 2.0
"""Seconds the probe may take for a read of the viewport (its elements, a drawn surface); past it the frame stays in
document order, and takes no screenshot fallback."""


class Observe:
    """`observe`, and the re-observation that answers an act (`frame`). Its seams, what a broken variant may
    replace in a subclass passed as `Parts.observe`: `run` and `frame`."""

    def __init__(self, reach: Reach, registry: PageRegistry, settings: Settings) -> None:
        self.reach = reach
        self.registry = registry
        self.settings = settings

    def refuse_without_diagnostics(self, session_id: str | None) -> None:
        """`detail=diagnostics` where the backend reads none (the session's, or the setting's for a new session):
        refused before a session opens or anything is read, 0 CDP commands, as every invalid_arguments is."""
        sessions = self.reach.sessions
        live = sessions.live.get(session_id or "")
        name = live.backend_name if live is not None else self.settings.backend
        backend = live.backend if live is not None else sessions.backends.get(name)
        if not getattr(backend, "diagnoses", False):
            raise Refusal(
                ReasonCode.invalid_arguments, f"detail=diagnostics is not offered by backend {name}", NO_DIAGNOSTICS
            )

    async def run(self, session: ComputerSession, args: ComputerUseArgs, context: PageContext) -> Answer:
        words = words_of(args.query) if args.query is not None else ()
        if args.offset:
            frame = session.latest
            if frame is None or frame.id != args.frame_id:
                raise Refusal(ReasonCode.stale_observation, "offset continues the latest frame; pass its frame_id")
            scope = frame.scope or Scope()
            asked = args.query is not None or args.within is not None
            if asked and (words != scope.words or args.within != (scope.region.ref if scope.region else None)):
                raise Refusal(
                    ReasonCode.invalid_arguments,
                    "offset continues the frame as its first read was scoped: pass the same query and within, or none",
                )
            return self._read(session, frame, args.offset)
        scope = Scope(words) if words else None
        if args.within is not None:
            scope = Scope(words, self._region(session, args.within))
        return await self.frame(session, args.detail, context, scope=scope)

    @staticmethod
    def _region(session: ComputerSession, ref: str) -> Region:
        """The region `within` names in the session's latest frame, or the refusal that says which ref to pass."""
        frame = session.latest
        region = frame.region(ref) if frame is not None else None
        if region is not None:
            return region
        if frame is not None and frame.element(ref) is not None:
            raise Refusal(
                ReasonCode.invalid_arguments,
                "within takes a region's ref (from an observation's regions line), not an element's",
                "Pass a ref from the regions line of the latest frame, or use query to find elements.",
            )
        raise Refusal(
            ReasonCode.stale_observation,
            "within is not a region of this session's latest frame",
            "Observe this computer_session_id without within, then pass a ref from its regions line.",
        )

    async def frame(
        self,
        session: ComputerSession,
        detail: str,
        context: PageContext,
        since: Frame | None = None,
        scope: Scope | None = None,
    ) -> Answer:
        """A new frame of the session's Page; after an act (`since`: the frame the act was sent on), the result
        tells what changed since, when that is shorter than the frame. With a `scope`, its reads show only that;
        its region, one of the latest frame's, is found again in the new snapshot (same role and name, as many
        before it), so the region read is of the Page as it is now."""
        earlier = session.latest
        timeout = self.settings.observe_timeout
        # An act may have taken the Page to a reserved origin: never read it there (the service checks again after).
        await self.reach.refuse_reserved(session.page, RESERVED_AFTER if since is not None else RESERVED)
        until_stopped = self.reach.until_stopped
        async with self.reach.refusing(session, OBSERVE):
            documents = session.gateway.documents
            snapshot = await until_stopped(session, self._snapshot(session), timeout)
            mark("backend_snapshot")
            # The document the snapshot was read from: known if none replaced another during the read (a backend's
            # first read is also when it first reads the frame tree, which is the gateway's first document).
            read_one = session.gateway.documents - documents == 0 or session.gateway.documents == 1
            document = session.gateway.document if read_one else None
            image = None
            if detail == "diagnostics":
                diagnostics = await until_stopped(session, session.backend.diagnostics(), timeout)
                snapshot = dataclasses.replace(snapshot, diagnostics=diagnostics)
                mark("backend_diagnostics")
            if detail == "visual" or (since is None and detail != "diagnostics" and await self._drawn(session)):
                image = await until_stopped(session, session.screenshot(), timeout)
                mark("backend_screenshot")
        if scope is not None and scope.region is not None and earlier is not None:
            region = same_region(snapshot.regions, scope.region, earlier.snapshot.regions)
            if region is None:
                raise Refusal(
                    ReasonCode.stale_observation,
                    "that region is no longer on the Page",
                    "Observe this computer_session_id without within and pick a region from its regions line.",
                )
            scope = Scope(scope.words, region)
        point_request = (context.turn, context.sequence + 1) if image is not None else None
        frame = session.new_frame(snapshot, detail, point_request, document=document, since=since, scope=scope)
        shown = self._read(session, frame, 0, image)
        if since is not None and frame.delta is not None:
            cap = self.settings.observation_tokens
            changes = render_delta(frame.snapshot, since.snapshot, frame.delta, detail, cap)
            if changes is not None and len(changes) < len(shown.observation or ""):
                mark("frame")
                return dataclasses.replace(shown, observation=changes, next_offset=None, changes_only=True)
        if shown.next_offset is not None:
            frame.order = await self._in_view_first(session, frame)
            if frame.order is not None:
                shown = self._read(session, frame, 0, image)
        mark("frame")
        return shown

    @staticmethod
    async def _drawn(session: ComputerSession) -> bool:
        """Whether this observation takes the backend's screenshot fallback: the backend asks for it and the
        runtime's probe sees a drawn surface in the viewport (`DRAWN_JS`); False when the probe cannot tell in time."""
        if not getattr(session.backend, "screenshot_fallback", False):
            return False
        try:
            return await asyncio.wait_for(session.probe.evaluate(DRAWN_JS), IN_VIEW_TIMEOUT) is True
        except (CDPError, TargetGone, TimeoutError):
            return False

    @staticmethod
    async def _in_view_first(session: ComputerSession, frame: Frame) -> list[int] | None:
        """The frame's elements in the viewport first (`runtime/reading/viewport.py`); None (document order) when the
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

    def _read(self, session: ComputerSession, frame: Frame, offset: int, image: bytes | None = None) -> Answer:
        """A read of `frame` from `offset`. A continuation carries only what the first read of the frame did not:
        the Page, its url and title came with that read (on the catalogue they were a sixth of every continuation)."""
        text, next_offset = render(
            frame.snapshot,
            frame.detail,
            offset,
            cap=self.settings.observation_tokens,
            order=frame.order,
            scope=frame.scope,
        )
        first = offset == 0
        return Answer(
            f"Observed with backend {session.backend_name}." if first else "",
            session,
            frame_id=frame.id,
            page=self.registry.info(session.page) if first else None,
            observation=text,
            next_offset=next_offset,
            image=image,
        )
