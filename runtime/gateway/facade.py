"""The scoped CDP gateway: a per-ComputerSession CDP endpoint that shows its client exactly one page.

Four rooms behind one facade, each in its own module:

- `admission`: the secret in every URL and who may connect (the gateway's own uid, its own `Host`, no web page);
- `scope`: the bound target and its children, what a client may name, read and hear, the `/json` discovery cut to
  the bound page, and the bound page's current document;
- `relay`: one upstream connection per client, ids remapped, answers passed on unparsed where possible, the `init`
  lifecycle event Chromium does not replay;
- `watch`: the gateway's own discovery connection, reporting popups, crashes and losses of the bound page.

They share a `records.Ledger` (refusals, absorptions, forwarded methods, events) and reach the browser through
`upstream.Upstream`. A request is routed here: admitted, then `/json…` to the scope, `/devtools/…` to the relay.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

from aiohttp import web

from runtime.endpoint import BrowserEndpoint
from runtime.gateway.admission import Admission
from runtime.gateway.allowlist import Policy, static_verdict
from runtime.gateway.records import Absorbed, GatewayEvent, Ledger, RefusedCommand
from runtime.gateway.relay import Relay
from runtime.gateway.scope import TargetScope
from runtime.gateway.upstream import Upstream
from runtime.gateway.watch import Watch
from runtime.listeners import BACKLOG, BoundedAppRunner


class ScopedGateway:
    """A CDP endpoint (`http://127.0.0.1:PORT/<secret>`) through which a client sees and touches only `target_id`."""

    def __init__(
        self,
        endpoint: str | BrowserEndpoint,
        target_id: str,
        *,
        on_event: Callable[[GatewayEvent], None] | None = None,
        policy: Policy = static_verdict,
        admission: type[Admission] = Admission,
        scope: type[TargetScope] = TargetScope,
        relay: type[Relay] = Relay,
    ) -> None:
        """`endpoint`: the browser's, `http://host:port`, a private Chromium's `unix:/path` (`runtime.pipe`) or a
        farm's browser WebSocket with its headers (`runtime.endpoint`). `policy`: the static method table
        (`allowlist.static_verdict`). `admission`, `scope` and `relay` are the rooms' classes, public seams like
        `policy`: whoever builds the gateway may hand in another room."""
        self.target_id = target_id
        self.ledger = Ledger(target_id, on_event)
        self.upstream = Upstream(endpoint)
        self.admission = admission(self.ledger)
        self.scope = scope(target_id, self.ledger, policy)
        self.relay = relay(self.upstream, self.scope, self.ledger)
        self.watch = Watch(self.upstream, self.scope, self.ledger)
        self._runner: web.AppRunner | None = None

    @property
    def lost(self) -> str | None:
        """Why the bound page is out of reach (crashed, destroyed, detached, the browser connection closed), once
        it is; None while it lives. Sticky. The one owner of the target's state: the runtime's session and the
        backend behind this gateway both ask here (`BackendConfig.target_state`)."""
        return self.ledger.lost

    @property
    def refusals(self) -> list[RefusedCommand]:
        return self.ledger.refusals

    @property
    def absorbed(self) -> list[Absorbed]:
        return self.ledger.absorbed

    @property
    def forwarded(self) -> Counter[tuple[str, str]]:
        """(level, method) → commands let through (`Ledger.forwarded`)."""
        return self.ledger.forwarded

    @property
    def events(self) -> list[GatewayEvent]:
        return self.ledger.events

    @property
    def policy(self) -> Policy:
        return self.scope.policy

    @policy.setter
    def policy(self, policy: Policy) -> None:
        self.scope.policy = policy

    @property
    def document(self) -> str | None:
        """The loaderId of the bound page's current document (`TargetScope.note_document`)."""
        return self.scope.document

    @property
    def documents(self) -> int:
        return self.scope.documents

    @property
    def target_info(self) -> dict[str, Any]:
        return self.watch.target_info

    async def start(self) -> str:
        """Watch the bound target upstream, then listen; returns the CDP endpoint URL for `--cdp-endpoint`."""
        try:
            await self.upstream.open()
            await self.watch.start()
            app = web.Application()
            app.router.add_route("*", "/{tail:.*}", self._serve)
            self._runner = BoundedAppRunner(app, access_log=None, handle_signals=False, shutdown_timeout=2.0)
            await self._runner.setup()
            site = web.TCPSite(self._runner, "127.0.0.1", 0, backlog=BACKLOG)
            await site.start()
            port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        except BaseException:
            await self.close()
            raise
        self.admission.hostport = f"127.0.0.1:{port}"
        return self.url

    @property
    def url(self) -> str:
        """`http://127.0.0.1:PORT/<secret>`: what `--cdp-endpoint` / `--browserUrl` take. Both CDP clients append
        `/json/version` to the path (playwright-core's `urlToWSEndpoint`, puppeteer's `getWSEndpointURL`), and so
        does `runtime.cdp.CDPConnection.connect`, so the secret survives into every request they make."""
        return f"http://{self.admission.base}"

    async def close(self) -> None:
        """Close every client connection, its upstream connection and the gateway's own browser connection."""
        await self.relay.close()
        await self.watch.close()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        await self.upstream.close()

    async def __aenter__(self) -> ScopedGateway:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def _serve(self, request: web.Request) -> web.StreamResponse:
        """Every HTTP request and WebSocket handshake: admitted first, then routed by the path after the secret."""
        admitted = self.admission.admit(request)
        if isinstance(admitted, web.Response):
            return admitted
        if admitted == "/json" or admitted.startswith("/json/"):
            return await self.scope.serve_json(admitted, self.upstream, self.admission.base)
        parts = admitted.split("/")  # ["", "devtools", kind, id]
        if request.method == "GET" and len(parts) == 4 and parts[1] == "devtools":
            return await self.relay.serve_ws(request, parts[2], parts[3])
        return web.Response(status=404, text=f"computer_use gateway: no such endpoint {admitted}")
