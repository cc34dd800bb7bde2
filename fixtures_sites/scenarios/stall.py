"""stall: a slow back-office page whose write, navigation and fetch are all held until the test releases them.

(a) the expense form POSTs `/stall/write` (write and stall: the write is counted on arrival, its answer held);
(b) the "Quarterly report" link navigates to `/stall/slow-page` (stall: the HTML is held);
(c) "Refresh balance" fetches `/stall/fetch` (stall) and shows the JSON answer's `balance` (or "ok").
Every stall=True route is held, so what a test passes to `Stall.release()` is what the browser gets; the
handlers below are only what an override or a future un-held use would serve.
"""

from fixtures_sites.routes import Route, done_page, json_ok, page

SCENARIO = "stall"

ROUTES = (
    Route("GET", "/stall/", page("stall/index.html"), SCENARIO),
    Route(
        "POST",
        "/stall/write",
        done_page("Expense submitted", "Your expense report was submitted for approval."),
        SCENARIO,
        write=True,
        stall=True,
    ),
    Route("GET", "/stall/slow-page", page("stall/slow-page.html"), SCENARIO, stall=True),
    Route("GET", "/stall/fetch", json_ok({"balance": "€1,204.50"}), SCENARIO, stall=True),
)
