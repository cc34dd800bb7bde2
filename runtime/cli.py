"""`computer-use serve`: the MCP server over stdio or streamable HTTP (default 127.0.0.1:18100).

It connects to a browser's CDP endpoint (`--cdp-endpoint http://127.0.0.1:9222`, or a browser farm's WebSocket
`ws://…`/`wss://…` with the headers its front door wants: `--cdp-header`, `--cdp-headers-file`,
`$COMPUTER_USE_CDP_HEADERS`) or launches a private Chromium (`--launch`). Only a host that shares this runtime's
context store can mint tokens, so a bare server answers every call with `invalid_capability` — by design, a
third-party client alone cannot act.

SIGINT and SIGTERM (what `timeout`, systemd, containers and MCP clients send) both stop it the same way: the
transport ends, the runtime closes its backend sessions (their child processes), a launched Chromium's process
group is ended and its profile removed, and the exit status is 0.

Over stdio every request line gets an answer, even one the SDK's own transport would drop (see
`runtime.transports.mcp.stdio`).

Over HTTP on anything but loopback it also needs `--allow-remote` and a bearer token (see
`runtime.transports.mcp.http`); with a token configured, every request without `Authorization: Bearer <token>` gets 401.

Other packages add subcommands through the entry-point group `computer_use.commands`: each entry point is a
function `register(subparsers) -> None` that adds its parser and sets `func(args) -> int` on it (the host app's
`computer-use app` comes in this way, so the runtime never imports the host). A command that cannot start raises a
`runtime.startup.StartupFailure` after stopping what it started; `main` prints its one line and exits with its
class's status, and so does every usage error (`CommandParser`): a person never sees a traceback.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import signal
import socket
import sys
import threading
from collections.abc import Awaitable, Callable
from importlib.metadata import entry_points, version
from pathlib import Path
from typing import Any, NoReturn

from runtime.assembly import Runtime, installed_backends
from runtime.browser import CHROMIUM_ENV, PrivateChromium
from runtime.endpoint import HEADERS_ENV, BrowserEndpoint, HeaderError, headers_from
from runtime.observation import OBSERVATION_TOKENS
from runtime.service import Settings
from runtime.startup import EXIT_STATUSES, StartupFailure, UsageError, cdp_endpoint, listening_socket
from runtime.transports.mcp.http import TOKEN_ENV, ExposureRefused, check_exposure, read_token, serve_http
from runtime.transports.mcp.stdio import run_stdio

DISTRIBUTION = "computer-use-lab"
"""The installed distribution whose version `--version` prints."""
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


async def serve(args: argparse.Namespace, token: str | None, listener: socket.socket | None = None) -> None:
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
                await until_stopped(serve_http(runtime.server, args.host, args.port, token, listener), stop)
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


def port(text: str) -> int:
    """An argparse type: a TCP port, 0 (any free one) to 65535."""
    value = int(text)
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError("a port is 0 to 65535")
    return value


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Descriptions as written (paragraphs kept), and every option's default after its help unless the help
    already tells it or there is none to tell."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        shown = action.default not in (None, False, argparse.SUPPRESS) and action.option_strings
        if shown and "default" not in text and "%(default)" not in text:
            text += " (default: %(default)s)"
        return text


class CommandParser(argparse.ArgumentParser):
    """A `computer-use` parser: help as `HelpFormatter` lays it out, the exit statuses below it, and a usage
    error as one line on stderr with exit status 2."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", HelpFormatter)
        kwargs.setdefault("epilog", EXITS)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        todo = "" if ";" in message else f"; see `{self.prog} --help`"
        self.exit(UsageError.status, " ".join(f"{self.prog}: {message}{todo}".split()) + "\n")


EXITS = "exit status:\n" + "\n".join(f"  {status}  {meaning}" for status, meaning in EXIT_STATUSES.items())
DESCRIPTION = """\
Safe browser control for LLM agents: one MCP tool, computer_use (list_pages, observe, act, verify), that acts
only on the browser Pages a person authorized.

Start with `computer-use app` (a chat console beside your Pages). An MCP client of your own uses the tool through
`computer-use connect` and a grant given in the console."""
SERVE = """\
Serve the computer_use MCP tool over stdio, or over streamable HTTP at http://127.0.0.1:18100/mcp, on a private
headless Chromium (--launch) or on a running browser (--cdp-endpoint).

Only a host app that shares this server's process can authorize Pages, so a bare server answers every call with
invalid_capability: to use the tool yourself, run `computer-use app`. Off loopback, HTTP also needs
--allow-remote and a bearer token. SIGINT and SIGTERM stop it and everything it started (exit status 0)."""


