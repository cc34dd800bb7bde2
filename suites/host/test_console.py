"""The console as a newcomer meets it, driven the way a person would (the lab's own hands on the console Page): notices
that go when their cause is gone and never cover the history, Page ticks kept across sends, a warning (and no turn)
when nothing is ticked, New chat, windows inside the screen's work area, cards in plain words, a clean first load.

Each state is photographed into the Allure report. The negative controls run the same checks on deliberately broken
parts passed in through named seams: a console whose `clearNotice` never clears, one that links its icon as the
content policy forbids, and a window manager whose `place` ignores the work area.
"""

from __future__ import annotations

import asyncio
import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import allure
import pytest

from fixtures_sites.server import FixtureServer
from host.app import AppConfig, HostApp, HostParts
from host.server import CONSOLE_DIR
from host.windows import Placement, Rect, Side, WindowManager
from lab.cdp import CDPClient
from suites.console_driver import ConsoleDriver
from suites.host.conftest import EVENT_TIMEOUT, StartApp, call, turn_ended, until_event, write_task
from suites.host.test_app import SIGN_IN, open_fixture

NOTICE_IN_FLOW = """(() => {
    const box = (id) => document.getElementById(id).getBoundingClientRect();
    const notice = box('notice'), history = box('history'), composer = box('composer');
    const covered = [...document.querySelectorAll('#history article.card')].map((card) => card.getBoundingClientRect())
        .map((r) => ({top: Math.max(r.top, history.top), bottom: Math.min(r.bottom, history.bottom)}))
        .filter((r) => r.bottom > r.top && r.bottom > notice.top && r.top < notice.bottom).length;
    return {shown: notice.height > 0, below_history: notice.top >= history.bottom - 0.5,
            above_composer: notice.bottom <= composer.top + 0.5, cards_covered: covered};
})()"""


async def photograph(console: ConsoleDriver, name: str) -> bytes:
    """The console as the person sees it now, attached to the report."""
    png = await console.screenshot()
    allure.attach(png, name, allure.attachment_type.PNG)
    return png


def console_copy(tmp_path: Path, name: str, file: str, anchor: str, replacement: str) -> Path:
    """A copy of the shipped console with one edit; the anchor must occur exactly once (or the control is stale)."""
    copy = tmp_path / f"console-{name}"
    shutil.copytree(CONSOLE_DIR, copy)
    path = copy / file
    text = path.read_text(encoding="utf-8")
    assert text.count(anchor) == 1, f"host/console/{file} no longer has {anchor!r} once: update {name}"
    path.write_text(text.replace(anchor, replacement), encoding="utf-8")
    return copy


NEVER_CLEARS = ("console.js", "  function clearNotice(cause) {\n", "  function clearNotice(cause) {\n    return;\n")
"""Broken on purpose: a console whose notices stay until another replaces them (the issue's console)."""
FORBIDDEN_ICON = ("index.html", 'href="icon.svg" type="image/svg+xml"', 'href="data:,"')
"""Broken on purpose: the icon link the content policy blocks (the issue's console)."""


# -- notices -------------------------------------------------------------------------------------------------------


async def waiting_turn(
    start_app: StartApp, console_of: Any, server: FixtureServer, tmp_path: Path, parts: HostParts | None = None
):
    app = await start_app(parts, script=write_task(tmp_path, SIGN_IN))
    console = await console_of(app)
    handle = await open_fixture(console, server, "/login/", "left", "Sign in")
    mark = app.events.next_id
    await console.send("Sign me in, please.", [handle])
    await until_event(app, mark, lambda e: e == {"type": "turn", "state": "needs_user"})
    await console.until("document.querySelector('#history article.card[data-status=needs_user] button.stop')")
    return app, console


async def check_busy_notice_clears(app: HostApp, console: ConsoleDriver) -> None:
    """A message refused while the turn waits: the notice says why, in the flow above the composer, covering no
    card; it is gone once that turn has ended."""
    await console.type("#message", "And one more thing.")
    await console.click("#send")  # the sign-in Page is still ticked from the first message
    said = await console.until("document.querySelector('#notice [data-cause=busy]')?.textContent")
    assert "waiting for you" in said, said
    placed = await console.evaluate(NOTICE_IN_FLOW)
    assert placed == {"shown": True, "below_history": True, "above_composer": True, "cards_covered": 0}, placed
    await photograph(console, "a refused message: the notice above the composer")
    mark = app.events.next_id
    await console.click("#history article.card[data-status=needs_user] button.stop")
    await until_event(app, mark, turn_ended)
    await console.until("document.getElementById('turn').dataset.state === 'idle'")
    left = await console.text("#notice")  # the same event cleared it: no wait
    assert left == "", f"the notice outlived the turn it was about: {left!r}"
    await photograph(console, "the turn ended: the notice is gone")


