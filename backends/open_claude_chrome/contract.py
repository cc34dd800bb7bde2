"""ToolContract: the Claude-in-Chrome tool contract, implemented over raw CDP on the one bound page.

Names, parameters and semantics follow the public Claude-in-Chrome / Open-Claude-in-Chrome tool definitions
(`read_page`, `find`, `computer`, `navigate`, `form_input`, `get_page_text`); the implementation is this project's
own. What differs, on purpose:

- No `tabId`: a contract is bound to exactly one page (the scoped gateway shows it nothing else), so there is no
  tab to name, and the tab tools (`tabs_context_mcp`, `tabs_create_mcp`, …) do not exist here. Nor do
  `javascript_tool`, `resize_window`, `gif_creator`, uploads, console or network reads: the runtime offers none.
- `computer`: `zoom` is refused (no crop/zoom, by policy), `wait` and `left_click_drag` are refused (no canonical
  action maps to them). `scroll` without `coordinate` scrolls at the viewport's centre.
- Coordinates (`left_click`/`scroll`/`hover` with `coordinate`) are accepted only as the call right after a
  `screenshot` of the same document: they describe that image and nothing later.
- `read_page(depth=None)` reads without a depth bound (the adapter pages the element list itself).
- A click, key or `form_input` that makes the page navigate returns once the new document is parsed
  (DOMContentLoaded), bounded; one that does not finish in time is a `timeout`, never a success.
- Errors are `BackendError`s with the runtime's kinds (`Failure`); a ref that no longer matches its element is
  `Failure.stale` (see `refs.py`).

Every call is bounded (`PageSession`). Input goes through `Input.dispatchMouseEvent` / `Input.insertText` /
`Input.dispatchKeyEvent` on the page's own session, which Chromium delivers to unfocused and hidden pages alike:
nothing is raised, focused or activated. Structured reads take no screenshot; `Page.captureScreenshot` is sent by
`computer(action="screenshot")` only.
"""

from __future__ import annotations

from backends.open_claude_chrome.inputs import ComputerResult, FormInputResult, Input
from backends.open_claude_chrome.navigation import NavigateResult
from backends.open_claude_chrome.reading import (
    FindMatch,
    FindResult,
    PageNode,
    PageTextResult,
    ReadPageResult,
    ReadTools,
)

__all__ = [
    "ComputerResult",
    "FindMatch",
    "FindResult",
    "FormInputResult",
    "NavigateResult",
    "PageNode",
    "PageTextResult",
    "ReadPageResult",
    "ToolContract",
]


class ToolContract(ReadTools, Input):
    """The compatible tools on one bound page: reading (`reading.py`), navigation (`navigation.py`) and input
    (`inputs.py`), over the state they share (`tools.py`). Refs (`ref_N`) come from `read_page`/`find` and are
    re-checked before every use; the action cursor marks where actions land."""
