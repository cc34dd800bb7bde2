"""A browser's CDP endpoint as a browser farm hands it out: a URL and the headers its front door wants.

Chromium's own endpoint is `http://host:port`, with `/json/version` naming its browser WebSocket. A farm (Selenium
Grid 4's `se:cdp`, browserless) hands out the WebSocket itself, `ws://…` or `wss://…`, often behind a front door
that wants a header (`Authorization: Bearer …`) and serves no `/json` at all. The runtime's own connection
(`runtime.cdp`) and every scoped gateway's upstream (`runtime.gateway.upstream`) connect with the headers; the
backends behind the gateways never see them.

Header values are secrets: a `BrowserEndpoint` prints as its URL and the header names only. The CLI takes them from
`--cdp-header`, `--cdp-headers-file` or `$COMPUTER_USE_CDP_HEADERS` (`headers_from`), so none need sit on argv.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

HEADERS_ENV = "COMPUTER_USE_CDP_HEADERS"
"""Headers for the browser endpoint, one `Name: value` a line (the environment's way to keep them off argv)."""
WEBSOCKET_SCHEMES = ("ws://", "wss://")
MAX_HEADERS = 32
MAX_HEADER_CHARS = 8192
FORBIDDEN = frozenset({"host", "connection", "upgrade", "content-length", "transfer-encoding"})
"""Headers the WebSocket handshake sets itself: one given here would break it."""


class HeaderError(ValueError):
    """A header line that is not `Name: value` (or one the handshake owns); the message says which and why."""


class EndpointRefused(ConnectionError):
    """The browser endpoint answered the handshake with an HTTP error: its front door refused us (a wrong or missing
    header, most likely). One line, naming the status and what to check; never a header's value."""

    def __init__(self, what: str, todo: str) -> None:
        super().__init__(f"{what}; {todo}")
        self.what = what
        self.todo = todo


@dataclass(frozen=True)
class BrowserEndpoint:
    """Where the browser is (`url`: `http://host:port`, `unix:/path`, `ws://…` or `wss://…`) and the headers every
    connection to it carries."""

    url: str
    headers: tuple[tuple[str, str], ...] = ()

    @property
    def websocket_only(self) -> bool:
        """The URL is the browser's WebSocket itself: there may be no `/json` beside it."""
        return self.url.startswith(WEBSOCKET_SCHEMES)

    @property
    def header_map(self) -> dict[str, str]:
        return dict(self.headers)

    @property
    def shown(self) -> str:
        """The URL without its query or credentials (a farm may put a token there), for messages and logs."""
        parts = urlsplit(self.url)
        if parts.scheme not in ("http", "https", "ws", "wss"):
            return self.url
        return f"{parts.scheme}://{parts.hostname or ''}{f':{parts.port}' if parts.port else ''}{parts.path}"

    def __str__(self) -> str:
        return self.shown

    def __repr__(self) -> str:
        names = ", ".join(name for name, _ in self.headers)
        return f"BrowserEndpoint({self.shown!r}, headers: {names or 'none'})"


def endpoint_of(value: str | BrowserEndpoint) -> BrowserEndpoint:
    """`value` as a `BrowserEndpoint` (a bare URL carries no headers)."""
    return value if isinstance(value, BrowserEndpoint) else BrowserEndpoint(value)


def parse_header(line: str) -> tuple[str, str]:
    """`Name: value` as (name, value); HeaderError if it is not one (nothing that may be the value is quoted back:
    a line without a colon may be a secret whole)."""
    name, colon, value = line.partition(":")
    name, value = name.strip(), value.strip()
    if not colon:
        raise HeaderError("a CDP header must be 'Name: value' on one line; one has no colon")
    if not name or any(c in name for c in " \t\r\n") or "\n" in value or "\r" in value:
        raise HeaderError(f"a CDP header must be 'Name: value' on one line; not {name[:40]!r}")
    if name.lower() in FORBIDDEN:
        raise HeaderError(f"the CDP header {name} is set by the WebSocket handshake itself; leave it out")
    return name, value


def parse_headers(lines: Iterable[str]) -> tuple[tuple[str, str], ...]:
    """Every non-blank line that is not a `#` comment, as a header; bounded in count and length."""
    headers = tuple(parse_header(line) for line in lines if line.strip() and not line.lstrip().startswith("#"))
    if len(headers) > MAX_HEADERS or sum(len(n) + len(v) for n, v in headers) > MAX_HEADER_CHARS:
        raise HeaderError(f"at most {MAX_HEADERS} CDP headers of {MAX_HEADER_CHARS} characters in all")
    return headers


def headers_from(
    given: Iterable[str] = (), file: Path | None = None, environ: Mapping[str, str] = os.environ
) -> tuple[tuple[str, str], ...]:
    """The headers of `--cdp-header` (each `Name: value`), `--cdp-headers-file` (one a line) and `$HEADERS_ENV`
    (one a line), in that order; HeaderError on a malformed one, OSError if the file cannot be read."""
    lines = [*given]
    if file is not None:
        lines += file.read_text(encoding="utf-8").splitlines()
    lines += environ.get(HEADERS_ENV, "").splitlines()
    return parse_headers(lines)


def refused(endpoint: BrowserEndpoint, status: int) -> EndpointRefused:
    """The error for a handshake the endpoint answered with HTTP `status`."""
    sent = ", ".join(name for name, _ in endpoint.headers) or "no header"
    return EndpointRefused(
        f"the browser endpoint {endpoint.shown} refused the connection with HTTP {status} (sent {sent})",
        f"give the header its front door expects with --cdp-header 'Name: value', --cdp-headers-file or ${HEADERS_ENV}",
    )
