"""Fixtures for release proof 10 (chat stability): a real host app in-process, and the lab's eyes and hands on its
console.

The app reaches Chromium through the tap (label "runtime") like every system under test. The lab reaches the
console only through its own direct CDP connection (`lab_cdp`): it types, ticks and clicks as a user would
(`Input.*` on the console's target), and it watches the history from an isolated world it created itself
(`Page.createIsolatedWorld`), so nothing the console's own scripts do can hide a rebuilt node from it.
"""

from __future__ import annotations

import base64
import contextlib
import json
import shutil
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from fixtures_sites.server import FixtureServer
from host.app import AppConfig, HostApp, HostParts
from host.server import CONSOLE_DIR
from lab.cdp import CDPClient
from lab.tap import CDPTap
from runtime.models import Page

HERE = Path(__file__).resolve().parent

WAIT = 10.0
"""Bound on a wait for the console itself (a checkbox appearing, a scroll landing)."""
TURN_WAIT = 90.0
"""Bound on a wait for the turn (backends start lazily: the first observe spawns the upstream MCP server)."""
CDP_MARGIN = 5.0
"""The lab's CDP answer bound sits this far above the page's own bound, so the page's reason wins."""

FORM, LOGIN = "/dom_form/", "/login/"
TITLES = {"form": "Shipping details", "login": "Sign in"}
"""What each Page's title shows once the console has read it."""


def _call(**arguments: Any) -> dict[str, Any]:
    return {"name": "computer_use", "arguments": arguments}


def _act(page: str, **action: Any) -> dict[str, Any]:
    return _call(command="act", computer_session_id={"$session": page}, frame_id={"$frame": page}, action=action)


PLAN = """Here is my **plan** for this turn:

1. read the shipping form on the right
2. read the sign-in page on the left
3. fill in the `Full name` box
4. check the result with `verify`

```
observe  /dom_form/
observe  /login/
act      type "Ada Lovelace"
verify   element_state value
```

Anything that needs *your* sign-in stays with you."""

CHECK = """The sign-in page is yours now. Meanwhile, on the form:

- the **Full name** box should read `Ada Lovelace`
- nothing was submitted

Then I will try **Sign in** once more, which is again yours to do."""

TASK: list[dict[str, Any]] = [
    {"say": "I'll start by listing the Pages you ticked for this turn.", "calls": [_call(command="list_pages")]},
    {
        "say": PLAN,
        "calls": [_call(command="observe", page={"$page": FORM}), _call(command="observe", page={"$page": LOGIN})],
    },
    {
        "say": "The form has a **Full name** box; typing `Ada Lovelace` into it.",
        "calls": [_act(FORM, type="type", ref={"$ref": ["textbox", "Full name"]}, text="Ada Lovelace")],
    },
    {
        "say": "Next, a control that is *not* on the page: this call must fail with a reason code.",
        "calls": [_act(FORM, type="click", ref="e99999")],
    },
    {
        "say": "The sign-in page asks for an email address. That is yours to enter:",
        "calls": [_act(LOGIN, type="type", ref={"$ref": ["textbox", "Email or username"]}, text="ada@example.com")],
    },
    {
        "say": CHECK,
        "calls": [
            _call(
                command="verify",
                computer_session_id={"$session": FORM},
                assertion={
                    "type": "element_state",
                    "role": "textbox",
                    "name": "Full name",
                    "state": "value",
                    "expected": "Ada Lovelace",
                },
            ),
            _act(LOGIN, type="click", ref={"$ref": ["button", "Sign in"]}),
        ],
    },
    {
        "say": "Reading the form once more after the hand-over.",
        "calls": [
            _call(command="observe", computer_session_id={"$session": FORM}),
            _call(
                command="verify",
                computer_session_id={"$session": FORM},
                assertion={"type": "text_present", "text": "Shipping details"},
            ),
        ],
    },
]
"""The script provider's task: one step per model reply; 10 tool calls, one failing (a ref not in the frame) and
two handed to the user (the sign-in form), so a turn gives 20 card updates (each card: running, then its end)."""