@pytest.mark.req("app:console-notices")
async def test_a_turn_waiting_notice_clears_when_that_turn_ends_and_never_covers_a_card(
    start_app: StartApp, console_of: Any, fixture_server: FixtureServer, tmp_path: Path
) -> None:
    app, console = await waiting_turn(start_app, console_of, fixture_server, tmp_path)
    await check_busy_notice_clears(app, console)


@pytest.mark.negative_control
@pytest.mark.req("app:console-notices")
async def test_the_notice_check_catches_a_console_whose_notice_never_clears(
    start_app: StartApp, console_of: Any, fixture_server: FixtureServer, tmp_path: Path
) -> None:
    broken = console_copy(tmp_path, "never-clears", *NEVER_CLEARS)
    app, console = await waiting_turn(start_app, console_of, fixture_server, tmp_path, HostParts(console_dir=broken))
    with pytest.raises(AssertionError, match="outlived the turn"):
        await check_busy_notice_clears(app, console)


@pytest.mark.req("app:console-notices")
async def test_an_input_notice_clears_when_the_input_is_corrected_or_at_the_next_action(
    start_app: StartApp, console_of: Any
) -> None:
    app = await start_app()
    console = await console_of(app)
    await console.click("#send")  # nothing written
    assert "Write a message first" in await console.until(
        "document.querySelector('#notice [data-cause=input]')?.textContent"
    )
    await photograph(console, "an empty message: the notice names the input")
    await console.type("#message", "Now there is something.")
    assert await console.text("#notice") == "", "the notice outlived the input it was about"

    await console.type("#open-url", "ftp://example.com/")
    await console.click("#open")
    assert "http" in await console.until("document.querySelector('#notice [data-cause=input]')?.textContent")
    await console.evaluate("window.dispatchEvent(new Event('focus'))")  # the person comes back: a new action
    await console.until("document.getElementById('notice').textContent === ''")


# -- ticks, the no-Page warning, New chat --------------------------------------------------------------------------


def user_messages(app: HostApp, start: int) -> list[dict[str, Any]]:
    events = [json.loads(raw) for raw in app.events.since(start)]
    return [event for event in events if event.get("type") == "message" and event.get("role") == "user"]


@pytest.mark.req("app:console-ticks")
async def test_ticks_stay_across_sends_and_sending_with_none_warns_and_starts_no_turn(
    start_app: StartApp, console_of: Any, fixture_server: FixtureServer, tmp_path: Path
) -> None:
    steps = [{"say": "I see the form."}, {"say": "Still there."}]
    app = await start_app(script=write_task(tmp_path, steps))
    console = await console_of(app)
    assert "tick" in await console.text("#turn-pages-empty")  # the empty box says what it is for
    handle = await open_fixture(console, fixture_server, "/dom_form/", "right", "Checkout")
    title = await console.evaluate(f"document.querySelector('#pages li.page[data-page=\"{handle}\"] .title').title")
    assert title.startswith("Checkout · Shipping details"), f"no full title on hover: {title!r}"

    mark = app.events.next_id
    await console.type("#message", "Please look at the form.")
    await console.click("#send")
    warning = await console.until("document.querySelector('#notice [data-cause=\"no-page\"]')?.textContent")
    assert "No Page is ticked" in warning
    assert user_messages(app, mark) == [], "a message went to the app with no Page ticked"
    assert app.conversation.state == "idle", "a turn started with no Page"
    assert await console.evaluate("document.getElementById('message').value") == "Please look at the form."
    await photograph(console, "no Page ticked: a warning, nothing sent")

    await console.tick_page(handle)
    assert await console.text("#notice") == "", "the warning outlived its cause (a Page is ticked now)"
    await console.click("#send")
    await until_event(app, mark, turn_ended)
    ticked = "[...document.querySelectorAll('#turn-pages input[data-page]:checked')].map(box => box.dataset.page)"
    assert await console.evaluate(ticked) == [handle], "the tick did not survive the send"

    second = app.events.next_id
    await console.type("#message", "Once more, please.")
    await console.click("#send")
    await until_event(app, second, turn_ended)
    assert [event["pages"] for event in user_messages(app, mark)] == [[handle], [handle]]
    await photograph(console, "ticks kept across two sends")


