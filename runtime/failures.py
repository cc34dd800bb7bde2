"""The one mapping from a backend's failure to what the agent is told: a reason code and the runtime's own words.

A backend says what kind of failure it saw (`runtime.backend.Failure`); the words of its message may echo upstream
or page text, so they go to the log only. The agent reads the reason code and a sentence written here.
"""

from __future__ import annotations

from runtime.backend import BackendError, Failure
from runtime.reasons import ReasonCode

GONE = "the Page's target is gone"
DIALOG_OPEN = "a dialog is open on the Page; the user must answer it (the runtime never does), then observe again"


def reason_for(error: BackendError, *, reading: bool) -> tuple[ReasonCode, str]:
    """The reason code and message for `error`, raised while reading the Page (`reading`) or acting on it."""
    kind = error.kind
    if kind is Failure.target_lost:
        return ReasonCode.target_lost, GONE
    if kind is Failure.timeout:
        return ReasonCode.timeout, "the backend did not finish in time"
    if kind is Failure.dialog:
        return ReasonCode.needs_user, DIALOG_OPEN
    if kind is Failure.stale:
        return (
            ReasonCode.stale_observation,
            "the element changed since the frame was read; nothing was done: observe again",
        )
    if reading:
        return ReasonCode.stale_observation, f"the backend could not read the Page ({kind})"
    return ReasonCode.stale_observation, f"the Page did not accept the action ({kind}); observe again"
