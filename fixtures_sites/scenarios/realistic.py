"""realistic: three pages shaped like the web a model meets, for token budgets per interactive element.

- `/realistic/article`: a long, link-heavy article (section nav, contents, ~60 inline links, footnotes and their
  back-links, related reading as image-and-title links, a big footer);
- `/realistic/shop`: a shop listing of 24 products, each with an image-only link (`<a><img alt="Name"></a>`), a title
  link, a rating with a review-count link, a price, "Add to basket" and an icon-only "Save … to wishlist" button;
- `/realistic/form`: an account settings form with labels and help text (`aria-describedby`), a select, radios,
  checkboxes with help, a textarea.
Static and deterministic (generated once); nothing on them writes.
"""

from fixtures_sites.routes import Route, page

SCENARIO = "realistic"

ROUTES = (
    Route("GET", "/realistic/article", page("realistic/article.html"), SCENARIO),
    Route("GET", "/realistic/shop", page("realistic/shop.html"), SCENARIO),
    Route("GET", "/realistic/form", page("realistic/form.html"), SCENARIO),
)
