"""Admission: only the backend the runtime handed the gateway's URL to may reach it.

Every request and handshake is admitted (`Admission.admit`) in this order, each refusal recorded in the ledger and
never forwarded:

1. Who calls (`check_caller`): the peer's socket must belong to the gateway's own uid (`runtime.loopback`), else
   403. Another local user reaches every loopback port; with a leaked secret it must still get nothing.
2. `Host` must name the gateway's own address and port, else 421: a DNS-rebound page's requests name its host.
3. A request carrying `Origin`, `Sec-Fetch-Site` or any `Sec-Fetch-*` header but `Sec-Fetch-Mode` comes from a web
   page (browsers add `Origin` to every WebSocket handshake and cross-origin request, `Sec-Fetch-Site`/`-Dest`/
   `-Mode` to every request; CDP clients send none, but Node's `fetch()` sends `Sec-Fetch-Mode`): 403, secret or
   not.
4. Every gateway URL carries a per-gateway secret as its first path segment
   (`http://127.0.0.1:PORT/<secret>/json/version`, `ws://127.0.0.1:PORT/<secret>/devtools/browser/…`), because any
   page's script can open a WebSocket to any loopback port (not subject to CORS) and *send* a simple `fetch()`
   there: a request without it is answered 404. The backend gets the URL in a 0600 file, never on its command line.
"""

from __future__ import annotations

import hmac
import os
import secrets

import aiohttp
from aiohttp import web

from runtime.gateway.allowlist import refusal_message
from runtime.gateway.records import Ledger
from runtime.loopback import peer_uid

NODE_FETCH = "sec-fetch-mode"
"""The one `Sec-Fetch-*` header a CDP client sends: Node's `fetch()` adds it to every request (`check_web`)."""


class Admission:
    """The gateway's secret and its address, and the checks every request passes before it is routed."""

    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger
        self.secret = secrets.token_urlsafe(32)
        self.hostport = ""
        """`127.0.0.1:PORT`, once the gateway listens: what `Host` must name."""

    @property
    def base(self) -> str:
        """`127.0.0.1:PORT/<secret>`: the gateway's address and secret, what every URL it hands out starts with."""
        if not self.hostport:
            raise RuntimeError("start() the gateway first")
        return f"{self.hostport}/{self.secret}"

    def admit(self, request: web.Request) -> str | web.Response:
        """The path after the secret, or the answer refusing the request (recorded, never forwarded).

        The caller, `Host`, `Origin` and `Sec-Fetch-*` are checked before the secret, so a refused caller or a page
        learns nothing about the secret: every request it can make gets the same answer. The secret is compared in
        constant time, and never written to a refusal or a log."""
        secret, _, rest = request.path[1:].partition("/")
        known = hmac.compare_digest(secret.encode(), self.secret.encode())
        path = request.path
        if known:
            path = f"/<secret>/{rest}"
        elif len(secret) >= 16:  # someone's try at a secret, maybe a near miss of this one: never recorded
            path = f"/<not the secret>/{rest}"
        shown = f"HTTP {request.method} {path[:200]}"
        for status, check in ((403, self.check_caller), (421, self.check_host), (403, self.check_web)):
            reason = check(request)
            if reason is not None:
                self.ledger.refuse(0, shown, reason, None)
                return web.Response(status=status, text=refusal_message(f"{request.method} request", reason))
        if not known:
            self.ledger.refuse(0, shown, "no or wrong gateway secret in the path", None)
            return web.Response(status=404, text="computer_use gateway: no such endpoint")
        return "/" + rest

    def check_caller(self, request: web.Request) -> str | None:
        """Why the caller may not use this gateway, or None: its socket must be owned by the gateway's own uid.

        The secret keeps out whoever does not know it; this keeps out every other local user who does (a leaked
        URL, a backend's command line read from `ps`). Unknown counts as another user."""
        transport = request.transport
        peer = transport.get_extra_info("peername") if transport is not None else None
        local = transport.get_extra_info("sockname") if transport is not None else None
        if not peer or not local:
            return "the caller's address is unknown"
        uid = peer_uid(peer[:2], local[:2])
        if uid is None:
            return "the caller's uid cannot be found (no such loopback socket: not a local process, or gone)"
        if uid != os.geteuid():
            return f"the caller runs as uid {uid}, not as the gateway's uid {os.geteuid()}"
        return None

    def check_host(self, request: web.Request) -> str | None:
        """Why `Host` is wrong, or None: it must name the gateway's own address and port, as every URL it hands out
        does (a DNS-rebound page's requests name the attacker's host)."""
        host = request.headers.get(aiohttp.hdrs.HOST)
        if host != self.hostport:
            return f"the request names Host {(host or '')[:100]!r}, not the gateway's {self.hostport}"
        return None

    @staticmethod
    def check_web(request: web.Request) -> str | None:
        """Why the request comes from a web page, or None: browsers send `Origin` on every WebSocket handshake and
        cross-origin request, and `Sec-Fetch-Site` and `Sec-Fetch-Dest` on every request to a loopback address
        (forbidden headers: page script cannot drop them); CDP clients send neither. `Sec-Fetch-Mode` alone is
        Node's own `fetch()` (undici sends `Sec-Fetch-Mode: cors` on every request; puppeteer, and so
        chrome-devtools-mcp, reads `/json/version` with it): let through."""
        origin = request.headers.get(aiohttp.hdrs.ORIGIN)
        if origin is not None:
            return f"the request carries Origin {origin[:100]!r}: it comes from a web page"
        fetch = sorted(
            name for name in request.headers if name.lower().startswith("sec-fetch-") and name.lower() != NODE_FETCH
        )
        if fetch:
            return f"the request carries {', '.join(fetch)[:100]}: it comes from a web page"
        return None
