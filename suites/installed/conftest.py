"""Phase 6, installed acceptance: the project as a user gets it — a wheel installed non-editable into a fresh venv —
started as `<venv>/bin/computer-use app` on 127.0.0.1:18100 with the lab's Chromium behind the tap, and driven
through its console the way a person would: the lab's own CDP connection types, ticks, clicks Send and Continue.

What is here:
- `installed` (session): builds the wheel from a copy of the checkout, makes a fresh venv in a temp dir, installs
  the wheel into it and proves that the console script imports the venv's copy, never the checkout's. Once per run:
  xdist workers share one build, each with a home of its own.
- `AppProcess`: the app as a subprocess in a process group of its own, its two printed URLs, SIGINT (or, for a
  negative control, SIGKILL), and the process audit of everything it started.
- the console Page is driven by `suites/console_driver.py`, through the lab's direct CDP connection (never through
  the tap).

Port 18100 is fixed, so each test here holds an exclusive lock on a file named after the port (`port_lock`,
autouse) for as long as it runs: two xdist workers, or two checkouts' runs on one machine, take turns instead of
failing on "Address already in use". (pytest-xdist's `xdist_group` does not keep a group on one worker with the
pytest this lab pins; the lock does not depend on the scheduler.)

Backends: the installed app takes a minute per backend, so by default only the default backend's run goes ahead and
the others are skipped (still collected, so the parity ledger sees what `make lab` exercises). `--backend NAME`
runs the named ones; `INSTALLED_BACKENDS=all` (what `make lab` sets) or a comma-separated list runs those.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import shutil
import signal
import sys
import tempfile
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from lab.cdp import CDPClient
from lab.processes import Proc, command_line, processes
from suites.harness import file_lock, run_folder, skip_other_backends

ROOT = Path(__file__).resolve().parents[2]
MCP_PORT = 18100
MCP_URL = f"http://127.0.0.1:{MCP_PORT}/mcp"
MCP_LINE = re.compile(r"^MCP: (http://127\.0\.0\.1:(\d+)/mcp)$")
CONSOLE_LINE = re.compile(r"^Console: (http://127\.0\.0\.1:\d+/[A-Za-z0-9_-]{20,}/)$")

BUILD_TIMEOUT = 240.0
"""Seconds for each step of building and installing (a wheel, a venv, pip): the first run fills the wheelhouse."""
START_TIMEOUT = 60.0
"""Seconds from starting the app to its two URL lines."""
STOP_TIMEOUT = 30.0
"""Seconds from SIGINT to the app's exit (it closes its sessions and their backend children first)."""
EXIT_TIMEOUT = 10.0
"""Seconds a process the app started may take to disappear after the app has exited."""

HERE = Path(__file__).resolve().parent


PORT_LOCK_TIMEOUT = 600.0
"""Seconds a test waits for another worker's tests on 18100 to finish (the task set takes about a minute)."""
BUILD_LOCK_TIMEOUT = 4 * BUILD_TIMEOUT
"""Seconds a worker waits for another worker's build of the installed app (its four steps)."""


@pytest.fixture(autouse=True)
async def port_lock() -> AsyncIterator[None]:
    """Hold the machine-wide lock on port 18100 for the whole test."""
    async with file_lock(Path(tempfile.gettempdir()) / "computer-use-lab-port-18100.lock", PORT_LOCK_TIMEOUT):
        yield


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    skip_other_backends(config, items, HERE, "the installed run")


COPY_IGNORE = shutil.ignore_patterns(
    ".git", ".venv", "node_modules", "reports", "build", "dist", "*.egg-info", "__pycache__", ".pytest_cache",
    ".ruff_cache", ".benchmarks", "allure-*",
)  # fmt: skip


def wheelhouse() -> Path:
    """Where the wheels of the runtime's dependencies are kept between runs (pip's own cache is not usable here:
    the package index's answers are not cacheable), so a fresh venv installs offline after the first run."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "computer-use-lab" / "installed-wheels"


def clean_env(**extra: str) -> dict[str, str]:
    """The environment of a process of the installed app: nothing that points Python back at the checkout."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYTHONSTARTUP")
        and not k.startswith(("PYTEST_", "COV_"))
        and k not in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY")
    }
    env.update(extra)
    return env


