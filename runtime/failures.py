"""The one mapping from a backend's failure to what the agent is told: a reason code and the runtime's own words.

A backend says what kind of failure it saw (`runtime.backend.Failure`); the words of its message may echo upstream
or page text, so they go to the log only. The agent reads the reason code and a sentence written here, and, for an
action the backend cannot express (`Failure.unsupported`), the adapter's own constant advice as the hint: observing
again cannot help there, a differently shaped call can.
"""

from __future__ import annotations

from runtime.backend import BackendError, Failure
from runtime.reasons import ReasonCode

GONE = "the Page's target is gone"
DIALOG_OPEN = "a dialog is open on the Page; the user must answer it (the runtime never does), then observe again"


UNSUPPORTED = "this backend cannot do this action as asked; nothing was sent, and the frame is still the latest"
UNSUPPORTED_HINT = "Ask differently as the hint says, with the same frame_id."
MAX_ADVICE = 300


def reason_for(error: BackendError, *, reading: bool) -> tuple[ReasonCode, str, str | None]:
    """The reason code, message and hint (None: the code's own) for `error`, raised while reading the Page
    (`reading`) or acting on it."""
    kind = error.kind
    if kind is Failure.unsupported:
        advice = " ".join(error.advice.split())[:MAX_ADVICE]
        return ReasonCode.invalid_arguments, UNSUPPORTED, f"{advice} (same frame_id)" if advice else UNSUPPORTED_HINT
    if kind is Failure.target_lost:
        return ReasonCode.target_lost, GONE, None
    if kind is Failure.timeout:
        return ReasonCode.timeout, "the backend did not finish in time", None
    if kind is Failure.dialog:
        return ReasonCode.needs_user, DIALOG_OPEN, None
    if kind is Failure.stale:
        return (
            ReasonCode.stale_observation,
            "the element changed since the frame was read; nothing was done: observe again",
            None,
        )
    if reading:
        return ReasonCode.stale_observation, f"the backend could not read the Page ({kind})", None
    return ReasonCode.stale_observation, f"the Page did not accept the action ({kind}); observe again", None
