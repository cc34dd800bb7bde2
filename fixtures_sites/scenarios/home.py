"""home: the fixture server's index page at `/`, linking to every scenario page (for humans poking around)."""

from fixtures_sites.routes import Route, page

SCENARIO = "home"

ROUTES = (Route("GET", "/", page("home/index.html"), SCENARIO),)
