"""catalogue: a large, noisy product listing rendered server-side (observation token budgets) with one write.

`GET /catalogue/` lists `PAGE_SIZE` (300) of `TOTAL` (1,200) deterministic products per page, with a header nav,
a search box, a filter sidebar (category/colour checkboxes, price and rating selects, sort), pagination and a big
footer, plus the noise real shops carry (long tracking URLs, JSON data attributes, utility-class soup, ids).
The query parameters `q`, `category`, `colour`, `price`, `rating`, `sort` and `page` really filter, sort and page.
Each product's "Add to cart" is a form that the page's script submits with fetch: `POST /catalogue/cart` (write);
the first item added also shows a "Checkout" link in the header, before every product (what an act's changes
must report as added, with every product's ref kept).
"""

from __future__ import annotations

import html
import json
from dataclasses import dataclass
from urllib.parse import urlencode

from aiohttp import web
from multidict import MultiDictProxy

from fixtures_sites.routes import Route, done_page, page_with, read_fields

SCENARIO = "catalogue"

TOTAL = 1200
PAGE_SIZE = 300

BRANDS = ("Northwind", "Fjellgear", "Alder & Pine", "Summitline", "Coastwise", "Tundra Lab", "Kestrel", "Mossback")
MODELS = ("Pro", "Lite", "Evo", "Classic", "Trek", "Ultra", "Venture", "Ridge", "Basecamp", "Flow")
# (product type, category, icon, base price in EUR)
TYPES = (
    ("Trail Running Shoe", "footwear", "shoe", 89.0),
    ("Waterproof Rain Jacket", "jackets", "jacket", 129.0),
    ("Merino Wool Beanie", "accessories", "hat", 24.0),
    ("Insulated Bottle 750 ml", "camping", "bottle", 29.0),
    ("Daypack 22 L", "bags", "bag", 64.0),
    ("Hiking Socks (3-pack)", "accessories", "sock", 19.0),
    ("Headlamp 400 lm", "camping", "lamp", 39.0),
    ("Softshell Trousers", "trousers", "trousers", 79.0),
    ("Enamel Camp Mug 350 ml", "camping", "mug", 14.0),
    ("Two-Person Dome Tent", "camping", "tent", 219.0),
    ("Fleece Pullover", "jackets", "jacket", 59.0),
    ("Approach Shoe", "footwear", "shoe", 119.0),
)
CATEGORIES = (
    ("footwear", "Footwear"),
    ("jackets", "Jackets & fleeces"),
    ("trousers", "Trousers"),
    ("bags", "Bags & packs"),
    ("camping", "Camping gear"),
    ("accessories", "Accessories"),
)
COLOURS = (
    ("black", "Black", "#1f2328"),
    ("navy", "Navy", "#1d3557"),
    ("forest", "Forest", "#2d6a4f"),
    ("red", "Red", "#c1121f"),
    ("ochre", "Ochre", "#c98c10"),
    ("slate", "Slate", "#5c677d"),
    ("sand", "Sand", "#b8a77a"),
    ("teal", "Teal", "#138086"),
)
PRICES = (
    ("", "Any price"),
    ("0-25", "Under €25"),
    ("25-50", "€25 – €50"),
    ("50-100", "€50 – €100"),
    ("100-200", "€100 – €200"),
    ("200-", "€200 and above"),
)
RATINGS = (("", "Any rating"), ("4", "4 stars & up"), ("3", "3 stars & up"))
SORTS = (
    ("featured", "Featured"),
    ("price-asc", "Price: low to high"),
    ("price-desc", "Price: high to low"),
    ("rating", "Customer rating"),
)


@dataclass(frozen=True)
class Product:
    index: int
    sku: str
    name: str
    slug: str
    category: str
    icon: str
    colour: str
    colour_name: str
    colour_hex: str
    price: float
    was: float | None
    rating: float
    reviews: int
    stock: int


