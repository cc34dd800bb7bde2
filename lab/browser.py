"""Launch Debian Chromium for the lab: headless, a fresh profile, off the closed network, always cleaned up.

Readiness is an event, not a delay: Chromium prints `DevTools listening on ws://…` on stderr once its debugging
port is bound (it also writes `<profile>/DevToolsActivePort`); we read that line, bounded.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shutil
import signal
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from lab.cdp import CDPClient

# The binary, not /usr/bin/chromium: that wrapper sources /etc/chromium.d and adds flags we did not choose.
CANDIDATES = ("/usr/lib/chromium/chromium", "/usr/bin/chromium", "chromium")

FLAGS = (
    "--headless",
    "--no-sandbox",  # the lab runs as root
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--no-default-browser-check",
    "--disable-background-networking",  # without these, the closed network refuses dozens of connections
    "--disable-component-update",
    "--disable-sync",
    # Headless Chromium 156 still builds every window's omnibox popups as WebUI pages (two `browser_ui` targets a
    # window) whose renderer repaints without end: ~30 % of a core for an idle browser with four windows. Off, the
    # same browser idles at ~0 % (measured in the note of the change that added this).
    "--disable-features=Translate,MediaRouter,OptimizationHints,WebUIOmniboxPopup,WebUIOmniboxAimPopup,WebUIOmniboxFullPopup",
    # A host app keeps background panes live (Electron: backgroundThrottling: false); without these, a
    # minimized or occluded window stops animation frames and every rAF-based actionability check hangs.
    "--disable-renderer-backgrounding",
    "--disable-background-timer-throttling",
    "--disable-backgrounding-occluded-windows",
    # A desktop's screen (headless Chromium's own is 800x600, smaller than the windows a host app opens, which
    # place themselves inside its work area), and the default window size that screen would otherwise change.
    "--screen-info={2560x1440}",
    "--window-size=780,580",
    "--remote-debugging-port=0",
)

READY_TIMEOUT = 30.0
_LISTENING = re.compile(r"DevTools listening on (ws://\S+)")


class PrerequisiteMissing(RuntimeError):
    """Something the lab needs is not installed; the message says what to run."""


def find_chromium() -> str:
    explicit = os.environ.get("CHROMIUM")
    for candidate in (explicit,) if explicit else CANDIDATES:
        path = shutil.which(candidate) if not os.path.isabs(candidate) else candidate
        if path and os.access(path, os.X_OK):
            return path
    raise PrerequisiteMissing("Chromium not found: run `make setup` (it installs Debian's chromium) or set CHROMIUM")


@dataclass
class Chromium:
    """A running Chromium. `http_endpoint` is what CDP clients (and the tap) connect to."""

    process: asyncio.subprocess.Process
    profile: Path
    ws_endpoint: str
    stderr_tail: list[str] = field(default_factory=list)
    _drain: asyncio.Task[None] | None = None

    @property
    def port(self) -> int:
        return int(self.ws_endpoint.split(":")[2].split("/")[0])

    @property
    def http_endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def alive(self) -> bool:
        return self.process.returncode is None

    async def connect(self) -> CDPClient:
        """A direct browser-level CDP connection (the lab's hands; bypasses any tap)."""
        return await CDPClient.connect(self.ws_endpoint)

    async def close(self) -> None:
        if self.alive:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGTERM)
            try:
                await asyncio.wait_for(self.process.wait(), 5)
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.process.pid, signal.SIGKILL)
                await self.process.wait()
        if self._drain is not None:
            self._drain.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._drain
        shutil.rmtree(self.profile, ignore_errors=True)

    def kill(self) -> None:
        """Simulate a browser crash: SIGKILL the whole process group."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)


async def launch(extra_args: tuple[str, ...] = (), wrapper: tuple[str, ...] = ()) -> Chromium:
    """Start Chromium with a fresh profile and wait (bounded) until its debugging endpoint is listening.
    `wrapper` runs it through another command that execs it (`ip netns exec NAME`: in a network namespace)."""
    executable = find_chromium()
    profile = Path(tempfile.mkdtemp(prefix="cul-chromium-"))
    process = await asyncio.create_subprocess_exec(
        *wrapper,
        executable,
        *FLAGS,
        f"--user-data-dir={profile}",
        *extra_args,
        "about:blank",
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
        start_new_session=True,  # its own process group, so close() reaps renderers and helpers too
    )
    assert process.stderr is not None
    tail: list[str] = []

    async def ready() -> str:
        assert process.stderr is not None
        while line := await process.stderr.readline():
            text = line.decode("utf-8", "replace").rstrip()
            tail.append(text)
            if match := _LISTENING.search(text):
                return match.group(1)
        raise RuntimeError("Chromium exited before listening:\n" + "\n".join(tail[-20:]))

    try:
        ws_endpoint = await asyncio.wait_for(ready(), READY_TIMEOUT)
    except BaseException:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        await process.wait()
        shutil.rmtree(profile, ignore_errors=True)
        raise

    chromium = Chromium(process=process, profile=profile, ws_endpoint=ws_endpoint, stderr_tail=tail)

    async def drain() -> None:
        # Keep reading stderr so Chromium never blocks on a full pipe; keep a short tail for error reports.
        assert process.stderr is not None
        while line := await process.stderr.readline():
            tail.append(line.decode("utf-8", "replace").rstrip())
            del tail[:-50]

    chromium._drain = asyncio.create_task(drain())
    return chromium