def build_parser() -> CommandParser:
    """`computer-use` with `serve` and every installed subcommand (the `computer_use.commands` entry points)."""
    parser = CommandParser(prog="computer-use", description=DESCRIPTION)
    parser.add_argument("--version", action="version", version=f"%(prog)s {version(DISTRIBUTION)}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=CommandParser)
    run = commands.add_parser("serve", help="serve the computer_use MCP tool (for a host app)", description=SERVE)
    run.add_argument("--transport", choices=("stdio", "http"), default="stdio", help="how MCP clients reach it")
    run.add_argument("--host", default="127.0.0.1", help="http: the address to listen on")
    run.add_argument("--port", type=port, default=18100, help="http: the port to listen on (0: any free one)")
    run.add_argument(
        "--allow-remote",
        action="store_true",
        help="http: allow a --host other than 127.0.0.1, localhost or ::1 (also needs a bearer token)",
    )
    run.add_argument(
        "--bearer-token-file",
        type=Path,
        metavar="FILE",
        help=f"http: require 'Authorization: Bearer <the file's content>' (or set {TOKEN_ENV})",
    )
    source = run.add_mutually_exclusive_group(required=True)
    source.add_argument(
        "--cdp-endpoint",
        type=cdp_endpoint,
        metavar="URL",
        help="a running browser's debugging endpoint, http://HOST:PORT (Chromium with --remote-debugging-port), or a "
        "browser farm's ws://… or wss://… URL",
    )
    source.add_argument(
        "--launch",
        action="store_true",
        help=f"launch a private headless Chromium (${CHROMIUM_ENV}, else found on PATH and in the usual places)",
    )
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
    backends = installed_backends()
    run.add_argument(
        "--backend", choices=backends, default=backends[0], help="the backend new sessions use (installed ones)"
    )
    run.add_argument(
        "--observation-tokens",
        type=positive,
        default=OBSERVATION_TOKENS,
        metavar="N",
        help="the cap of one observation in estimated tokens (the rest follows with next_offset)",
    )
    run.set_defaults(func=run_serve)
    for command in entry_points(group=COMMANDS):
        command.load()(commands)
    for sub in commands.choices.values():
        sub.set_defaults(prog=sub.prog)
    return parser


def run_serve(args: argparse.Namespace) -> int:
    if args.launch and (args.cdp_header or args.cdp_headers_file):
        raise UsageError(
            "--cdp-header and --cdp-headers-file go with --cdp-endpoint", "a launched Chromium takes no headers"
        )
    try:
        args.cdp_headers = () if args.launch else headers_from(args.cdp_header, args.cdp_headers_file)
    except (HeaderError, OSError) as exc:
        raise UsageError(str(exc), "see `computer-use serve --help`") from None
    token = None
    listener = None
    if args.transport == "http":
        try:
            token = read_token(args.bearer_token_file)
            check_exposure(args.host, args.allow_remote, token)
        except ExposureRefused as exc:
            raise UsageError(str(exc), "see `computer-use serve --help`") from None
        listener = listening_socket(args.host, args.port)  # before anything starts: a busy port launches nothing
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    try:
        with contextlib.suppress(KeyboardInterrupt):
            asyncio.run(serve(args, token, listener))
    finally:
        if listener is not None:
            listener.close()
    if threading.active_count() > 1:
        # Stopped by a signal over stdio while the client keeps stdin open: a worker thread still blocks reading it
        # (a read cannot be cancelled) and the interpreter would wait for it at exit. Everything is closed by now.
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)
    return 0


def report(prog: str, failure: StartupFailure) -> int:
    """What every command does with a failure: its one line on stderr; the exit status of its class."""
    print(failure.line(prog), file=sys.stderr, flush=True)
    return failure.status


def main(argv: list[str] | None = None, on_failure: Callable[[str, StartupFailure], int] = report) -> int:
    """`computer-use`; `on_failure` turns a failure into the exit status (the suites' broken variants pass
    another)."""
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except StartupFailure as failure:
        return on_failure(args.prog, failure)
    except KeyboardInterrupt:  # Ctrl-C where a command has no handler of its own (eval): stopped, not a crash
        return 130
    except Exception as exc:  # a bug: still one line; the details at debug level
        logging.getLogger(__name__).debug("%s failed", args.prog, exc_info=True)
        unexpected = StartupFailure(
            f"failed unexpectedly ({type(exc).__name__}: {str(exc)[:300]})", "please report it with the command run"
        )
        return on_failure(args.prog, unexpected)


if __name__ == "__main__":
    sys.exit(main())
