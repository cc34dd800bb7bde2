"""The scoped gateway's rules, each shown deciding on its own: the static table and the gateway's own checks.

The live suites (suites/gateway, suites/security) prove the gateway end to end on a real browser, but there each
rule is one of several that agree: a `Runtime.addBinding` in a named world only travels through
chrome-devtools-mcp, a request on another port of the same host never comes, a second `Sec-Fetch-*` header hides a
first. Here every rule of the static table and of the scope room is called alone on a real CDP message (and the
discovery proxy on a real in-process upstream), without a browser, so a rule that stopped deciding shows at once, and
the messages a refused client (or the model reading its error) sees are asserted word for word. The admission room's
checks are shown the same way in `suites/gateway/test_gateway_admission.py`.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any, cast

import pytest
from aiohttp import web

from runtime.gateway import GatewayEvent, ScopedGateway
from runtime.gateway.allowlist import ABSORBED, FORWARD, Verdict, refusal_message, static_verdict
from runtime.gateway.records import GatewayClient, PendingCommand, RefusedCommand

pytestmark = pytest.mark.req("gateway:page-allowlist")

BOUND = "A" * 32
CHILD = "C" * 32
OTHER = "B" * 32
HOSTPORT = "127.0.0.1:4242"
OTHER_TARGET = Verdict("refuse", "it names a target other than the bound page")
NOT_OURS = Verdict("refuse", "the session is not the bound page's")


# -- the static table: conditions that make an allowed method harmless ----------------------------------------


def page(method: str, params: Mapping[str, Any]) -> Verdict:
    return static_verdict(method, params, False)


def test_navigation_to_https_is_forwarded_as_http_is_whatever_the_schemes_case() -> None:
    """https is the web's common case; a scheme is case-insensitive, so `HTTPS:` is the same navigation."""
    assert page("Page.navigate", {"url": "https://example.com/a"}) == FORWARD
    assert page("Page.navigate", {"url": "HTTPS://example.com/a"}) == FORWARD
    assert page("Page.navigate", {"url": "http://example.com/a"}) == FORWARD


def test_a_refused_navigation_names_its_scheme_or_relative_when_it_has_none() -> None:
    """The model reads the refusal: it must say which scheme was refused, and call a schemeless URL relative."""
    file_reason = page("Page.navigate", {"url": "file:///etc/passwd"}).reason
    assert file_reason.startswith("navigation to a file: URL (file:, chrome:")
    assert file_reason.endswith("; http(s) only")
    assert page("Page.navigate", {"url": "/dom_form/"}).reason.startswith("navigation to a relative: URL (")
    assert page("Page.navigate", {}).reason.startswith("navigation to a relative: URL (")


def test_a_binding_scoped_to_a_named_world_or_one_context_is_forwarded() -> None:
    """Puppeteer binds its ARIA handler in its own world by name; a context id (0 included) scopes it as well."""
    assert page("Runtime.addBinding", {"name": "q", "executionContextName": "__puppeteer_utility_world__"}) == FORWARD
    assert page("Runtime.addBinding", {"name": "q", "executionContextId": 0}) == FORWARD
    assert page("Runtime.addBinding", {"name": "q", "executionContextId": 7}) == FORWARD


def test_a_binding_in_every_context_is_refused_with_why() -> None:
    """No name and no id (or an empty name) reaches the page's own world: a channel from page script out."""
    why = "a binding in every context, the page's own included: a channel from page script to the client"
    assert page("Runtime.addBinding", {"name": "q"}) == Verdict("refuse", why)
    assert page("Runtime.addBinding", {"name": "q", "executionContextName": ""}) == Verdict("refuse", why)


