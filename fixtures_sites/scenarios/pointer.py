"""pointer: controls that change as the pointer reaches them, for the pointer-truth proof (docs/policy.md).

`/pointer/` (fixed geometry, CSS px of the viewport):
- a shopping list of three rows (Milk, Bread, Eggs), each a checkbox (client-side only) and two buttons shown only
  while the row is hovered (CSS `:hover`): "Copy link" (centre of the first row at `COPY`) POSTs `/pointer/copy`,
  a benign write; "Delete" (`DELETE`) POSTs `/pointer/delete`, a write the user must confirm by its name; and
  "Pin", which grows into view instead (0 px wide until the row is hovered, full width once a 600 ms stepped CSS
  transition has run, as Swagger UI's copy button does) and POSTs `/pointer/pin`, a benign write;
- "View details" (`DETAILS`) renames itself "Buy now" on `pointerover` (back on `pointerleave`); a click while it
  says "Buy now" POSTs `/pointer/buy`;
- "Save draft" (`DRAFT`) renames itself "Confirm purchase" on `pointerdown`; the click that follows POSTs
  `/pointer/purchase`;
- "Add to wishlist" (`WISHLIST`, writes nothing) in a card whose hover lays "Pay now" over it (CSS `:hover`); "Pay
  now" POSTs `/pointer/pay`;
- "Move to folder" (`FOLDER`) renames itself "Delete forever" two animation frames after `pointerover`, as a
  transition library starts an enter transition (back on `pointerleave`); a click while it says "Delete forever"
  POSTs `/pointer/erase`.
Before the pointer reaches them, nothing sensitive is under any of these points.
"""

from fixtures_sites.routes import Route, json_ok, page

SCENARIO = "pointer"

COPY = (360, 100)
DELETE = (450, 100)
DETAILS = (100, 278)
DRAFT = (100, 338)
WISHLIST = (100, 400)
FOLDER = (100, 488)

ROUTES = (
    Route("GET", "/pointer/", page("pointer/index.html"), SCENARIO),
    Route("POST", "/pointer/copy", json_ok(), SCENARIO, write=True),
    Route("POST", "/pointer/delete", json_ok(), SCENARIO, write=True),
    Route("POST", "/pointer/pin", json_ok(), SCENARIO, write=True),
    Route("POST", "/pointer/buy", json_ok(), SCENARIO, write=True),
    Route("POST", "/pointer/purchase", json_ok(), SCENARIO, write=True),
    Route("POST", "/pointer/pay", json_ok(), SCENARIO, write=True),
    Route("POST", "/pointer/erase", json_ok(), SCENARIO, write=True),
)
