"""realapps: third-party open-source apps served offline, each from its npm package pinned exactly in
`fixtures_sites/realapps/package.json` + `package-lock.json` (`make setup` runs `npm ci` there).

Each app's published files are served read-only under `/realapps/pkg/<package>/<file>` by one folder route: only
the files `SERVED` names, found at request time, so before `make setup` they answer 404 and the app's host page loads
nothing. Each app has one host page,
`/realapps/<app>/`, that is the app's own documented embedding snippet and nothing more, so the UI under test is
the app's, not ours. What an app needs from a server is served here as data: an OpenAPI document (Swagger UI,
RapiDoc) whose `POST /realapps/api/orders` is a write, the rows of a data table, a JSON document to edit.
"""

from __future__ import annotations

import json
from pathlib import Path

from aiohttp import web

from fixtures_sites.routes import PAGES, Route, json_ok, page

SCENARIO = "realapps"

PACKAGES = Path(__file__).resolve().parent.parent / "realapps" / "node_modules"
"""Where `npm ci` puts the pinned packages."""

SERVED = {
    "swagger-ui-dist": ("swagger-ui.css", "swagger-ui-bundle.js", "favicon-32x32.png"),
    "rapidoc": ("dist/rapidoc-min.js",),
    "jsoneditor": ("dist/jsoneditor.min.js", "dist/jsoneditor.min.css", "dist/img/*.svg"),
    "vanilla-jsoneditor": ("standalone.js",),
    "tinymce": ("tinymce.min.js", "*/**/*.min.js", "*/**/*.min.css", "skins/**/*.js"),
    "jquery": ("dist/jquery.min.js",),
    "datatables.net": ("js/dataTables.min.js",),
    "datatables.net-dt": ("css/dataTables.dataTables.min.css",),
    "@shoelace-style/shoelace": ("cdn/**/*.js", "cdn/**/*.css", "cdn/assets/icons/*.svg"),
    "@ionic/core": ("dist/ionic/*.js", "dist/ionic/svg/chevron-*.svg", "css/ionic.bundle.css"),
}
"""package → the globs of its files the apps load (bundles, their lazily loaded parts, styles, icons)."""

APPS = ("swagger", "rapidoc", "jsoneditor", "svelte-jsoneditor", "tinymce", "datatables", "shoelace", "ionic")
"""Each app's host page is `pages/realapps/<app>.html`, served at `/realapps/<app>/`."""


PKG = "/realapps/pkg/"


_listed: dict[str, frozenset[str]] = {}
"""package → the files of it `SERVED` names, listed once it is installed."""


def served_file(tail: str) -> Path | None:
    """The installed file `/realapps/pkg/<tail>` names, if `SERVED` lists it; None for anything else (another file of
    the package, a path that climbs out of it, a package that is not installed)."""
    for package, patterns in SERVED.items():
        if not tail.startswith(package + "/"):
            continue
        root = PACKAGES / package
        if package not in _listed and root.is_dir():
            found = (path for pattern in patterns for path in root.glob(pattern) if path.is_file())
            _listed[package] = frozenset(path.relative_to(root).as_posix() for path in found)
        inside = tail[len(package) + 1 :]
        return root / inside if inside in _listed.get(package, frozenset()) else None
    return None


async def package_file(request: web.Request) -> web.StreamResponse:
    path = served_file(request.path[len(PKG) :])
    if path is None:
        return web.Response(status=404, text="not a file the real apps load")
    return web.FileResponse(path)


def installed(package: str) -> bool:
    return (PACKAGES / package / "package.json").is_file()


def version(package: str) -> str:
    """The installed version of a pinned package (the lab's docs and reports name it)."""
    return str(json.loads((PACKAGES / package / "package.json").read_text(encoding="utf-8"))["version"])


PRODUCTS = (
    "Anchor bolt", "Ball bearing", "Cable tie", "Dowel pin", "Eye bolt", "Flat washer", "Gear rack", "Hex nut",
    "Idler pulley", "Jam nut", "Key stock", "Lock washer", "Machine screw", "Needle bearing", "O-ring",
    "Pillow block", "Quick link", "Rivet", "Shaft collar", "T-slot nut", "U-bolt", "V-belt", "Wing nut",
    "Zip tie",
)  # fmt: skip
SITES = ("Osaka", "Lyon", "Porto", "Tacoma", "Leeds", "Aarhus")


def inventory_rows() -> list[dict[str, object]]:
    """The data table's 144 rows: each product at each site, deterministic."""
    return [
        {"sku": f"NW-{p * 10 + s + 1000}", "product": name, "site": site, "stock": (p * 37 + s * 11) % 400}
        for p, name in enumerate(PRODUCTS)
        for s, site in enumerate(SITES)
    ]


async def inventory(request: web.Request) -> web.StreamResponse:
    return web.json_response({"data": inventory_rows()})


async def document(request: web.Request) -> web.StreamResponse:
    """The JSON document both JSON editors open."""
    return web.Response(text=(PAGES / "realapps" / "document.json").read_text(encoding="utf-8"),
                        content_type="application/json")  # fmt: skip


ROUTES = (
    *(Route("GET", f"/realapps/{app}/", page(f"realapps/{app}.html"), SCENARIO) for app in APPS),
    Route("GET", "/realapps/api/openapi.json", page("realapps/openapi.json", "application/json"), SCENARIO),
    Route("GET", "/realapps/api/orders", json_ok({"orders": []}), SCENARIO),
    Route("GET", "/realapps/api/products", json_ok({"products": list(PRODUCTS)}), SCENARIO),
    Route("POST", "/realapps/api/orders", json_ok({"id": "PO-1001", "status": "placed"}), SCENARIO, write=True),
    Route("GET", "/realapps/data/inventory.json", inventory, SCENARIO),
    Route("GET", "/realapps/data/document.json", document, SCENARIO),
    # The quick-start snippet's form posts the editor's content back to its page: a save, so a write.
    Route("POST", "/realapps/tinymce/", json_ok({"saved": True}), SCENARIO, write=True),
    Route("GET", PKG, package_file, SCENARIO, folder=True),
)
