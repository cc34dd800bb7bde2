"""OpenClaudeChromeBackend: the `Backend` contract over the first-party `ToolContract`, speaking raw CDP to the one
page the scoped gateway exposes. No child process, no extension, no native host: the runtime's own process only.

Action mapping (exactly one contract call per canonical Action; nothing else is sent):

    click  (ref)            -> computer(action="left_click", ref)            ref re-checked, point hit-tested
    click  (x, y)           -> computer(action="left_click", coordinate)     only right after a screenshot
    type   (ref, text)      -> form_input(ref, value=text)                   replaces the field's content with
                                                                              trusted input events; leaves it focused
                                                                              (a date, time, colour or range field
                                                                              takes its value set, as a select does)
    type   with submit      -> not sent (`types_and_submits` is False): the contract has no single call that types
                               and presses Enter; the runtime sends `type`, checks the field kept the focus, then
                               `press Enter`. Sent anyway, it is refused like the shapes below
    press  (key, no ref)    -> computer(action="key", text=key)              to the focused element
    press  with a ref       -> refused: `key` has no target, and focusing first would be a second call
    select (ref, [value])   -> form_input(ref, value)                         one option per call (by value or text);
                                                                              several: refused

A refused shape is BackendError(Failure.unsupported) with the adapter's advice (what to send instead), before
anything is sent.
    navigate (url)          -> navigate(url)                                  waits for DOMContentLoaded, bounded
    scroll (direction)      -> computer(action="scroll", scroll_direction)    at the viewport's centre
    scroll (ref)            -> computer(action="hover", ref)                  into view, and the mouse rests on its
                                                                              centre (as the other backends' hover);
                                                                              no direction
    scroll (x, y, direction)-> computer(action="scroll", coordinate, scroll_direction)
    screenshot()            -> computer(action="screenshot")                  one viewport PNG
    snapshot()              -> read_page(filter="all") + get_page_text(), answered from one page read

Why `form_input` for `type`: `computer(type)` types into whatever has focus, so it needs a click first (two
calls, and a click can have effects of its own); `form_input` addresses the field by ref and replaces its
value, which is what `type` means in the other backends too.

Every ref is re-checked against the live DOM before anything is sent (`refs.py`): a moved, replaced or changed
element is `BackendError(Failure.stale, "…")` with no input. Elements inside open shadow roots, nested or slotted,
are read, placed and re-checked like any other (by their place in the flat tree the page is drawn from). A click or
key that starts a navigation returns once the new document is parsed; a navigation that does not finish is a
`timeout`. Controls in cross-site iframes are read and acted on in place (their renderers are child sessions of the
bound page).
"""

from __future__ import annotations

import json
from typing import Any

from backends.common.normalize import MAX_ELEMENTS
from backends.common.roles import shared_role
from backends.common.structure import Entry, opens, structure
from backends.open_claude_chrome.contract import ReadPageResult, ToolContract
from backends.open_claude_chrome.refs import REF
from backends.open_claude_chrome.session import PageSession
from runtime.backend import BackendConfig, BackendError, Element, Failure, Snapshot
from runtime.models import Action

SNAPSHOT_MAX_CHARS = 5_000_000
"""The runtime pages the element list itself; the adapter wants the whole page, not the contract's 50,000."""
SNAPSHOT_DEPTH: int | None = None


PRESS_ON_REF = "press acts on the focused element: send press without ref (type into the field first to focus it)"
TYPE_THEN_ENTER = "type without submit, then press Enter"
ONE_OPTION = "select one option per act"


