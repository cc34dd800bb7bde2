"""`computer-use serve`: the MCP server over stdio or streamable HTTP (default 127.0.0.1:18100).

It connects to a browser's CDP endpoint (`--cdp-endpoint http://127.0.0.1:9222`) or launches a private
Chromium (`--launch`). Only a host that shares this runtime's context store can mint tokens, so a bare server
answers every call with `invalid_capability` — by design, a third-party client alone cannot act.

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
import sys
from importlib.metadata import entry_points
from pathlib import Path

from runtime.app import Runtime
from runtime.browser import PrivateChromium
from runtime.mcp.http import TOKEN_ENV, ExposureRefused, check_exposure, read_token, serve_http
from runtime.mcp.stdio import run_stdio
from runtime.observation import OBSERVATION_TOKENS
from runtime.service import Settings

COMMANDS = "computer_use.commands"
"""The entry-point group of further subcommands (see the module docstring)."""


async def serve(args: argparse.Namespace, token: str | None) -> None:
    chromium = await PrivateChromium.launch() if args.launch else None
    endpoint = chromium.endpoint if chromium else args.cdp_endpoint
    settings = Settings(backend=args.backend, observation_tokens=args.observation_tokens)
    runtime = await Runtime.connect(endpoint, settings=settings)
    try:
        if args.transport == "stdio":
            await run_stdio(runtime.server)
        else:
            await serve_http(runtime.server, args.host, args.port, token)
    finally:
        await runtime.close()
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
    source.add_argument("--cdp-endpoint", help="a browser's CDP endpoint, e.g. http://127.0.0.1:9222")
    source.add_argument("--launch", action="store_true", help="launch a private headless Chromium")
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
    return 0


if __name__ == "__main__":
    sys.exit(main())
