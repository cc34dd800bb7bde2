"""`computer-use connect`: the `computer_use` tool for a third-party MCP client, through the user's grant.

A third-party client (Claude Code, Cursor, VS Code, the MCP Inspector) launches this command as its stdio MCP server,
e.g. `claude mcp add computer-use -- computer-use connect`. It publishes the same `computer_use` tool as the runtime
and pairs with the running `computer-use app` over the app's private socket (`host.pairing`), found through the same
config dir as the app's (`--config-dir`, else the default). The app's console then shows "<client> asks for browser
access"; until the person grants Pages there, every call answers `invalid_capability` without reaching the runtime.

Before it sends the socket anything it authenticates the app: the socket's directory and the socket must belong to
this user and be closed to everyone else, and the process listening must run as this user (`SO_PEERCRED`).
Otherwise another local user could have planted a socket there; `connect` then pairs with nothing, says on stderr
(one line) and in every call's answer what is wrong and what to do.

After a grant this is a first-party client adapter, like the app's own agent loop: for each `tools/call` it asks
the app for a one-time token (a provider request of the grant's turn) and forwards the call to the app's MCP server
with the token in `_meta`, over the app's private MCP socket beside the pairing socket (`host.pairing`), never over
TCP. The third-party client sends only the tool's arguments and gets only its result: it never sees
a token, and a `_meta` of its own is not forwarded. A refused capability's hint is the grant's (`Bridge.fit_hint`).
Revoking in the console makes the next call `invalid_capability`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import socket
import stat
import sys
from pathlib import Path
from typing import Any

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.server.lowlevel import Server
from mcp.types import CallToolRequestParams, CallToolResult, ListToolsResult, TextContent, Tool

from host.grants import GRANT_HINT
from host.pairing import MAX_LINE, MCP_SOCKET_NAME, socket_path
from host.settings import default_config_dir
from runtime.capability.verifier import CALL_KEY, TOKEN_KEY
from runtime.cli import CommandParser
from runtime.loopback import unix_peer_uid
from runtime.models import ComputerUseResult, as_text
from runtime.reasons import ReasonCode
from runtime.transports.mcp.server import TOOL, build_server
from runtime.transports.mcp.stdio import stdio_server

log = logging.getLogger(__name__)

PAIR_TIMEOUT = 10.0
"""Seconds to reach the app's socket and get its answer to one request (a token needs a Page Context snapshot)."""
MCP_TIMEOUT = 30.0
"""Seconds to open the MCP connection to the app (and the HTTP client's connect/write timeout, as the SDK's)."""
MCP_READ_TIMEOUT = 300.0
"""Seconds an MCP response may take (the SDK's default read timeout: a response stream may stay open)."""

GRANT_INSTRUCTIONS = (
    "Browser control limited to the Pages the user granted this client in the computer-use console. One tool, "
    "computer_use: list_pages, then observe a Page, act once per call with the latest frame_id, verify with an "
    "assertion. Without a grant every call is invalid_capability: ask the user to grant access in the console."
)
CONNECT_DESCRIPTION = """\
The computer_use tool for an MCP client of your own (Claude Code, Cursor, VS Code, the MCP Inspector), through a
grant the person gives in the console of `computer-use app`. The client launches it as its stdio MCP server:

  claude mcp add computer-use -- computer-use connect

It pairs with the running app (same --config-dir as the app's). The console then shows "<client> asks for browser
access"; until the person grants Pages there, every call is refused (invalid_capability) and nothing is done."""
START_HINT = (
    "Ask the user to start `computer-use app` (the browser console), then grant this client access in its console."
)


def refusal(code: ReasonCode, message: str, hint: str | None = None) -> CallToolResult:
    """A result in the runtime's envelope (the same fields `computer_use` answers with), as an error."""
    data = ComputerUseResult.fail(code, message, hint).model_dump(mode="json", exclude_none=True, exclude_defaults=True)
    return CallToolResult(
        content=[TextContent(type="text", text=as_text(data))], structured_content=data, is_error=True
    )


class AppGone(Exception):
    """The app's socket closed or did not answer."""


class NotTheApp(Exception):
    """What listens on the socket cannot be proven to be this user's app: `message` says why, `hint` what to do."""

    def __init__(self, message: str, hint: str) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint


