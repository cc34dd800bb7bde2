"""The reason codes. Only the runtime produces them; backend text never overrides a code or a completion."""

from __future__ import annotations

from enum import StrEnum


class ReasonCode(StrEnum):
    invalid_arguments = "invalid_arguments"
    invalid_capability = "invalid_capability"
    ambiguous_page = "ambiguous_page"
    page_context_stale = "page_context_stale"
    stale_observation = "stale_observation"
    page_access_disabled = "page_access_disabled"
    target_lost = "target_lost"
    needs_user = "needs_user"
    timeout = "timeout"
    cancelled = "cancelled"
    verification_failed = "verification_failed"


HINTS: dict[ReasonCode, str] = {
    ReasonCode.invalid_arguments: "Fix the arguments as the message says and call again.",
    ReasonCode.invalid_capability: (
        "This call carried no valid one-time page_context_token. Only the host app can authorize Pages; "
        "ask the user to authorize the Page in the chat app."
    ),
    ReasonCode.ambiguous_page: "Call list_pages and pass one exact page handle instead of a relation word.",
    ReasonCode.page_context_stale: "The authorized Pages changed. Call list_pages, then observe again.",
    ReasonCode.stale_observation: "Call observe on this computer_session_id and use the new frame_id and refs.",
    ReasonCode.page_access_disabled: "The user disabled access to this Page. Ask the user to enable it.",
    ReasonCode.target_lost: "The Page is gone (closed, crashed or replaced). Call list_pages and observe again.",
    ReasonCode.needs_user: "Tell the user what is needed on this Page and wait for them; do not retry.",
    ReasonCode.timeout: "The action may or may not have happened. Observe, then verify before retrying.",
    ReasonCode.cancelled: "The action was cancelled and may have partly happened. Observe and verify before retrying.",
    ReasonCode.verification_failed: "The assertion does not hold on the live Page. Observe to see what is there.",
}


class Refusal(Exception):
    """A call the runtime answers with a reason code; nothing further is done. `hint`: what would work instead, when
    the code's own hint (`runtime.reasons.HINTS`) would mislead."""

    def __init__(self, code: ReasonCode, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.hint = hint
