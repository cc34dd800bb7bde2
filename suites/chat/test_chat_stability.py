"""Release proof 10 (Chat 稳定): a tool update never rebuilds the history, and a user who scrolled up stays put.

A real host app runs one turn of the script provider against two fixture Pages: ten tool calls (cards going
running → ok / failed / needs_user), two hand-overs to the user on the sign-in page, and one call that fails with
a reason code. The lab drives the console as a user (types, ticks, clicks Send and Continue through its own CDP
connection) and watches `#history` from an isolated world of its own (suites/chat/watch.js): every earlier message,
avatar, card and node of finished markdown must still be the same node after every update. While the user is at
the bottom the history follows the updates; once the user scrolled up, `scrollTop` holds.

The negative controls run the same turn and the same checks against broken copies of the console: ones that render
the messages, their markdown or their avatars again after each update (still working consoles, only the DOM
churns), and one that jumps to the bottom after each update.
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import allure
import pytest

from runtime.reasons import ReasonCode
from suites.chat.conftest import (
    JUMPING,
    TITLES,
    USER_MESSAGE,
    WAIT,
    ChatConsole,
    OpenConsole,
    Scroll,
    cards,
    history_position,
    install_watch,
    patched_console,
    press_last,
    report,
    rerendering,
    scroll_history,
    wait_turn,
)
from suites.console_driver import ConsoleDriver
from suites.proofs import record_cost

DEFAULT_BACKEND = "playwright_mcp"
SCREENSHOT = Path(__file__).resolve().parents[2] / "docs" / "console.png"
MIN_OVERFLOW = 100
"""The history must overflow by this much (px) for "follows" and "holds" to mean anything."""
MIN_UPDATES = 6
REASON_CODES = {code.value for code in ReasonCode}

AT_BOTTOM = (
    "(h => h.scrollHeight - h.clientHeight >= {min} && h.scrollHeight - h.clientHeight - h.scrollTop <= 2)"
    "(document.querySelector('#history'))"
)
NO_CARD_RUNNING = "!document.querySelector('article.card[data-status=\"running\"]')"


def hand_overs(count: int) -> str:
    return f"document.querySelectorAll('article.card[data-status=\"needs_user\"]').length >= {count}"


@dataclass
class TurnRun:
    """What the lab saw of one turn: the watch's report, the scroll positions, the cards, a mid-turn screenshot."""

    report: dict[str, Any] = field(default_factory=dict)
    followed: list[Scroll] = field(default_factory=list)
    """The history at each hand-over, the user never having scrolled: it should be at the bottom."""
    scrolled: Scroll | None = None
    """Right after the user scrolled up (at the second hand-over)."""
    after: Scroll | None = None
    """When the turn ended, the user not having scrolled since."""
    updates_after_scroll: int = 0
    cards: list[list[Any]] = field(default_factory=list)
    screenshot: bytes = b""

    def figures(self, backend: str, console: str) -> dict[str, Any]:
        return {
            "backend": backend,
            "console": console,
            "updates": self.report.get("updates"),
            "history_nodes_removed_or_replaced": self.report.get("removed_or_replaced"),
            "by_kind": self.report.get("lost_by_kind"),
            "messages": self.report.get("messages"),
            "cards": self.report.get("cards"),
            "scroll_top_held": None if self.scrolled is None or self.after is None else self.after.top,
            "scroll_top_set": None if self.scrolled is None else self.scrolled.top,
            "updates_after_scroll": self.updates_after_scroll,
        }


# -- the checks (each also run by a negative control) --------------------------------------------------------------


def assert_history_stable(report: dict[str, Any]) -> None:
    """0 earlier messages, avatars, cards or finished-markdown nodes removed or replaced, over every update seen."""
    assert report["removed_or_replaced"] == 0, (
        f"{report['removed_or_replaced']} history nodes removed or replaced over {report['updates']} updates: "
        f"{report['lost_by_kind']} (markdown rewritten in place: {report['markdown_rewritten']})"
    )


def assert_follows(followed: list[Scroll]) -> None:
    """At each hand-over the history overflowed and sat at the bottom, and it had grown since the last one."""
    assert followed, "no hand-over was seen"
    for scroll in followed:
        assert scroll.overflow >= MIN_OVERFLOW, f"the history does not overflow enough to scroll: {scroll}"
        assert scroll.at_bottom, f"the history did not follow the updates to the bottom: {scroll}"
    heights = [scroll.height for scroll in followed]
    assert heights == sorted(set(heights)), f"the history did not grow between hand-overs: {heights}"


def assert_scroll_held(scrolled: Scroll | None, after: Scroll | None, updates: int) -> None:
    """Updates arrived after the user scrolled up, and scrollTop stayed where the user left it."""
    assert scrolled is not None, "the user never scrolled up"
    assert after is not None, "the turn never ended"
    assert updates > 0, f"no update arrived after the scroll: {scrolled} {after}"
    assert after.height > scrolled.height, f"nothing was added after the scroll: {scrolled} {after}"
    assert abs(after.top - scrolled.top) <= 1, f"scrollTop moved from {scrolled.top} to {after.top} ({after})"


# -- driving the console as a user ---------------------------------------------------------------------------------


