"""canary: a Page that carries a string the test chose, in its URL, `<title>` and content.

Open `/canary/?c=CANARY-<hex>`: the value is echoed into the title, a heading and a paragraph. Isolation proofs
give every Page an agent must not read its own canary and then count the canary's bytes where a leak would show
(a backend's CDP traffic, a tool result). The value is restricted to `[A-Za-z0-9-]` and 64 characters, so it
reaches the page verbatim and HTML-escaped at once, and a JSON frame carries it byte for byte; anything else is
answered 400. Without `c` the page shows no canary.
"""

from __future__ import annotations

import html
import re

from aiohttp import web

from fixtures_sites.routes import PAGES, Route, render

SCENARIO = "canary"

VALID = re.compile(r"[A-Za-z0-9-]{1,64}")
NONE = "no canary"


async def canary_page(request: web.Request) -> web.StreamResponse:
    value = request.query.get("c", NONE)
    if value != NONE and not VALID.fullmatch(value):
        return web.Response(status=400, text="c must be 1-64 characters of [A-Za-z0-9-]")
    text = (PAGES / "canary" / "index.html").read_text(encoding="utf-8").replace("{{CANARY}}", html.escape(value))
    return web.Response(text=render(text, request), content_type="text/html")


ROUTES = (Route("GET", "/canary/", canary_page, SCENARIO),)
