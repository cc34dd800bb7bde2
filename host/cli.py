"""`computer-use app`: the host app as one command (registered with `computer-use` through an entry point).

It prints exactly two lines on stdout once everything is up — `MCP: <url>` and `Console: <url>` — then serves until
SIGINT or SIGTERM, stops every part it started (its Chromium and the runtime's backend processes included) and
exits 0. Anything that keeps it from starting is checked before the part it concerns starts where it can be (the
options, the ports, the provider: before any browser), stops what started, and is one line on stderr with the exit
status of its class (`runtime.startup`).
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

from host.app import AppConfig, HostApp, choose_provider
from host.providers import KEY_ENV, PROVIDERS, make_provider
from host.providers.base import ProviderError
from host.settings import BACKENDS, default_config_dir
from runtime.cli import port, positive
from runtime.observation import OBSERVATION_TOKENS
from runtime.startup import ProviderUnavailable, UsageError, cdp_endpoint, listening_socket

APP_DESCRIPTION = """\
The host app: a chat console in its own browser window beside your Pages, a model provider, and the computer_use
MCP tool on http://127.0.0.1:18100/mcp.

Open a URL as a Page beside the chat, tick the Pages a message may use, and send it; each tool call shows as a
card, and sign-in, CAPTCHA or payment hand the Page to you. It prints the MCP URL and the console's URL once
everything is up; Ctrl-C (or SIGTERM) stops it and everything it started.

Without --provider: anthropic if ANTHROPIC_API_KEY is set, else openai if OPENAI_API_KEY is set, else the script
provider (with --script FILE it runs that task file; without, it tells you how to configure a model)."""


def add_provider_arguments(parser: argparse.ArgumentParser, script_help: str) -> None:
    """The options that choose the model: `--provider`, `--model`, `--script`, `--base-url` (app and eval)."""
    parser.add_argument(
        "--provider",
        choices=PROVIDERS,
        help="the model provider (default: anthropic if ANTHROPIC_API_KEY is set, else openai if OPENAI_API_KEY "
        "is set, else script)",
    )
    parser.add_argument("--model", metavar="NAME", help="the provider's model name (default: the provider's own)")
    parser.add_argument("--script", type=Path, metavar="FILE", help=script_help)
    parser.add_argument(
        "--base-url", metavar="URL", help="an endpoint compatible with the provider's API (default: the provider's)"
    )


def chosen_provider(provider: str | None, script: Path | None) -> str | None:
    """The provider the options name: `--script` means the script provider, and with another it is a usage error
    (it would be ignored); None leaves the choice to the keys set."""
    if script is not None and provider not in (None, "script"):
        raise UsageError(f"--script runs the script provider, not {provider}", "leave out --script or --provider")
    return "script" if script is not None else provider


def provider_failure(exc: ProviderError, name: str) -> ProviderUnavailable:
    """A provider that cannot be made at start, as the person can act on it."""
    if exc.kind == "missing_key":
        return ProviderUnavailable(
            f"the {name} provider needs an API key and {KEY_ENV[name]} is not set",
            f"set {KEY_ENV[name]}, or choose --provider script with --script FILE",
        )
    if exc.kind == "script":
        return ProviderUnavailable(exc.message, "fix the file (its format: docs/providers.md) or leave out --script")
    return ProviderUnavailable(exc.message, "install it, or choose another --provider")


async def check_provider(name: str, model: str | None, script: Path | None, base_url: str | None) -> None:
    """Make the provider once and close it: a missing key, SDK or script fails the command before anything starts."""
    try:
        provider = make_provider(name, model=model, script=script, base_url=base_url)
    except ProviderError as exc:
        raise provider_failure(exc, name) from None
    await provider.close()


def register(subparsers: Any) -> None:
    """Add `app` to `computer-use`'s subcommands (the `computer_use.commands` entry point)."""
    parser = subparsers.add_parser(
        "app",
        help="the host app: a chat console beside your Pages, and the MCP tool on 127.0.0.1:18100",
        description=APP_DESCRIPTION,
    )
    parser.add_argument(
        "--cdp-endpoint",
        type=cdp_endpoint,
        metavar="URL",
        help="attach to this browser (http://127.0.0.1:PORT) instead of launching a private Chromium",
    )
    parser.add_argument(
        "--headless",
        action="store_true",
        help="launch the private Chromium headless (default: headless when neither DISPLAY nor WAYLAND_DISPLAY is set)",
    )
    parser.add_argument("--port", type=port, default=18100, help="the MCP port (streamable HTTP) on 127.0.0.1")
    parser.add_argument(
        "--console-port",
        type=port,
        default=0,
        metavar="PORT",
        help="the console's port on 127.0.0.1 (default: 0, any free one)",
    )
    add_provider_arguments(parser, script_help="the script provider's task file (JSON; implies --provider script)")
    parser.add_argument(
        "--backend",
        choices=BACKENDS,
        help="the backend for new sessions in this run, not saved (default: the one chosen in the console's Settings)",
    )
    parser.add_argument(
        "--observation-tokens",
        type=positive,
        default=OBSERVATION_TOKENS,
        metavar="N",
        help="the cap of one observation in estimated tokens (the rest follows with next_offset)",
    )
    parser.add_argument(
        "--config-dir",
        type=Path,
        metavar="DIR",
        help=f"where the settings are saved (default: {default_config_dir()})",
    )
    parser.add_argument(
        "--demo",
        action="store_true",
        help="open a demo Page left of the chat and let the script provider subscribe on it, with live cards",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.demo and (args.provider not in (None, "script") or args.script is not None):
        raise UsageError("--demo runs its own script with the script provider", "leave out --provider and --script")
    provider = chosen_provider(args.provider, args.script)
    for number, option in ((args.port, "--port"), (args.console_port, "--console-port")):
        if number:  # busy: said now, before a browser starts (the app binds it again itself)
            listening_socket("127.0.0.1", number, option).close()
    headless = args.headless or not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))
    config = AppConfig(
        cdp_endpoint=args.cdp_endpoint,
        mcp_port=args.port,
        console_port=args.console_port,
        provider=provider,
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
    if not config.demo:
        name = config.provider or choose_provider()
        await check_provider(name, config.model, config.script, config.base_url)
    app = await HostApp.start(config)  # a failure stops what started, then `computer-use` prints its one line
    try:
        if not stop.is_set():  # a signal during start-up: stop without announcing anything
            print(f"MCP: {app.mcp_url}", flush=True)
            print(f"Console: {app.console_url}", flush=True)
            await stop.wait()
    finally:
        await app.close()
    return 0
