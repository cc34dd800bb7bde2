"""popup: a newsletter page that opens a second window, by `window.open()` and by a `target=_blank` link.

`/popup/child` (the popup) carries a "Confirm subscription" form that POSTs `/popup/confirm` (write); it sends
`via` = "link" when opened by the link (`?via=link`), else "window".
"""

from __future__ import annotations

from aiohttp import web

from fixtures_sites.routes import Route, done_page, page, page_with

SCENARIO = "popup"


def _child_values(request: web.Request) -> dict[str, str]:
    return {"VIA": "link" if request.query.get("via") == "link" else "window"}


ROUTES = (
    Route("GET", "/popup/", page("popup/index.html"), SCENARIO),
    Route("GET", "/popup/child", page_with("popup/child.html", _child_values), SCENARIO),
    Route(
        "POST",
        "/popup/confirm",
        done_page("Subscription confirmed", "You're subscribed to The Weekly Field Notes."),
        SCENARIO,
        write=True,
    ),
)
