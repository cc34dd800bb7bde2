""" "Allow once": the user approves one write that the policy handed over for its name alone.

When the policy hands a write to the user because of what its control, choice, form or address *says* (delete, pay,
send…), the runtime records what the write would commit as an `ApprovalRequest`: the host that asked, the session,
the frame, the canonical action, the concept and the control as the runtime read them. The host shows it to the
person ("Allow once") and, if they allow it, mints an approval for that one request (`Approvals.grant`). The host
then sends the same act again with the approval in the call's `_meta` (`APPROVAL_KEY`), beside its capability token:
the model never sees an approval and cannot ask for one.

An approval is spent by its first use, whatever the outcome, and holds only if everything still matches a moment
before the input: the same host, session, frame and action, and the runtime's fresh read of the Page hands the write
over for the same concept on the same control. A Page that renamed the control, a frame that moved on, or another
action gets `needs_user` again. Sign-in, CAPTCHA and card fields are never offered: they stay the user's own to do.
"""

from __future__ import annotations

import secrets
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from runtime.capability.token import TOKEN_LIFETIME

APPROVAL_KEY = "approval_token"
"""The `_meta` key an approved act carries its approval in."""
MAX_PENDING = 64
"""Requests kept for the host to show, the newest (one per session: a newer refusal replaces an older one)."""
MAX_FIELD = 200
"""Characters of a request's page-read fields (control, form address): page text, shown escaped, never obeyed."""


@dataclass(frozen=True)
class Binding:
    """What an approval is for: one action on one frame of one session, asked for by one host."""

    host: str
    session: str
    frame: str
    action: str
    """The canonical action as JSON (`Action.model_dump_json(exclude_none=True)`)."""


@dataclass(frozen=True)
class ApprovalRequest:
    """A write the policy handed over for its name alone, as the runtime read it: what the person approves."""

    id: str
    binding: Binding
    page: str
    """The Page's handle."""
    concept: str
    """The sensitive concept the runtime named (delete, payment, send…): runtime words."""
    control: str
    """The control as the runtime read it (`button "Delete account"`): page text, cut to `MAX_FIELD`."""
    commits_to: str
    """The address the write commits to (its form's action or its link), if any: page data, cut to `MAX_FIELD`."""


class Approvals:
    """The runtime's record of approval requests and the approvals the host granted for them.

    Bounded: at most `MAX_PENDING` requests, one per session, and a granted approval expires after `lifetime`
    seconds on `clock` (the capability store's own, so tests can move it)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic, lifetime: float = TOKEN_LIFETIME) -> None:
        self._clock = clock
        self._lifetime = lifetime
        self._requests: OrderedDict[str, ApprovalRequest] = OrderedDict()
        self._granted: dict[str, tuple[str, float]] = {}
        """approval token -> (request id, expiry)."""

    def offer(self, binding: Binding, page: str, concept: str, control: str, commits_to: str) -> ApprovalRequest:
        """Record a handed-over write the person may allow once; replaces the session's earlier request."""
        for old in [r.id for r in self._requests.values() if r.binding.session == binding.session]:
            self._forget(old)
        request = ApprovalRequest(
            f"ap-{secrets.token_hex(6)}", binding, page, concept, control[:MAX_FIELD], commits_to[:MAX_FIELD]
        )
        self._requests[request.id] = request
        for oldest in list(self._requests)[: max(0, len(self._requests) - MAX_PENDING)]:
            self._forget(oldest)
        return request

    def pending(self, binding: Binding) -> ApprovalRequest | None:
        """The request recorded for exactly this host, session, frame and action, if the person may still allow it."""
        return next((r for r in reversed(self._requests.values()) if r.binding == binding), None)

    def grant(self, request: ApprovalRequest, host: str) -> str:
        """The person allowed `request` once: a one-time approval for the host that asked (KeyError if the request is
        not the one recorded, already granted, or another host's)."""
        if self._requests.get(request.id) != request or request.binding.host != host:
            raise KeyError(request.id)
        if any(r == request.id for r, _ in self._granted.values()):
            raise KeyError(request.id)
        self._prune()
        token = secrets.token_urlsafe(24)
        self._granted[token] = (request.id, self._clock() + self._lifetime)
        return token

    def redeem(self, token: object, binding: Binding, concept: str, control: str) -> bool:
        """Spend `token` (whatever the answer) and say whether it approves this write as the runtime reads it now."""
        if not isinstance(token, str):
            return False
        request_id, until = self._granted.pop(token, ("", 0.0))
        request = self._requests.get(request_id)
        if request is None or self._clock() >= until:
            return False
        self._forget(request_id)
        return request.binding == binding and request.concept == concept and request.control == control[:MAX_FIELD]

    def _forget(self, request_id: str) -> None:
        self._requests.pop(request_id, None)
        for token in [t for t, (r, _) in self._granted.items() if r == request_id]:
            del self._granted[token]

    def _prune(self) -> None:
        now = self._clock()
        for token in [t for t, (_, until) in self._granted.items() if until <= now]:
            del self._granted[token]