def check_private(path: Path, kind: int) -> None:
    """`path` (not followed if a link) is a `kind` (`stat.S_IFDIR`, `stat.S_IFSOCK`) of this user's that no other
    user may read, write or enter; `NotTheApp` otherwise."""
    me = os.getuid()
    info = path.lstat()
    what = "directory" if kind == stat.S_IFDIR else "socket"
    hint = f"remove {path} and restart `computer-use app` (it makes them anew, private)"
    if stat.S_IFMT(info.st_mode) != kind:
        raise NotTheApp(f"{path} is not a {what}", hint)
    if info.st_uid != me:
        raise NotTheApp(f"the {what} {path} belongs to uid {info.st_uid}, not to you (uid {me})", hint)
    if info.st_mode & 0o077:
        mode = oct(stat.S_IMODE(info.st_mode))
        raise NotTheApp(f"the {what} {path} is open to other users (mode {mode}): anyone could have put it there", hint)


def check_unswappable(path: Path) -> None:
    """No other user can rename or replace what is in directory `path`: it belongs to this user or root, and only
    they may write to it (or it is sticky, as /tmp is: there an entry can be renamed only by its owner)."""
    info = path.lstat()
    if info.st_uid not in (os.getuid(), 0) or (info.st_mode & 0o022 and not info.st_mode & stat.S_ISVTX):
        raise NotTheApp(
            f"{path} (on the way to the app's socket) can be changed by another user (owner uid {info.st_uid}, "
            f"mode {oct(stat.S_IMODE(info.st_mode))}): the socket's directory could be swapped",
            "give `computer-use app` and `connect` a --config-dir whose parents only you or root can change, and "
            "restart `computer-use app`",
        )


