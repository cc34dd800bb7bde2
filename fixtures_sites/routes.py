"""Routes as data: each scenario declares its routes, and which of them are real writes, in one table.

A `Route` marked `write=True` gets exactly one ledger row per request that reaches the server, recorded before
its handler runs; `attacker=True` routes record every hit; `stall=True` routes hold their answer until the test
releases them. Handlers never touch the ledger themselves, so no scenario can forget to count a write.
"""

from __future__ import annotations

import html
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

from aiohttp import web

PAGES = Path(__file__).parent / "pages"

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@dataclass(frozen=True)
class Route:
    method: str  # "GET", "POST", or "*" for any
    path: str
    handler: Handler
    scenario: str
    write: bool = False
    attacker: bool = False
    stall: bool = False
    folder: bool = False
    """The route answers every path under `path` (which ends in `/`): a folder of files served as they are (the real
    apps' packages), never a page the lab wrote. An exact route of the same path wins."""

    def serves(self, path: str) -> bool:
        return path == self.path or (self.folder and path.startswith(self.path))


def origins(request: web.Request) -> dict[str, str]:
    """This request's origin and the fixture server's other origin (localhost <-> 127.0.0.1, same port)."""
    host = request.host
    port = host.rsplit(":", 1)[1] if ":" in host else "80"
    here = f"http://{host}"
    other = f"http://127.0.0.1:{port}" if host.startswith("localhost") else f"http://localhost:{port}"
    return {"ORIGIN": here, "OTHER_ORIGIN": other}


def render(text: str, request: web.Request, values: dict[str, str] | None = None) -> str:
    """Fill `{{NAME}}` placeholders: ORIGIN, OTHER_ORIGIN and any scenario-specific values."""
    for key, value in {**origins(request), **(values or {})}.items():
        text = text.replace("{{" + key + "}}", value)
    return text


def page(relative: str, content_type: str = "text/html") -> Handler:
    """A handler serving `pages/<relative>` with its placeholders filled for the requesting origin."""
    path = PAGES / relative

    async def handler(request: web.Request) -> web.StreamResponse:
        return web.Response(text=render(path.read_text(encoding="utf-8"), request), content_type=content_type)

    return handler


def done_page(title: str, message: str) -> Handler:
    """A small confirmation page, the kind a real site shows after a successful POST."""

    async def handler(request: web.Request) -> web.StreamResponse:
        body = (
            f"<!doctype html><html lang=en><head><meta charset=utf-8><link rel=icon href='data:,'>"
            f"<title>{html.escape(title)}</title></head>"
            f"<body><main><h1>{html.escape(title)}</h1><p role=status>{html.escape(message)}</p>"
            f'<p><a href="javascript:history.back()">Back</a></p></main></body></html>'
        )
        return web.Response(text=body, content_type="text/html")

    return handler


def json_ok(payload: dict[str, object] | None = None) -> Handler:
    async def handler(request: web.Request) -> web.StreamResponse:
        return web.Response(text=json.dumps({"ok": True, **(payload or {})}), content_type="application/json")

    return handler


def page_with(relative: str, values: Callable[[web.Request], dict[str, str]]) -> Handler:
    """Like `page()`, plus scenario placeholders computed per request by `values(request)`.

    The scenario values are filled first, so fragments they return may themselves use `{{ORIGIN}}` and
    `{{OTHER_ORIGIN}}`. Values are inserted verbatim: escape anything that came from the request.
    """
    path = PAGES / relative

    async def handler(request: web.Request) -> web.StreamResponse:
        text = path.read_text(encoding="utf-8")
        for key, value in values(request).items():
            text = text.replace("{{" + key + "}}", value)
        return web.Response(text=render(text, request), content_type="text/html")

    return handler


async def read_fields(request: web.Request) -> dict[str, str]:
    """A POST body as flat fields, whether the page sent a form (urlencoded/multipart) or a JSON object.

    Malformed or non-object bodies give `{}`, so a write handler never fails on what a probe or agent sent.
    """
    if request.content_type == "application/json":
        try:
            data = await request.json()
        except ValueError:
            return {}
        return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}
    return {k: v for k, v in (await request.post()).items() if isinstance(v, str)}
