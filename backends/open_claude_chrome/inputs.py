"""The contract's input tools: `computer` (mouse, keyboard, screenshot) and `form_input`. Input goes through
`Input.*` on the page's own session, delivered to unfocused and hidden pages alike: nothing is raised, focused or
activated. A ref is re-checked on the live page before every use; a coordinate only points into the screenshot
taken by the call just before."""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import Any, Literal

from backends.open_claude_chrome import keys
from backends.open_claude_chrome.navigation import Navigation
from backends.open_claude_chrome.refs import Identity, Mode, recheck
from backends.open_claude_chrome.session import ProtocolError
from backends.open_claude_chrome.tools import tool
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

SCROLL_TICK = 100  # CSS px per wheel tick
CLICKS = {
    "left_click": ("left", 1),
    "right_click": ("right", 1),
    "double_click": ("left", 2),
    "triple_click": ("left", 3),
}
BUTTON_BITS = {"left": 1, "right": 2}
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@dataclass(frozen=True)
class ComputerResult:
    action: str
    point: tuple[float, float] | None = None
    image: bytes | None = None
    viewport: tuple[int, int] | None = None


@dataclass(frozen=True)
class FormInputResult:
    ref: str
    value: str | bool | float


class Input(Navigation):
    """Input may make the page navigate, so it builds on `Navigation` (`_may_navigate`)."""

    @tool
    async def form_input(self, ref: str, value: str | bool | float) -> FormInputResult:
        """Set a form control's value by ref: a select's option (by value or visible text), a checkbox/radio's
        checked state (boolean), a text field's whole content (replaced, as typed input events), or the value of a
        date, time, colour or range field (set with input and change events: such a field takes no typed text)."""
        identity = self.refs.get(ref)
        async with self._may_navigate():
            return await self._form_input(ref, identity, value)

    async def _form_input(self, ref: str, identity: Identity, value: str | bool | float) -> FormInputResult:
        if isinstance(value, bool):
            answer = await self.recheck_ref(ref, identity, "check", value)
            await self._cursor(answer)
            return FormInputResult(ref, bool(answer.get("checked")))
        if identity.role in ("combobox", "listbox") and _is_select(identity):
            answer = await self.recheck_ref(ref, identity, "select", str(value))
            await self._cursor(answer)
            return FormInputResult(ref, str(answer.get("selected", value)))
        text = str(value)
        answer = await self.recheck_ref(ref, identity, "text", text)
        await self._cursor(answer)
        if answer.get("value_set"):
            pass  # a date, time, colour or range field: the check set the value (it takes no typed text)
        elif text:
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
            answer = await self.recheck_ref(ref, self.refs.get(ref), "scroll")
            return ComputerResult(action, (answer["x"], answer["y"]))
        if action == "scroll":
            return await self._scroll(coordinate, ref, scroll_direction, scroll_amount)
        if action in CLICKS or action == "hover":
            point = await self.press_point(coordinate, ref, "point" if action == "hover" else "click")
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

    async def recheck_ref(self, ref: str, identity: Identity, mode: Mode, arg: Any = None) -> dict[str, Any]:
        """The ref's element checked again just before it is used (still there, in its place, hit at its centre):
        a public seam, so a variant of the contract can change how it is checked."""
        return await recheck(self.session, self.worlds, ref, identity, mode, arg)

    async def _cursor(self, answer: dict[str, Any]) -> None:
        if answer.get("x") is not None and answer.get("y") is not None:
            await self.cursor.show(answer["x"], answer["y"])

    async def press_point(
        self, coordinate: tuple[float, float] | None, ref: str | None, mode: Mode = "point"
    ) -> tuple[float, float]:
        """Where to put the mouse: the coordinate, or the ref's centre re-checked (`click` also refuses a disabled
        control; `point`, for hover, does not). A public seam, like `recheck_ref`."""
        if coordinate is not None:
            x, y = coordinate
            return float(x), float(y)
        if ref is None:
            raise BackendError(Failure.upstream, "a click needs a ref or a coordinate")
        identity = self.refs.get(ref)
        answer = await self.recheck_ref(ref, identity, mode)
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
            point = await self.press_point(None, ref)
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


def _is_select(identity: Identity) -> bool:
    return identity.signature.startswith("select|")
