"""shadow: one small task app built twice, inside open shadow roots (`/shadow/`) and in the light DOM
(`/shadow/light`), from the same script, so every command can be held to the same answer on both.

The app (`<task-app>`, each task a `<task-item>` with a shadow root of its own in the shadow build): a form that adds
a task ("New task", Add: POSTs `/shadow/add`, a write), a "Show" filter, a "Due date" field, a checkbox and a
"Remove …" button per task, a status line ("3 tasks, 3 open"), and "Delete all tasks" (POSTs `/shadow/delete-all`,
a write the policy must hand to the user by its name, wherever it sits).
"""

from aiohttp import web

from fixtures_sites.routes import PAGES, Handler, Route, json_ok, page, render

SCENARIO = "shadow"


def build(name: str) -> Handler:
    """The app's one page, its `data-build` set to `name` ("shadow" or "light")."""

    async def handler(request: web.Request) -> web.StreamResponse:
        text = render((PAGES / "shadow" / "index.html").read_text(encoding="utf-8"), request, {"BUILD": name})
        return web.Response(text=text, content_type="text/html")

    return handler


ROUTES = (
    Route("GET", "/shadow/", build("shadow"), SCENARIO),
    Route("GET", "/shadow/light", build("light"), SCENARIO),
    Route("GET", "/shadow/app.js", page("shadow/app.js", "text/javascript"), SCENARIO),
    Route("POST", "/shadow/add", json_ok(), SCENARIO, write=True),
    Route("POST", "/shadow/delete-all", json_ok(), SCENARIO, write=True),
)
