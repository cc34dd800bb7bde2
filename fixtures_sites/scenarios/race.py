"""race: a team notes board whose "Add a note" button writes once per click without leaving the page.

For races and parallel writes: the button stays where it is and stays enabled, so a second click (a race the
runtime lost) would be a second real write, counted by the ledger; each row's `referer` names the Page (open it
as `/race/?page=A`) so writes on several Pages can be told apart.
"""

from fixtures_sites.routes import Route, json_ok, page

SCENARIO = "race"

ROUTES = (
    Route("GET", "/race/", page("race/index.html"), SCENARIO),
    Route("POST", "/race/note", json_ok(), SCENARIO, write=True),
)
