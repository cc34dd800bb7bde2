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

import base64
import contextlib
import contextvars
import functools
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Concatenate, Literal, ParamSpec, TypeVar

from backends.open_claude_chrome import accessibility, find, keys
from backends.open_claude_chrome.accessibility import AXItem, PageRead
from backends.open_claude_chrome.cursor import ActionCursor
from backends.open_claude_chrome.refs import Identity, IsolatedWorlds, Mode, RefTable, recheck
from backends.open_claude_chrome.session import PageSession, ProtocolError
from runtime.backend import BackendError, Failure

ComputerAction = Literal[
    "left_click",
    "right_click",
    "double_click",
    "triple_click",
    "type",
    "screenshot",
    "wait",
    "scroll",
    "key",
    "left_click_drag",
    "zoom",
    "scroll_to",
    "hover",
]
Direction = Literal["up", "down", "left", "right"]

READ_PAGE_MAX_CHARS = 50_000
READ_PAGE_DEPTH = 15
SCROLL_TICK = 100  # CSS px per wheel tick
CLICKS = {
    "left_click": ("left", 1),
    "right_click": ("right", 1),
    "double_click": ("left", 2),
    "triple_click": ("left", 3),
}
BUTTON_BITS = {"left": 1, "right": 2}
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
FLUSH_JS = (
    "new Promise(done => { const c = new MessageChannel(); c.port1.onmessage = () => done(true);"
    " c.port2.postMessage(0); })"
)
FLUSH_TIMEOUT = 2.0


@dataclass(frozen=True)
class PageNode:
    """One line of a `read_page` answer, structured."""

    ref: str | None
    role: str
    name: str
    level: int
    interactive: bool
    value: str | None = None
    checked: bool | None = None
    disabled: bool = False


@dataclass(frozen=True)
class ReadPageResult:
    url: str
    title: str
    text: str
    """The tree as text: `role "name" [ref_N] attrs`, one node per line (indented by level for `filter="all"`)."""
    nodes: tuple[PageNode, ...]


@dataclass(frozen=True)
class FindMatch:
    ref: str
    role: str
    name: str
    score: float
    why: str


@dataclass(frozen=True)
class FindResult:
    query: str
    matches: tuple[FindMatch, ...]
    total: int
    """How many elements matched at all; only the best `find.LIMIT` are in `matches`."""

    @property
    def text(self) -> str:
        lines = [f'- {m.ref} {m.role} "{m.name}" ({m.why})' for m in self.matches]
        if self.total > len(self.matches):
            lines.append(f"{self.total} elements match; showing the best {len(self.matches)}. Be more specific.")
        return "\n".join(lines) if lines else f"No element matches {self.query!r}."


@dataclass(frozen=True)
class ComputerResult:
    action: str
    point: tuple[float, float] | None = None
    image: bytes | None = None
    viewport: tuple[int, int] | None = None


@dataclass(frozen=True)
class NavigateResult:
    url: str


@dataclass(frozen=True)
class FormInputResult:
    ref: str
    value: str | bool | float


@dataclass(frozen=True)
class PageTextResult:
    url: str
    title: str
    text: str


P = ParamSpec("P")
R = TypeVar("R")


def tool(
    method: Callable[Concatenate[ToolContract, P], Awaitable[R]],
) -> Callable[Concatenate[ToolContract, P], Awaitable[R]]:
    """A contract tool: refuses at once once the page is gone, spends a pending screenshot's coordinates (they are
    good for the one call after it), and reports a CDP error nobody expected as an upstream failure."""

    @functools.wraps(method)
    async def call(self: ToolContract, *args: P.args, **kwargs: P.kwargs) -> R:
        self.session.check()
        self._previous_screenshot, self._screenshot_of = self._screenshot_of, None
        try:
            return await method(self, *args, **kwargs)
        except ProtocolError as exc:
            raise BackendError(Failure.upstream, f"{method.__name__}: {exc}") from None

    return call


