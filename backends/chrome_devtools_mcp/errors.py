"""Classify what chrome-devtools-mcp 1.11.0 reports into the `BackendError` kinds.

The upstream reports most failures as an error result (`isError: true`, the thrown message as text). Two kinds
of failure it reports as *success*, and the adapter turns them into errors (`navigation_failure`):

- `navigate_page` catches the navigation's own error and answers "Unable to navigate in the selected page: <why>."
  without `isError`;
- after a reconnect to the browser it answers normally, with a note that page ids have changed (the fixed page id
  may now name nothing, or another page).

Order matters: a lost page explains everything after it, and the upstream's "did not become interactive within the
configured timeout" is an element problem (a disabled or covered element), not a slow page.
"""

from __future__ import annotations

import re

from runtime.backend import BackendError, Failure

TARGET_LOST = re.compile(
    r"No page found"
    r"|selected page has been closed"
    r"|Target (?:page )?(?:closed|crashed)"
    r"|Page crashed"
    r"|Session (?:closed|already detached)"
    r"|Navigating frame was detached"
    r"|browser has (?:been )?disconnected"
    r"|Connection closed"
    r"|Page ids have changed",
    re.IGNORECASE,
)
ELEMENT = re.compile(
    r"Element uid \S+ not found"
    r"|no longer exists on the page"
    r"|Failed to interact with the element"
    r"|Could not find option with text"
    r"|require \"true\" or \"false\" value"
    r"|No snapshot found for page"
    r"|Node is detached from document"
    r"|Node is either not (?:clickable|visible)"
    r"|not an HTMLElement",
    re.IGNORECASE,
)
DIALOG = re.compile(r"A dialog is open", re.IGNORECASE)
"""A JavaScript dialog is open: the upstream refuses to snapshot until it is handled, which only the user may do
(handle_dialog is not allowlisted)."""
TIMEOUT = re.compile(
    r"Navigation timeout of \d+ ms exceeded|Timeout \d+ms exceeded|timed out|TimeoutError", re.IGNORECASE
)
NAVIGATION_FAILED = re.compile(r"^Unable to navigate[^:]*: (.*)$", re.MULTILINE)


def classify(text: str) -> Failure:
    """The BackendError kind for an upstream error text."""
    if TARGET_LOST.search(text):
        return Failure.target_lost
    if DIALOG.search(text):
        return Failure.dialog
    if ELEMENT.search(text):
        return Failure.element
    if TIMEOUT.search(text):
        return Failure.timeout
    return Failure.upstream


def error_message(text: str, limit: int = 300) -> str:
    """The first meaningful line of an upstream error, for logs (never for the agent)."""
    for line in text.splitlines():
        line = re.sub(r"\x1b\[[0-9;]*m", "", line).strip().removeprefix("Error: ")
        if line:
            return line[:limit]
    return "upstream reported an error without text"


def upstream_error(text: str) -> BackendError:
    return BackendError(classify(text), error_message(text))


def navigation_failure(text: str) -> BackendError | None:
    """The error hidden in a *successful* navigate_page answer, if any."""
    match = NAVIGATION_FAILED.search(text)
    if match is None:
        return None
    return BackendError(classify(match.group(1)), f"navigation failed: {error_message(match.group(1))}")
