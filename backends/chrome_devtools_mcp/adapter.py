"""ChromeDevToolsMCPBackend: the `Backend` contract over the official chrome-devtools-mcp 1.11.0, a private stdio
child behind the scoped gateway.

Action mapping (exactly one upstream tool call per canonical Action; nothing else is ever sent):

    click  (ref)          -> click {pageId, uid}
    click  (x, y)         -> click_at {pageId, x, y}                            (--experimentalVision)
    type   (ref)          -> fill {pageId, uid, value: text}                    (replaces the value, like Playwright's
                                                                                 fill; text fields only)
    press  (no ref)       -> press_key {pageId, key}                            (to the focused element)
    select (ref)          -> fill {pageId, uid, value: label}                   (a <select> combobox; one option,
                                                                                 by its visible label)
    navigate              -> navigate_page {pageId, type: url, url, timeout, handleBeforeUnload: accept}
    scroll (ref)          -> hover {pageId, uid}                                (scrolls it into view and rests
                                                                                 the mouse on it; no direction)
    screenshot()          -> take_screenshot {pageId, format: png}              (inline image, viewport only)
    diagnostics()         -> list_console_messages {pageId, types: [error]}     (since the last navigation)
                             + list_network_requests {pageId}                  (method, url, status: no headers
                                                                                 or bodies; the failed ones kept)
    snapshot()            -> take_snapshot {pageId}                             (structured JSON, see snapshot.py)

`type` with `submit` has no single upstream call (`fill` has no submit; `type_text` has a submit key but types into
whatever is focused, so focusing first would be a second call): `types_and_submits` is False, and the runtime types,
checks the focus, then presses Enter itself. Sent here anyway, it is refused like the actions below.

Refused before anything is sent, because no single upstream call does it, with BackendError(Failure.unsupported)
and the adapter's advice (what the agent may send instead):
- `press` with a ref (the upstream presses on the focused element only);
- `scroll` without a ref, and a point scroll (the upstream has no wheel or scroll tool; the keyboard would be a
  write to the focused element);
- `select` of several values, or on anything but a combobox (`fill` selects one option of a native select by label;
  on a checkbox it would toggle it); `type` into a checkbox/radio/switch likewise;
- `type` of text with a line break: Puppeteer's `fill` types a value under 100 characters key by key, and "\n" is
  an Enter key press, which submits a form (a write nobody asked for).

The page: chrome-devtools-mcp routes every page tool by a required `pageId`, an id it assigns itself, counting from 1
per process as it discovers pages. Behind the scoped gateway it discovers exactly one page, the bound one, so the
adapter fixes `PAGE_ID = 1` and never calls `list_pages`, `select_page`, `new_page` or `close_page` (none is
allowlisted). If the page goes, "No page found" (or the reconnect note: ids changed) is target_lost, sticky.

Failures the upstream reports as success are turned into errors: `navigate_page` answers "Unable to navigate ...:
<why>" for a failed or timed-out navigation without `isError` (-> timeout, target_lost or upstream by <why>).
Its post-action wait (up to 3 s for a navigation the action started, then for a quiet DOM) has no failure signal at
all: a click whose navigation is still pending after it answers "Successfully clicked", and the runtime's own
re-observation shows the page as it is (as with the default backend).

Uids go upstream only if they match the upstream's uid syntax (`3_14`). Nothing else ever addresses an element.

Flags: the gateway's endpoint in `--config <file>` (`browserUrl`, a 0600 file in a 0700 directory, never on the
command line), no usage statistics, no CrUX, no update checks, no config discovery;
categories performance, emulation and memory off (network stays on for `list_network_requests`, the one network
tool allowlisted); no JavaScript evaluation; no file: navigations; no
source maps (DevTools would fetch them from the page's server); structured content (the only safe snapshot format);
vision (click_at); file tools restricted to the workdir. HOME, TMPDIR and XDG_* point into the workdir.
"""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Mapping
from typing import Any

import mcp_types as types

from backends.chrome_devtools_mcp.client import DevToolsClient
from backends.chrome_devtools_mcp.errors import navigation_failure, upstream_error
from backends.chrome_devtools_mcp.snapshot import UID, SnapshotTreeError, parse_snapshot
from backends.common.child_backend import ChildBackend
from backends.common.roles import CHECKABLE_ROLES
from runtime.backend import BackendConfig, BackendError, Diagnostics, Element, Failure, Snapshot
from runtime.models import Action

