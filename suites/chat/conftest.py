"""Fixtures for release proof 10 (chat stability): a real host app in-process, and the lab's eyes and hands on its
console.

The app reaches Chromium through the tap (label "runtime") like every system under test. The lab reaches the
console only through its own direct CDP connection (`suites/console_driver.py`): it types, ticks and clicks as a
user would, and it reads and watches the history from an isolated world it created itself, so nothing the console's
own scripts do can hide a rebuilt node from it.
"""

from __future__ import annotations

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
from suites.console_driver import ConsoleDriver

HERE = Path(__file__).resolve().parent

WAIT = 10.0
"""Bound on a scroll landing."""
TURN_WAIT = 90.0
"""Bound on a wait for the turn (backends start lazily: the first observe spawns the upstream MCP server)."""

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


async def wait_turn(console: ConsoleDriver, state: str, condition: str = "true") -> None:
    """Wait until `#turn` shows `state` (and `condition` holds); an error state ends the wait at once."""
    turn = "document.querySelector('#turn').dataset.state"
    await console.until(
        f"({turn} === {json.dumps(state)} && ({condition})) || {turn} === 'error'", f"the turn {state}", TURN_WAIT
    )
    shown = await console.snapshot()
    assert shown["state"] == state, f"the turn ended in {shown['state']!r}, not {state!r}: {await console.shown()}"


def cards(shown: dict[str, Any]) -> list[list[str]]:
    """[command, status, reason] of every card the console shows."""
    return [[card["command"], card["status"], card["reason"]] for m in shown["messages"] for card in m["cards"]]


async def press_last(console: ConsoleDriver, selector: str) -> None:
    """Click the last enabled element matching `selector` with a DOM click, without scrolling it into view.

    Used for a card's Continue while the history is scrolled up: a person's click would first have to scroll the
    button into view, which is exactly the scroll position under test.
    """
    await console.evaluate(
        f"""(() => {{
            const all = [...document.querySelectorAll({json.dumps(selector)})].filter((b) => !b.disabled);
            if (!all.length) throw new Error("no enabled " + {json.dumps(selector)});
            all[all.length - 1].click();
            return true;
        }})()"""
    )


async def scroll_history(console: ConsoleDriver, top: int) -> Scroll:
    """Scroll the history as a user would, and return once the scroll event has been dispatched (or, bounded, as it
    is: the scroll checks say what is wrong with the position read here)."""
    await console.evaluate(
        f"""new Promise((resolve) => {{
            const history = document.querySelector("#history");
            const timer = setTimeout(() => resolve(false), {int(WAIT * 1000)});
            history.addEventListener("scroll", () => {{ clearTimeout(timer); resolve(true); }}, {{once: true}});
            history.scrollTop = {top};
        }})""",
        timeout=WAIT,
    )
    return await history_position(console)


async def history_position(console: ConsoleDriver) -> Scroll:
    """Where the history is scrolled, and how far it could be."""
    top, height, client = await console.evaluate(
        "(() => { const h = document.querySelector('#history'); return [h.scrollTop, h.scrollHeight, "
        "h.clientHeight]; })()"
    )
    return Scroll(top, height, client)


async def install_watch(console: ConsoleDriver) -> None:
    """The lab's watch over `#history` (suites/chat/watch.js), in the lab's own world."""
    await console.evaluate((HERE / "watch.js").read_text(encoding="utf-8"))


async def report(console: ConsoleDriver) -> dict[str, Any]:
    return await console.evaluate("globalThis.__labWatch.report()")


@dataclass
class ChatConsole:
    app: HostApp
    console: ConsoleDriver
    """The lab's hands and eyes on the console, in an isolated world of the lab's own."""
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
            console = await ConsoleDriver.attach(
                lab_cdp, app.console_url, target_id=app.chat_page.cdp_target_id, world="lab-chat-eyes"
            )
            try:
                yield ChatConsole(app, console, pages)
            finally:
                await console.detach()
        finally:
            await app.close()

    return start
