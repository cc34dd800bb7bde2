"""Where a call's time goes: the commands and the pointer mark the end of each phase (`runtime.phases.mark`), and
the journal keeps the milliseconds per phase, read by the overhead benchmark (`suites/bench/test_act_latency.py`)."""

from __future__ import annotations

import pytest

from runtime import phases

pytestmark = pytest.mark.req("bench:overhead")


def test_each_phase_gets_the_time_since_the_previous_mark_and_a_repeated_phase_adds_up() -> None:
    marks = [("start", 1.000), ("token", 1.001), ("backend_snapshot", 1.011), ("frame", 1.012)]
    marks += [("backend_snapshot", 1.020), ("result", 1.0205)]
    assert phases.durations(marks) == {"token": 1.0, "backend_snapshot": 18.0, "frame": 1.0, "result": 0.5}


def test_a_mark_outside_a_call_records_nothing_and_does_not_fail() -> None:
    phases.mark("token")  # no call in progress in this context
    assert phases.call_marks.get() is None
