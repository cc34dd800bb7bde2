"""Fixtures the capability unit tests share: a clock the test advances, and a context store that reads it."""

from __future__ import annotations

import pytest

from runtime.capability.contexts import ContextStore
from suites.harness import Clock


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def store(clock: Clock) -> ContextStore:
    return ContextStore(clock=clock)
