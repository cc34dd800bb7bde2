"""`computer-use` run as a person runs it: a real subprocess of the command, watched from outside.

Each run gets a temporary folder of its own (`TMPDIR`), new and empty; and a marker in its environment, which
every process it starts inherits (Chromium, its helpers, the backends' Node servers, whatever session or process
group they put themselves in), so the audit after it exits finds every survivor by the marker alone. A survivor is
killed once it is recorded: a failing check leaves nothing running either.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from lab.processes import command_line, processes

ROOT = Path(__file__).resolve().parents[2]
RUN_LIMIT = 60.0
"""Seconds one run may take: every failure here is found within a few seconds of start."""
MARKER = "COMPUTER_USE_CLI_AUDIT"
CLEARED = ("DISPLAY", "WAYLAND_DISPLAY", "ANTHROPIC_API_KEY", "OPENAI_API_KEY", "CHROMIUM", "COMPUTER_USE_BEARER_TOKEN")
"""Left out of every run's environment: each case sets what it is about, nothing leaks in from the machine."""


@dataclass
class Ran:
    status: int
    stdout: str
    stderr: str
    temp_left: list[str]
    """What the run left in its temporary folder (empty before it started)."""
    survivors: list[str]
    """Command lines of processes it started that outlived it (killed since)."""


def survivors(marker: str) -> list[str]:
    """Live processes whose environment carries `marker`; each is killed once recorded."""
    found = []
    needle = f"{MARKER}={marker}".encode()
    for proc in processes():
        if proc.state in ("Z", "X") or proc.pid == os.getpid():
            continue
        try:
            environ = Path(f"/proc/{proc.pid}/environ").read_bytes()
        except OSError:
            continue  # exited while we looked, or not ours to read
        if needle in environ.split(b"\0"):
            found.append(command_line(proc.pid)[:200] or proc.name)
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGKILL)
    return found


def run_command(
    tmp_path: Path, *args: str, env: dict[str, str] | None = None, module: tuple[str, ...] = ("runtime.cli",)
) -> Ran:
    """`python -m <module> <args>` (the `computer-use` console script's `main`), run to its end (bounded)."""
    # Short, under /tmp: Chromium's singleton socket goes in $TMPDIR, and a Unix socket's path has at most 108 bytes.
    temp = Path(tempfile.mkdtemp(prefix="cli-", dir="/tmp"))
    marker = secrets.token_hex(8)
    environ = {key: value for key, value in os.environ.items() if key not in CLEARED}
    environ.update(
        {
            "PYTHONPATH": str(ROOT),
            "TMPDIR": str(temp),
            "XDG_CONFIG_HOME": str(tmp_path / "config"),
            MARKER: marker,
            **(env or {}),
        }
    )
    try:
        done = subprocess.run(
            [sys.executable, "-m", *module, *args],
            env=environ,
            cwd=ROOT,
            stdin=subprocess.DEVNULL,  # over stdio, `serve` ends at the end of its input
            capture_output=True,
            text=True,
            timeout=RUN_LIMIT,
            start_new_session=True,
            check=False,
        )
    finally:
        left = survivors(marker)
        kept = sorted(p.name for p in temp.iterdir())
        shutil.rmtree(temp, ignore_errors=True)
    return Ran(done.returncode, done.stdout, done.stderr, kept, left)


@pytest.fixture
def fake_chromium(tmp_path: Path) -> dict[str, Path]:
    """Executables that pose as Chromium: one that dies at start with a FATAL line, one that closes its debugging
    pipe and stays alive (a hung browser the command must stop)."""
    folder = tmp_path / "fake"
    folder.mkdir()
    scripts = {
        "dies": '#!/bin/sh\necho "[1:1:FATAL:chrome_main.cc(1)] Missing X server or $DISPLAY" >&2\nexit 1\n',
        "hangs": '#!/bin/bash\nexec 3<&- 4>&-\necho "[1:1:ERROR:pipe] gave up on its pipe" >&2\nexec sleep 300\n',
    }
    paths = {}
    for name, text in scripts.items():
        path = folder / name
        path.write_text(text)
        path.chmod(0o755)
        paths[name] = path
    return paths
