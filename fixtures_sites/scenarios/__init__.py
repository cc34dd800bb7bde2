"""Every scenario's routes, in one table. A scenario is a module with `SCENARIO` and `ROUTES`."""

from fixtures_sites.scenarios import (
    canvas,
    captcha,
    catalogue,
    chat,
    dom_form,
    frames,
    home,
    injection,
    login,
    popup,
    sensitive,
    stall,
)

MODULES = (home, dom_form, catalogue, canvas, popup, captcha, login, sensitive, injection, frames, stall, chat)

ROUTES = tuple(route for module in MODULES for route in module.ROUTES)
