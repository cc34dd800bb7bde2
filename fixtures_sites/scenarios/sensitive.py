"""sensitive: an account & billing page whose "Pay now" and "Delete account" each ask `confirm()` first.

Each is a plain form whose submit handler calls `confirm()`; only on confirmation does it POST `/sensitive/pay`
or `/sensitive/delete` (both writes). Dismissing the dialog sends nothing. "Email me these invoices" is harmless
by name but asks `confirm()` too before it POSTs `/sensitive/invoices`: a dialog the runtime cannot foresee, which
only the user may answer.
"""

from fixtures_sites.routes import Route, done_page, page

SCENARIO = "sensitive"

ROUTES = (
    Route("GET", "/sensitive/", page("sensitive/index.html"), SCENARIO),
    Route(
        "POST",
        "/sensitive/pay",
        done_page("Payment received", "We charged €128.40 to your Visa ending 4242. Order NW-48213 is confirmed."),
        SCENARIO,
        write=True,
    ),
    Route(
        "POST",
        "/sensitive/invoices",
        done_page("Invoices sent", "We emailed 2 invoices to alex.morgan@example.com."),
        SCENARIO,
        write=True,
    ),
    Route(
        "POST",
        "/sensitive/delete",
        done_page("Account deleted", "Your account and all its data have been permanently deleted."),
        SCENARIO,
        write=True,
    ),
)
