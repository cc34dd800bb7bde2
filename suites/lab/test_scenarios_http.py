"""Every scenario's routes over plain HTTP: pages render whole and stay on loopback, writes are counted once per
request, the attacker endpoint counts every hit, and no page can reach the attacker by merely loading."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from html.parser import HTMLParser
from urllib.parse import urljoin, urlsplit

import aiohttp
import pytest

from fixtures_sites.routes import Route
from fixtures_sites.scenarios import ROUTES, canvas, captcha, catalogue, chat, evasion
from fixtures_sites.server import FixtureServer

pytestmark = pytest.mark.req("lab:scenarios")

TIMEOUT = aiohttp.ClientTimeout(total=10)

EXAMPLE_QUERY = {"/catalogue/product": "?sku=" + catalogue.PRODUCTS[0].sku}
"""GET routes that need a query string to show their page."""

FOLDERS = [r for r in ROUTES if r.folder]
"""Folders of third-party files served as they are (the real apps' packages): not pages the lab wrote."""
SCRIPTS = [r for r in ROUTES if r.method == "GET" and r.path.endswith(".js")]
"""A page's own script, served beside it (the `shadow` app builds both of its pages from one)."""
DATA = [r for r in ROUTES if r.method == "GET" and (r.path.endswith(".json") or "/api/" in r.path)]
"""JSON an app loads (the real apps' OpenAPI document, rows and products): data, not a page."""
GET_PAGES = [
    r for r in ROUTES if r.method == "GET" and not r.stall and not r.folder and r not in SCRIPTS and r not in DATA
]
HELD_GETS = [r for r in ROUTES if r.method == "GET" and r.stall]
WRITES = [r for r in ROUTES if r.write]
ATTACKER = [r for r in ROUTES if r.attacker]
UNLOADABLE = evasion.UNLOADABLE
"""Foreign URLs a page shows on purpose (a payment iframe's `src`); the lab is offline, so they never load."""

LOADING_ATTRIBUTES = {"src", "srcset", "data", "poster", "background", "ping", "content", "codebase", "archive"}
"""Attributes whose URL a browser fetches (or may fetch) with no user action; `href` counts on link/base/use."""


def route_id(route: Route) -> str:
    return f"{route.method} {route.path}"


def path_of(route: Route) -> str:
    return route.path + EXAMPLE_QUERY.get(route.path, "")


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession(timeout=TIMEOUT) as session:
        yield session


async def held(server: FixtureServer, path: str, request: asyncio.Future | asyncio.Task, **release: object) -> int:
    """Wait until the held request to `path` has arrived, release it, and return the answer's status."""
    stall = server.stall(path)
    await stall.started()
    assert stall.holding
    stall.release(**release)  # type: ignore[arg-type]
    async with asyncio.timeout(10):
        return await request


class Tags(HTMLParser):
    """Every start tag with its attributes, and the text inside <script> and <style>."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str]]] = []
        self.code: list[tuple[str, str]] = []
        self._in: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, {k: v or "" for k, v in attrs}))
        if tag in ("script", "style"):
            self._in = tag

    def handle_endtag(self, tag: str) -> None:
        if tag == self._in:
            self._in = None

    def handle_data(self, data: str) -> None:
        if self._in:
            self.code.append((self._in, data))


def parse(text: str) -> Tags:
    tags = Tags()
    tags.feed(text)
    tags.close()
    return tags


async def get_page(http: aiohttp.ClientSession, url: str) -> tuple[int, str, str]:
    async with http.get(url) as response:
        return response.status, response.content_type, await response.text()


# -- pages ---------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("route", GET_PAGES, ids=route_id)
@pytest.mark.parametrize("cross", [False, True], ids=["localhost", "127.0.0.1"])
async def test_every_get_route_answers_200_with_whole_html_on_loopback_only(
    fixture_server: FixtureServer, http: aiohttp.ClientSession, route: Route, cross: bool
) -> None:
    status, content_type, text = await get_page(http, fixture_server.url(path_of(route), cross=cross))

    assert status == 200
    assert content_type == "text/html"
    assert text.lstrip().lower().startswith("<!doctype html>")
    assert "{{" not in text
    allowed = (fixture_server.prefix + "/", fixture_server.cross_origin + "/")
    urls = re.findall(r"https?://[^\s\"'<>()]+", text)
    foreign = [u for u in urls if not (u + "/").startswith(allowed) and not u.startswith(UNLOADABLE)]
    assert foreign == []
    assert not re.search(r"""(?:src|href|action|srcset)\s*=\s*["']?//""", text), "protocol-relative URL"


@pytest.mark.parametrize("route", DATA, ids=route_id)
async def test_every_data_route_answers_200_with_json(
    fixture_server: FixtureServer, http: aiohttp.ClientSession, route: Route
) -> None:
    async with http.get(fixture_server.url(route.path)) as response:
        assert response.status == 200
        assert response.content_type == "application/json"
        assert await response.json()


async def test_the_real_apps_folder_serves_the_files_its_apps_load_and_nothing_else_of_their_packages(
    fixture_server: FixtureServer, http: aiohttp.ClientSession
) -> None:
    served = {
        "swagger-ui-dist/swagger-ui-bundle.js": 200,
        "tinymce/tinymce.min.js": 200,
        "swagger-ui-dist/package.json": 404,  # in the package, but no app loads it
        "tinymce/../../realapps/package.json": 404,
        "rapidoc/%2e%2e/%2e%2e/package-lock.json": 404,
        "no-such-package/index.js": 404,
    }
    got = {}
    for tail in served:
        async with http.get(fixture_server.url(f"/realapps/pkg/{tail}"), allow_redirects=False) as response:
            got[tail] = response.status
    assert got == served


@pytest.mark.parametrize("route", SCRIPTS, ids=route_id)
async def test_every_script_route_answers_200_with_javascript_that_loads_nothing_foreign(
    fixture_server: FixtureServer, http: aiohttp.ClientSession, route: Route
) -> None:
    status, content_type, text = await get_page(http, fixture_server.url(route.path))

    assert status == 200
    assert content_type == "text/javascript"
    assert re.findall(r"https?://[^\s\"'<>()`]+", text) == []
    assert "attacker" not in text.lower()


PER_LOAD = re.compile(r'(?<=name="page_nonce" value=")[0-9a-f]{16}(?=")')
"""The dom_form's per-load Page nonce (the ledger's attribution of a write to its Page)."""


@pytest.mark.parametrize("route", GET_PAGES, ids=route_id)
async def test_other_origin_means_the_origin_the_request_did_not_use(
    fixture_server: FixtureServer, http: aiohttp.ClientSession, route: Route
) -> None:
    _, _, here = await get_page(http, fixture_server.url(path_of(route)))
    _, _, there = await get_page(http, fixture_server.url(path_of(route), cross=True))

    here, there = (PER_LOAD.sub("per-load", page) for page in (here, there))  # a nonce differs on every load anyway
    swapped = here.replace(fixture_server.prefix, "\0").replace(fixture_server.cross_origin, fixture_server.prefix)
    assert swapped.replace("\0", fixture_server.cross_origin) == there


@pytest.mark.parametrize("route", GET_PAGES, ids=route_id)
async def test_every_link_frame_and_form_on_a_page_leads_to_a_declared_route(
    fixture_server: FixtureServer, http: aiohttp.ClientSession, route: Route
) -> None:
    page_url = fixture_server.url(path_of(route))
    _, _, text = await get_page(http, page_url)
    declared = {(r.method, r.path) for r in ROUTES}
    broken = []
    for tag, attrs in parse(text).tags:
        targets = [(attrs[a], "GET") for a in ("href", "src") if a in attrs]
        if tag == "form":
            targets.append((attrs.get("action", ""), attrs.get("method", "get").upper()))
        for target, method in targets:
            if target.startswith(("#", "javascript:", "data:", "mailto:", *UNLOADABLE)):
                continue
            url = urlsplit(urljoin(page_url, target))
            in_folder = any(r.method == method and r.serves(url.path) for r in FOLDERS)
            if (method, url.path) not in declared and ("*", url.path) not in declared and not in_folder:
                broken.append(f"<{tag}> {method} {target}")
    assert broken == []


@pytest.mark.parametrize("route", HELD_GETS, ids=route_id)
async def test_every_stalled_get_route_holds_its_answer_until_released(
    fixture_server: FixtureServer, http: aiohttp.ClientSession, route: Route
) -> None:
    async def fetch() -> int:
        async with http.get(fixture_server.url(route.path)) as response:
            await response.read()
            return response.status

    request = asyncio.ensure_future(fetch())
    assert await held(fixture_server, route.path, request) == 200
    assert fixture_server.ledger.writes() == []


# -- ledger --------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("route", WRITES, ids=route_id)
async def test_every_write_route_records_exactly_one_ledger_row_per_post(
    fixture_server: FixtureServer, http: aiohttp.ClientSession, route: Route
) -> None:
    async def post(n: int) -> int:
        async with http.post(fixture_server.url(route.path, cross=n == 2), data={"probe": str(n)}) as response:
            await response.read()
            return response.status

    for n in (1, 2):
        if route.stall:
            status = await held(fixture_server, route.path, asyncio.ensure_future(post(n)))
        else:
            status = await post(n)
        assert status < 500
        assert len(fixture_server.ledger.writes(route.path)) == n

    rows = fixture_server.ledger.writes()
    assert [(r.scenario, r.method, r.path) for r in rows] == [(route.scenario, "POST", route.path)] * 2
    assert [r.origin for r in rows] == [
        fixture_server.prefix.removeprefix("http://"),
        fixture_server.cross_origin.removeprefix("http://"),
    ]
    assert fixture_server.ledger.attacker_hits() == []


async def test_get_routes_record_no_ledger_rows(fixture_server: FixtureServer, http: aiohttp.ClientSession) -> None:
    for route in GET_PAGES + SCRIPTS:
        status, _, _ = await get_page(http, fixture_server.url(path_of(route)))
        assert status == 200
    for route in HELD_GETS:
        request = asyncio.ensure_future(get_page(http, fixture_server.url(route.path)))
        stall = fixture_server.stall(route.path)
        await stall.started()
        stall.release()
        async with asyncio.timeout(10):
            await request

    assert fixture_server.ledger.writes() == []
    assert fixture_server.ledger.attacker_hits() == []


async def test_the_attacker_route_records_every_hit_and_answers_204(
    fixture_server: FixtureServer, http: aiohttp.ClientSession
) -> None:
    [route] = ATTACKER
    assert (route.method, route.path) == ("*", "/attacker/collect")
    hits = [("GET", False), ("POST", True), ("POST", False), ("PUT", True), ("GET", True)]
    for method, cross in hits:
        async with http.request(method, fixture_server.url(route.path + "?c=1", cross=cross), data="x=1") as response:
            assert response.status == 204

    rows = fixture_server.ledger.attacker_hits()
    assert [r.method for r in rows] == [m for m, _ in hits]
    assert {r.path for r in rows} == {"/attacker/collect"}
    assert fixture_server.ledger.writes() == []


@pytest.mark.parametrize("route", GET_PAGES, ids=route_id)
async def test_no_page_references_the_attacker_endpoint_in_anything_that_loads_by_itself(
    fixture_server: FixtureServer, http: aiohttp.ClientSession, route: Route
) -> None:
    _, _, text = await get_page(http, fixture_server.url(path_of(route)))
    tags = parse(text)

    autoload = [
        f"<{tag} {name}={value!r}>"
        for tag, attrs in tags.tags
        for name, value in attrs.items()
        if "attacker" in value.lower()
        and (name in LOADING_ATTRIBUTES or (name == "href" and tag in ("link", "base", "use", "image")))
    ]
    assert autoload == []
    assert [kind for kind, code in tags.code if "attacker" in code.lower()] == []


@pytest.mark.parametrize("path", ["/chat/", "/injection/", "/injection/frame"])
async def test_the_chat_and_injection_pages_cannot_reach_the_attacker_without_an_activation(
    fixture_server: FixtureServer, http: aiohttp.ClientSession, path: str
) -> None:
    _, _, text = await get_page(http, fixture_server.url(path))
    tags = parse(text)

    assert not re.search(r"src\s*=\s*[\"']?[^\"'>]*/attacker", text, re.IGNORECASE)
    references = [(tag, name) for tag, attrs in tags.tags for name, value in attrs.items() if "/attacker" in value]
    urls = [(tag, name) for tag, name in references if name not in ("alt", "title", "aria-label")]
    assert set(urls) <= {("a", "href"), ("form", "action")}
    assert not any(tag == "meta" and "refresh" in attrs.get("http-equiv", "").lower() for tag, attrs in tags.tags)
    if path.startswith("/injection/"):
        assert [tag for tag, _ in tags.tags if tag in ("script", "object", "embed")] == []
        assert references, "the injection page is meant to point at the attacker"
    else:
        assert references == []


# -- scenario behaviour --------------------------------------------------------------------------------------------


async def test_the_catalogue_lists_a_full_page_of_products_each_with_add_to_cart(
    fixture_server: FixtureServer, http: aiohttp.ClientSession
) -> None:
    _, _, text = await get_page(http, fixture_server.url("/catalogue/"))

    assert text.count('class="product-card ') == catalogue.PAGE_SIZE
    assert text.count(">Add to cart</button>") == sum(1 for p in catalogue.PRODUCTS[: catalogue.PAGE_SIZE] if p.stock)
    assert 'aria-current="page" aria-label="Page 1"' in text
    assert len(text) > 300_000  # the size of a real shop's listing


async def test_catalogue_filters_and_search_really_narrow_the_listing(
    fixture_server: FixtureServer, http: aiohttp.ClientSession
) -> None:
    url = fixture_server.url("/catalogue/?category=camping&colour=red&price=0-25&q=mug")
    _, _, text = await get_page(http, url)

    expected = [
        p
        for p in catalogue.PRODUCTS
        if p.category == "camping" and p.colour == "red" and p.price < 25 and "mug" in p.name.lower()
    ]
    assert expected
    assert text.count('class="product-card ') == len(expected)
    assert f"of {len(expected)} results" in text


async def test_add_to_cart_answers_json_for_the_page_script(
    fixture_server: FixtureServer, http: aiohttp.ClientSession
) -> None:
    product = next(p for p in catalogue.PRODUCTS if p.stock)
    async with http.post(
        fixture_server.url("/catalogue/cart"),
        data={"sku": product.sku, "qty": "1"},
        headers={"Accept": "application/json"},
    ) as response:
        assert response.status == 200
        assert await response.json() == {"ok": True, "sku": product.sku, "qty": 1, "name": product.name}
    assert len(fixture_server.ledger.writes("/catalogue/cart")) == 1


@pytest.mark.parametrize("seat", [None, 0, 100, canvas.SEATS - 1])
async def test_a_click_at_the_documented_target_center_is_a_hit_and_elsewhere_a_miss(
    fixture_server: FixtureServer, http: aiohttp.ClientSession, seat: int | None
) -> None:
    target = canvas.DEFAULT_SEAT if seat is None else seat
    query = "" if seat is None else f"?seat={seat}"
    _, _, page = await get_page(http, fixture_server.url("/canvas/" + query))
    assert canvas.board(target) in page  # the page draws the board the judge uses

    async def pick(x: float, y: float) -> dict[str, object]:
        async with http.post(fixture_server.url("/canvas/pick" + query), json={"x": x, "y": y}) as response:
            return await response.json()

    x, y = canvas.target_center(target)
    assert await pick(x, y) == {"ok": True, "hit": True, "seat": canvas.seat_label(target)}
    assert (await pick(x + canvas.SEAT_SIZE / 2 - 1, y - canvas.SEAT_SIZE / 2 + 1))["hit"] is True
    neighbour = target + 1 if target % canvas.COLS < canvas.COLS - 1 else target - 1
    assert await pick(*canvas.target_center(neighbour)) == {
        "ok": True,
        "hit": False,
        "seat": canvas.seat_label(neighbour),
    }
    assert (await pick(2, 2))["seat"] is None
    assert len(fixture_server.ledger.writes("/canvas/pick")) == 4


async def test_the_canvas_page_does_not_reveal_the_target_outside_the_drawing_script(
    fixture_server: FixtureServer, http: aiohttp.ClientSession
) -> None:
    pages = [(await get_page(http, fixture_server.url(f"/canvas/?seat={seat}")))[2] for seat in (5, 100)]
    tags = parse(pages[0])

    [attrs] = [a for t, a in tags.tags if t == "canvas"]
    assert attrs["aria-label"] == "Seating plan"
    without_scripts = [re.sub(r"<script.*?</script>", "", page, flags=re.S) for page in pages]
    assert without_scripts[0] == without_scripts[1]  # markup, text and ARIA are the same wherever the target is
    assert pages[0] != pages[1]


async def test_the_captcha_submit_is_refused_without_the_widget_token(
    fixture_server: FixtureServer, http: aiohttp.ClientSession
) -> None:
    async with http.post(fixture_server.url("/captcha/verify", cross=True), json={"v": "anchor-1"}) as response:
        token = (await response.json())["token"]
    assert token == captcha.TOKEN

    async with http.post(fixture_server.url("/captcha/submit"), data={"email": "a@example.com"}) as response:
        assert response.status == 400
    async with http.post(fixture_server.url("/captcha/submit"), data={"captcha_token": token}) as response:
        assert response.status == 200
    assert [r.path for r in fixture_server.ledger.writes()] == ["/captcha/verify", "/captcha/submit", "/captcha/submit"]


async def test_the_chat_page_has_stable_message_and_avatar_ids_and_a_mutation_counter(
    fixture_server: FixtureServer, http: aiohttp.ClientSession
) -> None:
    _, _, page = await get_page(http, fixture_server.url("/chat/"))
    tags = parse(page)

    messages = [a for t, a in tags.tags if "data-message-id" in a]
    assert [m["data-message-id"] for m in messages] == list(chat.HISTORY_IDS)
    assert [m["data-role"] for m in messages] == ["user", "assistant"] * 4
    assert [a["id"] for t, a in tags.tags if t == "svg" and a.get("class") == "avatar"] == list(chat.AVATAR_IDS)
    assert "window.__chatMutations" in page
    for tag in ("h2", "h3", "ol", "ul", "table", "pre", "code", "strong", "em", "blockquote"):
        assert f"<{tag}" in page

    message = {"conversation_id": "conv-0417", "message": "hi"}
    async with http.post(fixture_server.url("/chat/send"), json=message) as response:
        answer = await response.json()
    assert answer["ok"] is True
    assert answer["message_id"] != answer["reply_id"]
