"""Which CDP methods a scoped gateway forwards, refuses or absorbs, independent of targets and sessions.

The gateway's other half (which target or session a command may name) lives in `gateway.py`, because it needs
the connection's state. This module is the static table: methods that act on the whole browser or on data that
belongs to other sites are refused wherever they are sent; a few methods are *absorbed* (answered `{}`, never
forwarded) because a supported client needs them to succeed but the runtime must never let them take effect.

At browser level (the root session of a `/devtools/browser/…` connection) the table is an allowlist: anything sent
there acts on the browser as a whole, so only what a CDP client needs to find and attach to its one page passes.
On the bound page's sessions it is a denylist: those methods act on that page unless listed here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

Action = Literal["forward", "refuse", "absorb", "auto_attach"]
"""`auto_attach`: a browser-level `Target.setAutoAttach`, which the gateway turns into an attach of the bound page."""


@dataclass(frozen=True)
class Verdict:
    action: Action
    reason: str = ""


FORWARD = Verdict("forward")

ABSORBED: dict[str, str] = {
    # Playwright's connectOverCDP fails the whole connection if this errors; the behaviour is browser-wide
    # (it would redirect every page's downloads), so it is acknowledged and not applied.
    "Browser.setDownloadBehavior": "download behaviour is browser-wide; acknowledged, not applied",
    "Page.bringToFront": "the runtime never raises or focuses a window; acknowledged, not applied",
    # chrome-devtools-mcp turns focus emulation on for the page it initializes and gives up on that page if the
    # call fails. Faking focus is still a focus change the runtime never makes, so it is acknowledged only.
    "Emulation.setFocusEmulationEnabled": "the runtime never fakes or changes focus; acknowledged, not applied",
}

_BROWSER_WIDE = "acts on the whole browser, not on the bound page"
_OTHER_SITES = "reads or changes data of other sites, not only the bound page's"

REFUSED: dict[str, str] = {
    "Target.createTarget": "opens a page the session is not bound to",
    # Refused rather than absorbed: it raises a window (focus), it can name any target, and none of the
    # supported clients needs it to succeed, so an honest error is better than a pretend success.
    "Target.activateTarget": "raises a window; the runtime never changes focus",
    "Target.createBrowserContext": _BROWSER_WIDE,
    "Target.disposeBrowserContext": _BROWSER_WIDE,
    # Gives page JavaScript a binding that speaks CDP for the target: a way around this gateway.
    "Target.exposeDevToolsProtocol": "would hand the page an unscoped CDP binding",
    "Target.attachToBrowserTarget": "the browser target is not the bound page",
    "Target.getDevToolsTarget": "names a DevTools target outside the bound page",
    "Target.openDevTools": "opens a DevTools window",
    # Non-flatten mode wraps a command inside a string; the inner command would bypass this table.
    "Target.sendMessageToTarget": "non-flatten messages would hide the inner command from the gateway",
    "Target.setRemoteLocations": _BROWSER_WIDE,
    "Browser.close": _BROWSER_WIDE,
    "Browser.crash": _BROWSER_WIDE,
    "Browser.crashGpuProcess": _BROWSER_WIDE,
    "Browser.setPermission": "permissions are granted per origin for the whole browser context",
    "Browser.grantPermissions": "permissions are granted per origin for the whole browser context",
    "Browser.resetPermissions": "permissions are granted per origin for the whole browser context",
    "Browser.setWindowBounds": "windows are placed by the host, never by the agent",
    "Browser.setContentsSize": "windows are placed by the host, never by the agent",
    "Browser.setDockTile": _BROWSER_WIDE,
    "Browser.executeBrowserCommand": _BROWSER_WIDE,
    "Browser.cancelDownload": "downloads belong to the browser, not the page",
    # Reveals the profile directory, the debugging port and every flag.
    "Browser.getBrowserCommandLine": _BROWSER_WIDE,
    "Browser.getHistograms": _BROWSER_WIDE,
    "Browser.getHistogram": _BROWSER_WIDE,
    "Browser.addPrivacySandboxEnrollmentOverride": _BROWSER_WIDE,
    "Browser.addPrivacySandboxCoordinatorKeyConfig": _BROWSER_WIDE,
    # Filtering targets does not isolate the cookie jar: from the bound page's session these return or change
    # every site's cookies.
    "Network.getAllCookies": _OTHER_SITES,
    "Network.setCookie": _OTHER_SITES,
    "Network.setCookies": _OTHER_SITES,
    "Network.deleteCookies": _OTHER_SITES,
    "Network.clearBrowserCookies": _OTHER_SITES,
    "Network.clearBrowserCache": _OTHER_SITES,
    "Network.setCookieControls": _BROWSER_WIDE,
    # Fetches any URL with the page's network context and hands back the body, ignoring CORS.
    "Network.loadNetworkResource": _OTHER_SITES,
    # These act on every renderer at once.
    "Memory.simulatePressureNotification": _BROWSER_WIDE,
    "Memory.setPressureNotificationsSuppressed": _BROWSER_WIDE,
    "Memory.getBrowserSamplingProfile": _BROWSER_WIDE,
    "Memory.getAllTimeSamplingProfile": _BROWSER_WIDE,
}

REFUSED_DOMAINS: dict[str, str] = {
    # Storage, CacheStorage, IndexedDB and DOMStorage are addressed by origin or storage key, not by page: from
    # the bound page's session they reach any site's cookies, databases and local storage.
    "Storage": _OTHER_SITES,
    "CacheStorage": _OTHER_SITES,
    "IndexedDB": _OTHER_SITES,
    "DOMStorage": _OTHER_SITES,
    "BackgroundService": _OTHER_SITES,
    "SystemInfo": _BROWSER_WIDE,
    "Extensions": _BROWSER_WIDE,
    "PWA": "installs or launches apps in new windows",
    "Cast": _BROWSER_WIDE,
    "Tethering": _BROWSER_WIDE,
}

# Per-frame reads inside a refused domain: they only name the bound page's own frames.
DOMAIN_EXCEPTIONS = frozenset({"Storage.getStorageKeyForFrame", "Storage.getStorageKey"})

# Browser level: only what a client needs to find, attach to and describe its one page. Target.* methods that name
# a target or session are checked against the binding by the gateway after this table lets them through.
# Everything else sent there is browser-wide by construction (Tracing.* traces every process, Fetch.* intercepts
# every page's requests, Security.* ignores certificate errors everywhere), so it is refused.
BROWSER_LEVEL_ALLOWED = frozenset(
    {
        "Browser.getVersion",
        "Browser.getWindowForTarget",
        "Browser.getWindowBounds",
        "Schema.getDomains",
        "Target.getTargets",
        "Target.getTargetInfo",
        "Target.setDiscoverTargets",
        "Target.setAutoAttach",
        "Target.attachToTarget",
        "Target.detachFromTarget",
        "Target.closeTarget",
        "Target.autoAttachRelated",
        # Only browser context ids; Playwright asks for them to tell the default context apart.
        "Target.getBrowserContexts",
    }
)

# On the bound page's sessions, the Browser domain is browser-wide except these.
PAGE_LEVEL_BROWSER_ALLOWED = frozenset({"Browser.getVersion", "Browser.getWindowForTarget"})


def refusal_message(method: str, reason: str) -> str:
    """The error text a refused client sees; it names the gateway so nobody mistakes it for Chromium's."""
    return f"computer_use gateway: {method} is not allowed ({reason})"


def static_verdict(method: str, params: dict[str, Any], *, browser_level: bool) -> Verdict:
    """The verdict that depends on the method alone (and on whether it was sent at browser level)."""
    if method in ABSORBED:
        return Verdict("absorb", ABSORBED[method])
    if method in REFUSED:
        return Verdict("refuse", REFUSED[method])
    domain = method.split(".", 1)[0]
    if domain in REFUSED_DOMAINS and method not in DOMAIN_EXCEPTIONS:
        return Verdict("refuse", REFUSED_DOMAINS[domain])
    if browser_level:
        if method not in BROWSER_LEVEL_ALLOWED:
            return Verdict("refuse", "browser-level method outside the gateway's allowlist: " + _BROWSER_WIDE)
        return FORWARD
    if domain == "Browser" and method not in PAGE_LEVEL_BROWSER_ALLOWED:
        return Verdict("refuse", _BROWSER_WIDE)
    # With `urls` it returns cookies of any site; without, only those of the page and its frames.
    if method == "Network.getCookies" and params.get("urls"):
        return Verdict("refuse", _OTHER_SITES)
    return FORWARD
