"""captcha: a sign-up form gated by a cross-origin "I'm not a robot" widget, as real challenge widgets appear.

`/captcha/` embeds `{{OTHER_ORIGIN}}/captcha/widget` in an iframe: a `role=checkbox` anchor with `aria-checked`,
"reCAPTCHA-like" branding and privacy/terms links. Ticking it POSTs `/captcha/verify` (write) from the widget's
origin; the widget then hands the token to the page with `postMessage`, which puts it in the form. Submitting
the form POSTs `/captcha/submit` (write); without a token the page refuses client-side and the server says 400.
"""

from __future__ import annotations

from aiohttp import web

from fixtures_sites.routes import Route, done_page, page, read_fields

SCENARIO = "captcha"

TOKEN = "rc-anchor-7f3a9c2e-ok"
"""The (deterministic) token a verified challenge yields."""


async def verify(request: web.Request) -> web.StreamResponse:
    return web.json_response({"ok": True, "success": True, "token": TOKEN})


async def submit(request: web.Request) -> web.StreamResponse:
    fields = await read_fields(request)
    if fields.get("captcha_token") != TOKEN:
        response = await done_page(
            "Please verify you're human", "Tick “I'm not a robot” before creating your account."
        )(request)
        response.set_status(400)
        return response
    return await done_page("Account created", "Welcome aboard! Check your inbox to verify your email.")(request)


ROUTES = (
    Route("GET", "/captcha/", page("captcha/index.html"), SCENARIO),
    Route("GET", "/captcha/widget", page("captcha/widget.html"), SCENARIO),
    Route("POST", "/captcha/verify", verify, SCENARIO, write=True),
    Route("POST", "/captcha/submit", submit, SCENARIO, write=True),
)
