"""Why a command could not start, as the person at the terminal needs it: one line on stderr that says what went
wrong and what to do, and an exit status per class of failure, the same for every `computer-use` command.

A script or a service manager tells the classes apart by status; a person reads the line. Nothing a failure
leaves would help either of them, so none leaves a traceback, a temporary folder or a child process (the parts
that started are stopped before the line is printed).
"""

from __future__ import annotations

import argparse
import errno
import socket
from typing import ClassVar
from urllib.parse import urlsplit

EXIT_STATUSES = {
    0: "done (or stopped by SIGINT/SIGTERM)",
    1: "failed otherwise (for `eval`: a question failed)",
    2: "usage: an unknown option or value, options that do not go together, a malformed URL or file name",
    3: "Chromium is missing or did not start",
    4: "the browser at --cdp-endpoint cannot be reached, or its front door refuses the headers",
    5: "a port to listen on is in use",
    6: "the model provider: a missing API key or SDK, a missing or malformed --script",
    130: "`eval` stopped by Ctrl-C before its last question",
}
"""The exit statuses of every `computer-use` command (README and docs/runtime.md list them)."""

ENDPOINT_SCHEMES = ("http", "https", "ws", "wss")


class StartupFailure(RuntimeError):
    """Something keeps a command from starting: `what` went wrong and `todo`, what to do about it."""

    status: ClassVar[int] = 1

    def __init__(self, what: str, todo: str) -> None:
        super().__init__(f"{what}; {todo}")
        self.what = what
        self.todo = todo

    def line(self, prog: str) -> str:
        """The one line for stderr: `<prog>: <what>; <what to do>`, whatever the parts held (newlines included)."""
        return " ".join(f"{prog}: {self.what}; {self.todo}".split())


class UsageError(StartupFailure):
    status = 2


class ChromiumUnavailable(StartupFailure):
    status = 3


class BrowserUnreachable(StartupFailure):
    status = 4


class PortBusy(StartupFailure):
    status = 5


class ProviderUnavailable(StartupFailure):
    status = 6


def cdp_endpoint(text: str) -> str:
    """An argparse type: a browser's debugging endpoint, `http://HOST:PORT`, or a browser WebSocket (`ws://` or
    `wss://`, its port the scheme's own when it names none), as Chromium prints it or a browser farm hands it out."""
    try:
        parts = urlsplit(text)
        port_given = parts.port is not None or parts.scheme in ("ws", "wss")
        valid = parts.scheme in ENDPOINT_SCHEMES and bool(parts.hostname) and port_given
    except ValueError:  # a port that is not a number, or out of range
        valid = False
    if not valid:
        raise argparse.ArgumentTypeError(
            f"{text[:200]!r} is not a browser's debugging endpoint; give http://HOST:PORT, where Chromium was started "
            "with --remote-debugging-port=PORT, or a browser farm's ws:// or wss:// URL"
        )
    return text


def listening_socket(host: str, port: int, option: str = "--port") -> socket.socket:
    """A TCP socket bound to `host:port`, made before anything else starts so that a busy port is `PortBusy` and
    nothing was launched in vain. The server it is handed to listens on it."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # restart despite TIME_WAIT, as uvicorn does
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise port_failure(exc, host, port, option) from None
    return sock


def port_failure(exc: OSError, host: str, port: int, option: str = "--port") -> StartupFailure:
    """A failed bind of `host:port` (chosen with `option`), as the person can act on it."""
    if exc.errno == errno.EADDRINUSE:
        return PortBusy(
            f"port {port} on {host} is in use",
            f"stop what listens there (`ss -ltnp` shows it) or choose another port with {option}",
        )
    return UsageError(f"cannot listen on {host}:{port} ({exc.strerror or exc})", f"choose another {option}")