class ToolContract:
    """The compatible tools on one bound page. Refs (`ref_N`) come from `read_page`/`find` and are re-checked
    before every use; the action cursor marks where actions land."""

    def __init__(
        self,
        session: PageSession,
        *,
        navigation_timeout: float = 20.0,
        settle_timeout: float = 3.0,
        screenshot_timeout: float = 10.0,
    ) -> None:
        self.session = session
        self.navigation_timeout = navigation_timeout
        self.settle_timeout = settle_timeout
        self.screenshot_timeout = screenshot_timeout
        self.refs = RefTable()
        self.worlds = IsolatedWorlds(session)
        self.cursor = ActionCursor(session)
        self._shared: contextvars.ContextVar[list[PageRead] | None] = contextvars.ContextVar("shared", default=None)
        """Inside `one_read()`: the read this task's tools share (a context variable, so concurrent callers don't)."""
        self._screenshot_of: str | None = None
        """Loader id of the document the last call screenshotted, if the last call was a screenshot."""
        self._previous_screenshot: str | None = None
        self._screenshot_size: tuple[int, int] | None = None

    # -- reads ---------------------------------------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def one_read(self) -> AsyncIterator[None]:
        """Within this block every read tool answers from one read of the page (an observation costs one read)."""
        token = self._shared.set([])
        try:
            yield
        finally:
            self._shared.reset(token)

    async def _read(self) -> PageRead:
        shared = self._shared.get()
        if shared:
            return shared[0]
        await self.session.settle(self.settle_timeout)
        read = await accessibility.read(self.session)
        self.refs.prune(read)
        if shared is not None:
            shared.append(read)
        return read

    @tool
    async def read_page(
        self,
        filter: Literal["interactive", "all"] = "all",
        depth: int | None = READ_PAGE_DEPTH,
        ref_id: str | None = None,
        max_chars: int = READ_PAGE_MAX_CHARS,
    ) -> ReadPageResult:
        """The accessibility tree as text with refs. `filter="interactive"`: controls only, one per line;
        `"all"`: every shown node, indented. `ref_id` reads that element's subtree; `depth` bounds the levels;
        an answer over `max_chars` is an error that says to narrow it (as the contract does)."""
        read = await self._read()
        roots = read.roots
        if ref_id is not None:
            identity = self.refs.get(ref_id)
            start = read.find_backend(identity.frame_id, identity.backend_id)
            if start is None or read.loaders.get(identity.frame_id) != identity.loader_id:
                raise BackendError(Failure.stale, f"{ref_id} is no longer in the page")
            roots = [start]
        nodes: list[PageNode] = []
        lines: list[str] = []
        for root in roots:
            for item, level in accessibility.shown(root, depth):
                if filter == "interactive" and not item.interactive:
                    continue
                if item.role == accessibility.TEXT_ROLE:
                    parent_name = " ".join((item.parent.name if item.parent is not None else "").split())
                    if filter == "all" and item.name.strip() and " ".join(item.name.split()) != parent_name:
                        shown_text = json.dumps(" ".join(item.name.split()), ensure_ascii=False)
                        lines.append(" " * level + "text " + shown_text)
                    continue
                ref = self._ref_for(read, item)
                node = PageNode(
                    ref,
                    item.role,
                    " ".join(item.name.split()),
                    level,
                    item.interactive,
                    item.shown_value,
                    item.checked,
                    item.disabled,
                )
                nodes.append(node)
                indent = "" if filter == "interactive" else " " * level
                lines.append(indent + _line(node, item, read))
        text = "\n".join(lines)
        if len(text) > max_chars:
            raise BackendError(
                Failure.upstream,
                f"read_page output is {len(text):,} characters, over max_chars={max_chars:,}: pass a smaller depth, "
                "filter='interactive', or a ref_id to read part of the page",
            )
        return ReadPageResult(read.url, read.title, text, tuple(nodes))

    def _ref_for(self, read: PageRead, item: AXItem) -> str | None:
        facts = read.facts(item)
        if facts is None:
            return None
        return self.refs.assign(read, item, facts)

    @tool
    async def find(self, query: str) -> FindResult:
        """Up to `find.LIMIT` elements matching a natural-language description, best first."""
        if not query.strip():
            raise BackendError(Failure.upstream, "find needs a query")
        read = await self._read()
        ranked = find.rank(query, find.candidates(read))
        matches: list[FindMatch] = []
        for scored in ranked:
            ref = self._ref_for(read, scored.item)
            if ref is None:
                continue
            why = "matches " + ", ".join(scored.matched) if scored.matched else "role"
            matches.append(FindMatch(ref, scored.item.role, " ".join(scored.item.name.split()), scored.score, why))
            if len(matches) == find.LIMIT:
                break
        return FindResult(query, tuple(matches), len(ranked))

    @tool
    async def get_page_text(self) -> PageTextResult:
        """The page's text, main content first, as plain lines (headings marked with `#`)."""
        read = await self._read()
        return PageTextResult(read.url, read.title, "\n".join(accessibility.text_lines(read)))

    # -- actions -------------------------------------------------------------------------------------------------

    @tool
    async def navigate(self, url: str) -> NavigateResult:
        """Load `url` (no scheme → https://) or go `"back"`/`"forward"` in history; returns once the new document
        is parsed (DOMContentLoaded), bounded by the navigation timeout."""
        if url in ("back", "forward"):
            history = await self.session.send("Page.getNavigationHistory")
            index = history["currentIndex"] + (-1 if url == "back" else 1)
            if not 0 <= index < len(history["entries"]):
                raise BackendError(Failure.upstream, f"there is no page to go {url} to")
            before = self.session.navigations
            await self.session.send("Page.navigateToHistoryEntry", {"entryId": history["entries"][index]["id"]})
            await self._await(lambda: self.session.navigations > before and not self.session.loading)
            return NavigateResult(self.session.main.url)
        if "://" not in url:
            url = "https://" + url
        try:
            started = await self.session.send("Page.navigate", {"url": url}, timeout=self.navigation_timeout)
        except ProtocolError as exc:
            raise BackendError(Failure.upstream, f"navigate: {exc.message}") from None
        if started.get("errorText"):
            raise BackendError(Failure.upstream, f"navigate to {url} failed: {started['errorText']}")
        loader = started.get("loaderId")
        if loader:  # a new document (a same-document navigation has none and is done already)
            session = self.session
            await self._await(lambda: session.main.loader_id == loader and session.dom_ready_loader == loader)
        return NavigateResult(self.session.main.url)

    @contextlib.asynccontextmanager
    async def _may_navigate(self) -> AsyncIterator[None]:
        """Around an action: if it made the page navigate (a link, a submit, Enter in a form), wait for the new
        document (DOMContentLoaded), bounded, as the other backends do."""
        before = self.session.requests
        yield
        if self.session.dialog is not None:
            return  # the action's effect is a dialog the user must answer; nothing navigates until then
        await self._flush()
        if self.session.requests != before:
            session = self.session
            try:
                await session.wait_until(lambda: not session.navigation_pending, self.navigation_timeout)
            except TimeoutError:
                why = f"the action started a navigation that did not finish within {self.navigation_timeout:g}s"
                raise BackendError(Failure.timeout, why) from None

    async def _flush(self) -> None:
        # A form submission is a task the page posts while handling the click, so its navigation request can reach
        # us after the input is acknowledged. A message-channel task posted now runs after it (same priority, later
        # enqueue order) and, unlike a timer, is not throttled in hidden pages: its answer follows the request.
        main = self.session.main
        try:
            context = await self.worlds.context(main.frame_id, main.loader_id)
            await self.session.send(
                "Runtime.evaluate",
                {"expression": FLUSH_JS, "contextId": context, "awaitPromise": True, "returnByValue": True},
                timeout=FLUSH_TIMEOUT,
            )
        except ProtocolError:
            pass  # the document is already gone: the navigation's own events tell the rest
        except BackendError as exc:
            if exc.kind != Failure.timeout:  # a page blocked by a dialog does not answer; the next call will say so
                raise

    async def _await(self, ready: Callable[[], bool]) -> None:
        try:
            await self.session.wait_until(ready, self.navigation_timeout)
        except TimeoutError:
            raise BackendError(Failure.timeout, f"the page did not load within {self.navigation_timeout:g}s") from None

    @tool
    async def form_input(self, ref: str, value: str | bool | float) -> FormInputResult:
        """Set a form control's value by ref: a select's option (by value or visible text), a checkbox/radio's
        checked state (boolean), or a text field's whole content (replaced, as typed input events)."""
        identity = self.refs.get(ref)
        async with self._may_navigate():
            return await self._form_input(ref, identity, value)

    async def _form_input(self, ref: str, identity: Identity, value: str | bool | float) -> FormInputResult:
        if isinstance(value, bool):
            answer = await self._recheck(ref, identity, "check", value)
            await self._cursor(answer)
            return FormInputResult(ref, bool(answer.get("checked")))
        if identity.role in ("combobox", "listbox") and _is_select(identity):
            answer = await self._recheck(ref, identity, "select", str(value))
            await self._cursor(answer)
            return FormInputResult(ref, str(answer.get("selected", value)))
        text = str(value)
        answer = await self._recheck(ref, identity, "text")
        await self._cursor(answer)
        if text:
            await self.session.send("Input.insertText", {"text": text})
        elif answer.get("had_value"):
            delete = keys.events(keys.Chord(keys.lookup("Delete"), 0))
            for event in delete:
                await self.session.send("Input.dispatchKeyEvent", event)
        return FormInputResult(ref, text)

    @tool
    async def computer(
        self,
        action: ComputerAction,
        *,
        coordinate: tuple[float, float] | None = None,
        ref: str | None = None,
        text: str | None = None,
        scroll_direction: Direction | None = None,
        scroll_amount: int = 3,
        modifiers: str | None = None,
        repeat: int = 1,
        duration: float | None = None,
        region: tuple[float, float, float, float] | None = None,
        start_coordinate: tuple[float, float] | None = None,
    ) -> ComputerResult:
        """Mouse, keyboard and screenshot on the page, by `ref` (re-checked) or by `coordinate` (only right after
        a screenshot). See the module doc for what is refused."""
        if action in ("zoom", "wait", "left_click_drag"):
            reason = {
                "zoom": "crop/zoom is not offered (one viewport screenshot at most per observation)",
                "wait": "the runtime does not wait on an agent's behalf; observe again instead",
                "left_click_drag": "drag is not a canonical action",
            }[action]
            raise BackendError(Failure.upstream, f"computer action {action!r} is not available: {reason}")
        if action == "screenshot":
            return await self._screenshot()
        if action == "key":
            async with self._may_navigate():
                return await self._key(text, repeat)
        if action == "type":
            if not text:
                raise BackendError(Failure.upstream, "computer type needs text")
            await self.session.send("Input.insertText", {"text": text})
            return ComputerResult(action)
        if coordinate is not None and ref is not None:
            raise BackendError(Failure.upstream, "give either ref or coordinate, not both")
        if coordinate is not None:
            self._check_coordinate(coordinate)
        try:
            modifier_bits = keys.modifier_bits(modifiers)
        except keys.UnknownKey as exc:
            raise BackendError(Failure.upstream, f"computer modifiers: {exc}") from None
        if action == "scroll_to":
            if ref is None:
                raise BackendError(Failure.upstream, "scroll_to needs a ref")
            answer = await self._recheck(ref, self.refs.get(ref), "scroll")
            return ComputerResult(action, (answer["x"], answer["y"]))
        if action == "scroll":
            return await self._scroll(coordinate, ref, scroll_direction, scroll_amount)
        if action in CLICKS or action == "hover":
            point = await self._point(coordinate, ref)
            await self.cursor.show(*point)
            if action == "hover":
                await self._mouse("mouseMoved", point, modifier_bits)
                return ComputerResult(action, point)
            button, count = CLICKS[action]
            async with self._may_navigate():
                await self._click(point, button, count, modifier_bits)
            return ComputerResult(action, point)
        raise BackendError(Failure.upstream, f"unknown computer action {action!r}")

    # -- parts ---------------------------------------------------------------------------------------------------

    def _check_coordinate(self, coordinate: tuple[float, float]) -> None:
        """A coordinate describes the screenshot taken by the call just before, of this document, and lies in it."""
        if self._previous_screenshot != self.session.main.loader_id or self._screenshot_size is None:
            raise BackendError(
                Failure.stale,
                "coordinates are valid only in the call right after a screenshot of this page",
            )
        width, height = self._screenshot_size
        x, y = coordinate
        if not (0 <= x < width and 0 <= y < height):
            raise BackendError(Failure.element, f"({x:g}, {y:g}) is outside the {width}x{height} screenshot")

    async def _recheck(self, ref: str, identity: Identity, mode: Mode, arg: Any = None) -> dict[str, Any]:
        return await recheck(self.session, self.worlds, ref, identity, mode, arg)

    async def _cursor(self, answer: dict[str, Any]) -> None:
        if answer.get("x") is not None and answer.get("y") is not None:
            await self.cursor.show(answer["x"], answer["y"])

    async def _point(self, coordinate: tuple[float, float] | None, ref: str | None) -> tuple[float, float]:
        if coordinate is not None:
            x, y = coordinate
            return float(x), float(y)
        if ref is None:
            raise BackendError(Failure.upstream, "a click needs a ref or a coordinate")
        identity = self.refs.get(ref)
        answer = await self._recheck(ref, identity, "point")
        return float(answer["x"]), float(answer["y"])

    async def _mouse(
        self, kind: str, point: tuple[float, float], modifiers: int, button: str = "none", count: int = 0
    ) -> None:
        params: dict[str, Any] = {"type": kind, "x": point[0], "y": point[1], "modifiers": modifiers}
        if kind != "mouseMoved":
            params |= {
                "button": button,
                "clickCount": count,
                "buttons": BUTTON_BITS.get(button, 0) if kind == "mousePressed" else 0,
            }
        await self.session.send("Input.dispatchMouseEvent", params)

    async def _click(self, point: tuple[float, float], button: str, count: int, modifiers: int) -> None:
        await self._mouse("mouseMoved", point, modifiers)
        for n in range(1, count + 1):
            if self.session.dialog is not None:
                return  # the first click opened a dialog: the rest of a double click would only be refused
            await self._mouse("mousePressed", point, modifiers, button, n)
            await self._mouse("mouseReleased", point, modifiers, button, n)

    async def _key(self, text: str | None, repeat: int) -> ComputerResult:
        if not text:
            raise BackendError(Failure.upstream, "computer key needs text (e.g. 'Enter', 'ctrl+a')")
        if not 1 <= repeat <= 100:
            raise BackendError(Failure.upstream, "repeat must be between 1 and 100")
        try:
            chords = keys.parse(text)
        except keys.UnknownKey as exc:
            raise BackendError(Failure.upstream, f"computer key: {exc}") from None
        for _ in range(repeat):
            for chord in chords:
                for event in keys.events(chord):
                    await self.session.send("Input.dispatchKeyEvent", event)
        return ComputerResult("key")

    async def _scroll(
        self,
        coordinate: tuple[float, float] | None,
        ref: str | None,
        direction: Direction | None,
        amount: int,
    ) -> ComputerResult:
        if direction not in ("up", "down", "left", "right"):
            raise BackendError(Failure.upstream, "scroll needs scroll_direction up/down/left/right")
        if not 1 <= amount <= 10:
            raise BackendError(Failure.upstream, "scroll_amount must be between 1 and 10")
        if ref is not None:
            point = await self._point(None, ref)
        elif coordinate is not None:
            point = (float(coordinate[0]), float(coordinate[1]))
        else:
            metrics = await self.session.send("Page.getLayoutMetrics")
            viewport = metrics["cssLayoutViewport"]
            point = (viewport["clientWidth"] / 2, viewport["clientHeight"] / 2)
        delta = amount * SCROLL_TICK
        dx, dy = {"up": (0, -delta), "down": (0, delta), "left": (-delta, 0), "right": (delta, 0)}[direction]
        await self.session.send(
            "Input.dispatchMouseEvent",
            {"type": "mouseWheel", "x": point[0], "y": point[1], "deltaX": dx, "deltaY": dy, "modifiers": 0},
        )
        return ComputerResult("scroll", point)

    async def _screenshot(self) -> ComputerResult:
        # The overlay is painted into captures: the agent's image must show the page, not our marker.
        await self.cursor.hide()
        try:
            shot = await self.session.send("Page.captureScreenshot", {"format": "png"}, timeout=self.screenshot_timeout)
        except BackendError as exc:
            if exc.kind == Failure.timeout:
                raise BackendError(
                    Failure.timeout,
                    "the page did not render a screenshot in time (a minimized or hidden window renders no frames)",
                ) from None
            raise
        except ProtocolError as exc:
            raise BackendError(Failure.upstream, f"screenshot: {exc.message}") from None
        data = base64.b64decode(shot["data"])
        if not data.startswith(PNG_MAGIC):
            raise BackendError(Failure.upstream, "the screenshot is not a PNG")
        self._screenshot_of = self.session.main.loader_id
        width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
        self._screenshot_size = (width, height)
        return ComputerResult("screenshot", image=data, viewport=(width, height))


def _line(node: PageNode, item: AXItem, read: PageRead) -> str:
    parts = [node.role]
    if node.name:
        parts.append(json.dumps(node.name, ensure_ascii=False))
    if node.ref:
        parts.append(f"[{node.ref}]")
    facts = read.facts(item)
    attrs = facts.attrs if facts is not None else {}
    if node.value is not None:
        parts.append("value=" + json.dumps(node.value[:80], ensure_ascii=False))
    if node.checked is not None:
        parts.append("checked" if node.checked else "unchecked")
    if node.disabled:
        parts.append("disabled")
    placeholder = attrs.get("placeholder")
    if placeholder and placeholder != node.name:
        parts.append("placeholder=" + json.dumps(placeholder, ensure_ascii=False))
    if node.role == "link" and attrs.get("href"):
        parts.append("href=" + json.dumps(attrs["href"], ensure_ascii=False))
    return " ".join(parts)


def _is_select(identity: Identity) -> bool:
    return identity.signature.startswith("select|")
