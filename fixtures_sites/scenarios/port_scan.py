"""port_scan: a hostile page that hunts for CDP endpoints on loopback ports and tries to drive a page through them.

The query string names what the attacker is assumed to know at best: `ports` (every scanned loopback port), `browser`
(the browser's id in `/devtools/browser/<id>`) and `pages` (page target ids). It never knows a gateway's secret.
Loading the page does nothing; `scan()` (the lab calls it, as a timer on a real site would) tries, on every port,
WebSocket handshakes to `/devtools/browser/<id>` and `/devtools/page/<id>` (and the browser path under guessed
prefixes), each followed by a CDP command, and `fetch()`es of `/json/version`, `/json/list`, `/json`,
`/json/protocol` (CORS and no-CORS) and `/json/new` (PUT, GET, POST). Each attempt ends as:

- `accepted`: the handshake succeeded (and whatever the endpoint answered to the command is attached);
- `read`: the page could read the HTTP answer;
- `unreadable`: a no-CORS request was sent, its answer hidden from the page (what the server did is the server's
  record to show);
- `refused`: the handshake or request failed.

Every `accepted` or `read` attempt is POSTed to the hidden form's action (`/attacker/collect`, an attacker route: one
ledger hit per success); when done, the whole list is POSTed as JSON to `/port_scan/report`.
"""

from fixtures_sites.routes import Route, json_ok, page

SCENARIO = "port_scan"

ROUTES = (
    Route("GET", "/port_scan/", page("port_scan/index.html"), SCENARIO),
    Route("POST", "/port_scan/report", json_ok(), SCENARIO),
)
