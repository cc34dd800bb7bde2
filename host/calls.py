"""A turn's tool calls, one at a time, each with its card: what the console shows the person about it.

Each call goes through the first-party client adapter (`HostedClient`) over the app's own MCP connection, with the
provider request's token; its card starts as running, headed in the person's words (`host.cards.words`), and ends
ok, failed with its reason, or saying what the person must do. The words need what earlier calls told: the Page
each ComputerSession is on and the names of the elements its observations listed, kept here for the chat.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable, Sequence
from typing import Any

from mcp.types import CallToolResult, ImageContent, TextContent

from host.cards import YOURS, Card, clip, describe_call, element_names, needs_you, words
from host.providers.base import Entry, Image, ToolCall, ToolResult, ToolResults
from runtime.capability.approval import ApprovalRequest, Binding
from runtime.capability.contexts import Host, ProviderRequest
from runtime.models import Action, ComputerUseResult, as_text, from_text
from runtime.registry.pages import PageRegistry, UnknownPage
from runtime.transports.client import HostedClient
from runtime.transports.mcp.server import TOOL

log = logging.getLogger(__name__)

Emit = Callable[[dict[str, Any]], None]

MAX_CALLS_PER_REPLY = 16
"""Tool calls of one reply that are run; the rest answer that they were not run."""


def _approval_card(offer: ApprovalRequest) -> dict[str, str]:
    """What the console shows the person before they allow a write: the control, what it commits to, the concept."""
    return {"control": clip(offer.control), "commits_to": clip(offer.commits_to), "concept": clip(offer.concept, 60)}


def _result_of(raw: CallToolResult) -> tuple[ComputerUseResult, Image | None]:
    data = raw.structured_content
    if data is None:
        data = from_text(next((c.text for c in raw.content if isinstance(c, TextContent)), "{}"))
    image = next((c for c in raw.content if isinstance(c, ImageContent)), None)
    return (
        ComputerUseResult.model_validate(data),
        Image(media_type=image.mime_type, data=image.data) if image is not None else None,
    )


class ToolCalls:
    """The chat's tool calls and their cards. `offer` is the write the person may allow once while the turn waits
    for them, with the call that asked for it."""

    def __init__(self, host: Host, registry: PageRegistry, client: HostedClient, emit: Emit) -> None:
        self._host = host
        self._registry = registry
        self._client = client
        self._emit = emit
        self._sessions: dict[str, tuple[str, str]] = {}  # computer_session_id -> (Page handle, card label)
        self._names: dict[str, dict[str, str]] = {}  # computer_session_id -> ref -> element name, for card words
        self.offer: tuple[ApprovalRequest, dict[str, Any]] | None = None

    def forget(self) -> None:
        """A new chat: no card speaks of the last one's sessions or elements."""
        self._sessions.clear()
        self._names.clear()

    async def run(
        self, request: ProviderRequest, message: str, calls: Sequence[ToolCall], transcript: list[Entry]
    ) -> str | None:
        """Run a reply's tool calls in order; the transcript gets one result per call, whatever happens (even a
        cancelled turn), since a provider refuses a transcript with an unanswered tool call. Returns the Page to
        hand over when a call needs the user: the calls after it are not run."""
        results: list[ToolResult] = []
        handed: str | None = None
        try:
            for index, call in enumerate(calls):
                if handed is not None or index >= MAX_CALLS_PER_REPLY:
                    why = "an earlier call needs the user" if handed is not None else "too many calls in one reply"
                    results.append(self._not_run(message, call, why))
                    continue
                result, page = await self._call(request, message, call)
                results.append(result)
                if page is not None:
                    handed = page
        finally:
            answered = {r.call_id for r in results}
            missing = [c for c in calls if c.id not in answered]
            results += [
                ToolResult(c.id, json.dumps({"status": "failed", "message": "the turn ended first"}), is_error=True)
                for c in missing
            ]
            transcript.append(ToolResults(tuple(results)))
        return handed

    async def _call(self, request: ProviderRequest, message: str, call: ToolCall) -> tuple[ToolResult, str | None]:
        """One tool call and its card. Returns its result and, when it needs the user, the handle of its Page."""
        arguments = call.arguments
        handle, label = self._page_of(arguments)
        card = self._card(message, call, label)
        self._emit(card.event())
        refusal = None
        if call.name != TOOL:
            refusal = f"there is no tool {clip(call.name, 60)!r}; the only tool is {TOOL}"
        elif "request" in arguments:  # the adapter's own parameter: not a computer_use argument either
            refusal = "unknown argument(s) request; see the computer_use schema"
        if refusal is not None:
            self._emit(self._failed(card, arguments, refusal).event())
            return ToolResult(call.id, json.dumps({"status": "failed", "message": refusal}), is_error=True), None
        try:
            raw = await self._client.call(request, **arguments)
            result, image = _result_of(raw)
        except asyncio.CancelledError:
            self._emit(self._failed(card, arguments, "cancelled: the turn ended during this call").event())
            raise
        except Exception as exc:
            # The MCP connection or the answer broke, not the call's rules: say so, as a failed call.
            text = f"the MCP call failed ({type(exc).__name__}: {clip(exc, 200)})"
            self._emit(self._failed(card, arguments, text).event())
            return ToolResult(call.id, json.dumps({"status": "failed", "message": text}), is_error=True), None
        if result.page is not None:
            handle, label = result.page.handle, self._label(result.page.handle, result.page.title)
            if result.computer_session_id:
                self._sessions[result.computer_session_id] = (handle, label)
        offer = self._approvable(arguments) if result.status == "needs_user" else None
        self._emit(self._ended(card.but(page=label), arguments, result, offer).event())
        if result.observation and result.computer_session_id:  # the names of the elements later cards speak of
            self._names.setdefault(result.computer_session_id, {}).update(element_names(result.observation))
        if offer is not None:
            self.offer = (offer, arguments)
        text = as_text(result.model_dump(mode="json", exclude_none=True))
        tool_result = ToolResult(call.id, text, image=image, is_error=result.status == "failed")
        # Only the handle goes back to the model as the user's words: a Page's title is the Page's to choose.
        return tool_result, (handle or "the Page") if result.status == "needs_user" else None

    def _card(self, message: str, call: ToolCall, label: str) -> Card:
        """The running card of a call, headed in the person's words."""
        if call.name != TOOL:
            return Card(message, call.id, "running", f"Calling {clip(call.name, 60)}", command=clip(call.name, 100))
        running, _, _ = words(call.arguments, self._names_of(call.arguments), self._title_of(label))
        return Card(message, call.id, "running", running, command=describe_call(call.arguments), page=label)

    def _failed(self, card: Card, arguments: dict[str, Any], reason: str) -> Card:
        _, _, failed = words(arguments, self._names_of(arguments), self._title_of(card.page))
        return card.but(status="failed", headline=f"Could not {failed}", detail=reason, reason=reason)

    def _ended(
        self, card: Card, arguments: dict[str, Any], result: ComputerUseResult, offer: ApprovalRequest | None
    ) -> Card:
        """The card once the runtime answered: ok, failed with its reason, or what the person must do."""
        names = self._names_of(arguments)
        _, done, failed = words(arguments, names, self._title_of(card.page))
        reason = f"{result.reason_code}: {result.message}" if result.reason_code is not None else ""
        card = card.but(status=result.status, backend=result.backend or "", reason=reason, hint=result.hint or "")
        if result.status == "ok":
            if result.verified is False:
                return card.but(headline=f"Could not {failed}", detail="It did not hold.", summary=result.message)
            return card.but(headline=done, summary=result.message)
        if result.status == "needs_user":
            where = f" on {self._title_of(card.page)}" if card.page else ""
            what = needs_you(result.message, names, arguments)
            approval = _approval_card(offer) if offer is not None else None
            return card.but(headline=f"Needs you: {what}{where}", detail=YOURS, approval=approval)
        return card.but(headline=f"Could not {failed}", detail=result.message)

    def _approvable(self, arguments: dict[str, Any]) -> ApprovalRequest | None:
        """The runtime's request for the act it just handed over, if the user may allow that write once."""
        try:
            action = Action.model_validate(arguments.get("action")).model_dump_json(exclude_none=True)
        except ValueError:
            return None
        session, frame = arguments.get("computer_session_id"), arguments.get("frame_id")
        if arguments.get("command") != "act" or not isinstance(session, str) or not isinstance(frame, str):
            return None
        return self._host.pending_approval(Binding(self._host.id, session, frame, action))

    async def allow_once(self, request: ProviderRequest, message: str, handed: str) -> str:
        """The user pressed Allow once: the runtime performs the write the user saw on the card, with the user's
        approval; the model hears what happened in the user's words (never the Page's text)."""
        assert self.offer is not None
        offer, arguments = self.offer
        self.offer = None
        label = self._page_of(arguments)[1]
        running, done, failed = words(arguments, self._names_of(arguments), self._title_of(label))
        card = Card(
            message,
            f"allowed-{offer.id}",
            "running",
            f"Allowed once: {running}",
            kind="allowed",
            command=f"allowed once: {describe_call(arguments)}",
            page=label,
        )
        self._emit(card.event())
        try:
            raw = await self._client.call_approved(request, self._host.approve(offer), arguments)
            result, _ = _result_of(raw)
        except Exception as exc:  # the connection or the answer broke: the write may not have happened
            log.warning("the allowed act failed", exc_info=True)
            reason = f"the call failed ({type(exc).__name__})"
            self._emit(card.but(status="failed", headline=f"Could not {failed}", reason=reason, detail=reason).event())
            return f"The user allowed your last action once on {handed}, but the call failed; observe the Page."
        reason = f"{result.reason_code}: {result.message}" if result.reason_code is not None else ""
        headline = f"Allowed once: {done}" if result.status == "ok" else f"Could not {failed}"
        self._emit(
            card.but(status=result.status, backend=result.backend or "", reason=reason, headline=headline).event()
        )
        if result.status == "ok":
            return f"The user allowed your last action once on {handed} and it was performed; observe the Page again."
        return (
            f"The user allowed your last action once on {handed}, but the runtime did not perform it "
            f"({result.reason_code}); observe the Page again."
        )

    def _not_run(self, message: str, call: ToolCall, why: str) -> ToolResult:
        label = self._page_of(call.arguments)[1]
        card = self._card(message, call, label)
        self._emit(self._failed(card, call.arguments, f"not run: {why}").event())
        return ToolResult(call.id, json.dumps({"status": "failed", "message": f"not run: {why}"}), is_error=True)

    def _page_of(self, arguments: dict[str, Any]) -> tuple[str, str]:
        """(handle, card label) of the Page a call is about, as far as the host knows before the answer."""
        session = arguments.get("computer_session_id")
        if isinstance(session, str) and session in self._sessions:
            return self._sessions[session]
        page = arguments.get("page")
        if isinstance(page, str):
            try:
                self._registry.get(page)
            except UnknownPage:
                return "", clip(page, 100)
            return page, clip(page, 100)
        return "", ""

    def _names_of(self, arguments: dict[str, Any]) -> dict[str, str]:
        session = arguments.get("computer_session_id")
        return self._names.get(session, {}) if isinstance(session, str) else {}

    @staticmethod
    def _title_of(label: str) -> str:
        """The Page's title from a card's label (`page-3 · Checkout`), else its handle."""
        return label.split(" · ", 1)[-1]

    @staticmethod
    def _label(handle: str, title: str) -> str:
        return clip(f"{handle} · {title}" if title else handle, 160)
