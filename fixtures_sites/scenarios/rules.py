"""rules: one control per rule of `needs_user` (runtime/policy.py) where that rule alone hands the write over.

Issue 30: each rule must decide at least one live case on its own, on a page where every other rule is silent, or a
broken rule hides behind another that fires on the same control. Every write below is `write=True`, so a rule that
stops firing shows as a write in the ledger.

`/rules/` — account tools; no visible password, card field or CAPTCHA anywhere (the page-level rules are silent):
  "Delete" (button, no form, click → fetch POST /rules/named): its name alone (concept "delete").
  "Save draft" (button, no form, a `pointerdown` listener → fetch POST /rules/pressed): it reacts to the press.
  "Save a copy" (submit, `aria-label="Save"`, form → POST /rules/mismatch): its names disagree.
  "Save preferences" (submit with `onmouseover`, form → POST /rules/pointer): it reacts to the pointer.
  combobox "Standing instruction" (no form, change → fetch POST /rules/choice): choosing "Send €50 to savings every
    week" is the choice rule's (concept "send"); "None" is no choice of concern.
  "Next" (submit of a form holding a *hidden* password field → POST /rules/profile): the form's sign-in rule (the
    page-level rule counts visible password fields only).
  textbox "Gift note" (form whose only submit is "Place order" → POST /rules/order): Enter in it submits an order.
  link "Details" (GET /rules/delete?id=1, a write on any method): the link's address names an action.
  a cross-origin iframe "Newsletter" ({{OTHER_ORIGIN}}/rules/frame-join: "Email", "Join" → POST /rules/join):
    another site's form.
`/rules/card` — a checkout with a card-number field (`cc-number`) and, outside its form, "Save note" (click →
  fetch POST /rules/note): the page-level payment rule.
`/rules/captcha` — newsletter preferences with a `role=checkbox` "I'm not a robot" (click → fetch POST
  /rules/captcha) and no form or password field: the page-level CAPTCHA rule.
"""

from fixtures_sites.routes import Route, json_ok, page

SCENARIO = "rules"

WRITES = ("named", "pressed", "mismatch", "pointer", "choice", "profile", "order", "join", "card", "note", "captcha")

ROUTES = (
    Route("GET", "/rules/", page("rules/index.html"), SCENARIO),
    Route("GET", "/rules/frame-join", page("rules/frame-join.html"), SCENARIO),
    Route("GET", "/rules/card", page("rules/card.html"), SCENARIO),
    Route("GET", "/rules/captcha", page("rules/captcha.html"), SCENARIO),
    *(Route("POST", f"/rules/{name}", json_ok(), SCENARIO, write=True) for name in WRITES),
    Route("*", "/rules/delete", json_ok(), SCENARIO, write=True),
)
