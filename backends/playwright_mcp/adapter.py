"""PlaywrightMCPBackend: the `Backend` contract over the official @playwright/mcp 0.0.83, a private stdio child.

Action mapping (exactly one upstream tool call per canonical Action; nothing else is ever sent):

    click  (ref)          -> browser_click {target: ref}
    click  (x, y)         -> browser_mouse_click_xy {x, y}                      (--caps vision)
    type                  -> browser_type {target: ref, text, submit}           (fill, then Enter if submit)
    press  (no ref)       -> browser_press_key {key}                            (to the focused element)
    select                -> browser_select_option {target: ref, values}
    navigate              -> browser_navigate {url}
    scroll (no ref)       -> browser_mouse_wheel {deltaX, deltaY}               (--caps vision; ±SCROLL_STEP px,
                                                                                 at the current mouse position)
    scroll (ref)          -> browser_hover {target: ref}                        (scrolls it into view and rests
                                                                                 the mouse on it; no direction)
    screenshot()          -> browser_take_screenshot {type: png, scale: css}    (inline image, viewport only)
    snapshot()            -> browser_snapshot {}                                (inline ARIA YAML)

`type` with `submit` is one call (`types_and_submits`): Playwright fills the field, then presses Enter on that field
(its `press` focuses the field first), so the Enter reaches the field even if the Page moved the focus meanwhile.

Not expressible as one upstream call, so refused with BackendError(Failure.unsupported) and the adapter's advice
before anything is sent: `press` with a ref (the upstream only presses on the focused element; focusing first would
be a second call) and a point scroll (the wheel tool has no position; moving the mouse first would be a second
call).

Refs go upstream only if they match the upstream's ref syntax (`e12`, `f1e3`): `target` also accepts CSS and
Playwright selectors, which would let text from elsewhere address arbitrary elements.

The gateway's URL (secret included) is in `--config <file>` (`browser.cdpEndpoint`, a 0600 file in a 0700
directory), never on the command line. Flags: `--snapshot-mode none` (actions do not snapshot, so nothing is
written to disk and no CDP calls are spent on it), `--codegen none`, `--no-webmcp` (pages could otherwise register
callable tools), `--caps vision` (point click, wheel), `--output-dir` inside the workdir, explicit action/navigation
timeouts below the call timeout.
"""

from __future__ import annotations

import asyncio
import base64
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import mcp_types as types

from backends.common.child_backend import ChildBackend
from backends.playwright_mcp.client import PlaywrightClient
from backends.playwright_mcp.errors import upstream_error
from backends.playwright_mcp.snapshot import REF, AriaSnapshotError, parse_snapshot_answer
from runtime.backend import BackendConfig, BackendError, Element, Failure, Snapshot
from runtime.models import Action

EXECUTABLE = "playwright-mcp"
SCROLL_STEP = 600  # CSS px per scroll action (about one viewport of a small window)
SOCKETS_DIR_MAX = 60
"""Playwright puts a unix socket at `<dir>/browser/<21 chars>` and refuses paths over 103 bytes (sun_path)."""
SHORT_ROOTS = ("/tmp", "/var/tmp")
"""Where a private sockets dir goes when `$TMPDIR` is itself too deep for one (a test runner's, a sandbox's)."""


def short_temp_root() -> str:
    """`$TMPDIR` when a private dir in it (`cu-pw-` and 8 characters) is short enough for the socket path, else the
    first short system temp root that exists; `$TMPDIR` when none is (the upstream then names the problem)."""
    for root in (tempfile.gettempdir(), *SHORT_ROOTS):
        if len(os.fsencode(root)) + len("/cu-pw-12345678") <= SOCKETS_DIR_MAX and os.access(root, os.W_OK | os.X_OK):
            return root
    return tempfile.gettempdir()


WHEEL = {"up": (0, -SCROLL_STEP), "down": (0, SCROLL_STEP), "left": (-SCROLL_STEP, 0), "right": (SCROLL_STEP, 0)}
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


PRESS_ON_REF = "press acts on the focused element: send press without ref (type into the field first to focus it)"
POINT_SCROLL = "scroll without x/y (the viewport, by direction), or scroll to a ref"


