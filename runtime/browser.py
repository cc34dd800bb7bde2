"""Launching a private Chromium for `computer-use serve --launch` and `computer-use app`: a fresh profile, off the
network, debugged over a pipe rather than a port, cleaned up.

Chromium runs with `--remote-debugging-pipe` and opens no TCP port: no other local user can list its Pages or
drive it. `runtime.pipe.PipeBroker` holds the pipe and serves the runtime's own CDP clients on a Unix socket only
this user can open; `PrivateChromium.endpoint` (`unix:/…/cdp.sock`) is what they connect to. Readiness is
Chromium's answer on the pipe, bounded. (The lab has its own launcher; a measuring device does not share code with
what it measures.)
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import tempfile
from collections import deque
from collections.abc import Mapping, Sequence
from pathlib import Path

from runtime.pipe import BrokerError, Pipe, PipeBroker
from runtime.startup import ChromiumUnavailable

CHROMIUM_ENV = "CHROMIUM"
"""The environment variable naming the Chromium (or Chrome) executable to launch; it wins over every search."""
DEBIAN = "/usr/lib/chromium/chromium"
"""Debian's binary, ahead of its /usr/bin/chromium wrapper (which sources /etc/chromium.d and adds flags)."""
ON_PATH = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
INSTALLED = (
    "/Applications/Chromium.app/Contents/MacOS/Chromium",
    "/Applications/Google Chrome.app/Contents/MacOS/Google Chrome",
    r"C:\Program Files\Google\Chrome\Application\chrome.exe",
    r"C:\Program Files (x86)\Google\Chrome\Application\chrome.exe",
    r"C:\Program Files\Chromium\Application\chrome.exe",
)
"""Where macOS and Windows installers put it."""
INSTALL_HINT = (
    "install Chromium (Debian/Ubuntu: apt-get install chromium; macOS: brew install --cask chromium; Windows: "
    f"install Google Chrome) or set {CHROMIUM_ENV} to its executable"
)
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
)
HEADLESS = (
    "--headless",
    # Headless windows still build their omnibox popups as WebUI pages whose renderer repaints without end (~30 %
    # of a core for four idle windows); nobody can open them headless, so they are off. Headed, the user's
    # omnibox is left as Chromium ships it.
    "--disable-features=WebUIOmniboxPopup,WebUIOmniboxAimPopup,WebUIOmniboxFullPopup",
)
PIPE_ONLY = ("--remote-debugging-pipe",)
"""How Chromium is debugged: the pipe, and nothing else (no port any local user could reach)."""
STDERR_DRAIN = 5.0
"""Seconds a stopped Chromium's stderr may take to reach its end (its process group is gone by then)."""
# Chromium reads CDP from its fd 3 and writes to its fd 4. subprocess passes fds under their own numbers only, so
# a shell moves ours there (bash: dash's redirections take fd numbers up to 9) and execs Chromium in its place.
_ON_FDS_3_AND_4 = 'exec "$0" "$@" 3<&{reads} 4>&{writes} {reads}<&- {writes}>&-'


class PrivateChromium:
    """A Chromium this process launched, and the broker that serves its debugging pipe."""

    def __init__(
        self, process: asyncio.subprocess.Process, profile: Path, broker: PipeBroker, stderr: asyncio.Task[None]
    ) -> None:
        self.process = process
        self.profile = profile
        self.broker = broker
        self.endpoint = broker.endpoint
        """`unix:/…/cdp.sock`: what `runtime.cdp.CDPConnection.connect` and the scoped gateways connect to."""
        self._stderr = stderr

    @classmethod
    async def launch(
        cls,
        timeout: float = 30.0,
        *,
        headless: bool = True,
        debugging: Sequence[str] = PIPE_ONLY,
        broker: type[PipeBroker] = PipeBroker,
    ) -> PrivateChromium:
        """Launch it; `ChromiumUnavailable` when there is none to launch or it does not answer on the pipe.

        `debugging` (how Chromium is debugged) and `broker` (what serves the pipe) are public seams: the app and
        `serve --launch` always take the defaults, and a variant built elsewhere passes its own."""
        executable = find_chromium()
        profile = Path(tempfile.mkdtemp(prefix="computer-use-"))
        sockets = Path(tempfile.mkdtemp(prefix="computer-use-cdp-"))  # 0700: the broker's socket goes here
        chromium_reads, we_write = os.pipe()
        we_read, chromium_writes = os.pipe()
        try:
            process = await asyncio.create_subprocess_exec(
                "/bin/bash",
                "-c",
                _ON_FDS_3_AND_4.format(reads=chromium_reads, writes=chromium_writes),
                executable,
                *(HEADLESS if headless else ()),
                *FLAGS,
                *debugging,
                f"--user-data-dir={profile}",
                "about:blank",
                pass_fds=(chromium_reads, chromium_writes),
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.DEVNULL,
                stderr=asyncio.subprocess.PIPE,
                start_new_session=True,
            )
        except BaseException:
            for fd in (we_read, we_write):
                os.close(fd)
            _remove(profile, sockets)
            raise
        finally:
            for fd in (chromium_reads, chromium_writes):
                os.close(fd)
        said: deque[str] = deque(maxlen=20)
        stderr = asyncio.create_task(_keep_last_lines(process, said))
        served: PipeBroker | None = None
        try:
            served = broker(await Pipe.open(we_read, we_write), sockets)
            await served.start(timeout)
        except BaseException as exc:
            if served is not None:
                await served.close()
            await _stop(process)
            await _finish(stderr)
            _remove(profile, sockets)
            if isinstance(exc, BrokerError | TimeoutError):
                # Its reason is the FATAL line when there is one (crashpad's noise comes after it), else the line
                # that says it is exiting (D-Bus complaints come after that one).
                last = next(
                    (f": {line}" for key in (":FATAL:", "Exiting") for line in reversed(said) if key in line),
                    f": {said[-1]}" if said else "",
                )
                raise ChromiumUnavailable(
                    f"Chromium ({executable}) did not start: no answer on its debugging pipe "
                    f"({exc or 'timed out'}){last}",
                    f"check that `{executable} --version` runs, or set {CHROMIUM_ENV} to a Chromium that does"
                    + ("" if headless else ", or launch it headless (--headless)"),
                ) from None
            raise
        return cls(process, profile, served, stderr)

    async def close(self) -> None:
        """Close the broker (its clients and the pipe), then Chromium; remove the profile and the socket's
        directory."""
        await self.broker.close()
        await _stop(self.process)
        await _finish(self._stderr)
        _remove(self.profile, self.broker.path.parent)


