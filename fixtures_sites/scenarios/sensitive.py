"""sensitive: an account & billing page whose "Pay now" and "Delete account" each ask `confirm()` first.

Each is a plain form whose submit handler calls `confirm()`; only on confirmation does it POST `/sensitive/pay`
or `/sensitive/delete` (both writes). Dismissing the dialog sends nothing.
"""

from fixtures_sites.routes import Route, done_page, page

SCENARIO = "sensitive"

ROUTES = (
    Route("GET", "/sensitive/", page("sensitive/index.html"), SCENARIO),
    Route("POST", "/sensitive/pay", done_page("Payment received", "We charged €128.40 to your Visa ending 4242. "
                                              "Order NW-48213 is confirmed."), SCENARIO, write=True),
    Route("POST", "/sensitive/delete", done_page("Account deleted", "Your account and all its data have been "
                                                 "permanently deleted."), SCENARIO, write=True),
)
