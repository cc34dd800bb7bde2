"""faults: a point-of-sale kiosk whose pages fail the way real pages do, for the reliability suite.

(a) `/faults/` "Finish and close window" calls `window.close()` (Chromium lets a script close a top-level window
    that was opened by script or has a single history entry: open this Page straight at its URL to have it close);
(b) `/faults/` "Recalculate forecast" fetches `/faults/forecast` synchronously (a held route): the page's main thread
    answers nothing until the test releases it, the way a page stuck in a script hangs, without spinning a core;
(c) `/faults/dialog-on-load?kind=alert|confirm` opens that dialog from an inline script while the page is still
    loading. Only once someone answers it does the page POST `/faults/dialog-answered` (write): a ledger row is
    the proof that the dialog was answered, and by then the page shows what the answer was;
(d) `/faults/sync` "Sync now" (or `syncNow(label, errors)`, which resolves when it is over) logs `errors` console
    errors of hostile text and fetches `/faults/sync-missing?token=...` (no route: 404) and port 9, which
    Chromium refuses to fetch (`net::ERR_UNSAFE_PORT`), both with a token in the query string: the diagnostics proofs.
"""

from __future__ import annotations

from aiohttp import web

from fixtures_sites.routes import Route, json_ok, page, page_with

SCENARIO = "faults"

DIALOGS = {
    "alert": 'alert("Your session was restored after a browser update.")',
    "confirm": 'confirm("Restore the unsaved sale from your last visit?")',
}


def _dialog(request: web.Request) -> dict[str, str]:
    kind = request.query.get("kind", "confirm")
    return {"KIND": kind if kind in DIALOGS else "confirm", "DIALOG": DIALOGS.get(kind, DIALOGS["confirm"])}


ROUTES = (
    Route("GET", "/faults/", page("faults/index.html"), SCENARIO),
    Route("GET", "/faults/forecast", json_ok(), SCENARIO, stall=True),
    Route("GET", "/faults/sync", page("faults/sync.html"), SCENARIO),
    Route("GET", "/faults/dialog-on-load", page_with("faults/dialog-on-load.html", _dialog), SCENARIO),
    Route("POST", "/faults/dialog-answered", json_ok(), SCENARIO, write=True),
)
