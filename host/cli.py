"""`computer-use app`: the host app as one command (registered with `computer-use` through an entry point).

It prints exactly two lines on stdout once everything is up — `MCP: <url>` and `Console: <url>` — then serves until
SIGINT or SIGTERM, stops every part it started (its Chromium and the runtime's backend processes included) and
exits 0. Anything that keeps it from starting is one line on stderr and exit status 1.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sys
from pathlib import Path
from typing import Any

from host.app import AppConfig, HostApp, StartError
from host.providers import PROVIDERS
from host.providers.base import ProviderError
from host.settings import BACKENDS, default_config_dir
from runtime.cli import positive
from runtime.observation import OBSERVATION_TOKENS


def add_provider_arguments(parser: argparse.ArgumentParser, script_help: str) -> None:
    """The options that choose the model: `--provider`, `--model`, `--script`, `--base-url` (app and eval)."""
    parser.add_argument(
        "--provider",
        choices=PROVIDERS,
        help="the model provider (default: anthropic if ANTHROPIC_API_KEY is set, else openai if OPENAI_API_KEY "
        "is set, else script)",
    )
    parser.add_argument("--model", help="the provider's model name (default: the provider's own)")
    parser.add_argument("--script", type=Path, help=script_help)
    parser.add_argument("--base-url", help="a provider endpoint compatible with the provider's API")


def register(subparsers: Any) -> None:
    """Add `app` to `computer-use`'s subcommands (the `computer_use.commands` entry point)."""
    parser = subparsers.add_parser(
        "app",
        help="the host app: a console chat beside your Pages, and the MCP tool on 127.0.0.1:18100",
        description=__doc__,
    )
    parser.add_argument(
        "--cdp-endpoint",
        help="attach to this browser (http://127.0.0.1:PORT) instead of launching a private Chromium",
    )
    parser.add_argument("--headless", action="store_true", help="launch the private Chromium headless")
    parser.add_argument("--port", type=int, default=18100, help="MCP (streamable HTTP) port on 127.0.0.1")
    parser.add_argument("--console-port", type=int, default=0, help="console port on 127.0.0.1 (0: any free one)")
    add_provider_arguments(parser, script_help="the script provider's task file (JSON)")
    parser.add_argument(
        "--backend", choices=BACKENDS, help="the backend for new sessions in this run (overrides the saved setting)"
    )
    parser.add_argument(
        "--observation-tokens",
        type=positive,
        default=OBSERVATION_TOKENS,
        help="cap of one observation in estimated tokens (the rest follows with next_offset)",
    )
    parser.add_argument(
        "--config-dir",
        type=Path,
        help=f"where the settings are saved (default: {default_config_dir()})",
    )
    parser.add_argument(
        "--demo",
        action="store_true",
        help="open a demo Page left of the chat and let the script provider subscribe on it, with live cards",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.demo and args.provider not in (None, "script"):
        print("computer-use app: --demo runs the script provider; leave out --provider", file=sys.stderr)
        return 2
    headless = args.headless or not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))
    config = AppConfig(
        cdp_endpoint=args.cdp_endpoint,
        mcp_port=args.port,
        console_port=args.console_port,
        provider=args.provider,
        model=args.model,
        script=args.script,
        base_url=args.base_url,
        backend=args.backend,
        observation_tokens=args.observation_tokens,
        config_dir=args.config_dir,
        headless=headless,
        demo=args.demo,
    )
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    return asyncio.run(serve(config))


async def serve(config: AppConfig) -> int:
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        app = await HostApp.start(config)
    except (StartError, ProviderError) as exc:
        print(f"computer-use app: {exc}", file=sys.stderr)
        return 1
    except Exception as exc:  # the browser or a port: one line for the user, the details in the log
        logging.getLogger(__name__).debug("start failed", exc_info=True)
        print(f"computer-use app: could not start ({type(exc).__name__}: {exc})", file=sys.stderr)
        return 1
    try:
        if not stop.is_set():  # a signal during start-up: stop without announcing anything
            print(f"MCP: {app.mcp_url}", flush=True)
            print(f"Console: {app.console_url}", flush=True)
            await stop.wait()
    finally:
        await app.close()
    return 0