class Bridge:
    """One paired connection to the app (made on first need, again after the app restarts) and one MCP connection
    to the app's MCP URL. Calls are forwarded one at a time: each token is for the grant's newest provider request."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.mcp_socket = path.parent / MCP_SOCKET_NAME
        self.mcp_url = ""
        self.refused: NotTheApp | None = None
        """Why the last pairing was refused (the app could not be authenticated); None once one succeeds."""
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._introduced: str | None = None
        self._client: Client | None = None
        self._client_task: asyncio.Task[None] | None = None
        self._client_stop = asyncio.Event()
        self._lock = asyncio.Lock()

    # -- the app's socket ---------------------------------------------------------------------------------------

    def authenticate_path(self) -> None:
        """The sockets' directory, the pairing socket and the MCP socket are this user's and private, and no other
        user can swap the directory (its parents, links resolved, are unswappable): then the MCP socket, reached by
        path later, is still the app's. `NotTheApp` otherwise, `FileNotFoundError` while there is no app."""
        directory = self.path.parent.resolve()
        for parent in directory.parents:
            check_unswappable(parent)
        check_private(directory, stat.S_IFDIR)
        self.path, self.mcp_socket = directory / self.path.name, directory / MCP_SOCKET_NAME
        check_private(self.path, stat.S_IFSOCK)
        with contextlib.suppress(FileNotFoundError):  # an app that serves no MCP socket: its calls fail later
            check_private(self.mcp_socket, stat.S_IFSOCK)

    def authenticate_peer(self, sock: socket.socket) -> None:
        """The process that listens on the socket runs as this user (`SO_PEERCRED`); `NotTheApp` otherwise."""
        uid, me = unix_peer_uid(sock), os.getuid()
        if uid != me:
            raise NotTheApp(
                f"the process listening on {self.path} runs as uid {uid}, not as you (uid {me})",
                f"stop that process, remove {self.path} and restart `computer-use app`",
            )

    def _refuse(self, refused: NotTheApp) -> None:
        if self.refused is None or str(self.refused) != str(refused):  # one line per new reason, not per call
            print(f"computer-use connect: not pairing: {refused.message}; {refused.hint}", file=sys.stderr, flush=True)
        self.refused = refused

    async def _pair(self) -> bool:
        if self._writer is not None and not self._writer.is_closing():
            return True
        await self._unpair()
        # Nothing of the client's (its name, a token request) goes to a socket before it is proven to be the app's.
        try:
            self.authenticate_path()
        except FileNotFoundError:
            self.refused = None
            return False
        except NotTheApp as refused:
            self._refuse(refused)
            return False
        try:
            reader, writer = await asyncio.wait_for(
                asyncio.open_unix_connection(str(self.path), limit=MAX_LINE), PAIR_TIMEOUT
            )
        except (OSError, TimeoutError):
            return False
        try:
            self.authenticate_peer(writer.get_extra_info("socket"))
        except NotTheApp as refused:
            writer.close()
            self._refuse(refused)
            return False
        self.refused = None
        self._reader, self._writer = reader, writer
        try:
            hello = await self._read()
        except AppGone:
            await self._unpair()
            return False
        url = hello.get("mcp_url")
        if hello.get("type") != "paired" or not isinstance(url, str) or not url.startswith("http://127.0.0.1:"):
            await self._unpair()
            return False
        self.mcp_url = url
        # A new pairing mints for a new connection nonce, which binds to the first MCP connection presenting it:
        # an MCP connection of an earlier pairing (bound to that pairing's nonce) must not carry these tokens.
        await self._close_client()
        return True

    async def _unpair(self) -> None:
        writer, self._reader, self._writer = self._writer, None, None
        self._introduced = None
        if writer is not None:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _read(self) -> dict[str, Any]:
        assert self._reader is not None
        try:
            line = await asyncio.wait_for(self._reader.readline(), PAIR_TIMEOUT)
        except (OSError, TimeoutError, ValueError, asyncio.LimitOverrunError):
            raise AppGone from None
        if not line:
            raise AppGone
        try:
            answer = json.loads(line)
        except ValueError:
            raise AppGone from None
        if not isinstance(answer, dict):
            raise AppGone
        return answer

    async def _ask(self, request: dict[str, Any]) -> dict[str, Any]:
        assert self._writer is not None
        try:
            self._writer.write(json.dumps(request).encode() + b"\n")
            await self._writer.drain()
        except OSError:
            raise AppGone from None
        return await self._read()

    async def introduce(self, name: str) -> bool:
        """Pair (if not yet) and tell the app who the client is, so the console shows its request. False when the
        app is not there."""
        async with self._lock:
            return await self._introduce(name)

    async def _introduce(self, name: str) -> bool:
        if not await self._pair():
            return False
        if self._introduced != name:
            try:
                await self._ask({"op": "client", "name": name})
            except AppGone:
                await self._unpair()
                return False
            self._introduced = name
        return True

    # -- the app's MCP URL --------------------------------------------------------------------------------------

    async def _mcp(self) -> Client:
        if self._client is not None:
            return self._client
        await self._close_client()
        ready: asyncio.Future[Client] = asyncio.get_running_loop().create_future()
        self._client_stop = asyncio.Event()
        # The connection lives in a task of its own: anyio's cancel scopes must be left by the task entering them.
        self._client_task = asyncio.create_task(self._hold_client(self.mcp_url, ready))
        done, _ = await asyncio.wait({ready, self._client_task}, timeout=MCP_TIMEOUT, return_when="FIRST_COMPLETED")
        if ready not in done:
            await self._close_client()
            raise AppGone
        self._client = ready.result()
        return self._client

    def http_client(self) -> httpx2.AsyncClient:
        """The HTTP client the MCP connection uses: over the app's private MCP socket, with the SDK's timeouts.

        The URL stays the app's TCP MCP URL, so the requests carry the `Host` the app's DNS-rebinding check admits;
        no byte goes over TCP."""
        return httpx2.AsyncClient(
            transport=httpx2.AsyncHTTPTransport(uds=str(self.mcp_socket)),
            timeout=httpx2.Timeout(MCP_TIMEOUT, read=MCP_READ_TIMEOUT),
        )

    async def _hold_client(self, url: str, ready: asyncio.Future[Client]) -> None:
        try:
            async with (
                self.http_client() as http,
                Client(streamable_http_client(url, http_client=http), mode="legacy") as client,
            ):
                ready.set_result(client)
                await self._client_stop.wait()
        except Exception:
            log.debug("the MCP connection to %s ended", url, exc_info=True)

    async def _close_client(self) -> None:
        self._client = None
        self._client_stop.set()
        if self._client_task is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._client_task, 10)
            self._client_task = None

    # -- one call -----------------------------------------------------------------------------------------------

    async def call(self, client_name: str, name: str, arguments: dict[str, Any]) -> CallToolResult:
        async with self._lock:
            if name != TOOL:
                return refusal(ReasonCode.invalid_arguments, f"the only tool is {TOOL}")
            if not await self._introduce(client_name):
                return self._no_pairing()
            try:
                answer = await self._ask({"op": "token"})
            except AppGone:
                # The app may have restarted since the last call: pair once more (a new pairing asks anew).
                await self._unpair()
                if not await self._introduce(client_name):
                    return self._no_pairing("the computer-use app went away")
                try:
                    answer = await self._ask({"op": "token"})
                except AppGone:
                    await self._unpair()
                    return refusal(ReasonCode.invalid_capability, "the computer-use app went away", START_HINT)
            token, tool_call = answer.get("token"), answer.get("tool_call")
            if not answer.get("ok") or not isinstance(token, str) or not isinstance(tool_call, str):
                message = str(answer.get("message") or "no grant")[:300]
                hint = str(answer.get("hint") or "")[:300] or None
                code = ReasonCode.target_lost if answer.get("code") == "target_lost" else ReasonCode.invalid_capability
                return refusal(code, message, hint)
            try:
                client = await self._mcp()
                result = await client.call_tool(TOOL, arguments, meta={TOKEN_KEY: token, CALL_KEY: tool_call})
            except Exception as exc:
                log.debug("forwarding failed", exc_info=True)
                await self._close_client()
                return refusal(
                    ReasonCode.target_lost,
                    f"the app's MCP server did not answer ({type(exc).__name__}); nothing was done",
                )
            return self.fit_hint(result)

    def fit_hint(self, result: CallToolResult) -> CallToolResult:
        """The runtime's hint for a refused capability is written for a host that mints its own tokens (it names
        page_context_token, which this client never sees); what this client can do is ask for a grant, so that is
        what its hint says. Every other result passes as it came."""
        data = result.structured_content
        if not result.is_error or not isinstance(data, dict) or data.get("reason_code") != "invalid_capability":
            return result
        data = {**data, "hint": GRANT_HINT}
        text = TextContent(type="text", text=as_text(data))
        return CallToolResult(content=[text, *result.content[1:]], structured_content=data, is_error=True)

    def _no_pairing(self, message: str = "the computer-use app is not running (no pairing)") -> CallToolResult:
        if self.refused is not None:
            return refusal(
                ReasonCode.invalid_capability, f"not pairing: {self.refused.message}"[:300], self.refused.hint[:300]
            )
        return refusal(ReasonCode.invalid_capability, message, START_HINT)

    async def close(self) -> None:
        await self._unpair()
        await self._close_client()