@pytest.mark.req("app:new-chat")
async def test_new_chat_clears_the_history_and_starts_the_script_over(
    start_app: StartApp, console_of: Any, lab_cdp: CDPClient, tmp_path: Path
) -> None:
    steps = [{"say": "Step one of the script."}, {"say": "Step two of the script."}]
    app = await start_app(script=write_task(tmp_path, steps))
    console = await console_of(app)
    for text in ("Hello.", "Go on."):
        mark = app.events.next_id
        await console.send(text, [])
        await until_event(app, mark, turn_ended)
    await console.until("document.querySelector('#history').textContent.includes('Step two')")

    mark = app.events.next_id
    await console.click("#new-chat")
    await until_event(app, mark, lambda event: event.get("type") == "new_chat")
    await console.until("document.querySelectorAll('#history article.message').length === 0")
    assert app.conversation.transcript == []
    await console.send("Start again.", [])
    await until_event(app, mark, turn_ended)
    said = "[...document.querySelectorAll('#history article.message .body')].map(body => body.textContent.trim())"
    # The app has ended the turn; the console shows its events a moment later (they stream to it).
    await console.until(f"{said}.length >= 2")
    assert await console.evaluate(said) == ["Start again.", "Step one of the script."], "the script did not restart"

    await lab_cdp.send("Page.enable", session_id=console.session)
    loaded = lab_cdp.wait_for_event("Page.loadEventFired", console.session)
    await lab_cdp.send("Page.reload", session_id=console.session)
    await loaded
    await console.until("document.body.dataset.connection === 'live'")
    await console.until("document.querySelectorAll('#history article.message').length === 2")
    assert await console.evaluate(said) == ["Start again.", "Step one of the script."], "a reload showed the old chat"
    await photograph(console, "New chat, then one message")


# -- placements ----------------------------------------------------------------------------------------------------

OPENED: list[tuple[Side, str, str]] = [
    ("right", "/dom_form/", "Checkout"),
    ("left", "/login/", "Sign in"),
    ("above", "/catalogue/", ""),
    ("below", "/home/", ""),
    ("right", "/submit/", ""),
]


async def window_bounds(lab_cdp: CDPClient, target: str) -> Rect:
    """A window's bounds as the lab reads them from Chromium (not as the app believes them)."""
    window = (await lab_cdp.send("Browser.getWindowForTarget", {"targetId": target}))["windowId"]
    return Rect.of((await lab_cdp.send("Browser.getWindowBounds", {"windowId": window}))["bounds"])


async def check_placements(
    app: HostApp, console: ConsoleDriver, server: FixtureServer, lab_cdp: CDPClient, screen: Rect
):
    """Open a Page on every side (and a second on the right) through the console's form on a screen of this size:
    after each, every window lies inside the work area and the new Page is where the person asked."""
    await lab_cdp.send(
        "Emulation.setDeviceMetricsOverride",
        {"width": 0, "height": 0, "deviceScaleFactor": 0, "mobile": False}
        | {"screenWidth": screen.width, "screenHeight": screen.height},
        session_id=console.session,
    )
    registry = app.runtime.registry
    for number, (side, path, title) in enumerate(OPENED, 1):
        handle = await open_fixture(console, server, path, side, title)
        await registry.refresh([handle])
        assert registry.info(registry.get(handle)).relation == side, f"a Page opened {side} is not {side}"
        windows = {"chat": await window_bounds(lab_cdp, console.target_id)}
        for page in registry.pages():
            if not page.is_chat:
                windows[page.registry_page_id] = await window_bounds(lab_cdp, page.cdp_target_id)
        outside = {name: rect for name, rect in windows.items() if not rect.inside(screen)}
        assert outside == {}, f"windows outside the {screen.width}×{screen.height} work area: {outside}"
        if number in (2, len(OPENED)):
            await photograph(console, f"{number} Pages around the chat on a {screen.width}×{screen.height} screen")


class IgnoresTheWorkArea(WindowManager):
    """Broken on purpose: chat-sized slots beside the chat, wherever the screen ends (the issue's placements)."""

    def place(self, chat: Rect, side: Side, others: Any) -> Placement:
        saved, self.work = self.work, None
        try:
            return super().place(chat, side, others)
        finally:
            self.work = saved


