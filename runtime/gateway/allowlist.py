"""Which CDP methods a scoped gateway forwards, refuses or absorbs, independent of targets and sessions.

The gateway's other half (which target or session a command may name) lives in `scope.py`, because it needs
the connection's state. This module is the static table, and it is an allowlist at both levels:

- At browser level (the root session of a `/devtools/browser/…` connection) only what a CDP client needs to find,
  attach to and describe its one page passes: anything else sent there acts on the browser as a whole.
- On the bound page's sessions (and those of its iframes and workers) only the methods a supported backend was
  seen sending pass, each with the backends that need it and what for (`PAGE_ALLOWED`). A few of them pass only
  in a harmless form (`CONDITIONS`): navigation to http(s) only, new-document scripts and bindings only in an
  isolated world, exceptions never pausing the page.

The lists were read from what each backend sent through the gateway over the backend, gateway, isolation, parity,
honesty, visual, foreground, policy and registry suites (docs/security.md has the table per backend, and
`suites/security/test_gateway_allowlist.py` checks each backend's normal work against it). A method an upstream
starts sending after an upgrade is refused with an error naming the gateway until it is reviewed and listed here.
A few methods are *absorbed* (answered `{}`, never forwarded) because a backend needs them to succeed but the
runtime must never let them take effect.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import urlsplit

Handling = Literal["forward", "refuse", "absorb", "auto_attach"]
"""`auto_attach`: a browser-level `Target.setAutoAttach`, which the gateway turns into an attach of the bound page."""

PW = "playwright_mcp"
CDM = "chrome_devtools_mcp"
OCC = "open_claude_chrome"


@dataclass(frozen=True)
class Verdict:
    action: Handling
    reason: str = ""


FORWARD = Verdict("forward")


@dataclass(frozen=True)
class Allowed:
    """Why a method is allowed: the backends seen sending it and what they use it for."""

    backends: tuple[str, ...]
    why: str


ABSORBED: dict[str, Allowed] = {
    # Playwright's connectOverCDP (the Python one at least) fails the whole connection if this errors; the behaviour
    # is browser-wide (it would redirect every page's downloads), so it is acknowledged and not applied.
    "Browser.setDownloadBehavior": Allowed((), "download behaviour is browser-wide; acknowledged, not applied"),
    "Page.bringToFront": Allowed((), "the runtime never raises or focuses a window; acknowledged, not applied"),
    # chrome-devtools-mcp turns focus emulation on for the page it initializes and gives up on that page if the
    # call fails. Faking focus is still a focus change the runtime never makes, so it is acknowledged only.
    "Emulation.setFocusEmulationEnabled": Allowed((CDM,), "the runtime never fakes or changes focus; not applied"),
}

BROWSER_LEVEL_ALLOWED: dict[str, Allowed] = {
    "Browser.getVersion": Allowed((PW,), "the browser's version, asked once on connect"),
    "Browser.getWindowForTarget": Allowed((), "the bound page's window (a targetId naming another page is refused)"),
    "Browser.getWindowBounds": Allowed((), "the bound page's window bounds (another window is refused)"),
    "Schema.getDomains": Allowed((), "the protocol's domain list, nothing of any page"),
    "Target.getTargets": Allowed((CDM, OCC), "target discovery, answered with the bound page only"),
    "Target.getTargetInfo": Allowed((PW,), "the browser's or the bound page's own target info"),
    "Target.setDiscoverTargets": Allowed((CDM, OCC), "target events, filtered to the bound page"),
    "Target.setAutoAttach": Allowed((PW, CDM), "turned into one attach of the bound page"),
    "Target.attachToTarget": Allowed((CDM, OCC), "a flatten session on the bound page (or its children) only"),
    "Target.detachFromTarget": Allowed((PW, CDM), "ending a session the client holds"),
    "Target.autoAttachRelated": Allowed((), "auto-attach to targets related to the bound page only"),
    # Only browser context ids; a client asks for them to tell the default context apart.
    "Target.getBrowserContexts": Allowed((CDM,), "browser context ids, to tell the default context apart"),
}

PAGE_ALLOWED: dict[str, Allowed] = {
    # -- reading the page
    "Accessibility.getFullAXTree": Allowed((CDM, OCC), "the accessibility tree an observation is built from"),
    "DOMSnapshot.captureSnapshot": Allowed((OCC,), "layout and text of the page for read_page and get_page_text"),
    "DOM.enable": Allowed((CDM, OCC), "node ids for the elements a snapshot names"),
    "DOM.describeNode": Allowed((PW, CDM), "the node behind an element handle"),
    "DOM.resolveNode": Allowed((PW, CDM, OCC), "a JavaScript handle of a snapshot's node, to act on it"),
    "DOM.getContentQuads": Allowed((PW,), "where an element is, to click its center"),
    "DOM.getBoxModel": Allowed((OCC,), "where an element is, to click its center"),
    "DOM.getFrameOwner": Allowed((OCC,), "the iframe element that holds a child frame"),
    "DOM.getNodeForLocation": Allowed((OCC,), "the element under a point, checked before a point click"),
    "DOM.scrollIntoViewIfNeeded": Allowed((PW, CDM, OCC), "bringing the element to act on into view"),
    "CSS.enable": Allowed((CDM,), "style tracking Puppeteer turns on for every page it initializes"),
    "Page.captureScreenshot": Allowed((PW, CDM, OCC), "the one viewport screenshot of a visual observation"),
    "Page.getLayoutMetrics": Allowed((PW, OCC), "the viewport, for screenshots and point clicks"),
    "Page.getFrameTree": Allowed((PW, CDM, OCC), "the page's frames"),
    "Page.getResourceTree": Allowed((CDM,), "the page's frames and resources, on initialization"),
    "Page.getNavigationHistory": Allowed((OCC,), "the history entries of `navigate back/forward`"),
    # -- lifecycle and events of the page
    "Page.enable": Allowed((PW, CDM, OCC), "navigation, load and dialog events"),
    "Page.setLifecycleEventsEnabled": Allowed((PW, CDM), "load-state events an action waits for"),
    "Page.setInterceptFileChooserDialog": Allowed((PW,), "a file chooser is reported, never opened"),
    "Page.setFontFamilies": Allowed((PW,), "Playwright's default fonts for the page"),
    "Runtime.enable": Allowed((PW, CDM), "execution contexts, console and exceptions"),
    "Runtime.runIfWaitingForDebugger": Allowed((PW, CDM), "resumes a page or worker auto-attached paused"),
    "Runtime.getIsolateId": Allowed((CDM,), "which V8 isolate a target runs in"),
    "Log.enable": Allowed((PW, CDM), "browser log entries (console collection)"),
    "Log.startViolationsReport": Allowed((CDM,), "long-task and blocked-event reports for its console"),
    "Network.enable": Allowed((PW, CDM), "request events an action waits for"),
    "Network.setAttachDebugStack": Allowed((CDM,), "initiator stacks for its network collector"),
    "Audits.enable": Allowed((CDM,), "the page's issues (its console collector)"),
    "Autofill.enable": Allowed((CDM,), "autofill events Puppeteer turns on for every page"),
    "Autofill.setAddresses": Allowed((CDM,), "sent with no addresses; test addresses for DevTools only"),
    "Performance.enable": Allowed((CDM,), "performance metrics Puppeteer turns on for every page"),
    "Profiler.enable": Allowed((CDM,), "source positions for its console stack traces"),
    "Debugger.enable": Allowed((CDM,), "scripts and source maps for its console stack traces"),
    "Debugger.setAsyncCallStackDepth": Allowed((CDM,), "async stack traces for its console"),
    "Debugger.setBlackboxPatterns": Allowed((CDM,), "hides its own scripts from stack traces"),
    "Debugger.setBlackboxExecutionContexts": Allowed((CDM,), "hides its utility world from stack traces"),
    "Debugger.setPauseOnExceptions": Allowed((CDM,), "sent with state none: the page never pauses"),
    "Debugger.setSkipAllPauses": Allowed((CDM,), "the page never pauses on a breakpoint or `debugger`"),
    "WebMCP.enable": Allowed((CDM,), "the page's declared WebMCP tools, listed on initialization"),
    "Storage.getStorageKey": Allowed((CDM,), "the storage key of the page's own frame, nothing stored"),
    "Target.setAutoAttach": Allowed((PW, CDM, OCC), "sessions for the page's own iframes and workers"),
    # -- script, only in the backend's own world or on handles it holds
    "Page.createIsolatedWorld": Allowed((PW, CDM, OCC), "the backend's own isolated world in a frame"),
    "Page.addScriptToEvaluateOnNewDocument": Allowed((PW, CDM), "creates its isolated world in new documents"),
    "Runtime.addBinding": Allowed((CDM,), "Puppeteer's ARIA query handler, bound in its own world"),
    "Runtime.evaluate": Allowed((PW, CDM, OCC), "the backend's injected snapshot and action scripts"),
    "Runtime.callFunctionOn": Allowed((PW, CDM, OCC), "functions run on element handles it holds"),
    "Runtime.getProperties": Allowed((PW,), "properties of a handle it holds"),
    "Runtime.releaseObject": Allowed((PW, CDM), "frees a handle it holds"),
    # -- acting on the page
    "Input.dispatchMouseEvent": Allowed((PW, CDM, OCC), "click, hover and wheel scroll on the page"),
    "Input.dispatchKeyEvent": Allowed((PW, CDM, OCC), "key presses and typing"),
    "Input.insertText": Allowed((PW, OCC), "typing text in one event"),
    "Page.navigate": Allowed((PW, CDM, OCC), "the navigate action, to an http(s) URL only"),
    "Page.navigateToHistoryEntry": Allowed((OCC,), "navigate back/forward within the page's own history"),
    "Overlay.enable": Allowed((OCC,), "the action cursor"),
    "Overlay.highlightRect": Allowed((OCC,), "the action cursor at the point acted on"),
    "Overlay.hideHighlight": Allowed((OCC,), "hides the action cursor"),
}


def _http_only(params: dict[str, Any]) -> str:
    scheme = urlsplit(str(params.get("url", ""))).scheme.lower()
    if scheme in ("http", "https"):
        return ""
    return (
        f"navigation to a {scheme or 'relative'}: URL (file:, chrome:, devtools:, javascript:, data:, … reach "
        "local files, browser pages or script in the page's own world); http(s) only"
    )


def _isolated_world(params: dict[str, Any]) -> str:
    if params.get("worldName"):
        return ""
    return "a script for every new document of the page's own (main) world; only into an isolated world"


def _scoped_binding(params: dict[str, Any]) -> str:
    if params.get("executionContextName") or params.get("executionContextId") is not None:
        return ""
    return "a binding in every context, the page's own included: a channel from page script to the client"


def _never_pause(params: dict[str, Any]) -> str:
    return "" if params.get("state") == "none" else "pausing on exceptions would freeze the user's page"


CONDITIONS: dict[str, Callable[[dict[str, Any]], str]] = {
    "Page.navigate": _http_only,
    "Page.addScriptToEvaluateOnNewDocument": _isolated_world,
    "Runtime.addBinding": _scoped_binding,
    "Debugger.setPauseOnExceptions": _never_pause,
}
"""Allowed methods that pass only in a harmless form: each returns why the params are refused, or ""."""

_BROWSER_WIDE = "acts on the whole browser, not on the bound page"
_OTHER_SITES = "reads or changes data of other sites, not only the bound page's"

WHY_REFUSED: dict[str, str] = {
    "Target.createTarget": "opens a page the session is not bound to",
    "Target.closeTarget": "closing a Page is the user's act, never the agent's",
    "Target.activateTarget": "raises a window; the runtime never changes focus",
    "Target.exposeDevToolsProtocol": "would hand the page an unscoped CDP binding",
    "Target.sendMessageToTarget": "non-flatten messages would hide the inner command from the gateway",
    # chrome-devtools-mcp asks this of every page it finds (is it a DevTools window?) and takes the refusal as "no".
    "Target.getDevToolsTarget": "names a DevTools target outside the bound page",
    "Browser.close": _BROWSER_WIDE,
    "Browser.getBrowserCommandLine": "reveals the profile directory, the debugging port and every flag",
    "DOM.setFileInputFiles": "would upload local files through the page's file inputs",
    "Page.handleJavaScriptDialog": "a dialog on the page is the user's to answer",
    "Page.setDownloadBehavior": "would write downloads to a folder of the client's choice",
    "Network.getCookies": "returns the page's cookies, HttpOnly ones included",
    "Network.getAllCookies": _OTHER_SITES,
    "Network.setCookie": _OTHER_SITES,
    "Network.loadNetworkResource": "fetches any URL with the page's network context, ignoring CORS",
    "Storage.getCookies": _OTHER_SITES,
}
"""Reasons for refusals worth a specific message; everything off the allowlists is refused all the same."""

Policy = Callable[[str, Mapping[str, Any], bool], Verdict]
"""`(method, params, browser_level) -> Verdict`: the static decision a gateway makes before its target checks."""


def refusal_message(method: str, reason: str) -> str:
    """The error text a refused client sees; it names the gateway so nobody mistakes it for Chromium's."""
    return f"computer_use gateway: {method} is not allowed ({reason})"


def static_verdict(method: str, params: Mapping[str, Any], browser_level: bool) -> Verdict:
    """The verdict that depends on the method and its params alone (and on whether it was sent at browser level)."""
    if method in ABSORBED:
        return Verdict("absorb", ABSORBED[method].why)
    allowed = BROWSER_LEVEL_ALLOWED if browser_level else PAGE_ALLOWED
    if method not in allowed:
        level = "browser-level" if browser_level else "page-session"
        return Verdict("refuse", WHY_REFUSED.get(method, f"not on the gateway's {level} allowlist"))
    condition = CONDITIONS.get(method)
    problem = condition(dict(params)) if condition is not None else ""
    return Verdict("refuse", problem) if problem else FORWARD
