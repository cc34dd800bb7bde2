"""A private stdio MCP child and the one place that calls its tools.

The child runs over stdio through the mcp 2.3.0 client (`stdio_client` + `ClientSession`). Both are anyio context
managers whose cancel scopes must be entered and left by the same task, while the backend's `start()` and
`close()` may be awaited from different tasks; so one owner task holds them open for the child's whole life, and
`call()` talks to the session from whichever task the runtime uses (the session's streams are task-agnostic).

Only tool names in the backend's allowlist can ever be called: the upstream servers cannot be made to drop their
dangerous tools (code execution, page enumeration and switching, ...), so the filter is ours, here, before anything
is written to the child.

Cancellation: a `call()` cancelled by the runtime propagates `CancelledError` at once. The mcp client sends the
child a `notifications/cancelled` for that request id (a courtesy: the upstream may or may not abort its action,
which may already have reached the page) and drops a late answer. The child is not killed and the session stays
usable; the next call is simply the next request.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage
from pydantic import ValidationError

from runtime.backend import BackendError, Failure

CLOSE_TIMEOUT = 10.0  # the SDK's own shutdown is bounded (stdin close 2 s + SIGTERM 2 s + SIGKILL reap 2 s)


class ToolRefused(BackendError):
    """The adapter asked for an upstream tool outside its allowlist. Nothing was sent to the child."""

    def __init__(self, name: str) -> None:
        super().__init__(Failure.upstream, f"upstream tool {name!r} is not allowlisted")
        self.tool = name


def _child_pid(marker: str) -> int | None:
    """The pid of our own child with the environment entry `marker` (read from /proc; None if not found).

    The environment, not the command line: an upstream may rename itself (chrome-devtools-mcp sets
    `process.title`, which rewrites its command line), while the environment it was exec'd with stays."""
    me = os.getpid()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            ppid = int(stat[stat.rindex(")") + 2 :].split()[1])
            if ppid == me and marker in (entry / "environ").read_bytes().decode("utf-8", "replace").split("\0"):
                return int(entry.name)
        except (OSError, ValueError, IndexError):
            continue
    return None


