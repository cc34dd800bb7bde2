"""A one-browser farm on a second host of this machine: Chromium in a network namespace behind a front door.

`farm(server)` makes a namespace (`lab.netns`), starts Chromium in it (its debugging port on the namespace's own
loopback: nothing outside can reach it), a front door beside it on the namespace's address (`lab.front_door`: it
wants `Authorization: Bearer <a fresh secret>` and serves nothing but the browser's WebSocket) and a forwarder that
leads the fixture server's two origins (`localhost:PORT`, `127.0.0.1:PORT`) across the veth pair to `server`, which
listens on the lab's end too. Everything is ended and removed on the way out, whatever happened inside.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

from fixtures_sites.server import FixtureServer
from lab import forward, front_door
from lab.browser import Chromium, launch
from lab.netns import RemoteHost
from runtime.endpoint import BrowserEndpoint

ROOT = Path(__file__).resolve().parents[2]
HEADER = "Authorization"


@dataclass
class Farm:
    """The remote browser: where its door is and the header the door wants."""

    host: RemoteHost
    chromium: Chromium
    door: str
    """`ws://10.203.N.2:PORT/devtools/browser/<id>`: the only way in."""
    secret: str

    @property
    def headers(self) -> dict[str, str]:
        return {HEADER: f"Bearer {self.secret}"}

    def endpoint(self, url: str | None = None, headers: dict[str, str] | None = None) -> BrowserEndpoint:
        """The door (or `url`, a tap in front of it) with the right header, or with `headers` instead."""
        given = self.headers if headers is None else headers
        return BrowserEndpoint(url or self.door, tuple(given.items()))


@contextlib.asynccontextmanager
async def farm(server: FixtureServer) -> AsyncIterator[Farm]:
    """A running farm for `server`'s pages (see the module docstring); raises `lab.netns.NamespaceUnavailable`."""
    host = await RemoteHost.create()
    chromium: Chromium | None = None
    try:
        await server.listen(host.lab_address)
        chromium = await launch(wrapper=host.inside())
        secret = secrets.token_urlsafe(24)
        env = {**os.environ, "PYTHONPATH": str(ROOT), front_door.HEADER_ENV: f"{HEADER}: Bearer {secret}"}
        python = (sys.executable, "-m")
        ready = await host.start(
            *python, "lab.front_door", "--listen", host.address, "--upstream", chromium.ws_endpoint,
            ready=front_door.READY, env=env,
        )  # fmt: skip
        await host.start(*python, "lab.forward", str(server.port), host.lab_address, ready=forward.READY, env=env)
        yield Farm(host, chromium, ready.removeprefix(front_door.READY), secret)
    finally:
        if chromium is not None:
            await chromium.close()
        await host.close()