USER_MESSAGE = (
    "Please fill in the shipping form on the right with the name Ada Lovelace and check that it holds.\n\n"
    "The sign-in page on the left is mine: if it needs anything, hand it over to me and wait."
)


@dataclass(frozen=True)
class Scroll:
    top: float
    height: float
    client: float

    @property
    def overflow(self) -> float:
        return self.height - self.client

    @property
    def at_bottom(self) -> bool:
        return self.overflow - self.top <= 2


class ConsoleEyes:
    """The lab's CDP session on the console's target, with an isolated world of the lab's own."""

    def __init__(self, cdp: CDPClient, session: str, context: int) -> None:
        self.cdp = cdp
        self.session = session
        self.context = context

    @classmethod
    async def attach(cls, cdp: CDPClient, target_id: str, console_url: str) -> ConsoleEyes:
        """Attach once the console's own document is committed, and create the lab's world in it."""
        session = (await cdp.send("Target.attachToTarget", {"targetId": target_id, "flatten": True}))["sessionId"]

        def is_console(params: dict[str, Any]) -> bool:
            frame = params["frame"]
            return "parentId" not in frame and frame["url"].startswith(console_url)

        navigated = cdp.wait_for_event("Page.frameNavigated", session_id=session, predicate=is_console, timeout=WAIT)
        await cdp.send("Page.enable", session_id=session)
        frame = (await cdp.send("Page.getFrameTree", session_id=session))["frameTree"]["frame"]
        if frame["url"].startswith(console_url):
            navigated.cancel()
        else:
            frame = (await navigated)["frame"]
        world = await cdp.send(
            "Page.createIsolatedWorld", {"frameId": frame["id"], "worldName": "lab-chat-eyes"}, session_id=session
        )
        eyes = cls(cdp, session, world["executionContextId"])
        await eyes.wait(
            "document.readyState === 'complete' && !!document.querySelector('#history')"
            " && !!document.querySelector('#turn')"
        )
        return eyes

    async def evaluate(self, expression: str, timeout: float = WAIT) -> Any:
        """Evaluate in the lab's world (same DOM as the console, none of its scripts)."""
        result = await self.cdp.send(
            "Runtime.evaluate",
            {"expression": expression, "contextId": self.context, "awaitPromise": True, "returnByValue": True},
            session_id=self.session,
            timeout=timeout + CDP_MARGIN,
        )
        if "exceptionDetails" in result:
            details = result["exceptionDetails"]
            raise RuntimeError(f"{expression[:200]!r} threw: {details.get('exception', {}).get('description')}")
        return result["result"].get("value")

    async def wait(self, condition: str, timeout: float = WAIT) -> None:
        """Wait, bounded and in the page, until a JS `condition` holds (rechecked on every DOM change and scroll)."""
        held = await self.evaluate(
            f"""new Promise((resolve) => {{
                const check = () => {{ try {{ return Boolean({condition}); }} catch (e) {{ return false; }} }};
                if (check()) return resolve(true);
                const stop = (value) => {{
                    clearTimeout(timer); observer.disconnect(); document.removeEventListener("scroll", onScroll, true);
                    resolve(value);
                }};
                const onScroll = () => {{ if (check()) stop(true); }};
                const timer = setTimeout(() => stop(false), {int(timeout * 1000)});
                const observer = new MutationObserver(() => {{ if (check()) stop(true); }});
                observer.observe(document, {{subtree: true, childList: true, characterData: true, attributes: true}});
                document.addEventListener("scroll", onScroll, true);
            }})""",
            timeout,
        )
        if not held:
            raise AssertionError(f"within {timeout:g}s, never: {condition}\nconsole: {await self.state()}")

    async def state(self) -> dict[str, Any]:
        """What a user sees of the turn: its state, the notice, and every card's status, reason and page."""
        return await self.evaluate(
            """({
                turn: document.querySelector("#turn")?.dataset.state,
                notice: document.querySelector("#notice")?.textContent.trim().slice(0, 300),
                cards: [...document.querySelectorAll("article.card")].map((card) => [
                    card.querySelector(".command")?.textContent.trim().slice(0, 60),
                    card.dataset.status,
                    card.querySelector(".reason")?.textContent.trim().slice(0, 80),
                ]),
            })"""
        )

    async def wait_turn(self, state: str, condition: str = "true", timeout: float = TURN_WAIT) -> None:
        """Wait until `#turn` shows `state` (and `condition` holds); an error state ends the wait at once."""
        await self.wait(
            f"(document.querySelector('#turn').dataset.state === {json.dumps(state)} && ({condition}))"
            " || document.querySelector('#turn').dataset.state === 'error'",
            timeout,
        )
        seen = await self.state()
        assert seen["turn"] == state, f"the turn ended in {seen['turn']!r}, not {state!r}: {seen}"

    # -- the user's hands --------------------------------------------------------------------------------------

    async def click(self, selector: str) -> None:
        """A real mouse click (Input.dispatchMouseEvent) at the middle of the element."""
        x, y = await self.evaluate(
            f"""(() => {{
                const element = document.querySelector({json.dumps(selector)});
                if (!element) throw new Error("no element " + {json.dumps(selector)});
                element.scrollIntoView({{block: "nearest"}});
                const box = element.getBoundingClientRect();
                return [box.left + box.width / 2, box.top + box.height / 2];
            }})()"""
        )
        for kind in ("mousePressed", "mouseReleased"):
            await self.cdp.send(
                "Input.dispatchMouseEvent",
                {"type": kind, "x": x, "y": y, "button": "left", "clickCount": 1},
                session_id=self.session,
            )

    async def type(self, selector: str, text: str) -> None:
        """Click into the field, then type as a keyboard would (Input.insertText)."""
        await self.click(selector)
        await self.wait(f"document.activeElement === document.querySelector({json.dumps(selector)})")
        await self.cdp.send("Input.insertText", {"text": text}, session_id=self.session)

    async def press_last(self, selector: str) -> None:
        """Click the last enabled element matching `selector` with a DOM click, without scrolling it into view.

        Used for a card's Continue while the history is scrolled up: a mouse click would first have to scroll the
        button into view, which is exactly the scroll position under test.
        """
        await self.evaluate(
            f"""(() => {{
                const all = [...document.querySelectorAll({json.dumps(selector)})].filter((b) => !b.disabled);
                if (!all.length) throw new Error("no enabled " + {json.dumps(selector)});
                all[all.length - 1].click();
                return true;
            }})()"""
        )

    async def scroll_history(self, top: int) -> Scroll:
        """Scroll the history as a user would, and return once the scroll event has been dispatched."""
        await self.evaluate(
            f"""new Promise((resolve) => {{
                const history = document.querySelector("#history");
                const timer = setTimeout(() => resolve(false), {int(WAIT * 1000)});
                history.addEventListener("scroll", () => {{ clearTimeout(timer); resolve(true); }}, {{once: true}});
                history.scrollTop = {top};
            }})"""
        )
        return await self.scroll()

    async def scroll(self) -> Scroll:
        top, height, client = await self.evaluate(
            "(() => { const h = document.querySelector('#history'); return [h.scrollTop, h.scrollHeight, "
            "h.clientHeight]; })()"
        )
        return Scroll(top, height, client)

    # -- the lab's instruments ---------------------------------------------------------------------------------

    async def install_watch(self) -> None:
        await self.evaluate((HERE / "watch.js").read_text(encoding="utf-8"))

    async def report(self) -> dict[str, Any]:
        return await self.evaluate("globalThis.__labWatch.report()")

    async def screenshot(self) -> bytes:
        """The console's window as the user sees it (PNG of the viewport)."""
        shot = await self.cdp.send(
            "Page.captureScreenshot", {"format": "png", "captureBeyondViewport": False}, session_id=self.session
        )
        return base64.b64decode(shot["data"])

    async def detach(self) -> None:
        with contextlib.suppress(Exception):  # the console may already be gone with its app
            await self.cdp.send("Target.detachFromTarget", {"sessionId": self.session})


