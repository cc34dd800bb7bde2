"""What the backends that run an official MCP server as a private stdio child share: the life of that child.

Start: the executable must be installed (`npm ci`), the child gets private directories inside the workdir, and the
child must offer every allowlisted tool. A failed or cancelled start leaves nothing running. Close stops the child,
whatever happens to it. Once the bound page is gone (the runtime's `config.target_state()` says so, or an answer
did), the loss is sticky: nothing more goes upstream.

A subclass names its upstream (`EXECUTABLE`, `CLIENT` bound to its allowlist, `PRIVATE_DIRS`), gives its flags
(`flags()`), its own environment variables (`upstream_env()`) and its config file (`upstream_config()`), and owns
its calls.

The gateway's URL carries the session's secret, so it is never a flag (every local user reads a process's command
line, `ps`) nor an environment variable (children inherit them, and a leak into a log or another process is one
`env` away): it goes into the upstream's own JSON config file, `config_path`, written 0600 into a 0700 directory
before the child starts, and the child is given only the file's path. The private HOME, TMPDIR and
XDG_* directories and PATH are set here, from `PRIVATE_DIRS`, the same for every child.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

from backends.common.child import ChildClient
from runtime.backend import BackendConfig, BackendError, Failure

NODE_BIN_ENV = "COMPUTER_USE_NODE_BIN"
PRIVATE_ENV = {
    "home": "HOME",
    "tmp": "TMPDIR",
    "cache": "XDG_CACHE_HOME",
    "config": "XDG_CONFIG_HOME",
    "data": "XDG_DATA_HOME",
    "run": "XDG_RUNTIME_DIR",
}
"""The environment variable that points the child at each private directory of `PRIVATE_DIRS` that has one."""
DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin"
CONFIG_DIR = "private"
"""The workdir's subdirectory (0700) that holds the upstream's config file (0600)."""


def node_bin() -> Path:
    """Where the pinned npm MCP servers are: `$COMPUTER_USE_NODE_BIN`, else a checkout's `backends/node_modules/.bin`.

    A wheel does not carry the npm servers (they are installed by `npm ci` from backends/package-lock.json), so an
    installed runtime is told where a pinned install lives."""
    explicit = os.environ.get(NODE_BIN_ENV, "").strip()
    if explicit:
        return Path(explicit)
    return Path(__file__).resolve().parents[1] / "node_modules" / ".bin"


class ChildBackend:
    EXECUTABLE: ClassVar[str]
    """The npm bin (in `node_bin()`); also the child's name in messages and its stderr log."""
    CLIENT: ClassVar[Callable[..., ChildClient]]
    """The child owner bound to this upstream's allowlist: `CLIENT(executable, args, **options)`."""
    PRIVATE_DIRS: ClassVar[tuple[str, ...]]
    """Directories created in the workdir before start: those of `PRIVATE_ENV` the child gets (`home` at least, the
    child's pid is found by its HOME), and the upstream's own."""

    def __init__(self, config: BackendConfig, *, call_timeout: float, start_timeout: float) -> None:
        self.config = config
        self.call_timeout = call_timeout
        self.start_timeout = start_timeout
        self.workdir = Path(config.workdir).resolve()
        self.node_bin = node_bin()
        self.client: ChildClient | None = None
        self._lost: str | None = None  # sticky: once the bound page is gone, nothing more goes upstream

    def command(self) -> tuple[Path, list[str], dict[str, str]]:
        """The executable, its flags and the env overrides of the child (the SDK adds LOGNAME, USER, ...): each
        private directory's variable, PATH, and the upstream's own."""
        env = {var: str(self.workdir / sub) for sub, var in PRIVATE_ENV.items() if sub in self.PRIVATE_DIRS}
        env["PATH"] = os.environ.get("PATH", DEFAULT_PATH)
        return self.node_bin / self.EXECUTABLE, self.flags(), env | self.upstream_env()

    def flags(self) -> list[str]:
        """The child's command-line flags."""
        raise NotImplementedError

    def upstream_env(self) -> dict[str, str]:
        """Environment variables of this upstream's own (telemetry off, its socket directory, ...)."""
        return {}

    def upstream_config(self) -> dict[str, Any]:
        """The upstream's JSON config (`--config config_path`): the gateway's URL, which no flag may carry."""
        raise NotImplementedError

    @property
    def config_path(self) -> Path:
        """Where `upstream_config()` is written: `<workdir>/private/<EXECUTABLE>.json`, only the runtime's uid reads
        it."""
        return self.workdir / CONFIG_DIR / f"{self.EXECUTABLE}.json"

    def _write_config(self) -> None:
        """`upstream_config()` into `config_path`: the directory 0700 and the file 0600 from their creation (never
        briefly readable by others), replaced whole if an earlier start left one."""
        folder = self.config_path.parent
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(folder, 0o700)
        self.config_path.unlink(missing_ok=True)
        fd = os.open(self.config_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as file:
            json.dump(self.upstream_config(), file)

    def _prepare(self) -> None:
        """Anything else the command needs before it is built (called once per start)."""

    def _cleanup(self) -> None:
        """Undo `_prepare` (called by close, after the child is gone)."""

    @property
    def pid(self) -> int | None:
        return self.client.pid if self.client is not None else None

    async def start(self) -> None:
        if self.client is not None:
            raise RuntimeError("backend already started")
        if not os.access(self.node_bin / self.EXECUTABLE, os.X_OK):
            raise BackendError(Failure.upstream, f"{self.EXECUTABLE} is not installed in {self.node_bin} (npm ci)")
        self._prepare()
        self._write_config()
        executable, args, env = self.command()
        options: dict[str, Any] = {
            "cwd": self.workdir,
            "env": env,
            "marker": f"HOME={env['HOME']}",  # how the child's pid is found (its private HOME is unique)
            "call_timeout": self.call_timeout,
            "start_timeout": self.start_timeout,
            "stderr_path": self.workdir / f"{self.EXECUTABLE}.stderr.log",
        }
        self.client = self.CLIENT(executable, args, **options)
        try:  # a cancelled or failed start leaves nothing running
            for sub in self.PRIVATE_DIRS:
                (self.workdir / sub).mkdir(mode=0o700, parents=True, exist_ok=True)
            missing = sorted(self.client.allowlist - await self.client.start())
            if missing:
                raise BackendError(Failure.upstream, f"{self.EXECUTABLE} lacks allowlisted tools: {', '.join(missing)}")
        except BaseException:
            await self.close()
            raise

    async def close(self) -> None:
        client, self.client = self.client, None
        try:
            if client is not None:
                await client.close()
        finally:
            self.config_path.unlink(missing_ok=True)  # the secret lives no longer than the child that needs it
            self._cleanup()

    def _check_target(self) -> None:
        if self._lost is None:
            self._lost = self.config.target_state()
        if self._lost is not None:
            raise BackendError(Failure.target_lost, self._lost)
