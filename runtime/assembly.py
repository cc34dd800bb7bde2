"""Assembling the runtime: one browser connection, the Page Registry, the host's context store, the service and
its MCP server. Used by `computer-use serve` and, in-process, by the lab.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from importlib.metadata import entry_points

import aiohttp

from runtime.capability.contexts import ContextStore, Host
from runtime.cdp import CDPConnection
from runtime.endpoint import BrowserEndpoint, EndpointRefused
from runtime.gateway import ScopedGateway
from runtime.models import Page
from runtime.reading.probe import read_preview
from runtime.registry.pages import PageRegistry
from runtime.service import BackendFactory, ComputerUseService, Parts, Settings
from runtime.sessions import GatewayFactory
from runtime.startup import BrowserUnreachable
from runtime.transports.mcp.server import ComputerUseServer, build_server

BACKENDS_GROUP = "computer_use.backends"
"""The entry-point group backends register in (`[project.entry-points."computer_use.backends"]`): name = factory.
The runtime never imports a backend by name; a third-party backend installs like a pytest plugin."""


def default_backends() -> dict[str, BackendFactory]:
    """Every installed backend, by its entry-point name."""
    return {entry.name: entry.load() for entry in entry_points(group=BACKENDS_GROUP)}


def installed_backends() -> tuple[str, ...]:
    """The names a backend setting may take: every installed backend, the default (`Settings.backend`) first.

    Names only: nothing is imported, so a settings screen can list a backend whose module is broken (and the
    session that tries it says why)."""
    names = [entry.name for entry in entry_points(group=BACKENDS_GROUP)]
    return tuple(sorted(names, key=lambda name: name != Settings.backend))


@dataclass
class Runtime:
    cdp: CDPConnection
    registry: PageRegistry
    host: Host
    service: ComputerUseService
    server: ComputerUseServer

    @classmethod
    async def connect(
        cls,
        cdp_endpoint: str | BrowserEndpoint,
        backends: Mapping[str, BackendFactory] | None = None,
        settings: Settings | None = None,
        store: ContextStore | None = None,
        gateway_factory: GatewayFactory = ScopedGateway,
        service_type: type[ComputerUseService] = ComputerUseService,
        parts: Parts | None = None,
    ) -> Runtime:
        """Connect to a browser's CDP endpoint (`http://host:port`, or a farm's browser WebSocket with the headers
        its front door wants: `runtime.endpoint.BrowserEndpoint`) and assemble the runtime around it; a
        browser that cannot be reached there is `BrowserUnreachable`.

        `store` is the hosts' shared context store: pass one to set the token lifetime (or the clock) it mints
        and verifies with; by default tokens live `runtime.capability.token.TOKEN_LIFETIME` seconds.
        `gateway_factory` makes each session's scoped gateway (the lab injects one that puts a tap in front);
        `parts` are the service's replaceable parts (`runtime.service.Parts`: the suites assemble deliberately
        broken runtimes from them, from outside the runtime); `service_type` is the service class (a
        subclass may wrap how a call is served, through its public `handle` or `dispatch`).
        """
        try:
            cdp = await CDPConnection.connect(cdp_endpoint)
        except EndpointRefused as exc:  # it answered: a front door that wants other headers, not a missing browser
            raise BrowserUnreachable(exc.what, exc.todo) from None
        except (aiohttp.ClientError, OSError, TimeoutError, ValueError, KeyError) as exc:
            raise BrowserUnreachable(
                f"no browser answers at {cdp_endpoint} ({type(exc).__name__}: {str(exc)[:200]})",
                "start Chromium with --remote-debugging-port=PORT and give http://127.0.0.1:PORT, or let computer-use "
                "launch a private Chromium (`serve --launch`; `app` without --cdp-endpoint)",
            ) from None
        registry = PageRegistry(cdp)
        await registry.start()
        store = store if store is not None else ContextStore()

        async def preview(page: Page) -> str:
            return await read_preview(cdp, page.cdp_target_id)

        service = service_type(
            cdp_endpoint,
            cdp,
            registry,
            store,
            backends if backends is not None else default_backends(),
            settings,
            gateway_factory,
            parts,
        )
        return cls(cdp, registry, Host(registry, store, preview), service, build_server(service))

    def new_host(self) -> Host:
        """Another host on this runtime (a second chat or app on the same browser), with turns of its own: its
        turns never stale another host's tokens, nor theirs its own."""
        return Host(self.registry, self.host.store, self.host.read_preview)

    async def close(self) -> None:
        await self.service.close()
        await self.cdp.close()
