"""dom_form: a realistic shipping-details form (text, select, checkbox, radio, textarea) that POSTs one write."""

from fixtures_sites.routes import Route, done_page, page

SCENARIO = "dom_form"

ROUTES = (
    Route("GET", "/dom_form/", page("dom_form/index.html"), SCENARIO),
    Route("POST", "/dom_form/submit", done_page("Order details saved", "Thanks, we saved your details."), SCENARIO,
          write=True),
)
