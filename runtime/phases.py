"""Where a call's time goes: the phases the service records per call (`CallRecord.phases`), marked as the call
reaches the end of each. A module of its own so that what a phase measures is marked where it happens (the pointer's
wait for the Page is marked in runtime/pointer.py), not only by the commands around it."""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from contextvars import ContextVar

PHASES = (
    "token",
    "session",
    "policy",
    "pointer",
    "backend_act",
    "backend_snapshot",
    "backend_diagnostics",
    "backend_screenshot",
    "frame",
    "result",
)
"""The phases in the order a call goes through them. `pointer`: a click's pointer move, from the moment it is sent
until the Page has answered it (the move is delivered with the Page's next frame, then the Page gets one more; the
policy's accessibility lookup answers within it); the policy's own reads before and after it are `policy`."""
call_marks: ContextVar[list[tuple[str, float]] | None] = ContextVar("computer_use_phase_marks", default=None)
call_progress: ContextVar[Callable[[str], None] | None] = ContextVar("computer_use_progress", default=None)
"""Told each phase the current call reaches, when its client asked for progress (`runtime.transports.mcp.progress`)."""


def mark(phase: str) -> None:
    """The current call reached the end of `phase` (a no-op outside a call)."""
    marks = call_marks.get()
    if marks is not None:
        marks.append((phase, time.perf_counter()))
    progress = call_progress.get()
    if progress is not None:
        progress(phase)


def durations(marks: list[tuple[str, float]]) -> dict[str, float]:
    """Milliseconds per phase; a phase marked more than once (the policy, around the pointer) adds up."""
    spent: dict[str, float] = {}
    for (_, before), (phase, at) in itertools.pairwise(marks):
        spent[phase] = round(spent.get(phase, 0.0) + (at - before) * 1000, 3)
    return spent
