"""Runtime settings. `backend` is read once per new ComputerSession and then frozen in it."""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from runtime.observation import OBSERVATION_TOKENS


@dataclass
class Settings:
    backend: str = "playwright_mcp"
    act_timeout: float = 30.0
    observe_timeout: float = 30.0
    lease_timeout: float = 10.0
    max_sessions: int = 8
    """Live ComputerSessions at most (each holds a backend, a gateway and a probe); the least recently used idle
    one is closed to make room."""
    session_idle: float = 300.0
    """Seconds a ComputerSession may go unused (from the end of its last call) before it closes; a call running on
    it is never cut short. The next call with its id answers `stale_observation` with a hint to observe the Page."""
    clock: Callable[[], float] = time.monotonic
    """What `session_idle` is measured on (monotonic; the suites move their own)."""
    observation_tokens: int = OBSERVATION_TOKENS
    """One observation's cap, in estimated tokens (`runtime.observation.estimate`); the rest of a frame's elements
    follow with `next_offset`."""
    workdir: Path = field(default_factory=lambda: Path(tempfile.gettempdir()))