def test_pause_on_exceptions_passes_only_as_none_and_otherwise_is_refused_with_why() -> None:
    """chrome-devtools-mcp sends `state: none`; any other state (or none given) would freeze the user's page."""
    why = Verdict("refuse", "pausing on exceptions would freeze the user's page")
    assert page("Debugger.setPauseOnExceptions", {"state": "none"}) == FORWARD
    assert page("Debugger.setPauseOnExceptions", {"state": "uncaught"}) == why
    assert page("Debugger.setPauseOnExceptions", {"state": "NONE"}) == why
    assert page("Debugger.setPauseOnExceptions", {}) == why


def test_a_new_document_script_passes_only_into_a_named_isolated_world() -> None:
    why = "a script for every new document of the page's own (main) world; only into an isolated world"
    assert page("Page.addScriptToEvaluateOnNewDocument", {"source": "1", "worldName": "w"}) == FORWARD
    assert page("Page.addScriptToEvaluateOnNewDocument", {"source": "1"}) == Verdict("refuse", why)


def test_an_absorbed_method_and_a_known_danger_carry_their_own_reasons() -> None:
    """The table's reasons are what docs/security.md and a refused client read."""
    assert page("Page.bringToFront", {}) == Verdict("absorb", ABSORBED["Page.bringToFront"].why)
    assert page("Network.getCookies", {}) == Verdict("refuse", "returns the page's cookies, HttpOnly ones included")


def test_a_method_off_both_allowlists_is_refused_naming_the_level_it_was_sent_at() -> None:
    assert static_verdict("Fetch.enable", {}, False).reason == "not on the gateway's page-session allowlist"
    assert static_verdict("Fetch.enable", {}, True).reason == "not on the gateway's browser-level allowlist"
    assert static_verdict("Target.getTargets", {}, False).action == "refuse"
    assert static_verdict("Page.navigate", {"url": "http://x/"}, True).action == "refuse"


# -- the gateway in-process: no browser, no upstream --------------------------------------------------------------


def gateway(upstream: str = "http://127.0.0.1:9") -> ScopedGateway:
    """A gateway bound to BOUND that believes it listens on HOSTPORT; nothing is started."""
    gw = ScopedGateway(upstream, BOUND)
    gw.admission.hostport = HOSTPORT
    return gw


def client(*, browser_level: bool = True, sessions: Mapping[str, str] | None = None, conn: int = 1) -> GatewayClient:
    """A client connection's state; the scope rules never touch its sockets."""
    return GatewayClient(conn, browser_level, cast(Any, None), cast(Any, None), sessions=dict(sessions or {}))


def decide(
    method: str, params: Mapping[str, Any], session: str | None = None, *, browser_level: bool = True
) -> Verdict:
    gw = gateway()
    gw.scope.children.add(CHILD)
    gw.scope.windows.add(5)
    holder = client(browser_level=browser_level, sessions={"S-A": BOUND, "S-C": CHILD})
    return gw.scope.decide(holder, method, dict(params), session)


def test_the_bound_target_and_its_children_are_visible_and_nothing_else() -> None:
    gw = gateway()
    gw.scope.children.add(CHILD)
    assert gw.scope.visible(BOUND)
    assert gw.scope.visible(CHILD)
    assert not gw.scope.visible(OTHER)
    assert not gw.scope.visible(None)


@pytest.mark.req("gateway:refuses-other-targets")
def test_a_command_on_a_session_the_client_does_not_hold_is_refused_whatever_its_method() -> None:
    assert decide("Runtime.evaluate", {"expression": "1"}, "S-B") == NOT_OURS
    assert decide("Runtime.evaluate", {"expression": "1"}, "S-A") == FORWARD
    assert decide("Runtime.evaluate", {"expression": "1"}, "S-C") == FORWARD


def test_the_level_of_a_command_is_the_browser_only_on_a_browser_connections_root_session() -> None:
    """A page method at the browser's root is refused; on a page session, or a page connection's root, it passes."""
    navigate = {"url": "http://example.com/"}
    assert decide("Page.navigate", navigate).reason == "not on the gateway's browser-level allowlist"
    assert decide("Page.navigate", navigate, "S-A") == FORWARD
    assert decide("Page.navigate", navigate, browser_level=False) == FORWARD
    assert decide("Target.getTargets", {}, "S-A").reason == "not on the gateway's page-session allowlist"


