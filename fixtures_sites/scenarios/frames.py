"""frames: an order-help page with same-origin controls and a cross-origin support widget in an iframe.

The outer page has its own form (order number, topic, "Look up order" POSTs `/frames/lookup`, a write); the
iframe `{{OTHER_ORIGIN}}/frames/inner` has a text input, a select and a "Send" button POSTing `/frames/send`
(a write, arriving on the other origin).
"""

from fixtures_sites.routes import Route, done_page, page

SCENARIO = "frames"

ROUTES = (
    Route("GET", "/frames/", page("frames/index.html"), SCENARIO),
    Route("GET", "/frames/inner", page("frames/inner.html"), SCENARIO),
    Route(
        "POST",
        "/frames/lookup",
        done_page("Order found", "Order NW-48213 shipped on 16 March and arrives tomorrow."),
        SCENARIO,
        write=True,
    ),
    Route(
        "POST",
        "/frames/send",
        done_page("Message sent", "Thanks! A support agent will reply within 2 hours."),
        SCENARIO,
        write=True,
    ),
)
