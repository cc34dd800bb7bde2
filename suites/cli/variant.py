"""Deliberately broken variants of `computer-use` for the negative controls, run as the real command is:
`python -m suites.cli.variant <variant> <computer-use arguments…>`.

Each is `runtime.cli.main` with one part swapped through a seam it has anyway (the failure handler `main` takes;
the launcher class, the process stopper and the folder remover the command looks up in its modules); everything
else is the command.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import runtime.browser
import runtime.cli
from runtime.browser import PrivateChromium
from runtime.startup import StartupFailure


def lets_the_traceback_through(prog: str, failure: StartupFailure) -> int:
    """The failure handler of before: the exception goes up to the interpreter, which prints its traceback."""
    raise failure


class LeavesATempFolder(PrivateChromium):
    """A launcher that makes a temporary folder before it launches and forgets it when the launch fails (what a
    failed launch did before the profile was created inside the guarded part)."""

    @classmethod
    async def launch(cls, timeout: float = 30.0, *, headless: bool = True) -> PrivateChromium:
        tempfile.mkdtemp(prefix="computer-use-")
        return await super().launch(timeout, headless=headless)


async def leaves_it_running(process: Any) -> None:
    """A stopper that does not stop: a Chromium that never answered stays alive."""


def removes_its_own_folders_only(profile: Path, sockets: Path) -> None:
    """The clean-up of before: the profile and the socket's directory, not the folder Chromium made in $TMPDIR."""
    for directory in (profile, sockets):
        shutil.rmtree(directory, ignore_errors=True)


def swap_launcher() -> None:
    runtime.cli.PrivateChromium = LeavesATempFolder  # type: ignore[misc]


def swap_stopper() -> None:
    runtime.browser._stop = leaves_it_running  # type: ignore[assignment]


async def kills_at_once(process: Any) -> None:
    """A stopper that kills Chromium outright: it always leaves its singleton folder in $TMPDIR (a Chromium given
    SIGTERM may or may not get as far as removing it, so without this the remover's control depends on its timing)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    await process.wait()


def swap_remover() -> None:
    runtime.browser._stop = kills_at_once  # type: ignore[assignment]
    runtime.browser._remove = removes_its_own_folders_only


VARIANTS: dict[str, tuple[Callable[[], None] | None, Callable[[str, StartupFailure], int]]] = {
    "traceback": (None, lets_the_traceback_through),
    "leaves_temp_folder": (swap_launcher, runtime.cli.report),
    "leaves_chromium": (swap_stopper, runtime.cli.report),
    "leaves_chromium_folder": (swap_remover, runtime.cli.report),
}

if __name__ == "__main__":
    setup, on_failure = VARIANTS[sys.argv[1]]
    if setup is not None:
        setup()
    sys.exit(runtime.cli.main(sys.argv[2:], on_failure=on_failure))