@pytest.mark.req("gateway:auto-attach")
def test_auto_attach_is_turned_into_one_attach_only_at_the_browsers_root() -> None:
    assert decide("Target.setAutoAttach", {"autoAttach": True}) == Verdict("auto_attach")
    assert decide("Target.setAutoAttach", {"autoAttach": True}, "S-A") == FORWARD


@pytest.mark.req("gateway:refuses-other-targets")
def test_an_attach_passes_only_to_a_visible_target_and_only_as_a_flatten_session() -> None:
    flatten_only = Verdict("refuse", "only flatten sessions; non-flatten messages would bypass the gateway")
    assert decide("Target.attachToTarget", {"targetId": BOUND, "flatten": True}) == FORWARD
    assert decide("Target.attachToTarget", {"targetId": CHILD, "flatten": True}) == FORWARD
    assert decide("Target.attachToTarget", {"targetId": OTHER, "flatten": True}) == OTHER_TARGET
    assert decide("Target.attachToTarget", {"targetId": BOUND}) == flatten_only
    assert decide("Target.attachToTarget", {"targetId": BOUND, "flatten": "true"}) == flatten_only
    assert decide("Target.autoAttachRelated", {"targetId": BOUND, "waitForDebuggerOnStart": False}) == FORWARD
    assert decide("Target.autoAttachRelated", {"targetId": OTHER, "waitForDebuggerOnStart": False}) == OTHER_TARGET


@pytest.mark.req("gateway:refuses-other-targets")
def test_target_info_passes_for_the_browser_itself_or_a_visible_target_only() -> None:
    assert decide("Target.getTargetInfo", {}) == FORWARD
    assert decide("Target.getTargetInfo", {"targetId": BOUND}) == FORWARD
    assert decide("Target.getTargetInfo", {"targetId": CHILD}) == FORWARD
    assert decide("Target.getTargetInfo", {"targetId": OTHER}) == OTHER_TARGET


@pytest.mark.req("gateway:refuses-other-targets")
def test_a_detach_passes_for_a_session_the_client_holds_or_a_visible_target_named_alone() -> None:
    assert decide("Target.detachFromTarget", {"sessionId": "S-A"}) == FORWARD
    assert decide("Target.detachFromTarget", {"targetId": BOUND}) == FORWARD
    assert decide("Target.detachFromTarget", {"sessionId": "S-B"}) == NOT_OURS
    assert decide("Target.detachFromTarget", {"sessionId": "S-B", "targetId": BOUND}) == NOT_OURS
    assert decide("Target.detachFromTarget", {"targetId": OTHER}) == NOT_OURS
    assert decide("Target.detachFromTarget", {}) == NOT_OURS


@pytest.mark.req("gateway:refuses-other-targets")
def test_the_window_for_a_target_passes_for_a_visible_one_or_the_sessions_own_page_only() -> None:
    """Without a targetId the window is the session's own target's: a page on a page session, none at the root."""
    assert decide("Browser.getWindowForTarget", {"targetId": BOUND}) == FORWARD
    assert decide("Browser.getWindowForTarget", {"targetId": OTHER}) == OTHER_TARGET
    assert decide("Browser.getWindowForTarget", {}) == OTHER_TARGET
    # A page session never gets this method from the static table; the target rule alone still lets it through.
    gw = gateway()
    assert gw.scope.target_verdict(client(), "Browser.getWindowForTarget", {}, "S-A", False) == FORWARD


@pytest.mark.req("gateway:refuses-other-targets")
def test_window_bounds_pass_only_for_a_window_the_bound_page_was_seen_in() -> None:
    assert decide("Browser.getWindowBounds", {"windowId": 5}) == FORWARD
    other_window = Verdict("refuse", "it names a window other than the bound page's")
    assert decide("Browser.getWindowBounds", {"windowId": 6}) == other_window
    assert decide("Browser.getWindowBounds", {}) == other_window


