"""Deliberately broken variants of `computer-use connect` for the negative controls, run as a client's stdio server:
`python -m suites.host.connect_variant <variant> <config dir>`.

Each is `host.connect.serve` with a `Bridge` subclass (its public seam) that restores what connect did before it
authenticated the app, reached it over its private socket or fitted a refusal's hint to its client; the rest is the
same command.
"""

from __future__ import annotations

import asyncio
import socket
import sys
from pathlib import Path

import httpx2
from mcp.types import CallToolResult

from host.connect import Bridge, serve


class TrustsAnySocket(Bridge):
    """Pairs with whatever listens at the socket's path: no owner, mode or peer-uid check."""

    def authenticate_path(self) -> None:
        self.path.lstat()  # FileNotFoundError while nothing is there, as before

    def authenticate_peer(self, sock: socket.socket) -> None:
        return None


class OverTCP(Bridge):
    """Forwards tool calls to the app's TCP MCP URL, as connect did before the private MCP socket."""

    def http_client(self) -> httpx2.AsyncClient:
        return httpx2.AsyncClient(timeout=httpx2.Timeout(30.0, read=300.0))


class RuntimeHints(Bridge):
    """Passes the runtime's refusals on as they came: the hint written for a host that mints its own tokens."""

    def fit_hint(self, result: CallToolResult) -> CallToolResult:
        return result


VARIANTS: dict[str, type[Bridge]] = {
    "trusts_any_socket": TrustsAnySocket,
    "over_tcp": OverTCP,
    "runtime_hints": RuntimeHints,
}

if __name__ == "__main__":
    variant, config_dir = sys.argv[1:3]
    sys.exit(asyncio.run(serve(Path(config_dir), bridge_class=VARIANTS[variant])))
