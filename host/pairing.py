"""The local channel `computer-use connect` pairs over: a Unix socket only the app's own user can open.

The socket lives at `<config dir>/connect/app.sock` (`socket_path`): the directory is made (or tightened to) 0700
and the socket 0600, so no other user can even reach it, and the app also checks each peer's uid (`SO_PEERCRED`)
and closes a connection from anyone else before reading a byte. `connect` finds the socket from the same config dir
(`--config-dir`, or the default), with no argument needed, and checks the same from its side (the directory's and
the socket's owner and mode, the listener's uid) before it sends anything.

Beside it, `<config dir>/connect/mcp.sock` (`MCP_SOCKET_NAME`) serves the app's MCP server (the same app as its TCP
`/mcp`, tokens checked the same way) to `connect` alone, with the same peer-uid check before a request is read:
`connect` forwards its tool calls there, never over TCP.

The protocol is one JSON object per line, at most `MAX_LINE` bytes, each request answered in order:

- on accept the app sends `{"type": "paired", "mcp_url": ..., "pairing": id}`;
- `{"op": "client", "name": ..., "version": ...}`: who the third-party client says it is (from its MCP
  `initialize`); from then on the console shows its request for access, beside what the kernel says of the peer:
  its pid and executable and its parent's (`process_of`: a name is self-declared, these are not). Answer
  `{"ok": true}`;
- `{"op": "token"}`: a token for one forwarded tool call. Answer `{"ok": true, "token": ..., "tool_call": ...}`
  while a grant holds, else `{"ok": false, "message": ..., "hint": ...}` (with `"code": "target_lost"` when the
  grant holds but its Pages could not be read).

A connection is one pairing: when it closes, its grant ends. At most `MAX_PAIRINGS` are open at once: one more
gets `{"type": "refused", "message": ...}` and is closed (an MCP client pairs once, so only a runaway process of the
app's own user can reach the cap, and it cannot take a pairing that is open).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import stat
from pathlib import Path
from typing import Any

from host.grants import GRANT_HINT, GrantStore, NoGrant, clean_text
from runtime.loopback import unix_peer_credentials

log = logging.getLogger(__name__)

MAX_LINE = 64 * 1024
MAX_PAIRINGS = 64
MAX_EXE = 160
"""Characters of an executable's path the console shows at most (the path is the file system's, any bytes)."""
SOCKET_DIR = "connect"
SOCKET_NAME = "app.sock"
MCP_SOCKET_NAME = "mcp.sock"


def socket_path(config_dir: Path) -> Path:
    return config_dir / SOCKET_DIR / SOCKET_NAME


def mcp_socket_path(config_dir: Path) -> Path:
    return config_dir / SOCKET_DIR / MCP_SOCKET_NAME


class PairingError(Exception):
    """The socket cannot be served safely; the message says why."""


def private_dir(path: Path) -> None:
    """Make `path` a directory only this user can enter (0700), or refuse if it belongs to someone else."""
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    info = path.lstat()
    if not stat.S_ISDIR(info.st_mode):
        raise PairingError(f"{path} is not a directory")
    if info.st_uid != os.getuid():
        raise PairingError(f"{path} belongs to another user")
    if stat.S_IMODE(info.st_mode) != 0o700:
        os.chmod(path, 0o700)


def process_of(pid: int) -> str:
    """What the console shows of a local process, from the kernel and never from the process's own words: `pid N,
    <executable>` (`/proc/<pid>/exe`, clipped and stripped of control characters), and the same of the process that
    started it. A third-party client starts `computer-use connect`, so its parent is the client itself."""
    words = f"pid {pid}, {executable(pid)}"
    parent = parent_pid(pid)
    if parent > 1:
        words += f", started by pid {parent}, {executable(parent)}"
    return words


def executable(pid: int) -> str:
    try:
        path = os.readlink(f"/proc/{pid}/exe")
    except OSError:
        return "executable unknown"
    return clean_text(path, MAX_EXE)


def parent_pid(pid: int) -> int:
    """The parent's pid from `/proc/<pid>/stat` (after the command name's last `)`: the name may hold anything)."""
    try:
        stat_line = Path(f"/proc/{pid}/stat").read_bytes()[:4096]
        return int(stat_line.rpartition(b")")[2].split()[1])
    except (OSError, ValueError, IndexError):
        return 0


class PairingServer:
    """The app's end. `owner_uid` is the only uid served (a class attribute: a test variant may change it)."""

    owner_uid: int = os.getuid()

    def __init__(self, grants: GrantStore, path: Path, mcp_url: str) -> None:
        self.grants = grants
        self.path = path
        self.mcp_url = mcp_url
        self._server: asyncio.AbstractServer | None = None
        self._connections: set[asyncio.Task[Any]] = set()

    async def start(self) -> PairingServer:
        private_dir(self.path.parent)
        if self.path.exists() or self.path.is_symlink():
            if await self._answers():
                raise PairingError(f"another computer-use app is listening on {self.path}")
            self.path.unlink()  # left behind by an app that did not stop cleanly
        # Inside a 0700 directory nobody else can reach the socket in the moment before it is made 0600.
        self._server = await asyncio.start_unix_server(self._serve, path=str(self.path), limit=MAX_LINE)
        os.chmod(self.path, 0o600)
        return self

    async def _answers(self) -> bool:
        try:
            _, writer = await asyncio.wait_for(asyncio.open_unix_connection(str(self.path)), 2)
        except (OSError, TimeoutError):
            return False
        writer.close()
        return True

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None
        for task in list(self._connections):
            task.cancel()
        for task in list(self._connections):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        sock = writer.get_extra_info("socket")
        try:
            credentials = unix_peer_credentials(sock) if sock is not None else None
            pid, uid = credentials if credentials is not None else (0, None)
            if uid is None or uid != self.owner_uid:
                log.warning("pairing refused: peer uid %s is not the app's user", uid)
                return
            if len(self._connections) > MAX_PAIRINGS:
                message = f"{MAX_PAIRINGS} clients are paired already: close one (end its MCP client) and retry"
                await self._send(writer, {"type": "refused", "message": message})
                return
            pairing = self.grants.pair(process_of(pid) if pid > 0 else "")
            try:
                await self._send(writer, {"type": "paired", "mcp_url": self.mcp_url, "pairing": pairing.id})
                while True:
                    try:
                        line = await reader.readline()
                    except (ValueError, asyncio.LimitOverrunError):
                        return  # a line over MAX_LINE: not our bridge
                    if not line:
                        return
                    await self._send(writer, await self._answer(pairing.id, line))
            finally:
                self.grants.unpair(pairing.id)
        except (ConnectionError, asyncio.IncompleteReadError):
            return
        finally:
            self._connections.discard(task)
            writer.close()

    async def _answer(self, pairing: str, line: bytes) -> dict[str, Any]:
        try:
            request = json.loads(line)
        except (ValueError, RecursionError):
            return {"ok": False, "message": "not JSON"}
        if not isinstance(request, dict):
            return {"ok": False, "message": "not a JSON object"}
        op = request.get("op")
        if op == "client":
            self.grants.announce(pairing, request.get("name"))
            return {"ok": True}
        if op == "token":
            try:
                tool_call, token = await self.grants.mint(pairing)
            except NoGrant as refusal:
                return {"ok": False, "message": str(refusal), "hint": GRANT_HINT}
            except Exception as exc:  # the browser, say, while the Page Context was taken: the grant stays
                log.warning("no token for %s", pairing, exc_info=True)
                return {
                    "ok": False,
                    "code": "target_lost",
                    "message": f"the Pages could not be read ({type(exc).__name__})",
                }
            return {"ok": True, "token": token, "tool_call": tool_call}
        return {"ok": False, "message": "op is client or token"}

    @staticmethod
    async def _send(writer: asyncio.StreamWriter, message: dict[str, Any]) -> None:
        writer.write(json.dumps(message).encode() + b"\n")
        await writer.drain()
