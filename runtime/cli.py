"""`computer-use serve`: the MCP server over stdio or streamable HTTP (default 127.0.0.1:18100).

It connects to a browser's CDP endpoint (`--cdp-endpoint http://127.0.0.1:9222`, or a browser farm's WebSocket
`ws://…`/`wss://…` with the headers its front door wants: `--cdp-header`, `--cdp-headers-file`,
`$COMPUTER_USE_CDP_HEADERS`) or launches a private Chromium (`--launch`). Only a host that shares this runtime's
context store can mint tokens, so a bare server answers every call with `invalid_capability` — by design, a
third-party client alone cannot act.

SIGINT and SIGTERM (what `timeout`, systemd, containers and MCP clients send) both stop it the same way: the
transport ends, the runtime closes its backend sessions (their child processes), a launched Chromium's process
group is ended and its profile removed, and the exit status is 0.

Over stdio every request line gets an answer, even one the SDK's own transport would drop (see `runtime.mcp.stdio`).

Over HTTP on anything but loopback it also needs `--allow-remote` and a bearer token (see `runtime.mcp.http`);
with a token configured, every request without `Authorization: Bearer <token>` gets 401.

Other packages add subcommands through the entry-point group `computer_use.commands`: each entry point is a
function `register(subparsers) -> None` that adds its parser and sets `func(args) -> int` on it (the host app's
`computer-use app` comes in this way, so the runtime never imports the host).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import signal
import sys
import threading
from collections.abc import Awaitable
from importlib.metadata import entry_points
from pathlib import Path

from runtime.app import Runtime
from runtime.browser import PrivateChromium
from runtime.endpoint import HEADERS_ENV, BrowserEndpoint, HeaderError, headers_from
from runtime.mcp.http import TOKEN_ENV, ExposureRefused, check_exposure, read_token, serve_http
from runtime.mcp.stdio import run_stdio
from runtime.observation import OBSERVATION_TOKENS
from runtime.service import Settings

COMMANDS = "computer_use.commands"
"""The entry-point group of further subcommands (see the module docstring)."""
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
"""The signals on which `serve` stops cleanly and exits 0."""


async def until_stopped(work: Awaitable[None], stop: asyncio.Event) -> None:
    """Run `work` until it ends or `stop` is set; then it is cancelled (and its cleanup awaited)."""
    task = asyncio.ensure_future(work)
    stopped = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait({task, stopped}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopped.cancel()
        if not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
    if not task.cancelled():
        task.result()


async def serve(args: argparse.Namespace, token: str | None) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in STOP_SIGNALS:
        loop.add_signal_handler(sig, stop.set)
    chromium = await PrivateChromium.launch() if args.launch else None
    try:
        endpoint = chromium.endpoint if chromium else BrowserEndpoint(args.cdp_endpoint, args.cdp_headers)
        settings = Settings(backend=args.backend, observation_tokens=args.observation_tokens)
        runtime = await Runtime.connect(endpoint, settings=settings)
        try:
            if args.transport == "stdio":
                await until_stopped(run_stdio(runtime.server), stop)
            else:
                await until_stopped(serve_http(runtime.server, args.host, args.port, token), stop)
        finally:
            await runtime.close()
    finally:
        if chromium is not None:
            await chromium.close()


def positive(text: str) -> int:
    """An argparse type: a whole number of at least 1."""
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="computer-use", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("serve", help="serve the computer_use MCP tool")
    run.add_argument("--transport", choices=("stdio", "http"), default="stdio")
    run.add_argument("--host", default="127.0.0.1")
    run.add_argument("--port", type=int, default=18100)
    run.add_argument(
        "--allow-remote",
        action="store_true",
        help="http: allow a --host other than 127.0.0.1, localhost or ::1 (also needs a bearer token)",
    )
    run.add_argument(
        "--bearer-token-file",
        type=Path,
        help=f"http: require 'Authorization: Bearer <the file's content>' (or set {TOKEN_ENV})",
    )
    source = run.add_mutually_exclusive_group(required=True)
    source.add_argument(
        "--cdp-endpoint",
        help="a browser's CDP endpoint, e.g. http://127.0.0.1:9222, or a browser farm's WebSocket, ws://… or wss://…",
    )
    source.add_argument("--launch", action="store_true", help="launch a private headless Chromium")
    run.add_argument(
        "--cdp-header",
        action="append",
        default=[],
        metavar="'NAME: VALUE'",
        help="a header for every connection to --cdp-endpoint, as a browser farm's front door wants it "
        f"(repeatable; also --cdp-headers-file and ${HEADERS_ENV}, which keep a secret off the command line)",
    )
    run.add_argument(
        "--cdp-headers-file", type=Path, metavar="FILE", help="headers for --cdp-endpoint, one 'NAME: VALUE' a line"
    )
    run.add_argument("--backend", default="playwright_mcp", help="backend for new ComputerSessions")
    run.add_argument(
        "--observation-tokens",
        type=positive,
        default=OBSERVATION_TOKENS,
        help="cap of one observation in estimated tokens (the rest follows with next_offset)",
    )
    for command in entry_points(group=COMMANDS):
        command.load()(commands)
    args = parser.parse_args(argv)
    if args.command != "serve":
        return args.func(args)
    if args.launch and (args.cdp_header or args.cdp_headers_file):
        run.error("--cdp-header and --cdp-headers-file go with --cdp-endpoint; a launched Chromium takes none")
    try:
        args.cdp_headers = () if args.launch else headers_from(args.cdp_header, args.cdp_headers_file)
    except (HeaderError, OSError) as exc:
        run.error(str(exc))  # exits with status 2 before anything starts
    token = None
    if args.transport == "http":
        try:
            token = read_token(args.bearer_token_file)
            check_exposure(args.host, args.allow_remote, token)
        except ExposureRefused as exc:
            run.error(str(exc))  # exits with status 2 before anything starts or listens
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve(args, token))
    if threading.active_count() > 1:
        # Stopped by a signal over stdio while the client keeps stdin open: a worker thread still blocks reading it
        # (a read cannot be cancelled) and the interpreter would wait for it at exit. Everything is closed by now.
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