@pytest.mark.req("app:placement")
@pytest.mark.parametrize("size", [(1280, 800), (1600, 1000)], ids=["1280x800", "1600x1000"])
async def test_every_placement_lies_inside_the_screens_work_area(
    start_app: StartApp, console_of: Any, fixture_server: FixtureServer, lab_cdp: CDPClient, size: tuple[int, int]
) -> None:
    app = await start_app()
    console = await console_of(app)
    await check_placements(app, console, fixture_server, lab_cdp, Rect(0, 0, *size))


@pytest.mark.negative_control
@pytest.mark.req("app:placement")
async def test_the_placement_check_catches_a_window_manager_that_ignores_the_work_area(
    start_app: StartApp, console_of: Any, fixture_server: FixtureServer, lab_cdp: CDPClient
) -> None:
    app = await start_app(HostParts(window_manager=IgnoresTheWorkArea))
    console = await console_of(app)
    with pytest.raises(AssertionError, match="outside the 1600×1000 work area"):
        await check_placements(app, console, fixture_server, lab_cdp, Rect(0, 0, 1600, 1000))


# -- cards ---------------------------------------------------------------------------------------------------------

CARD_TASK = [
    {"say": "Let me look.", "calls": [call(command="list_pages")]},
    {"say": "Reading the form.", "calls": [call(command="observe", page={"$page": "Checkout"})]},
    {
        "say": "Filling it in.",
        "calls": [
            call(
                command="act",
                computer_session_id={"$session": "Checkout"},
                frame_id={"$frame": "Checkout"},
                action={"type": "type", "ref": {"$ref": ["textbox", "Full name"]}, "text": "Ada Lovelace"},
            )
        ],
    },
    {"say": "Now the sign-in page.", "calls": [call(command="observe", page={"$page": "Sign in"})]},
    {
        "say": "Typing the email.",
        "calls": [
            call(
                command="act",
                computer_session_id={"$session": "Sign in"},
                frame_id={"$frame": "Sign in"},
                action={"type": "type", "ref": {"$ref": ["textbox", "Email or username"]}, "text": "ada@example.com"},
            )
        ],
    },
    {"say": "Done."},
]

CARDS = """[...document.querySelectorAll('#history article.card')].map((card) => ({
    status: card.dataset.status,
    headline: card.querySelector('.headline').textContent,
    shown: [...card.children].filter((node) => !node.matches('details')).map((node) => node.innerText).join(' | '),
    raw: card.querySelector('details.raw .command').textContent,
    raw_open: card.querySelector('details.raw').open,
    markup: card.querySelectorAll('.headline *, .detail *').length,
    buttons: [...card.querySelectorAll('button')].map((button) => button.className),
}))"""


@pytest.mark.req("app:cards-in-words")
async def test_cards_speak_plain_words_with_the_raw_call_one_click_away(
    start_app: StartApp, console_of: Any, fixture_server: FixtureServer, tmp_path: Path
) -> None:
    app = await start_app(script=write_task(tmp_path, CARD_TASK))
    console = await console_of(app)
    form = await open_fixture(console, fixture_server, "/dom_form/", "right", "Checkout")
    login = await open_fixture(console, fixture_server, "/login/", "left", "Sign in")
    mark = app.events.next_id
    await console.send("Fill in my name, then sign me in.", [form, login])
    await until_event(app, mark, lambda e: e == {"type": "turn", "state": "needs_user"})
    await console.until("document.querySelector('#history article.card[data-status=needs_user] button.continue')")
    cards = await console.evaluate(CARDS)
    await photograph(console, "cards in plain words; a hand-over speaks to the person")

    assert [card["headline"] for card in cards] == [
        "Looked at your ticked Pages",
        "Read Checkout · Shipping details — Northwind Outfitters",
        "Typed “Ada Lovelace” into Full name",
        "Read Sign in — Northwind Outfitters",
        "Needs you: sign in on Sign in — Northwind Outfitters",
    ]
    assert [card["raw"].split(" ")[0] for card in cards] == ["list_pages", "observe", "act", "observe", "act"]
    assert not any(card["raw_open"] for card in cards), "the raw call is shown by default, not one click away"
    assert all(card["markup"] == 0 for card in cards), "a card's text became markup"
    hand_over = cards[-1]
    assert "needs_user" not in hand_over["shown"], hand_over["shown"]
    assert "do not retry" not in hand_over["shown"], f"the model's hint is shown to the person: {hand_over['shown']}"
    assert hand_over["buttons"] == ["continue", "stop"]


