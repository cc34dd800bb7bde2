"""dom_form: a realistic shipping-details form (text, select, checkbox, radio, textarea) that POSTs one write.

Every load carries a nonce in a hidden `page_nonce` field (from `?page_nonce=` when given, else fresh), which
the ledger records with the write: when several Pages show this form, the ledger says which one wrote.
"""

import re
import secrets

from aiohttp import web

from fixtures_sites.routes import Route, done_page, page_with

SCENARIO = "dom_form"

_NONCE = re.compile(r"[A-Za-z0-9_-]{1,64}")


def _nonce(request: web.Request) -> dict[str, str]:
    asked = request.query.get("page_nonce", "")
    return {"PAGE_NONCE": asked if _NONCE.fullmatch(asked) else secrets.token_hex(8)}


ROUTES = (
    Route("GET", "/dom_form/", page_with("dom_form/index.html", _nonce), SCENARIO),
    Route(
        "POST",
        "/dom_form/submit",
        done_page("Order details saved", "Thanks, we saved your details."),
        SCENARIO,
        write=True,
    ),
)
