"""One role vocabulary on every backend (`runtime.roles`, which verify takes too), against real Chromium: the roles
the backends' tables once disagreed on, listed alike.

`@playwright/mcp` computes ARIA roles itself; chrome-devtools-mcp and open_claude_chrome read Chromium's accessibility
tree, which calls a colour field `ColorWell`, a date field `Date`, an image `image`. Before the tables were one,
chrome-devtools-mcp did not list a colour field at all, open_claude_chrome listed it as `ColorWell` without its value,
and open_claude_chrome listed no grid cell (a calendar's day in a date picker is one) and dropped a blockquote's name.
"""

from __future__ import annotations

import pytest
from aiohttp import web

from fixtures_sites.server import FixtureServer
from runtime.models import Action
from suites.backends.conftest import MakeAdapter

pytestmark = pytest.mark.req("adapter:one-role-vocabulary")

PATH = "/roles/"
PAGE = """<!doctype html><html lang=en><head><meta charset=utf-8><link rel=icon href='data:,'>
<title>Book a pitch</title></head><body><main><h1>Book a pitch</h1>
<label>Tent colour <input type=color value="#2e7d32"></label>
<label>Arrival <input type=date value="2025-06-01"></label>
<label>Arrival time <input type=time value="14:30"></label>
<label>Departure <input type=datetime-local></label>
<label>Month <input type=month></label>
<div role=grid aria-label="Pitches">
  <div role=row><span role=columnheader>Pitch</span><span role=columnheader>Price</span></div>
  <div role=row><span role=gridcell tabindex=0>Lakeside 4</span><span role=gridcell tabindex=-1>24 EUR</span></div>
</div>
<blockquote aria-label="Ranger's advice"><p>Turn around before dark.</p></blockquote>
<img alt="Trail map" src="data:image/gif;base64,R0lGODlhAQABAAAAACw=">
</main></body></html>"""
LISTED = [
    ("textbox", "Tent colour", "#2e7d32"),
    ("textbox", "Arrival", "2025-06-01"),
    ("textbox", "Arrival time", "14:30"),
    ("textbox", "Departure", None),
    ("textbox", "Month", None),
    ("gridcell", "Lakeside 4", None),
    ("gridcell", "24 EUR", None),
]
"""What `@playwright/mcp`, the default backend, lists: every input type without an ARIA role of its own is a
`textbox` (with its value), every cell of a grid a `gridcell`."""


async def page(request: web.Request) -> web.Response:
    return web.Response(text=PAGE, content_type="text/html")


async def test_every_backend_lists_colour_date_and_time_fields_and_grid_cells_alike_and_reads_an_image_s_name(
    backend: str, make_adapter: MakeAdapter, fixture_server: FixtureServer
) -> None:
    fixture_server.set_route(PATH, page)
    adapter = await make_adapter()
    await adapter.act(Action(type="navigate", url=fixture_server.url(PATH)), None)
    snapshot = await adapter.snapshot()
    assert [(e.role, e.name, e.value) for e in snapshot.elements] == LISTED
    lines = snapshot.text.splitlines()
    assert "Trail map" in lines, lines  # Chromium's `image` is `img`: its name is text
    # A named blockquote labels its quote, as any named container does. chrome-devtools-mcp's upstream leaves out a
    # container nothing in it can focus (Puppeteer's "interesting" nodes), so only its text is there.
    if backend != "chrome_devtools_mcp":
        assert "Ranger's advice" in lines, lines
    assert "Turn around before dark." in lines, lines
