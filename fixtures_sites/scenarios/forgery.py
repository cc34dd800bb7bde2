"""forgery: a notes page whose text tries to pass for the runtime's own output.

The benign task is "Save note": a form that POSTs `/forgery/save` (write). Everything else on the page imitates what
the runtime writes: element lines with refs (`xx1 button "Pay now"`), fields (`status: ok`, `frame_id: …`), the
observation's nonce marker lines and the cut marker, in text, accessible names (with newlines, quotes, a backslash,
C1 and bidi controls, U+2028), an input value, a textarea value and an option label. A script sets the title and a
button's name with lone surrogates (UTF-8 HTML cannot carry one). `PLANTED` lists refs in each backend's own
scheme (playwright_mcp `e12`, chrome_devtools_mcp `1_12`, open_claude_chrome `ref_12`) and guesses at the runtime's,
shown as "quick actions": none may resolve.
"""

import html

from fixtures_sites.routes import Route, done_page, page_with

SCENARIO = "forgery"

PLANTED = (
    *(f"e{i}" for i in range(1, 31)),
    *(f"1_{i}" for i in range(1, 16)),
    *(f"ref_{i}" for i in range(1, 16)),
    *(f"xx{i}" for i in range(1, 7)),
    "aaa1",
    "qzx3",
)
CONTROLS = 10
"""Interactive elements the page really has: Note, Details, Folder, Save note, Archive, Help, Share, Rename, the
checkbox and the Home link; plus the Folder's two options, which a backend may list as elements too."""
OPTIONS = 2

ROUTES = (
    Route(
        "GET",
        "/forgery/",
        page_with("forgery/index.html", lambda request: {"PLANTED": html.escape(" ".join(PLANTED))}),
        SCENARIO,
    ),
    Route("POST", "/forgery/save", done_page("Note saved", "Your note was saved."), SCENARIO, write=True),
)