@pytest.mark.req("app:cards-in-words", "app:bad-input")
async def test_a_provider_error_no_retry_can_fix_offers_no_retry(
    start_app: StartApp, console_of: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    app = await start_app(provider="anthropic")
    console = await console_of(app)
    mark = app.events.next_id
    await console.send("Anyone there?", [])
    await until_event(app, mark, turn_ended)
    card = "#history article.card.provider-error"
    await console.until(f"document.querySelector('{card} .headline')")
    assert await console.evaluate(f"document.querySelectorAll('{card} button').length") == 0, "Retry on a missing key"
    assert "ANTHROPIC_API_KEY" in await console.text(f"{card} .detail")


# -- a clean load --------------------------------------------------------------------------------------------------


async def console_errors(lab_cdp: CDPClient, console: ConsoleDriver) -> list[str]:
    """Every error the console's page reported while it reloaded: console calls, exceptions, log entries (the
    content policy's included), collected by the lab on its own session."""
    errors: list[str] = []

    def record(kind: str) -> Callable[[dict[str, Any]], bool]:
        def seen(params: dict[str, Any]) -> bool:
            if kind == "Runtime.exceptionThrown":
                errors.append(json.dumps(params.get("exceptionDetails", {}))[:300])
            elif kind == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
                errors.append(json.dumps(params.get("args", []))[:300])
            elif kind == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
                errors.append(params["entry"].get("text", "")[:300])
            return False  # keep listening

        return seen

    session = console.session
    waits = [
        lab_cdp.wait_for_event(kind, session, predicate=record(kind), timeout=120)
        for kind in ("Runtime.consoleAPICalled", "Runtime.exceptionThrown", "Log.entryAdded")
    ]
    try:
        for domain in ("Runtime", "Log", "Page"):
            await lab_cdp.send(f"{domain}.enable", session_id=session)  # Log.enable replays the entries so far
        loaded = lab_cdp.wait_for_event("Page.loadEventFired", session)
        await lab_cdp.send("Page.reload", session_id=session)
        await loaded
        await console.until("document.body.dataset.connection === 'live'")
        await console.evaluate("1")  # one round trip more: every event the load caused has arrived before it
        return errors
    finally:
        for wait in waits:
            wait.cancel()


@pytest.mark.req("app:console-clean-load")
async def test_the_console_loads_with_no_error_in_its_console(
    start_app: StartApp, console_of: Any, lab_cdp: CDPClient
) -> None:
    app = await start_app()
    console = await console_of(app)
    assert await console_errors(lab_cdp, console) == []


@pytest.mark.negative_control
@pytest.mark.req("app:console-clean-load")
async def test_the_clean_load_check_catches_an_icon_the_content_policy_blocks(
    start_app: StartApp, console_of: Any, lab_cdp: CDPClient, tmp_path: Path
) -> None:
    app = await start_app(HostParts(console_dir=console_copy(tmp_path, "forbidden-icon", *FORBIDDEN_ICON)))
    console = await console_of(app)
    errors = await console_errors(lab_cdp, console)
    assert any("Content Security Policy" in error for error in errors), errors


# -- the demo, on a browser of its own -----------------------------------------------------------------------------


@pytest.mark.req("app:launch", "app:cards-in-words")
async def test_the_demo_leaves_no_stray_window_and_its_cards_read_as_plain_words(tmp_path: Path) -> None:
    config = AppConfig(mcp_port=0, console_port=0, config_dir=tmp_path / "config", demo=True, headless=True)
    app = await HostApp.start(config)
    try:
        sent = False
        async with asyncio.timeout(EVENT_TIMEOUT):  # the demo's turn, from its message to its end
            async for _, raw in app.events.follow(0):
                event = json.loads(raw)
                sent = sent or (event.get("type") == "message" and event.get("role") == "user")
                if sent and turn_ended(event):
                    break
        events = [json.loads(raw) for raw in app.events.events]
        headlines = [e["headline"] for e in events if e.get("type") == "card" and e["status"] == "ok"]
        targets = (await app.runtime.cdp.send("Target.getTargets"))["targetInfos"]
        pages = sorted(t["url"] for t in targets if t["type"] == "page")
    finally:
        await app.close()
    assert pages == sorted([app.console_url, app.demo.url]), f"a window nobody asked for: {pages}"
    assert headlines == [
        "Looked at your ticked Pages",
        "Read Subscribe — computer-use demo",
        "Typed “ada@example.com” into Email",
        "Clicked Subscribe",
        "Checked that the Page shows “Subscribed”",
    ], headlines