async def start_turn(chat: ChatConsole) -> None:
    """Type the message, tick both Pages, press Send; return at the first hand-over (`#turn` needs_user)."""
    console = chat.console
    # Wait until the Pages show their titles: a label that grows after the pointer aimed moves the box below it.
    await console.until(
        " && ".join(
            f"!!document.querySelector('#turn-pages input[data-page=\"{page.registry_page_id}\"]')"
            f"?.closest('label').textContent.includes({json.dumps(TITLES[name])})"
            for name, page in chat.pages.items()
        ),
        "both Pages' titles beside their ticks",
    )
    await install_watch(console)
    await console.send(USER_MESSAGE, [page.registry_page_id for page in chat.pages.values()])
    await wait_turn(console, "needs_user")


async def settle(console: ConsoleDriver) -> Scroll:
    """The history once it reached the bottom (bounded: the console may scroll on the next frame), or as it is."""
    with contextlib.suppress(AssertionError):  # the checks say what is wrong with the position read here
        await console.until(AT_BOTTOM.format(min=MIN_OVERFLOW), "the history at its bottom", WAIT)
    return await history_position(console)


async def run_turn(chat: ChatConsole) -> TurnRun:
    """The whole turn: follow at both hand-overs, Continue the first, scroll up and Continue the second."""
    console, run = chat.console, TurnRun()
    await start_turn(chat)
    run.followed.append(await settle(console))
    run.screenshot = await console.screenshot()
    await press_last(console, "button.continue")
    await wait_turn(console, "needs_user", hand_overs(2))
    run.followed.append(await settle(console))
    run.scrolled = await scroll_history(console, 0)
    updates_at_scroll = (await report(console))["updates"]
    await press_last(console, "button.continue")
    await wait_turn(console, "idle", NO_CARD_RUNNING)
    run.after = await history_position(console)
    run.report = await report(console)
    run.updates_after_scroll = run.report["updates"] - updates_at_scroll
    run.cards = cards(await console.snapshot())
    return run


# -- the proof and its negative controls -----------------------------------------------------------------------------


@allure.epic("release proofs")
@allure.feature("chat stability")
@pytest.mark.req("proof:chat-stability", "app:live-cards", "app:needs-user")
async def test_tool_updates_never_replace_an_earlier_message_avatar_or_markdown_and_a_scrolled_up_history_holds(
    open_console: OpenConsole, backend: str
) -> None:
    async with open_console(backend) as chat:
        run = await run_turn(chat)
    allure.attach(run.screenshot, "console mid-turn", allure.attachment_type.PNG)
    allure.attach(json.dumps(run.report, indent=2), "the lab's watch over #history", allure.attachment_type.JSON)
    if backend == DEFAULT_BACKEND:
        SCREENSHOT.write_bytes(run.screenshot)
    record_cost(f"chat_stability-{backend}", run.figures(backend, "shipped"))
    print(f"cards: {run.cards}")

    assert_history_stable(run.report)
    assert_follows(run.followed)
    assert_scroll_held(run.scrolled, run.after, run.updates_after_scroll)
    assert run.report["updates"] >= MIN_UPDATES, run.report
    statuses = [card[1] for card in run.cards]
    assert statuses.count("needs_user") == 2, run.cards
    assert statuses.count("ok") >= 5, run.cards
    failed = [card for card in run.cards if card[1] == "failed"]
    assert len(failed) == 1, f"one failed card: {run.cards}"
    assert failed[0][2].split(":")[0] in REASON_CODES, f"the failed card shows its reason code: {run.cards}"


@allure.epic("release proofs")
@allure.feature("chat stability")
@pytest.mark.negative_control
@pytest.mark.req("proof:chat-stability", backend=DEFAULT_BACKEND)
@pytest.mark.parametrize(("part", "kind"), [("messages", "message"), ("markdown", "markdown"), ("avatars", "avatar")])
async def test_the_stability_check_catches_a_console_that_renders_the_history_again_on_each_update(
    open_console: OpenConsole, tmp_path: Path, part: str, kind: str
) -> None:
    console = patched_console(tmp_path, f"rerendering-{part}", *rerendering(part))
    async with open_console(DEFAULT_BACKEND, console_dir=console) as chat:
        run = await run_turn(chat)
    record_cost(f"chat_stability-rerendering_{part}", run.figures(DEFAULT_BACKEND, f"rerendering {part}"))
    assert_scroll_held(run.scrolled, run.after, run.updates_after_scroll)  # the console still works
    assert run.report["lost_by_kind"][kind] > 0, run.report["lost_by_kind"]
    with pytest.raises(AssertionError, match="history nodes removed or replaced"):
        assert_history_stable(run.report)


@allure.epic("release proofs")
@allure.feature("chat stability")
@pytest.mark.negative_control
@pytest.mark.req("proof:chat-stability", backend=DEFAULT_BACKEND)
async def test_the_scroll_check_catches_a_console_that_jumps_to_the_bottom_on_each_update(
    open_console: OpenConsole, tmp_path: Path
) -> None:
    async with open_console(DEFAULT_BACKEND, console_dir=patched_console(tmp_path, "jumping", *JUMPING)) as chat:
        run = await run_turn(chat)
    print(f"jump-to-bottom console: {run.figures(DEFAULT_BACKEND, 'jumping')}")
    assert_history_stable(run.report)  # only the scrolled-up case is broken
    assert_follows(run.followed)
    with pytest.raises(AssertionError, match="scrollTop moved"):
        assert_scroll_held(run.scrolled, run.after, run.updates_after_scroll)