EXECUTABLE = "chrome-devtools-mcp"
PAGE_ID = 1
"""The bound page's id upstream: the first and only page it discovers behind the gateway (see the module doc)."""
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
KEY_CHARACTERS = frozenset("\r\n\x00")
"""Characters Puppeteer's `fill` (which types values under 100 characters key by key) sends as key presses:
Enter, Enter, NumpadDecimal."""
DIAGNOSTICS_KEPT = 10
"""The latest console errors, and failed requests, a diagnostics read keeps (the runtime shows as many at most)."""
ENV = {
    "CHROME_DEVTOOLS_MCP_NO_USAGE_STATISTICS": "1",  # no Clearcut telemetry
    "CHROME_DEVTOOLS_MCP_NO_UPDATE_CHECKS": "1",  # no npm registry check, no detached checker process
    "CHROME_DEVTOOLS_MCP_NO_CONFIG_DISCOVERY": "1",  # no ~/.config/cd4a/config.json (could re-enable tools)
}


PRESS_ON_REF = "press acts on the focused element: send press without ref (type into the field first to focus it)"
NO_WHEEL = "this backend scrolls only to an element: scroll with a ref (and no x/y)"
TYPE_THEN_ENTER = "type without submit, then press Enter"
NOT_TYPABLE = "a checkbox, radio or switch is clicked, not typed into: click it"
ONE_LINE = "type text without line breaks on this backend"
SELECT_COMBOBOX = "select picks an option of a native select here; for any other control, click the option"
ONE_OPTION = "select one option per act, by its visible label"


class ChromeDevToolsMCPBackend(ChildBackend):
    name = "chrome_devtools_mcp"
    types_and_submits = False
    diagnoses = True
    screenshot_fallback = False
    EXECUTABLE = EXECUTABLE
    CLIENT = DevToolsClient
    PRIVATE_DIRS = ("home", "tmp", "cache", "config", "data", "run", "files")

    def __init__(
        self,
        config: BackendConfig,
        *,
        call_timeout: float = 30.0,
        navigation_timeout: float = 12.0,
        start_timeout: float = 30.0,
    ) -> None:
        """`navigation_timeout` bounds the upstream's `goto` (which waits for `load`); its post-action wait may take
        as long again plus 3 s, so 2 x 12 + 3 = 27 s keeps the upstream's own answer inside `call_timeout`."""
        super().__init__(config, call_timeout=call_timeout, start_timeout=start_timeout)
        self.navigation_timeout = navigation_timeout

    # -- process -------------------------------------------------------------------------------------------------

    def flags(self) -> list[str]:
        return [
            "--config",
            str(self.config_path),
            "--no-usage-statistics",
            "--no-performance-crux",
            "--no-category-performance",
            "--no-category-emulation",
            "--no-category-memory",
            "--no-javascript-evaluation",
            "--no-file-navigations",
            "--no-source-maps",
            "--experimentalStructuredContent",
            "--experimentalVision",
            "--screenshotFormat",
            "png",
            "--filesystemRoot",
            str(self.workdir / "files"),
        ]

    def upstream_config(self) -> dict[str, Any]:
        """The gateway, as `--browserUrl` would give it (its config file takes every flag by its long name)."""
        return {"browserUrl": self.config.cdp_endpoint}

    def upstream_env(self) -> dict[str, str]:
        return ENV

    # -- calls ---------------------------------------------------------------------------------------------------

    async def _call(self, name: str, arguments: dict[str, Any]) -> types.CallToolResult:
        if self.client is None:
            raise BackendError(Failure.upstream, "backend not started")
        self._check_target()
        result = await self.client.call(name, {"pageId": PAGE_ID, **arguments})
        # The answer may be about a page that is gone by now: check again.
        self._check_target()
        text = _text(result)
        error: BackendError | None = None
        if result.is_error:  # the thrown message, without the sections the upstream appends (open dialog, pages)
            message = _structured(result).get("errorMessage")
            error = upstream_error(message if isinstance(message, str) and message else text)
        elif _structured(result).get("reconnected"):
            error = BackendError(Failure.target_lost, "the upstream reconnected to the browser; its page ids changed")
        elif name == "navigate_page":
            error = navigation_failure(text)
        if error is not None:
            if error.kind == Failure.target_lost:
                self._lost = str(error)
            raise error
        return result

    async def snapshot(self) -> Snapshot:
        result = await self._call("take_snapshot", {})
        try:
            # Off the event loop: a huge Page's answer takes seconds to parse, and other connections wait meanwhile.
            return await asyncio.to_thread(parse_snapshot, _structured(result), _text(result))
        except SnapshotTreeError as exc:
            raise BackendError(Failure.upstream, f"unreadable take_snapshot answer: {exc}") from None

    async def diagnostics(self) -> Diagnostics:
        console = await self._call("list_console_messages", {"types": ["error"]})
        network = await self._call("list_network_requests", {})
        return parse_diagnostics(_structured(console), _structured(network))

    async def act(self, action: Action, element: Element | None) -> None:
        name, arguments = self.upstream_call(action, element)
        await self._call(name, arguments)

    def upstream_call(self, action: Action, element: Element | None) -> tuple[str, dict[str, Any]]:
        """The one upstream (tool, arguments) for a canonical Action, without the fixed pageId. Pure; raises
        BackendError if none fits."""
        kind = action.type
        if action.is_point:
            if kind == "click":
                return "click_at", {"x": action.x, "y": action.y}
            raise BackendError(Failure.unsupported, f"{self.name} cannot {kind} at a point", advice=NO_WHEEL)
        if kind == "navigate":
            return "navigate_page", {
                "type": "url",
                "url": action.url,
                "timeout": int(self.navigation_timeout * 1000),
                "handleBeforeUnload": "accept",
            }
        if kind == "press":
            if action.ref is not None or element is not None:
                raise BackendError(
                    Failure.unsupported, f"{self.name} presses keys on the focused element only", advice=PRESS_ON_REF
                )
            return "press_key", {"key": action.key}
        if kind == "scroll" and action.ref is None and element is None:
            raise BackendError(Failure.unsupported, f"{self.name} has no scroll tool", advice=NO_WHEEL)
        ref = element.ref if element is not None else action.ref
        if ref is None or not UID.fullmatch(ref):
            raise BackendError(Failure.element, f"not a {self.name} snapshot uid: {ref!r}")
        role = element.role if element is not None else None
        if kind == "click":
            return "click", {"uid": ref}
        if kind == "type":
            if action.submit:
                raise BackendError(
                    Failure.unsupported, f"{self.name} cannot type and submit in one call", advice=TYPE_THEN_ENTER
                )
            if role in CHECKABLE_ROLES:
                raise BackendError(Failure.unsupported, f"cannot type into a {role}", advice=NOT_TYPABLE)
            if any(ch in (action.text or "") for ch in KEY_CHARACTERS):
                raise BackendError(
                    Failure.unsupported,
                    f"{self.name} types short text key by key, where a line break is an Enter key press (it would "
                    "submit a form)",
                    advice=ONE_LINE,
                )
            return "fill", {"uid": ref, "value": action.text}
        if kind == "select":
            values = list(action.values or [])
            if role is not None and role != "combobox":
                raise BackendError(
                    Failure.unsupported,
                    f"{self.name} selects options of a combobox only, not a {role}",
                    advice=SELECT_COMBOBOX,
                )
            if len(values) != 1:
                raise BackendError(Failure.unsupported, f"{self.name} selects one option per call", advice=ONE_OPTION)
            return "fill", {"uid": ref, "value": values[0]}
        if kind == "scroll":
            return "hover", {"uid": ref}
        raise BackendError(Failure.upstream, f"unsupported action type {kind!r}")

    async def screenshot(self) -> bytes:
        result = await self._call("take_screenshot", {"format": "png"})
        images = [c for c in result.content if isinstance(c, types.ImageContent)]
        if len(images) != 1:
            raise BackendError(Failure.upstream, f"take_screenshot returned {len(images)} images")
        data = base64.b64decode(images[0].data)
        if not data.startswith(PNG_MAGIC):
            raise BackendError(Failure.upstream, f"take_screenshot returned {images[0].mime_type}, not a PNG")
        return data


