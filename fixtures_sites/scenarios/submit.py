"""submit: `type` with `submit` on a form that saves in place (fetch) and keeps what was typed, so a second Enter
is a second write.

`/submit/` — "Note for the courier" + "Save note" (POST /submit/note, a write), and a second form, "Email for
offers" + "Subscribe" (POST /submit/subscribe, a write).
`/submit/focus-moves` — the same page, with a script that moves the focus to "Email for offers" as soon as the note
field gets input: an Enter pressed after typing the note goes to the offers field and subscribes. Expected for
type+submit into the note: never a write to /submit/subscribe.
"""

from fixtures_sites.routes import Route, json_ok, page

SCENARIO = "submit"

ROUTES = (
    Route("GET", "/submit/", page("submit/index.html"), SCENARIO),
    Route("GET", "/submit/focus-moves", page("submit/index.html"), SCENARIO),
    Route("POST", "/submit/note", json_ok(), SCENARIO, write=True),
    Route("POST", "/submit/subscribe", json_ok(), SCENARIO, write=True),
)