def find_chromium(
    environ: Mapping[str, str] | None = None, first: Sequence[str] = (DEBIAN,), installed: Sequence[str] = INSTALLED
) -> str:
    """The executable to launch: `$CHROMIUM` if set (it must be one), else the first of `first` (Debian's binary),
    of `ON_PATH` on `$PATH`, of `installed`; `ChromiumUnavailable` saying how to install it."""
    env = os.environ if environ is None else environ
    explicit = env.get(CHROMIUM_ENV, "")
    if explicit:
        if os.path.isfile(explicit) and os.access(explicit, os.X_OK):
            return explicit
        raise ChromiumUnavailable(f"{CHROMIUM_ENV}={explicit[:200]} is not an executable file", INSTALL_HINT)
    search = env.get("PATH", os.defpath)
    found = (
        [path for path in first if os.path.isfile(path)]
        + [shutil.which(name, path=search) for name in ON_PATH]
        + [path for path in installed if os.path.isfile(path)]
    )
    for path in found:
        if path and os.access(path, os.X_OK):
            return path
    raise ChromiumUnavailable(
        f"Chromium not found (not {DEBIAN}, no {', '.join(ON_PATH)} on PATH, not in the usual install folders)",
        INSTALL_HINT,
    )


async def _stop(process: asyncio.subprocess.Process) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    try:
        await asyncio.wait_for(process.wait(), 5)
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        await process.wait()


async def _finish(reader: asyncio.Task[None]) -> None:
    """Let the stderr reader reach the end of a stopped Chromium's stderr (bounded), then end it. A reader cut off
    before the end leaves the pipe, and so the process's transport, open until the loop is gone; its finalizer then
    prints a traceback ("Event loop is closed") after the command's last line."""
    with contextlib.suppress(TimeoutError, asyncio.CancelledError):
        await asyncio.wait_for(reader, STDERR_DRAIN)


async def _keep_last_lines(process: asyncio.subprocess.Process, said: deque[str]) -> None:
    """Read Chromium's stderr to its end (a full pipe would stall Chromium), keeping the last lines for errors."""
    assert process.stderr is not None
    while line := await process.stderr.readline():
        said.append(line.decode(errors="replace").strip())


def _remove(profile: Path, sockets: Path) -> None:
    """Remove the profile, the socket's directory and the folder Chromium made for its singleton socket in $TMPDIR
    (org.chromium.Chromium.*, which it leaves behind when it is stopped or dies), found by the profile's link to
    it: never another Chromium's. Not Chromium's TMPDIR moved into the profile: the socket's path would grow past
    the 104-108 bytes a Unix socket path may have, and Chromium would not start."""
    link = profile / "SingletonSocket"
    if link.is_symlink():
        made = Path(os.readlink(link)).parent
        if (
            made.name.startswith("org.chromium.Chromium.")
            and made.parent.resolve() == Path(tempfile.gettempdir()).resolve()
        ):
            shutil.rmtree(made, ignore_errors=True)
    for directory in (profile, sockets):
        shutil.rmtree(directory, ignore_errors=True)
