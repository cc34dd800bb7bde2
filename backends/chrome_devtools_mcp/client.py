"""The private chrome-devtools-mcp child: the shared stdio child owner (`backends.common.child`) with this backend's
allowlist.

Category flags trim what the upstream offers (performance, emulation, memory, JavaScript evaluation are off), but
what is left still includes page management (`list_pages`, `select_page`, `new_page`, `close_page`), `upload_file`,
`fill_form` (several writes in one call), `drag`, `handle_dialog`, `lighthouse_audit`, screencasts, and the
detailed console and network readers (a request's headers, cookies included, and bodies). The runtime fixes the
page; the upstream never lists, selects, opens or closes one. So the filter is ours, applied by the child owner
before anything is written to the child.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from backends.common.child import ChildClient, ToolRefused, group_alive

__all__ = ["ALLOWLIST", "LABEL", "DevToolsClient", "ToolRefused", "group_alive"]

LABEL = "chrome-devtools-mcp"

ALLOWLIST: frozenset[str] = frozenset(
    {
        "take_snapshot",  # observation: the AX tree with uids (structured JSON, see snapshot.py)
        "click",  # click (uid)
        "click_at",  # point click (--experimentalVision)
        "fill",  # type (uid, text: replaces the value) and select (uid, one option label)
        "press_key",  # press (key, on the focused element)
        "hover",  # scroll with a ref: scrolls the element into view and rests the mouse on it
        "navigate_page",  # navigate (type=url)
        "take_screenshot",  # one viewport PNG (visual checks only)
        "list_console_messages",  # detail=diagnostics: the page's console errors (type, text, count; no stacks)
        "list_network_requests",  # detail=diagnostics: method, url, status (no headers or bodies)
    }
)
"""Every upstream tool the adapter may call. Everything else is refused, notably list_pages, select_page,
new_page, close_page, type_text, fill_form, drag, upload_file, handle_dialog, wait_for, lighthouse_audit,
screencast_start/stop, get_console_message, get_network_request, get_css_styles, evaluate_script, resize_page,
emulate, network/performance/memory tools and page-defined (WebMCP, third-party) tools."""


class DevToolsClient(ChildClient):
    """The shared child owner, bound to chrome-devtools-mcp's allowlist."""

    def __init__(self, command: Path, args: list[str], **options: Any) -> None:
        super().__init__(command, args, allowlist=ALLOWLIST, label=LABEL, **options)
