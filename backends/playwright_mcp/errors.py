"""Classify what @playwright/mcp reports into the `BackendError` kinds.

The upstream reports failures as text (`### Error` + the Playwright message, `isError: true`). The runtime never
shows that text as a reason; it only needs the kind. Order matters: a lost page explains everything after it, and
a Playwright action timeout whose call log shows an actionability wait is an element problem, not a slow page.
"""

from __future__ import annotations

import re

from runtime.backend import BackendError, Failure

TARGET_LOST = re.compile(
    r"Target page, context or browser has been closed"
    r"|Target (?:page )?(?:closed|crashed)"
    r"|Page crashed"
    r"|Session (?:closed|already detached)"
    r"|browser has (?:been )?disconnected"
    r"|No open pages available"
    r"|Target\.createTarget",  # behind the scoped gateway: the upstream tried to replace the lost page
    re.IGNORECASE,
)
ELEMENT = re.compile(
    r"Ref \S+ not found in the current page snapshot"
    r"|does not match any elements"
    r"|element is not (?:visible|enabled|editable|stable|attached|an? )"
    r"|Element is not"
    r"|intercepts pointer events"
    r"|outside of the viewport"
    r"|Not a (?:select|checkbox|radio|input)"
    r"|did not find some options"
    r"|strict mode violation"
    r"|Cannot type text into"
    r"|not an? (?:<input>|<select>|<textarea>|editable|HTMLSelectElement)",
    re.IGNORECASE,
)
DIALOG = re.compile(r"does not handle the modal state|Modal state", re.IGNORECASE)
"""A JavaScript dialog or file chooser is open: the upstream refuses every other tool until it is handled, which
only the user may do (browser_handle_dialog and browser_file_upload are not allowlisted)."""
TIMEOUT = re.compile(r"Timeout \d+ms exceeded|timed out|TimeoutError", re.IGNORECASE)
# A Playwright action that timed out while waiting for the element to become actionable.
ACTIONABILITY = re.compile(
    r"waiting for element to be (?:visible|enabled|editable|stable)"
    r"|element is not (?:visible|enabled|editable|stable)"
    r"|intercepts pointer events"
    r"|element is outside of the viewport",
    re.IGNORECASE,
)


def classify(text: str) -> Failure:
    """The BackendError kind for an upstream error text."""
    if TARGET_LOST.search(text):
        return Failure.target_lost
    if DIALOG.search(text):
        return Failure.dialog
    if TIMEOUT.search(text):
        return Failure.element if ACTIONABILITY.search(text) else Failure.timeout
    if ELEMENT.search(text):
        return Failure.element
    return Failure.upstream


def error_message(text: str, limit: int = 300) -> str:
    """The first meaningful line of an upstream error, for logs (never for the agent)."""
    body = text.split("### Error", 1)[-1]
    for line in body.splitlines():
        line = re.sub(r"\x1b\[[0-9;]*m", "", line).strip()
        if line:
            return line[:limit]
    return "upstream reported an error without text"


def upstream_error(text: str) -> BackendError:
    return BackendError(classify(text), error_message(text))
