"""Launching a private Chromium for `computer-use serve --launch`: a fresh profile, off the network, cleaned up.

The runtime reads readiness from Chromium's own `DevTools listening on` line, bounded. (The lab has its own
launcher; a measuring device does not share code with what it measures.)
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shutil
import signal
import tempfile
from pathlib import Path

EXECUTABLES = ("/usr/lib/chromium/chromium", "/usr/bin/chromium")
FLAGS = (
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-renderer-backgrounding",  # Pages are operated in the background: keep them rendering
    "--disable-background-timer-throttling",
    "--disable-backgrounding-occluded-windows",
    "--remote-debugging-address=127.0.0.1",
    "--remote-debugging-port=0",
)
HEADLESS = (
    "--headless",
    # Headless windows still build their omnibox popups as WebUI pages whose renderer repaints without end (~30 %
    # of a core for four idle windows); nobody can open them headless, so they are off. Headed, the user's
    # omnibox is left as Chromium ships it.
    "--disable-features=WebUIOmniboxPopup,WebUIOmniboxAimPopup,WebUIOmniboxFullPopup",
)
_LISTENING = re.compile(rb"DevTools listening on ws://([^/\s]+)/")


class PrivateChromium:
    def __init__(self, process: asyncio.subprocess.Process, profile: Path, endpoint: str) -> None:
        self.process = process
        self.profile = profile
        self.endpoint = endpoint

    @classmethod
    async def launch(cls, timeout: float = 30.0, *, headless: bool = True) -> PrivateChromium:
        executable = os.environ.get("CHROMIUM") or next((e for e in EXECUTABLES if os.access(e, os.X_OK)), None)
        if executable is None:
            raise RuntimeError("Chromium not found: install Debian's chromium or set CHROMIUM")
        profile = Path(tempfile.mkdtemp(prefix="computer-use-"))
        process = await asyncio.create_subprocess_exec(
            executable,
            *(HEADLESS if headless else ()),
            *FLAGS,
            f"--user-data-dir={profile}",
            "about:blank",
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
        )

        async def listening() -> str:
            assert process.stderr is not None
            while line := await process.stderr.readline():
                if match := _LISTENING.search(line):
                    return "http://" + match.group(1).decode()
            raise RuntimeError("Chromium exited before it was ready")

        try:
            endpoint = await asyncio.wait_for(listening(), timeout)
        except BaseException:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            shutil.rmtree(profile, ignore_errors=True)
            raise
        return cls(process, profile, endpoint)

    async def close(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGTERM)
        try:
            await asyncio.wait_for(self.process.wait(), 5)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
        shutil.rmtree(self.profile, ignore_errors=True)
