"""The private @playwright/mcp child: the shared stdio child owner (`backends.common.child`) with this backend's
allowlist.

@playwright/mcp cannot be made to drop its dangerous core tools (`browser_run_code_unsafe` runs code in the node
process, `browser_evaluate` in the page, `browser_tabs` switches and opens pages, ...), so the filter is ours,
applied by the child owner before anything is written to the child.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from backends.common.child import ChildClient, ToolRefused, group_alive

__all__ = ["ALLOWLIST", "LABEL", "PlaywrightClient", "ToolRefused", "group_alive"]

LABEL = "playwright-mcp"

ALLOWLIST: frozenset[str] = frozenset(
    {
        "browser_snapshot",  # observation: ARIA YAML with refs
        "browser_click",  # click (ref)
        "browser_type",  # type (ref, text, submit)
        "browser_press_key",  # press (key, on the focused element)
        "browser_select_option",  # select (ref, values)
        "browser_navigate",  # navigate (url)
        "browser_hover",  # scroll with a ref: brings the element into view
        "browser_take_screenshot",  # one viewport PNG (visual checks only)
        "browser_mouse_wheel",  # scroll without a ref (vision cap)
        "browser_mouse_click_xy",  # point click (vision cap)
    }
)
"""Every upstream tool the adapter may call. Everything else the upstream offers is refused, notably
browser_run_code_unsafe, browser_evaluate, browser_tabs, browser_close, browser_file_upload, browser_network_*,
browser_console_messages, browser_handle_dialog, browser_resize, storage/cookie/route tools and page-defined
WebMCP tools."""


class PlaywrightClient(ChildClient):
    """The shared child owner, bound to @playwright/mcp's allowlist."""

    def __init__(self, command: Path, args: list[str], **options: Any) -> None:
        super().__init__(command, args, allowlist=ALLOWLIST, label=LABEL, **options)