class OpenClaudeChromeBackend:
    name = "open_claude_chrome"
    types_and_submits = False
    diagnoses = False  # the contract has no console or network reader
    screenshot_fallback = True  # the spec: one viewport screenshot when semantic location is not enough

    def __init__(
        self,
        config: BackendConfig,
        *,
        call_timeout: float = 15.0,
        navigation_timeout: float = 20.0,
        settle_timeout: float = 3.0,
        screenshot_timeout: float = 10.0,
    ) -> None:
        self.config = config
        self.call_timeout = call_timeout
        self.navigation_timeout = navigation_timeout
        self.settle_timeout = settle_timeout
        self.screenshot_timeout = screenshot_timeout
        self.session: PageSession | None = None
        self.contract: ToolContract | None = None

    async def start(self) -> None:
        if self.session is not None:
            raise RuntimeError("backend already started")
        session = self.session = PageSession(
            self.config.cdp_endpoint, call_timeout=self.call_timeout, target_state=self.config.target_state
        )
        try:
            await session.start()
        except BaseException:
            await self.close()
            raise
        self.contract = ToolContract(
            session,
            navigation_timeout=self.navigation_timeout,
            settle_timeout=self.settle_timeout,
            screenshot_timeout=self.screenshot_timeout,
        )

    async def close(self) -> None:
        session, self.session, self.contract = self.session, None, None
        if session is not None:
            await session.close()

    def _contract(self) -> ToolContract:
        if self.contract is None:
            raise BackendError(Failure.upstream, "backend not started")
        return self.contract

    async def snapshot(self) -> Snapshot:
        contract = self._contract()
        async with contract.one_read():
            page = await contract.read_page(filter="all", depth=SNAPSHOT_DEPTH, max_chars=SNAPSHOT_MAX_CHARS)
            text = await contract.get_page_text()
        stream, listed = _outline(page)
        elements, regions = structure(stream, listed)
        # The same cap as the other backends' (backends.common.normalize); the runtime says what it left out.
        dropped = max(0, len(elements) - MAX_ELEMENTS)
        return Snapshot(
            url=page.url,
            title=page.title,
            text=text.text,
            elements=elements[:MAX_ELEMENTS],
            upstream_chars=len(page.text) + len(text.text),
            elements_dropped=dropped,
            regions=tuple(r for r in regions if r.start < MAX_ELEMENTS),
        )

    async def act(self, action: Action, element: Element | None) -> None:
        name, arguments = self.contract_call(action, element)
        contract = self._contract()
        if name == "computer":
            await contract.computer(**arguments)
        elif name == "form_input":
            await contract.form_input(**arguments)
        elif name == "navigate":
            await contract.navigate(**arguments)
        else:  # pragma: no cover - contract_call names only the three above
            raise BackendError(Failure.upstream, f"no contract tool {name!r}")

    def contract_call(self, action: Action, element: Element | None) -> tuple[str, dict[str, Any]]:
        """The one contract (tool, arguments) for a canonical Action. Pure; raises BackendError if none fits."""
        kind = action.type
        if action.is_point:
            point = (float(action.x or 0), float(action.y or 0))
            if kind == "click":
                return "computer", {"action": "left_click", "coordinate": point}
            return "computer", {"action": "scroll", "coordinate": point, "scroll_direction": action.direction or "down"}
        if kind == "navigate":
            return "navigate", {"url": action.url}
        if kind == "press":
            if action.ref is not None or element is not None:
                raise BackendError(
                    Failure.unsupported,
                    "open_claude_chrome presses keys on the focused element only",
                    advice=PRESS_ON_REF,
                )
            return "computer", {"action": "key", "text": action.key}
        if kind == "scroll" and action.ref is None and element is None:
            return "computer", {"action": "scroll", "scroll_direction": action.direction or "down"}
        ref = element.ref if element is not None else action.ref
        if ref is None or not REF.fullmatch(ref):
            raise BackendError(Failure.element, f"not an open_claude_chrome ref: {ref!r}")
        if kind == "click":
            return "computer", {"action": "left_click", "ref": ref}
        if kind == "scroll":  # the pointer rests on it, so what its hover reveals is in the next observation
            return "computer", {"action": "hover", "ref": ref}
        if kind == "type":
            if action.submit:
                raise BackendError(
                    Failure.unsupported,
                    "open_claude_chrome cannot type and submit in one call",
                    advice=TYPE_THEN_ENTER,
                )
            return "form_input", {"ref": ref, "value": action.text or ""}
        if kind == "select":
            values = list(action.values or [])
            if len(values) != 1:
                raise BackendError(
                    Failure.unsupported, "open_claude_chrome selects one option per action", advice=ONE_OPTION
                )
            return "form_input", {"ref": ref, "value": values[0]}
        raise BackendError(Failure.upstream, f"unsupported action type {kind!r}")

    async def screenshot(self) -> bytes:
        result = await self._contract().computer(action="screenshot")
        assert result.image is not None
        return result.image


TEXT_LINE = 'text "'
"""How `read_page(filter="all")` writes a text node: `text` and its JSON string (no Chromium role is `text`)."""


def _outline(page: ReadPageResult) -> tuple[list[Entry], list[Element]]:
    """The tree `read_page(filter="all")` answered, as the stream `backends.common.structure` reads, and the
    elements (its controls with a ref, in document order). Its lines are its nodes in order, with a text node's
    line (indented by its level) between them; the page's text comes from `get_page_text`, as the contract has it."""
    stream: list[Entry] = []
    elements: list[Element] = []
    nodes = iter(page.nodes)
    for line in page.text.split("\n"):
        body = line.lstrip(" ")
        if body.startswith(TEXT_LINE):
            stream.append(
                Entry("text", len(line) - len(body), " ".join(json.loads(body[len(TEXT_LINE) - 1 :]).split()))
            )
            continue
        node = next(nodes, None)
        if node is None:
            break
        role = shared_role(node.role)  # the contract keeps Chromium's word; the agent reads the one vocabulary
        if node.interactive and node.ref is not None:
            element = Element(node.ref, role, node.name, node.value, node.checked, node.disabled, node.level)
            elements.append(element)
            stream.append(Entry("element", node.level, node.name))
        elif opens(role):
            stream.append(Entry(role, node.level, node.name))
        elif node.name:  # a heading as the Page's text writes it, so it is not taken for its own link's label
            stream.append(Entry("text", node.level + 1, ("# " if role == "heading" else "") + node.name))
    return stream, elements