def test_a_method_with_no_target_rule_forwarded_by_the_policy_is_forwarded() -> None:
    assert decide("Browser.getVersion", {}) == FORWARD
    assert decide("Schema.getDomains", {}) == FORWARD


def test_an_absorbed_method_is_absorbed_before_any_target_rule() -> None:
    assert decide("Page.bringToFront", {}, "S-A").action == "absorb"


# -- answers the gateway reads ----------------------------------------------------------------------------------


def rewrite(
    gw: ScopedGateway, holder: GatewayClient, method: str, params: Mapping[str, Any], result: dict[str, Any], **kw: Any
) -> dict[str, Any]:
    pending = PendingCommand(1, method, dict(params), kw.pop("session_id", None), **kw)
    return gw.scope.rewrite_result(holder, pending, result)


@pytest.mark.req("gateway:auto-attach")
def test_the_answer_to_the_gateways_stand_in_attach_is_empty_and_gives_the_client_the_bound_pages_session() -> None:
    """The client asked setAutoAttach, whose answer is `{}`; the session it got is the bound page's."""
    gw, holder = gateway(), client()
    assert rewrite(gw, holder, "Target.setAutoAttach", {}, {"sessionId": "S1"}, auto_attach=True) == {}
    assert holder.sessions == {"S1": BOUND}
    assert rewrite(gw, holder, "Target.setAutoAttach", {}, {"sessionId": 7}, auto_attach=True) == {}
    assert holder.sessions == {"S1": BOUND}


def test_an_answer_the_gateway_does_not_read_is_returned_as_it_came() -> None:
    gw, holder = gateway(), client()
    result = {"sessionId": "S9", "windowId": 3, "targetInfos": [{"targetId": OTHER}]}
    assert rewrite(gw, holder, "Runtime.evaluate", {"targetId": BOUND}, result) is result
    assert holder.sessions == {}
    assert gw.scope.windows == set()


@pytest.mark.req("gateway:discovery-only-bound")
def test_a_target_list_is_cut_to_the_bound_page_and_its_children() -> None:
    gw, holder = gateway(), client()
    gw.scope.children.add(CHILD)
    infos = [{"targetId": BOUND}, {"targetId": OTHER}, {"targetId": CHILD}, {"type": "browser"}]
    answer = rewrite(gw, holder, "Target.getTargets", {}, {"targetInfos": infos, "extra": 1})
    assert answer == {"targetInfos": [{"targetId": BOUND}, {"targetId": CHILD}], "extra": 1}
    assert rewrite(gw, holder, "Target.getTargets", {}, {}) == {"targetInfos": []}


def test_the_frame_tree_of_the_bound_pages_session_names_its_current_document() -> None:
    gw, holder = gateway(), client(sessions={"S-A": BOUND})
    tree = {"frameTree": {"frame": {"id": "F", "loaderId": "L1"}}}
    assert rewrite(gw, holder, "Page.getFrameTree", {}, tree, session_id="S-A") == tree
    assert (gw.document, gw.documents) == ("L1", 1)


@pytest.mark.req("gateway:iframe-sessions")
def test_an_attach_answer_gives_the_client_the_session_of_the_target_it_named() -> None:
    gw, holder = gateway(), client()
    gw.scope.children.add(CHILD)
    rewrite(gw, holder, "Target.attachToTarget", {"targetId": CHILD, "flatten": True}, {"sessionId": "S-C"})
    rewrite(gw, holder, "Target.attachToTarget", {"flatten": True}, {"sessionId": "S-A"})
    rewrite(gw, holder, "Target.attachToTarget", {"targetId": BOUND}, {"sessionId": 3})
    assert holder.sessions == {"S-C": CHILD, "S-A": BOUND}