class PlaywrightMCPBackend(ChildBackend):
    name = "playwright_mcp"
    types_and_submits = True
    diagnoses = False  # its console and network tools are not allowlisted (the parity ledger says why)
    screenshot_fallback = False
    EXECUTABLE = EXECUTABLE
    CLIENT = PlaywrightClient
    PRIVATE_DIRS = ("home", "tmp", "cache", "config", "data", "output")
    """`tmp` takes node's temp files, `cache` its registry file (ms-playwright/b/), `output` what it saves."""

    def __init__(
        self,
        config: BackendConfig,
        *,
        call_timeout: float = 30.0,
        action_timeout: float = 5.0,
        navigation_timeout: float = 20.0,
        start_timeout: float = 30.0,
    ) -> None:
        super().__init__(config, call_timeout=call_timeout, start_timeout=start_timeout)
        self.action_timeout = action_timeout
        self.navigation_timeout = navigation_timeout
        self._sockets_dir: Path | None = None
        self._own_sockets_dir = False  # created outside the workdir (it was too deep for a socket path)

    # -- process -------------------------------------------------------------------------------------------------

    def flags(self) -> list[str]:
        return [
            "--config",
            str(self.config_path),
            "--caps",
            "vision",
            "--snapshot-mode",
            "none",
            "--codegen",
            "none",
            "--no-webmcp",
            "--image-responses",
            "allow",
            "--output-dir",
            str(self.workdir / "output"),
            "--output-max-size",
            str(32 * 1024 * 1024),
            "--timeout-action",
            str(int(self.action_timeout * 1000)),
            "--timeout-navigation",
            str(int(self.navigation_timeout * 1000)),
            "--cdp-timeout",
            str(int(min(self.start_timeout, self.call_timeout) * 1000)),
        ]

    def upstream_config(self) -> dict[str, Any]:
        """The gateway, as `--cdp-endpoint` would give it (`browser.cdpEndpoint`, config.d.ts)."""
        return {"browser": {"cdpEndpoint": self.config.cdp_endpoint}}

    def upstream_env(self) -> dict[str, str]:
        return {
            # Its unix socket (`browser/*.sock`); $TMPDIR/pw-<hash> unless set. Must stay short (see _prepare()).
            "PWTEST_SOCKETS_DIR": str(self._sockets_dir or self.workdir / "s"),
            "PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD": "1",
        }

    def _prepare(self) -> None:
        self._sockets_dir = self.workdir / "s"
        if len(os.fsencode(self._sockets_dir)) > SOCKETS_DIR_MAX:  # a deep workdir: a short private dir instead
            self._sockets_dir = Path(tempfile.mkdtemp(prefix="cu-pw-", dir=short_temp_root()))
            self._own_sockets_dir = True
        self._sockets_dir.mkdir(mode=0o700, parents=True, exist_ok=True)

    def _cleanup(self) -> None:
        if self._own_sockets_dir and self._sockets_dir is not None:
            shutil.rmtree(self._sockets_dir, ignore_errors=True)
            self._own_sockets_dir = False

    # -- calls ---------------------------------------------------------------------------------------------------

    async def _call(self, name: str, arguments: dict[str, Any]) -> types.CallToolResult:
        if self.client is None:
            raise BackendError(Failure.upstream, "backend not started")
        self._check_target()
        result = await self.client.call(name, arguments)
        # The answer may be about a page the upstream opened after ours was gone: check again.
        self._check_target()
        if result.is_error:
            error = upstream_error(_text(result))
            if error.kind == Failure.target_lost:
                self._lost = str(error)
            raise error
        return result

    async def snapshot(self) -> Snapshot:
        result = await self._call("browser_snapshot", {})
        try:
            # Off the event loop: a huge Page's answer takes seconds to parse, and other connections wait meanwhile.
            return await asyncio.to_thread(parse_snapshot_answer, _text(result), self.workdir)
        except (AriaSnapshotError, OSError) as exc:
            raise BackendError(Failure.upstream, f"unreadable browser_snapshot answer: {exc}") from None

    async def act(self, action: Action, element: Element | None) -> None:
        name, arguments = self.upstream_call(action, element)
        await self._call(name, arguments)

    def upstream_call(self, action: Action, element: Element | None) -> tuple[str, dict[str, Any]]:
        """The one upstream (tool, arguments) for a canonical Action. Pure; raises BackendError if none fits."""
        kind = action.type
        if action.is_point:
            if kind == "click":
                return "browser_mouse_click_xy", {"x": action.x, "y": action.y}
            raise BackendError(
                Failure.unsupported,
                f"playwright_mcp cannot {kind} at a point in one upstream call",
                advice=POINT_SCROLL,
            )
        if kind == "navigate":
            return "browser_navigate", {"url": action.url}
        if kind == "press":
            if action.ref is not None or element is not None:
                raise BackendError(
                    Failure.unsupported, "playwright_mcp presses keys on the focused element only", advice=PRESS_ON_REF
                )
            return "browser_press_key", {"key": action.key}
        if kind == "scroll" and action.ref is None and element is None:
            dx, dy = WHEEL[action.direction or "down"]
            return "browser_mouse_wheel", {"deltaX": dx, "deltaY": dy}
        ref = element.ref if element is not None else action.ref
        if ref is None or not REF.fullmatch(ref):
            raise BackendError(Failure.element, f"not a playwright_mcp snapshot ref: {ref!r}")
        if kind == "click":
            return "browser_click", {"target": ref}
        if kind == "type":
            return "browser_type", {"target": ref, "text": action.text, "submit": action.submit}
        if kind == "select":
            return "browser_select_option", {"target": ref, "values": list(action.values or [])}
        if kind == "scroll":
            return "browser_hover", {"target": ref}
        raise BackendError(Failure.upstream, f"unsupported action type {kind!r}")

    async def screenshot(self) -> bytes:
        result = await self._call("browser_take_screenshot", {"type": "png", "scale": "css"})
        images = [c for c in result.content if isinstance(c, types.ImageContent)]
        if len(images) != 1:
            raise BackendError(Failure.upstream, f"browser_take_screenshot returned {len(images)} images")
        data = base64.b64decode(images[0].data)
        if not data.startswith(PNG_MAGIC):
            raise BackendError(Failure.upstream, f"browser_take_screenshot returned {images[0].mime_type}, not a PNG")
        return data


def _text(result: types.CallToolResult) -> str:
    return "\n".join(c.text for c in result.content if isinstance(c, types.TextContent))