def parse_diagnostics(console: Mapping[str, Any], network: Mapping[str, Any]) -> Diagnostics:
    """The last `DIAGNOSTICS_KEPT` errors and failed requests of the upstream's structured answers. A grouped
    message (`count`) counts once per occurrence; a request failed when its status is not a number (an error text
    such as `net::ERR_FAILED`) or is 400 or more; a pending one has not failed yet."""
    errors: list[str] = []
    errors_total = 0
    for message in _entries(console, "consoleMessages"):
        text = message.get("text") or message.get("title")
        if isinstance(text, str):
            count = message.get("count")
            errors_total += count if isinstance(count, int) and count > 0 else 1
            errors.append(text)
    failed: list[tuple[str, str, str]] = []
    for request in _entries(network, "networkRequests"):
        status, url, method = request.get("status"), request.get("url"), request.get("method")
        if not (isinstance(status, str) and isinstance(url, str) and isinstance(method, str)) or status == "pending":
            continue
        if not status.isdigit() or int(status) >= 400:
            failed.append((method, url, status))
    return Diagnostics(
        errors=tuple(errors[-DIAGNOSTICS_KEPT:]),
        failed=tuple(failed[-DIAGNOSTICS_KEPT:]),
        errors_total=errors_total,
        failed_total=len(failed),
    )


def _entries(structured: Mapping[str, Any], key: str) -> list[Mapping[str, Any]]:
    entries = structured.get(key)
    return [e for e in entries if isinstance(e, Mapping)] if isinstance(entries, list) else []


def _text(result: types.CallToolResult) -> str:
    return "\n".join(c.text for c in result.content if isinstance(c, types.TextContent))


def _structured(result: types.CallToolResult) -> Mapping[str, Any]:
    structured = result.structured_content
    return structured if isinstance(structured, Mapping) else {}