@pytest.mark.req("gateway:refuses-other-targets")
def test_only_the_bound_pages_own_window_becomes_one_whose_bounds_may_be_read() -> None:
    gw, holder = gateway(), client(sessions={"S-A": BOUND, "S-C": CHILD})
    gw.scope.children.add(CHILD)
    rewrite(gw, holder, "Browser.getWindowForTarget", {"targetId": BOUND}, {"windowId": 1})
    rewrite(gw, holder, "Browser.getWindowForTarget", {"targetId": CHILD}, {"windowId": 2})
    rewrite(gw, holder, "Browser.getWindowForTarget", {}, {"windowId": 3}, session_id="S-A")
    rewrite(gw, holder, "Browser.getWindowForTarget", {}, {"windowId": 4}, session_id="S-C")
    rewrite(gw, holder, "Browser.getWindowForTarget", {}, {"windowId": 5})
    rewrite(gw, holder, "Browser.getWindowForTarget", {"targetId": BOUND}, {"windowId": "6"})
    assert gw.scope.windows == {1, 3, 5}


# -- events the client may see ----------------------------------------------------------------------------------


def event(method: str, session: str | None = None, **params: Any) -> dict[str, Any]:
    message: dict[str, Any] = {"method": method, "params": params}
    if session is not None:
        message["sessionId"] = session
    return message


def attached(target: str, session: str, on: str | None = None) -> dict[str, Any]:
    return event("Target.attachedToTarget", on, sessionId=session, targetInfo={"targetId": target, "type": "page"})


@pytest.mark.req("gateway:refuses-other-targets")
def test_an_event_on_a_session_the_client_does_not_hold_never_reaches_it() -> None:
    gw, holder = gateway(), client(sessions={"S-A": BOUND})
    assert not gw.scope.allow_event(holder, event("Page.loadEventFired", "S-B"))
    assert gw.scope.allow_event(holder, event("Page.loadEventFired", "S-A"))


@pytest.mark.req("gateway:iframe-sessions")
def test_a_target_attached_under_the_bound_page_becomes_a_visible_child_with_its_session() -> None:
    gw, holder = gateway(), client(sessions={"S-A": BOUND})
    assert gw.scope.allow_event(holder, attached(CHILD, "S-C", on="S-A"))
    assert gw.scope.visible(CHILD)
    assert holder.sessions["S-C"] == CHILD


@pytest.mark.req("gateway:iframe-sessions")
def test_on_a_page_connection_the_root_session_is_the_bound_page_so_what_attaches_there_is_its_child() -> None:
    gw, holder = gateway(), client(browser_level=False)
    assert gw.scope.allow_event(holder, attached(CHILD, "S-C"))
    assert gw.scope.visible(CHILD)
    assert holder.sessions == {"S-C": CHILD}
    assert gw.scope.allow_event(holder, event("Page.loadEventFired"))


@pytest.mark.req("gateway:refuses-other-targets")
def test_at_the_browsers_root_only_an_attach_to_a_visible_target_reaches_the_client() -> None:
    gw, holder = gateway(), client()
    assert not gw.scope.allow_event(holder, attached(OTHER, "S-B"))
    assert not gw.scope.visible(OTHER)
    assert holder.sessions == {}
    assert gw.scope.allow_event(holder, attached(BOUND, "S-A"))
    assert holder.sessions == {"S-A": BOUND}
    assert gw.scope.children == set()


def test_an_attach_event_without_a_target_or_a_session_id_adds_nothing() -> None:
    gw, holder = gateway(), client(sessions={"S-A": BOUND})
    assert not gw.scope.allow_event(holder, event("Target.attachedToTarget", "S-A", sessionId="S-X"))
    assert gw.scope.allow_event(holder, event("Target.attachedToTarget", "S-A", targetInfo={"targetId": CHILD}))
    assert holder.sessions == {"S-A": BOUND}
    assert gw.scope.children == {CHILD}