def _product(i: int) -> Product:
    kind, category, icon, base = TYPES[i % len(TYPES)]
    brand = BRANDS[(i * 5 + i // len(TYPES)) % len(BRANDS)]
    model = MODELS[(i * 3 + i // 7) % len(MODELS)]
    colour, colour_name, colour_hex = COLOURS[(i * 3 + i // 11) % len(COLOURS)]
    price = round(base * (0.8 + ((i * 37) % 50) / 100)) - 0.01
    was = round(price * 1.25) - 0.01 if i % 9 == 0 else None
    name = f"{brand} {model} {kind}"
    slug = "-".join("".join(c if c.isalnum() else " " for c in f"{name} {colour_name}".lower()).split())
    return Product(
        index=i,
        sku=f"NW-{10000 + i * 7}",
        name=name,
        slug=slug,
        category=category,
        icon=icon,
        colour=colour,
        colour_name=colour_name,
        colour_hex=colour_hex,
        price=price,
        was=was,
        rating=round(2.5 + ((i * 13) % 26) / 10, 1),
        reviews=(i * 97) % 2400 + 3,
        stock=0 if i % 23 == 5 else (3 if i % 17 == 0 else 40 + i % 60),
    )


PRODUCTS = tuple(_product(i) for i in range(TOTAL))
BY_SKU = {p.sku: p for p in PRODUCTS}


def product_href(p: Product, position: int, page: int) -> str:
    """A product link as long and tracking-laden as real shops make them."""
    query = urlencode(
        {
            "sku": p.sku,
            "slug": p.slug,
            "ref": f"plp_grid_p{page}_i{position}",
            "pf_rd_r": f"{(p.index * 2654435761) % 16**12:012X}",
            "pf_rd_p": f"{(p.index * 40503) % 16**8:08x}-{(p.index * 977) % 16**4:04x}-4c1e-9a0b-{p.index:012d}",
            "utm_source": "catalogue",
            "utm_medium": "grid",
            "utm_campaign": "ss26_outdoor_essentials",
        }
    )
    return f"{{{{ORIGIN}}}}/catalogue/product?{query}"


def _euro(value: float) -> str:
    return f"€{value:,.2f}"


def _filtered(query: MultiDictProxy[str]) -> list[Product]:
    q = query.get("q", "").strip().lower()
    categories = set(query.getall("category", []))
    colours = set(query.getall("colour", []))
    price = query.get("price", "")
    rating = query.get("rating", "")
    items = list(PRODUCTS)
    if q:
        items = [p for p in items if all(word in f"{p.name} {p.colour_name}".lower() for word in q.split())]
    if categories:
        items = [p for p in items if p.category in categories]
    if colours:
        items = [p for p in items if p.colour in colours]
    if "-" in price:
        low, _, high = price.partition("-")
        lo = float(low) if low.isdigit() else 0.0
        hi = float(high) if high.isdigit() else float("inf")
        items = [p for p in items if lo <= p.price < hi]
    if rating.isdigit():
        items = [p for p in items if p.rating >= int(rating)]
    sort = query.get("sort", "featured")
    if sort == "price-asc":
        items.sort(key=lambda p: (p.price, p.index))
    elif sort == "price-desc":
        items.sort(key=lambda p: (-p.price, p.index))
    elif sort == "rating":
        items.sort(key=lambda p: (-p.rating, -p.reviews, p.index))
    return items


def _card(p: Product, position: int, page: int) -> str:
    e = html.escape
    href = e(product_href(p, position, page))
    analytics = e(
        json.dumps(
            {
                "event": "view_item_list",
                "list_id": "plp_grid",
                "item_id": p.sku,
                "index": position,
                "item_brand": p.name.split(" ")[0],
                "item_category": p.category,
                "price": p.price,
            },
            separators=(",", ":"),
        )
    )
    pid = f"pn-{p.sku}"
    stars = "★" * round(p.rating) + "☆" * (5 - round(p.rating))
    price = f'<span class="price text-lg font-semibold">{_euro(p.price)}</span>'
    if p.was is not None:
        off = round(100 * (1 - p.price / p.was))
        price = (
            f'<span class="price price--sale text-lg font-semibold">{_euro(p.price)}</span> '
            f'<s class="price--was text-sm">{_euro(p.was)}</s> <span class="badge badge--sale">−{off}%</span>'
        )
    if p.stock == 0:
        stock = '<p class="stock stock--out">Out of stock</p>'
        action = (
            f'<button type="button" class="btn btn-secondary w-full" disabled aria-describedby="{pid}">'
            f"Out of stock</button>"
        )
    else:
        stock = f'<p class="stock stock--low">Only {p.stock} left</p>' if p.stock < 5 else ""
        action = (
            f'<form class="add-to-cart" method="post" action="/catalogue/cart" data-track="add_to_cart">'
            f'<input type="hidden" name="sku" value="{p.sku}"><input type="hidden" name="qty" value="1">'
            f'<input type="hidden" name="list_id" value="plp_grid_p{page}">'
            f'<button type="submit" class="btn btn-primary w-full" aria-describedby="{pid}">Add to cart</button>'
            f"</form>"
        )
    return (
        f'<li class="product-card group relative flex flex-col rounded-lg border border-neutral-200 bg-white p-3 '
        f'hover:shadow-md focus-within:ring-2" id="product-{p.sku}" data-sku="{p.sku}" data-price="{p.price:.2f}" '
        f'data-colour="{p.colour}" data-category="{p.category}" data-position="{position}" '
        f'data-analytics="{analytics}">'
        f'<article aria-labelledby="{pid}">'
        f'<a class="product-card__media block aspect-[4/3]" href="{href}" tabindex="-1" aria-hidden="true">'
        f'<svg class="product-card__img" viewBox="0 0 120 90" focusable="false"><rect width="120" height="90" '
        f'fill="#f3f4f6"/><use href="#i-{p.icon}" color="{p.colour_hex}"/></svg></a>'
        f'<h3 class="product-card__title mt-2 text-sm font-medium leading-snug">'
        f'<a id="{pid}" class="hover:underline" href="{href}">{e(p.name)}</a></h3>'
        f'<p class="product-card__colour text-xs text-neutral-500">Colour: {p.colour_name}</p>'
        f'<p class="product-card__rating text-xs"><span class="stars" aria-hidden="true" '
        f'style="--rating:{p.rating}">{stars}</span><span class="sr-only">Rated {p.rating} out of 5</span> '
        f'<a class="text-neutral-500" href="{href}#reviews">({p.reviews:,} reviews)</a></p>'
        f'<p class="product-card__price mt-1">{price}</p>{stock}{action}'
        f"</article></li>"
    )


def _checkboxes(name: str, options: tuple[tuple[str, ...], ...], chosen: set[str], counts: dict[str, int]) -> str:
    rows = []
    for value, label, *_ in options:
        checked = " checked" if value in chosen else ""
        rows.append(
            f'<li><input type="checkbox" id="f-{name}-{value}" name="{name}" value="{value}"{checked}>'
            f'<label for="f-{name}-{value}">{html.escape(label)} <span class="count">({counts.get(value, 0)})</span>'
            f"</label></li>"
        )
    return "".join(rows)


def _select(name: str, label: str, options: tuple[tuple[str, str], ...], chosen: str) -> str:
    opts = "".join(
        f'<option value="{v}"{" selected" if v == chosen else ""}>{html.escape(t)}</option>' for v, t in options
    )
    return f'<label for="f-{name}">{label}</label><select id="f-{name}" name="{name}">{opts}</select>'


def _values(request: web.Request) -> dict[str, str]:
    query = request.query
    items = _filtered(query)
    pages = max(1, -(-len(items) // PAGE_SIZE))
    raw_page = query.get("page", "1")
    page = min(max(int(raw_page), 1), pages) if raw_page.isdigit() else 1
    start = (page - 1) * PAGE_SIZE
    shown = items[start : start + PAGE_SIZE]
    cards = "\n".join(_card(p, start + n + 1, page) for n, p in enumerate(shown))
    if not cards:
        cards = '<li class="empty">No products match these filters. <a href="/catalogue/">Clear all filters</a></li>'

    def page_link(n: int) -> str:
        params = [(k, v) for k, v in query.items() if k != "page"] + [("page", str(n))]
        return html.escape("/catalogue/?" + urlencode(params))

    links = []
    if page > 1:
        links.append(f'<li><a rel="prev" href="{page_link(page - 1)}">Previous</a></li>')
    for n in range(1, pages + 1):
        current = ' aria-current="page"' if n == page else ""
        links.append(f'<li><a href="{page_link(n)}"{current} aria-label="Page {n}">{n}</a></li>')
    if page < pages:
        links.append(f'<li><a rel="next" href="{page_link(page + 1)}">Next</a></li>')

    category_counts = {c: sum(1 for p in PRODUCTS if p.category == c) for c, _ in CATEGORIES}
    colour_counts = {c: sum(1 for p in PRODUCTS if p.colour == c) for c, *_ in COLOURS}
    q = query.get("q", "")
    summary = f"Showing {start + 1:,}–{start + len(shown):,} of {len(items):,} results" if shown else "0 results"
    if q:
        summary += f" for “{html.escape(q)}”"
    return {
        "Q": html.escape(q, quote=True),
        "SUMMARY": summary,
        "PAGE": str(page),
        "PAGES": str(pages),
        "CATEGORY_FILTERS": _checkboxes("category", CATEGORIES, set(query.getall("category", [])), category_counts),
        "COLOUR_FILTERS": _checkboxes("colour", COLOURS, set(query.getall("colour", [])), colour_counts),
        "PRICE_SELECT": _select("price", "Price", PRICES, query.get("price", "")),
        "RATING_SELECT": _select("rating", "Customer rating", RATINGS, query.get("rating", "")),
        "SORT_SELECT": _select("sort", "Sort by", SORTS, query.get("sort", "featured")),
        "PRODUCTS": cards,
        "PAGINATION": "".join(links),
    }


def _product_values(request: web.Request) -> dict[str, str]:
    p = BY_SKU[request.query["sku"]]
    was = f' <s class="price--was">{_euro(p.was)}</s>' if p.was is not None else ""
    return {
        "NAME": html.escape(p.name),
        "SKU": p.sku,
        "CATEGORY": dict(CATEGORIES)[p.category],
        "CATEGORY_KEY": p.category,
        "COLOUR": p.colour_name,
        "COLOUR_HEX": p.colour_hex,
        "ICON": p.icon,
        "PRICE": _euro(p.price) + was,
        "RATING": str(p.rating),
        "REVIEWS": f"{p.reviews:,}",
        "STOCK": "Out of stock" if p.stock == 0 else (f"Only {p.stock} left" if p.stock < 5 else "In stock"),
        "DISABLED": " disabled" if p.stock == 0 else "",
    }


_product_page = page_with("catalogue/product.html", _product_values)


async def product(request: web.Request) -> web.StreamResponse:
    if request.query.get("sku") not in BY_SKU:
        return web.Response(
            status=404,
            text="<!doctype html><title>Not found</title><h1>Product not found</h1>"
            '<p><a href="/catalogue/">Back to the shop</a></p>',
            content_type="text/html",
        )
    return await _product_page(request)


async def cart(request: web.Request) -> web.StreamResponse:
    fields = await read_fields(request)
    p = BY_SKU.get(fields.get("sku", ""))
    qty = fields.get("qty", "1")
    ok = p is not None and p.stock > 0 and qty.isdigit() and 0 < int(qty) <= 10
    payload = {"ok": ok, "sku": fields.get("sku", ""), "qty": int(qty) if ok else 0, "name": p.name if p else ""}
    if "application/json" in request.headers.get("Accept", ""):
        return web.json_response(payload, status=200 if ok else 400)
    if ok and p is not None:
        response = await done_page("Added to cart", f"{p.name} is in your cart.")(request)
    else:
        response = await done_page("Not added", "Sorry, we couldn't add that item to your cart.")(request)
    response.set_status(200 if ok else 400)
    return response


ROUTES = (
    Route("GET", "/catalogue/", page_with("catalogue/index.html", _values), SCENARIO),
    Route("GET", "/catalogue/product", product, SCENARIO),
    Route("POST", "/catalogue/cart", cart, SCENARIO, write=True),
    Route(
        "POST",
        "/catalogue/newsletter",
        done_page("You're subscribed", "Thanks! Check your inbox to confirm."),
        SCENARIO,
        write=True,
    ),
)
