"""Every scenario's routes, in one table. A scenario is a module with `SCENARIO` and `ROUTES`."""

from fixtures_sites.scenarios import (
    canary,
    canvas,
    captcha,
    catalogue,
    chat,
    dom_form,
    evasion,
    faults,
    forgery,
    frames,
    home,
    huge,
    injection,
    login,
    popup,
    port_scan,
    race,
    realistic,
    sensitive,
    stall,
)

MODULES = (
    home,
    dom_form,
    catalogue,
    canvas,
    popup,
    captcha,
    login,
    sensitive,
    injection,
    frames,
    stall,
    chat,
    faults,
    race,
    port_scan,
    evasion,
    forgery,
    huge,
    canary,
    realistic,
)

ROUTES = tuple(route for module in MODULES for route in module.ROUTES)