@pytest.mark.req("gateway:events")
def test_chromium_detaching_the_bound_pages_session_unasked_is_reported_once_and_passed_on() -> None:
    seen: list[GatewayEvent] = []
    gw = ScopedGateway("http://127.0.0.1:9", BOUND, on_event=seen.append)
    holder = client(sessions={"S-A": BOUND, "S-C": CHILD}, conn=4)
    assert not gw.scope.allow_event(holder, event("Target.detachedFromTarget", sessionId="S-B"))
    assert gw.scope.allow_event(holder, event("Target.detachedFromTarget", sessionId="S-C"))
    assert seen == []
    assert gw.scope.allow_event(holder, event("Target.detachedFromTarget", sessionId="S-A"))
    assert gw.scope.allow_event(holder, event("Target.detachedFromTarget", sessionId="S-A"))
    assert seen == [GatewayEvent("detached", BOUND, "client 4 session S-A")]
    assert gw.lost == "detached: client 4 session S-A"
    assert "S-A" in holder.detaching
    assert "S-A" in holder.sessions


def test_a_detach_the_client_asked_for_is_passed_on_and_reported_as_nothing() -> None:
    seen: list[GatewayEvent] = []
    gw = ScopedGateway("http://127.0.0.1:9", BOUND, on_event=seen.append)
    holder = client(sessions={"S-A": BOUND})
    holder.detaching.add("S-A")
    assert gw.scope.allow_event(holder, event("Target.detachedFromTarget", sessionId="S-A"))
    assert seen == []
    assert gw.lost is None


@pytest.mark.req("gateway:discovery-only-bound")
def test_target_events_reach_the_client_about_visible_targets_only() -> None:
    gw, holder = gateway(), client()
    gw.scope.children.add(CHILD)
    for method in ("Target.targetCreated", "Target.targetInfoChanged"):
        assert gw.scope.allow_event(holder, event(method, targetInfo={"targetId": BOUND}))
        assert gw.scope.allow_event(holder, event(method, targetInfo={"targetId": CHILD}))
        assert not gw.scope.allow_event(holder, event(method, targetInfo={"targetId": OTHER}))
    for method in ("Target.targetDestroyed", "Target.targetCrashed"):
        assert gw.scope.allow_event(holder, event(method, targetId=BOUND))
        assert not gw.scope.allow_event(holder, event(method, targetId=OTHER))


@pytest.mark.req("gateway:refuses-other-targets")
def test_non_flatten_messages_never_reach_the_client_even_on_the_bound_pages_session() -> None:
    gw, holder = gateway(), client(sessions={"S-A": BOUND})
    message = event("Target.receivedMessageFromTarget", "S-A", sessionId="S-X", message="{}")
    assert not gw.scope.allow_event(holder, message)


@pytest.mark.req("gateway:refuses-other-targets")
def test_at_the_browsers_root_only_inspector_events_pass_everything_else_there_is_browser_wide() -> None:
    gw, holder = gateway(), client(sessions={"S-A": BOUND})
    assert gw.scope.allow_event(holder, event("Inspector.detached", reason="x"))
    assert not gw.scope.allow_event(holder, event("Browser.downloadWillBegin", guid="g"))
    assert not gw.scope.allow_event(holder, {"params": {}})
    assert gw.scope.allow_event(holder, event("Browser.downloadWillBegin", "S-A", guid="g"))


# -- HTTP discovery against a real (in-process) upstream ---------------------------------------------------------


@dataclass
class Upstream:
    """A tiny CDP HTTP endpoint: what Chromium answers on /json/version and /json/list."""

    url: str
    hostport: str
    version: dict[str, Any]