@dataclass
class ChatConsole:
    app: HostApp
    eyes: ConsoleEyes
    pages: dict[str, Page]


OpenConsole = Callable[..., contextlib.AbstractAsyncContextManager[ChatConsole]]


def patched_console(tmp_path: Path, name: str, *edits: tuple[str, str]) -> Path:
    """A copy of the shipped console with console.js edited: each (anchor, replacement) where the anchor occurs
    exactly once, so a change to the console that moves an anchor fails here instead of testing nothing."""
    copy = tmp_path / f"console-{name}"
    shutil.copytree(CONSOLE_DIR, copy)
    script = copy / "console.js"
    text = script.read_text(encoding="utf-8")
    for anchor, replacement in edits:
        assert text.count(anchor) == 1, f"host/console/console.js no longer has {anchor!r} once: update {name}"
        text = text.replace(anchor, replacement)
    script.write_text(text, encoding="utf-8")
    return copy


def rerendering(part: str) -> tuple[tuple[str, str], ...]:
    """Edits for a console that renders `part` of the history (messages | markdown | avatars) again after every
    event (suites/chat/rerender.js), and still works."""
    function = (HERE / "rerender.js").read_text(encoding="utf-8").replace("__PART__", part)
    return (
        ("  function handle(event) {", function + "  function handle(event) {"),
        (
            "if (handler) keepingScroll(() => handler(event));",
            "if (handler) keepingScroll(() => { handler(event); rerenderHistory(); });",
        ),
    )


