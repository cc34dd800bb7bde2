"""What kind of call a CDP method is. The categories are what the release proofs count.

- `screenshot`: pixels leave the page (visual-limit proof).
- `focus`: brings a page or window forward or fakes focus (non-foreground proof).
- `input`: synthetic user input (`Input.*`).
- `write`: changes page state without input (navigation, DOM edits, dialogs, emulation, storage).
- `script`: runs page JavaScript; may read or write, so it is its own category rather than a guess.
- `window`: window geometry and state.
- `discovery`: reads and events that describe targets — other Pages' URLs, titles and ids included
  (`Target.getTargets`, `Target.getTargetInfo`, `Target.targetCreated/InfoChanged/Destroyed/Crashed`,
  `Target.attachedToTarget`, `/json/list`). Counted apart from page commands: only the runtime's registry may
  see other Pages this way, never a backend.
- `target`: target management (`Target.*`, `/json/new`, `/json/close`).
- `read`: everything else (snapshots, accessibility, DOM reads, domain enables).
"""

from __future__ import annotations

SCREENSHOT = frozenset({"Page.captureScreenshot", "Page.startScreencast", "Page.captureSnapshot"})
FOCUS = frozenset(
    {
        "Page.bringToFront",
        "Target.activateTarget",
        "Emulation.setFocusEmulationEnabled",
        "HTTP /json/activate",
    }
)
WINDOW = frozenset({"Browser.setWindowBounds", "Browser.getWindowForTarget", "Browser.getWindowBounds"})
SCRIPT = frozenset({"Runtime.evaluate", "Runtime.callFunctionOn", "Runtime.runScript", "Runtime.compileScript"})
WRITE = frozenset(
    {
        "Page.navigate",
        "Page.reload",
        "Page.navigateToHistoryEntry",
        "Page.setDocumentContent",
        "Page.handleJavaScriptDialog",
        "Page.close",
        "Page.crash",
        "Page.setBypassCSP",
        "DOM.focus",
        "DOM.setAttributeValue",
        "DOM.setAttributesAsText",
        "DOM.setNodeValue",
        "DOM.setOuterHTML",
        "DOM.setNodeName",
        "DOM.removeNode",
        "DOM.removeAttribute",
        "DOM.setFileInputFiles",
        "DOM.copyTo",
        "DOM.moveTo",
        "DOM.undo",
        "DOM.redo",
        "Network.setCookie",
        "Network.setCookies",
        "Network.deleteCookies",
        "Network.clearBrowserCookies",
        "Network.clearBrowserCache",
        "Storage.clearDataForOrigin",
        "Storage.setCookies",
        "Storage.clearCookies",
    }
)
TARGET_HTTP = frozenset({"HTTP /json/new", "HTTP /json/close"})
DISCOVERY = frozenset(
    {
        "Target.getTargets",
        "Target.getTargetInfo",
        "Target.targetCreated",
        "Target.targetInfoChanged",
        "Target.targetDestroyed",
        "Target.targetCrashed",
        "Target.attachedToTarget",
        "HTTP /json/list",
    }
)

CATEGORIES = ("screenshot", "focus", "input", "write", "script", "window", "discovery", "target", "read")


def classify(method: str) -> str:
    """The category of a CDP method (or of a `HTTP /json/...` call)."""
    if method in SCREENSHOT:
        return "screenshot"
    if method in FOCUS:
        return "focus"
    if method.startswith("Input."):
        return "input"
    if method in WINDOW:
        return "window"
    if method in SCRIPT:
        return "script"
    if method in WRITE or method.startswith("Emulation."):
        return "write"
    if method in DISCOVERY:
        return "discovery"
    if method.startswith("Target.") or method in TARGET_HTTP:
        return "target"
    return "read"