@pytest.fixture
async def upstream() -> AsyncIterator[Upstream]:
    app = web.Application()
    runner = web.AppRunner(app)
    answers: dict[str, Any] = {}

    async def json_endpoint(request: web.Request) -> web.Response:
        if request.path not in answers:
            return web.Response(status=500)
        return web.json_response(answers[request.path])

    app.router.add_get("/{tail:.*}", json_endpoint)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    hostport = f"127.0.0.1:{port}"
    version = {"Browser": "Chrome/1", "webSocketDebuggerUrl": f"ws://{hostport}/devtools/browser/xyz"}
    answers["/json/version"] = version
    answers["/json/list"] = [
        {"id": BOUND, "type": "page", "webSocketDebuggerUrl": f"ws://{hostport}/devtools/page/{BOUND}"},
        {"id": OTHER, "type": "page", "webSocketDebuggerUrl": f"ws://{hostport}/devtools/page/{OTHER}"},
    ]
    try:
        yield Upstream(f"http://{hostport}", hostport, version)
    finally:
        await runner.cleanup()


async def serve_json(gw: ScopedGateway, path: str) -> web.Response:
    answer = await gw.scope.serve_json(path, gw.upstream, gw.admission.base)
    assert isinstance(answer, web.Response)
    return answer


@pytest.mark.req("gateway:discovery-only-bound")
async def test_discovery_names_the_gateway_and_lists_only_the_bound_page(upstream: Upstream) -> None:
    gw = gateway(upstream.url)
    try:
        version = await serve_json(gw, "/json/version")
        assert version.status == 200
        assert json_of(version) == {
            "Browser": "Chrome/1",
            "webSocketDebuggerUrl": f"ws://{HOSTPORT}/{gw.admission.secret}/devtools/browser/xyz",
        }
        expected = [
            {
                "id": BOUND,
                "type": "page",
                "webSocketDebuggerUrl": f"ws://{HOSTPORT}/{gw.admission.secret}/devtools/page/{BOUND}",
            }
        ]
        for path in ("/json/list", "/json", "/json/"):
            listing = await serve_json(gw, path)
            assert (listing.status, json_of(listing)) == (200, expected), path
        del upstream.version["webSocketDebuggerUrl"]
        bare = json_of(await serve_json(gw, "/json/version"))
        assert bare["webSocketDebuggerUrl"] == f"ws://{HOSTPORT}/{gw.admission.secret}/devtools/browser/gateway"
    finally:
        await gw.upstream.close()


def json_of(response: web.Response) -> Any:
    return json.loads(cast(str, response.text))


@pytest.mark.req("gateway:discovery-only-bound")
async def test_discovery_refuses_to_open_focus_or_close_pages_and_knows_no_other_endpoint(upstream: Upstream) -> None:
    gw = gateway(upstream.url)
    try:
        reason = "a client behind the gateway may not open, focus or close pages"
        for name in ("new", "activate", "close"):
            answer = await serve_json(gw, f"/json/{name}/{BOUND}")
            assert (answer.status, answer.text) == (403, refusal_message(f"/json/{name}", reason))
        assert gw.refusals == [RefusedCommand(0, f"HTTP /json/{name}", reason) for name in ("new", "activate", "close")]
        for path in ("/json/version/x", "/json/list/x", "/json/protocol"):
            answer = await serve_json(gw, path)
            assert (answer.status, answer.text) == (404, f"computer_use gateway: no such endpoint {path}"), path
    finally:
        await gw.upstream.close()


@pytest.mark.req("gateway:discovery-only-bound")
async def test_discovery_answers_502_naming_the_upstream_when_it_does_not_answer(upstream: Upstream) -> None:
    gw = gateway(upstream.url)
    try:
        gw.upstream.http_base = upstream.url + "/missing"
        answer = await serve_json(gw, "/json/version")
        assert answer.status == 502
        assert cast(str, answer.text).startswith(
            f"the upstream CDP endpoint {upstream.url} did not answer /json/version"
        )
        assert (await serve_json(gw, "/json/list")).status == 502
    finally:
        await gw.upstream.close()