def client_name(ctx: Any) -> str:
    """The name the client gave in its MCP `initialize` (clientInfo), or "" (the app cleans and clips it)."""
    params = getattr(ctx.session, "client_params", None)
    info = getattr(params, "client_info", None)
    title = getattr(info, "title", None)
    name = getattr(info, "name", None)
    return str(title or name or "")


async def tool_list() -> list[Tool]:
    """The runtime's own `computer_use` definition (schema, annotations, description), as its server lists it."""
    return await build_server(None).list_tools()  # type: ignore[arg-type]  # listing never reaches the service


def build_bridge_server(bridge: Bridge, tools: list[Tool]) -> Server[Any]:
    async def list_tools(ctx: Any, params: Any) -> ListToolsResult:
        await bridge.introduce(client_name(ctx))  # the console shows the request as soon as the client looks
        return ListToolsResult(tools=tools)

    async def call_tool(ctx: Any, params: CallToolRequestParams) -> CallToolResult:
        return await bridge.call(client_name(ctx), params.name, dict(params.arguments or {}))

    return Server("computer-use", instructions=GRANT_INSTRUCTIONS, on_list_tools=list_tools, on_call_tool=call_tool)


async def serve(config_dir: Path, bridge_class: type[Bridge] = Bridge) -> int:
    """Serve the client on stdio until it closes; `bridge_class` is the app-facing half (a subclass may vary it:
    the suites' broken variants)."""
    bridge = bridge_class(socket_path(config_dir))
    server = build_bridge_server(bridge, await tool_list())
    try:
        async with stdio_server() as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())
    finally:
        await bridge.close()
    return 0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--config-dir",
        type=Path,
        metavar="DIR",
        help=f"the app's config dir, where its socket is (default: {default_config_dir()})",
    )


def register(subparsers: Any) -> None:
    """Add `connect` to `computer-use`'s subcommands (the `computer_use.commands` entry point)."""
    parser = subparsers.add_parser(
        "connect",
        help="stdio MCP server for an MCP client of your own: the computer_use tool through the user's grant",
        description=CONNECT_DESCRIPTION,
    )
    add_arguments(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    with contextlib.suppress(KeyboardInterrupt):
        return asyncio.run(serve(args.config_dir or default_config_dir()))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = CommandParser(prog="computer-use connect", description=CONNECT_DESCRIPTION)
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