async def run(*command: str | Path, cwd: Path, timeout: float = BUILD_TIMEOUT) -> str:
    """Run a command to its end (bounded); its stdout, or an AssertionError with the tail of what it said."""
    process = await asyncio.create_subprocess_exec(
        *map(str, command),
        cwd=cwd,
        env=clean_env(),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        out, err = await asyncio.wait_for(process.communicate(), timeout)
    except TimeoutError:
        process.kill()
        await process.wait()
        raise AssertionError(f"{' '.join(map(str, command))} did not finish within {timeout:g}s") from None
    if process.returncode != 0:
        raise AssertionError(
            f"{' '.join(map(str, command))} exited {process.returncode}:\n{out.decode()[-2000:]}{err.decode()[-3000:]}"
        )
    return out.decode()


@dataclass(frozen=True)
class Installed:
    """The project installed from its wheel into a fresh venv."""

    venv: Path
    wheel: Path
    site_packages: Path
    home: Path
    """A scratch folder outside the checkout: the app's working directory and temp dir."""

    @property
    def python(self) -> Path:
        return self.venv / "bin" / "python"

    @property
    def computer_use(self) -> Path:
        return self.venv / "bin" / "computer-use"


async def build_and_install(tmp: Path) -> Installed:
    """Build the wheel, make a fresh venv and install the wheel into it (non-editable), all under `tmp`."""
    source, dist, venv, home = tmp / "source", tmp / "dist", tmp / "venv", tmp / "home"
    home.mkdir()
    # A copy of the checkout, so the build leaves nothing (build/, egg-info) in the working tree others use.
    shutil.copytree(ROOT, source, ignore=COPY_IGNORE, symlinks=True)
    await run(sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", dist, source, cwd=tmp)
    (wheel,) = dist.glob("computer_use_lab-*.whl")
    await run(sys.executable, "-m", "venv", "--without-pip", venv, cwd=tmp)
    # The checkout's pip installs into the fresh venv (`--python`): the same install as `<venv>/bin/pip install`,
    # without bootstrapping a pip into every temp venv. Offline from the wheelhouse when it has everything.
    pip = (sys.executable, "-m", "pip", "--python", venv / "bin" / "python")
    house = wheelhouse()
    house.mkdir(parents=True, exist_ok=True)
    # Only the dependencies live there: `pip download` of the wheel saves the project's own wheel too, and a stale
    # one (same version, older requirements) would be what the next download resolves instead of this build.
    for stale in house.glob("computer_use_lab-*.whl"):
        stale.unlink()
    try:
        await run(*pip, "install", "-q", "--no-compile", "--no-index", "--find-links", house, wheel, cwd=tmp)
    except AssertionError:
        await run(sys.executable, "-m", "pip", "download", "-q", "-d", house, wheel, cwd=tmp)
        for own in house.glob("computer_use_lab-*.whl"):
            own.unlink()
        await run(*pip, "install", "-q", "--no-compile", "--no-index", "--find-links", house, wheel, cwd=tmp)
    site = Path(
        (
            await run(
                venv / "bin" / "python", "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])", cwd=home
            )
        ).strip()
    )
    return Installed(venv, wheel, site, home)


@pytest.fixture(scope="session")
async def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    """One build per run. Under xdist the workers share it: the first to take the lock builds it into the run's
    base folder and records it; the others read the record (xdist's own recipe for a once-per-run fixture). Each
    worker gets a home of its own."""
    if (shared := run_folder(tmp_path_factory)) is None:
        return await build_and_install(tmp_path_factory.mktemp("installed"))
    record = shared / "installed.json"
    async with file_lock(shared / "installed.lock", BUILD_LOCK_TIMEOUT):
        if not record.exists():  # a folder of its own: a build that failed on another worker leaves no clash
            built = await build_and_install(Path(tempfile.mkdtemp(prefix="installed-", dir=shared)))
            record.write_text(json.dumps([str(built.venv), str(built.wheel), str(built.site_packages)]))
    venv, wheel, site = (Path(p) for p in json.loads(record.read_text()))
    return Installed(venv, wheel, site, tmp_path_factory.mktemp("installed-home"))


async def import_origins(installed: Installed) -> dict[str, str]:
    """Where the installed interpreter finds each package of the app, run from outside the checkout."""
    script = (
        "import json, runtime, host, backends, runtime.cli, host.cli, host.providers.script;"
        "print(json.dumps({m.__name__: m.__file__ for m in (runtime, host, backends, runtime.cli, host.cli,"
        " host.providers.script)}))"
    )
    return json.loads(await run(installed.python, "-c", script, cwd=installed.home))


# -- the process audit ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Seen:
    """A process the app started, as the audit saw it while the app ran."""

    pid: int
    pgid: int
    command: str


def descendants(root: int) -> list[Proc]:
    """Live processes below `root` (its children, theirs, ...), whatever their process group."""
    table = [p for p in processes() if p.state not in ("Z", "X")]
    found, frontier = [], {root}
    while frontier:
        layer = [p for p in table if p.ppid in frontier and p not in found]
        found += layer
        frontier = {p.pid for p in layer}
    return found


def still_alive(seen: Iterable[Seen]) -> list[Seen]:
    """The recorded processes that still run (same pid, same command line), and anything alive in their groups."""
    alive = {p.pid: p for p in processes() if p.state not in ("Z", "X")}
    left = [s for s in seen if s.pid in alive and command_line(s.pid) == s.command]
    groups = {s.pgid for s in seen}
    left += [
        Seen(p.pid, p.pgid, command_line(p.pid))
        for p in alive.values()
        if p.pgid in groups and p.pid not in {s.pid for s in left}
    ]
    return left


def assert_no_process_left(seen: Iterable[Seen]) -> None:
    """The process audit: nothing the app started outlives it."""
    left = still_alive(seen)
    assert left == [], f"{len(left)} processes of the app outlived it: {[(s.pid, s.command[:120]) for s in left]}"


async def exited(pid: int, limit: float) -> bool:
    """Wait (bounded) until `pid` is gone: a pidfd becomes readable when the process exits — an event, not a poll."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    loop = asyncio.get_running_loop()
    gone: asyncio.Future[None] = loop.create_future()
    loop.add_reader(fd, lambda: gone.done() or gone.set_result(None))
    try:
        await asyncio.wait_for(gone, limit)
        return True
    except TimeoutError:
        return False
    finally:
        loop.remove_reader(fd)
        os.close(fd)


# -- the app as a subprocess ---------------------------------------------------------------------------------------


@dataclass
class AppProcess:
    """`<venv>/bin/computer-use app ...` running in a process group of its own."""

    process: asyncio.subprocess.Process
    log: Path
    mcp_url: str = ""
    console_url: str = ""
    lines: list[str] = field(default_factory=list)
    seen: dict[int, Seen] = field(default_factory=dict)
    """Every process the app started that the audit saw (`note_processes`), by pid."""

    @property
    def pid(self) -> int:
        return self.process.pid

    @classmethod
    async def start(
        cls,
        installed: Installed,
        *,
        cdp_endpoint: str,
        config_dir: Path,
        script: Path | None = None,
        backend: str | None = None,
        log: Path,
        port: int = MCP_PORT,
    ) -> AppProcess:
        """Start the app and return once it printed both URL lines (bounded); the lines are checked to the letter.
        `port` 0 (any free port) is for the negative control that kills the app: a killed server leaves its port in
        TIME_WAIT."""
        command: list[str | Path] = [
            installed.computer_use, "app", "--cdp-endpoint", cdp_endpoint, "--port", str(port),
            "--provider", "script", "--config-dir", config_dir,
        ]  # fmt: skip
        if script is not None:
            command += ["--script", script]
        if backend is not None:
            command += ["--backend", backend]
        tmp = installed.home / "tmp"
        tmp.mkdir(exist_ok=True)
        with log.open("wb") as stderr:
            process = await asyncio.create_subprocess_exec(
                *map(str, command),
                cwd=installed.home,
                # The pinned npm servers are not in the wheel: the app is told where the checkout's install is.
                env=clean_env(TMPDIR=str(tmp), COMPUTER_USE_NODE_BIN=str(ROOT / "backends" / "node_modules" / ".bin")),
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=stderr,
                start_new_session=True,
            )
        app = cls(process, log)
        try:
            await asyncio.wait_for(app._read_urls(port), START_TIMEOUT)
        except BaseException as exc:
            await app.kill()
            if isinstance(exc, TimeoutError):
                raise AssertionError(
                    f"the app printed no URLs within {START_TIMEOUT:g}s:\n{app.stderr_tail()}"
                ) from None
            raise
        app.note_processes()
        return app

    async def _read_urls(self, port: int) -> None:
        assert self.process.stdout is not None
        while len(self.lines) < 2:
            line = await self.process.stdout.readline()
            if not line:
                raise AssertionError(
                    f"the app exited ({await self.process.wait()}) before it printed both URLs:\n{self.stderr_tail()}"
                )
            self.lines.append(line.decode().rstrip("\n"))
        mcp = MCP_LINE.match(self.lines[0])
        assert mcp is not None, self.lines
        assert port in (0, int(mcp.group(2))), self.lines
        console = CONSOLE_LINE.match(self.lines[1])
        assert console is not None, self.lines
        self.mcp_url, self.console_url = mcp.group(1), console.group(1)

    def stderr_tail(self, chars: int = 4000) -> str:
        try:
            return self.log.read_text(encoding="utf-8", errors="replace")[-chars:]
        except OSError:
            return ""

    def note_processes(self) -> list[Seen]:
        """Record the app and every process below it now (backend children come and go with sessions)."""
        now = [Proc(self.pid, os.getpgid(self.pid), "R", "app")] if self.process.returncode is None else []
        for proc in now + descendants(self.pid):
            if proc.pid not in self.seen:
                self.seen[proc.pid] = Seen(proc.pid, proc.pgid, command_line(proc.pid))
        return list(self.seen.values())

    async def interrupt(self) -> int:
        """Ctrl-C: SIGINT, then wait (bounded) for the exit; returns the exit status."""
        self.note_processes()
        self.process.send_signal(signal.SIGINT)
        try:
            return await asyncio.wait_for(self.process.wait(), STOP_TIMEOUT)
        except TimeoutError:
            raise AssertionError(
                f"the app did not exit within {STOP_TIMEOUT:g}s of SIGINT:\n{self.stderr_tail()}"
            ) from None

    async def settled(self) -> list[Seen]:
        """After the app's exit: wait (bounded, per process) for what it started to go; returns what is left."""
        for seen in list(self.seen.values()):
            await exited(seen.pid, EXIT_TIMEOUT)
        return still_alive(self.seen.values())

    async def kill(self) -> None:
        """The lab's clean-up (and the negative control's breakage): SIGKILL the app's group and every group of a
        process it started — by the ids the audit recorded, never by name."""
        running = self.process.returncode is None
        if running:
            self.note_processes()
        # Only groups that still hold a process the audit recorded (same pid, same command line): never a group
        # whose number a stranger's process has taken since.
        alive = {p.pid for p in processes() if p.state not in ("Z", "X")}
        ours = {s.pgid for s in self.seen.values() if s.pid in alive and command_line(s.pid) == s.command}
        for pgid in sorted(ours | ({self.pid} if running else set())):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pgid, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError):
            await asyncio.wait_for(self.process.wait(), STOP_TIMEOUT)


async def page_targets(cdp: CDPClient) -> dict[str, str]:
    """{target id: url} of every page target in the browser, as the lab sees them."""
    return {
        t["targetId"]: t["url"] for t in (await cdp.send("Target.getTargets"))["targetInfos"] if t["type"] == "page"
    }


async def close_targets(cdp: CDPClient, targets: Iterable[str]) -> None:
    """The lab tidies up windows an app left behind (a killed app cannot close its own)."""
    for target in targets:
        with contextlib.suppress(Exception):
            await cdp.send("Target.closeTarget", {"targetId": target})


@contextlib.asynccontextmanager
async def tidy_windows(cdp: CDPClient) -> AsyncIterator[None]:
    """Close every page target that appeared during the block and is still there after it."""
    before = set(await page_targets(cdp))
    try:
        yield
    finally:
        await close_targets(cdp, set(await page_targets(cdp)) - before)