def group_alive(pgid: int) -> bool:
    """Whether any non-zombie process is left in process group `pgid`."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        if int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
            return True
    return False


class ChildClient:
    """One stdio MCP child. `start()` -> tool names; `call()` -> CallToolResult; `close()` always reaps it."""

    def __init__(
        self,
        command: Path,
        args: list[str],
        *,
        cwd: Path,
        env: Mapping[str, str],
        marker: str,
        call_timeout: float,
        start_timeout: float,
        stderr_path: Path,
        allowlist: frozenset[str],
        label: str,
    ) -> None:
        self.allowlist = allowlist
        self.label = label  # the upstream's name in messages and task names
        self.params = StdioServerParameters(command=str(command), args=args, cwd=str(cwd), env=dict(env))
        self.marker = marker
        self.call_timeout = call_timeout
        self.start_timeout = start_timeout
        self.stderr_path = stderr_path
        self.pid: int | None = None  # the child's pid == its process group (the SDK starts a new session)
        self.tools: frozenset[str] = frozenset()
        self._session: ClientSession | None = None
        self._owner: asyncio.Task[None] | None = None
        self._ready: asyncio.Future[frozenset[str]] | None = None
        self._closing = asyncio.Event()
        self.failure: Exception | None = None

    # -- lifecycle -----------------------------------------------------------------------------------------------

    async def start(self) -> frozenset[str]:
        if self._owner is not None:
            raise RuntimeError("ChildClient.start() called twice")
        self._ready = asyncio.get_running_loop().create_future()
        self._owner = asyncio.create_task(self._own(), name=f"{self.label} owner")
        try:
            self.tools = await asyncio.wait_for(asyncio.shield(self._ready), self.start_timeout)
        except TimeoutError:
            await self.close()
            raise BackendError(
                Failure.timeout, f"{self.label} did not initialize within {self.start_timeout}s"
            ) from None
        except BaseException:
            await self.close()
            raise
        return self.tools

    async def _own(self) -> None:
        assert self._ready is not None
        try:
            with self.stderr_path.open("w", encoding="utf-8") as errlog:
                async with (
                    stdio_client(self.params, errlog=errlog) as (raw, write),
                    repaired(raw) as read,
                    ClientSession(read, write) as session,
                ):
                    await session.initialize()
                    # Only now: right after the spawn the child may not have exec'd yet, and its environment
                    # would still be ours (the marker not in it). An answered initialize proves the exec.
                    self.pid = _child_pid(self.marker)
                    names: set[str] = set()
                    cursor: str | None = None
                    while True:  # tools/list, following pages if the upstream ever paginates
                        params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
                        listing = await session.list_tools(params=params)
                        names.update(tool.name for tool in listing.tools)
                        cursor = listing.next_cursor
                        if not cursor:
                            break
                    self._session = session
                    self._ready.set_result(frozenset(names))
                    await self._closing.wait()
        except Exception as exc:  # reported through start(), or (after start) through failing calls
            self.failure = exc
            if not self._ready.done():
                self._ready.set_exception(BackendError(Failure.upstream, f"{self.label} failed to start: {exc!r}"))
        except BaseException:
            if not self._ready.done():
                self._ready.cancel()
            raise
        finally:
            self._session = None

    async def close(self) -> None:
        """Stop the child (stdin close, then SIGTERM/SIGKILL of its group by the SDK) and make sure it is gone."""
        self._closing.set()
        owner, self._owner = self._owner, None
        if owner is not None and not owner.done():
            try:
                await asyncio.wait_for(asyncio.shield(owner), CLOSE_TIMEOUT)
            except TimeoutError:
                owner.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await owner
        elif owner is not None:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                owner.result()
        if self.pid is not None and group_alive(self.pid):  # belt and braces: no orphan may outlive close()
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.pid, signal.SIGKILL)

    @property
    def running(self) -> bool:
        return self._session is not None

    # -- the one call site ---------------------------------------------------------------------------------------

    async def call(self, name: str, arguments: dict[str, Any]) -> types.CallToolResult:
        """Call one allowlisted upstream tool, bounded by `call_timeout`. Transport failures become BackendError."""
        if name not in self.allowlist:
            raise ToolRefused(name)
        session = self._session
        if session is None:
            raise BackendError(Failure.upstream, f"{self.label} is not running")
        if name not in self.tools:
            raise BackendError(Failure.upstream, f"{self.label} does not offer {name}")
        try:
            result = await session.call_tool(name, arguments, read_timeout_seconds=self.call_timeout)
        except MCPError as exc:
            if exc.code == types.REQUEST_TIMEOUT:  # what the client raises when `read_timeout_seconds` runs out
                raise BackendError(Failure.timeout, f"{name} got no answer within {self.call_timeout}s") from None
            raise BackendError(Failure.upstream, f"{name}: {exc.message}") from None
        if not isinstance(result, types.CallToolResult):
            raise BackendError(Failure.upstream, f"{name}: unexpected result type {type(result).__name__}")
        return result


@contextlib.asynccontextmanager
async def repaired(
    source: anyio.abc.ObjectReceiveStream[SessionMessage | Exception],
) -> Any:
    """The child's messages, with lone surrogates made U+FFFD.

    An upstream that serializes page text as JSON may write a lone-surrogate escape (`"\\ud800"`, from a title a
    page script set); the SDK's strict parser refuses that line, and the call it answers would wait until its
    timeout. Such a line is read again leniently, each lone surrogate replaced, and passed on as the message it is.
    """
    send, receive = anyio.create_memory_object_stream[SessionMessage | Exception](0)

    async def forward() -> None:
        async with send:
            async for item in source:
                await send.send(_reread(item))

    async with anyio.create_task_group() as group:
        group.start_soon(forward)
        try:
            yield receive
        finally:
            group.cancel_scope.cancel()


def _reread(item: SessionMessage | Exception) -> SessionMessage | Exception:
    if not isinstance(item, ValidationError):
        return item
    line = next((e.get("input") for e in item.errors() if isinstance(e.get("input"), str)), None)
    if line is None:
        return item
    try:
        text = json.dumps(json.loads(line), ensure_ascii=False)
        fixed = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
        return SessionMessage(types.jsonrpc_message_adapter.validate_json(fixed, by_name=False))
    except ValueError:
        return item