JUMPING = (("if (atBottom) history.scrollTop = history.scrollHeight;", "history.scrollTop = history.scrollHeight;"),)
"""A console that scrolls to the bottom after every event, even when the user had scrolled up."""


@pytest.fixture
def open_console(tap: CDPTap, lab_cdp: CDPClient, fixture_server: FixtureServer, tmp_path: Path) -> OpenConsole:
    """`async with open_console(backend, console_dir=None) as chat:` — a host app with the sign-in page left of the
    console and the shipping form right of it, and the lab attached to the console.

    A context manager rather than a fixture's teardown: the app starts and stops in the test's own task (its MCP
    client holds anyio cancel scopes), and the test closes it before its checks, so a failing check still reports
    figures from a cleanly stopped app.
    """

    @contextlib.asynccontextmanager
    async def start(backend: str, console_dir: Path | None = None) -> AsyncIterator[ChatConsole]:
        task = tmp_path / "chat-task.json"
        task.write_text(json.dumps(TASK, indent=2), encoding="utf-8")
        config = AppConfig(
            cdp_endpoint=await tap.endpoint("runtime"),
            mcp_port=0,
            console_port=0,
            provider="script",
            script=task,
            backend=backend,
            config_dir=tmp_path / "config",
        )
        app = await HostApp.start(config, HostParts(console_dir=console_dir))
        try:
            assert app.chat_page is not None, "the app opened no console"
            pages = {
                "login": await app.open_page(fixture_server.url(LOGIN), placement="left"),
                "form": await app.open_page(fixture_server.url(FORM), placement="right"),
            }
            eyes = await ConsoleEyes.attach(lab_cdp, app.chat_page.cdp_target_id, app.console_url)
            try:
                yield ChatConsole(app, eyes, pages)
            finally:
                await eyes.detach()
        finally:
            await app.close()

    return start
