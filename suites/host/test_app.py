"""The host app, for real: `computer-use app`'s parts on the lab's Chromium, its turns driven through the console.

The model is the script provider (a task file in tmp_path) or the real Anthropic SDK talking to a local stand-in of
the Messages API (`suites/host/wire.py`); everything else is the product: the console in a real window, the agent
loop calling `computer_use` over MCP HTTP with a token per call, the runtime and its backend on real Pages.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp.types import TextContent

from fixtures_sites.server import FixtureServer
from host.app import HostApp, HostParts
from host.providers.base import IMAGE_PLACEHOLDER, AssistantTurn, Entry, ToolResults, UserText
from host.settings import FILE_NAME
from host.turns import Conversation
from lab.cdp import CDPClient
from lab.processes import command_line, processes
from lab.tap import CDPTap
from runtime.assembly import installed_backends
from runtime.capability.contexts import ProviderRequest
from runtime.capability.token import CapabilityError, open_token
from runtime.models import ComputerUseResult, from_text
from runtime.transports.client import HostedClient
from suites.console_driver import ConsoleDriver
from suites.host.conftest import StartApp, call, turn_ended, until_event, write_task
from suites.host.wire import API_KEY, Call, Failure, Hang, Reply, StandIn, images
from suites.proofs import assert_untouched

ROOT = Path(__file__).resolve().parents[2]
CLI = ROOT / ".venv" / "bin" / "computer-use"

LIST = {"say": "Let me see which Pages I may use.", "calls": [call(command="list_pages")]}


def observe(page: str, say: str = "I'll look at **the form**.") -> dict[str, Any]:
    return {"say": say, "calls": [call(command="observe", page={"$page": page})]}


async def open_fixture(console: ConsoleDriver, server: FixtureServer, path: str, placement: str, title: str) -> str:
    """Open a fixture page through the console's form; returns its handle once the Pages list shows its title."""
    handle = await console.open_url(server.url(path), placement)
    selector = json.dumps(f'#pages li.page[data-page="{handle}"] .title')
    await console.until(f"document.querySelector({selector}).textContent.includes({json.dumps(title)})")
    return handle


def target_of(app: HostApp, handle: str) -> str:
    return app.runtime.registry.get(handle).cdp_target_id


def results(transcript: list[Entry]) -> list[ComputerUseResult]:
    return [
        ComputerUseResult.model_validate(from_text(result.text))
        for entry in transcript
        if isinstance(entry, ToolResults)
        for result in entry.results
    ]


WATCH_CARDS = """(() => {
    // The lab's own record of every card status change: which node, from what, to what.
    window.__cards = new Map();
    window.__changes = [];
    new MutationObserver((mutations) => {
        for (const m of mutations) {
            const id = m.target.dataset.callId;
            if (!window.__cards.has(id)) window.__cards.set(id, m.target);
            window.__changes.push([id, m.oldValue, m.target.dataset.status, window.__cards.get(id) === m.target]);
        }
    }).observe(document.getElementById('history'),
               {subtree: true, attributes: true, attributeFilter: ['data-status'], attributeOldValue: true});
})()"""


@pytest.mark.req("app:turns", "app:live-cards", "app:pages")
async def test_a_turn_runs_from_the_console_with_live_cards_and_touches_only_the_ticked_page(
    start_app: StartApp, console_of: Any, fixture_server: FixtureServer, tap: CDPTap, tmp_path: Path
) -> None:
    script = write_task(tmp_path, [LIST, observe("Checkout"), {"say": "Done: I saw the form."}])
    app = await start_app(script=script)
    console = await console_of(app)
    form = await open_fixture(console, fixture_server, "/dom_form/", "left", "Checkout")
    other = await open_fixture(console, fixture_server, "/catalogue/", "right", "")
    relations = await console.evaluate(
        "Object.fromEntries([...document.querySelectorAll('#pages li.page')]"
        ".map(li => [li.dataset.page, li.querySelector('.relation').textContent]))"
    )
    assert relations == {form: "left", other: "right"}
    ticked = await console.evaluate("[...document.querySelectorAll('#turn-pages input[data-page]:checked')].length")
    assert ticked == 0, "no Page may be ticked by default"
    await console.evaluate(WATCH_CARDS)

    tap.clear()
    mark = app.events.next_id
    await console.send("Look at the checkout form, please.", [form])
    await until_event(app, mark, turn_ended)
    await console.until("document.querySelectorAll('#history article.card[data-status=ok]').length === 2")

    changes = await console.evaluate("window.__changes")
    by_card: dict[str, list[tuple[str | None, str]]] = {}
    for call_id, old, new, same_node in changes:
        assert same_node, f"card {call_id} was replaced by another node"
        by_card.setdefault(call_id, []).append((old, new))
    assert list(by_card.values()) == [[(None, "running"), ("running", "ok")]] * 2, by_card
    backends = await console.evaluate(
        "[...document.querySelectorAll('#history article.card')].map(c => c.querySelector('.backend').textContent)"
    )
    assert backends == ["", "playwright_mcp"]  # list_pages has no session; observe shows its session's backend
    bodies = await console.evaluate(
        "[...document.querySelectorAll('#history article.message[data-role=assistant] .body')].map(b => b.innerHTML)"
    )
    assert any("<strong>the form</strong>" in body for body in bodies), bodies
    assert await console.text("#turn") == "Idle"
    assert await console.evaluate("document.getElementById('message').value") == ""

    assert_untouched(tap, {"the unticked Page": target_of(app, other), "the chat Page": app.chat_page.cdp_target_id})
    assert tap.by_target().get(target_of(app, form)), "the ticked Page was never observed: the check proves nothing"


TOKEN_SHAPE = re.compile(r"[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{16,}")


def tokens_in(requests: list[dict[str, Any]], secret: bytes) -> list[str]:
    """Every string in what the provider got that opens as a token this app's host signed."""
    found = []
    for match in TOKEN_SHAPE.finditer(json.dumps(requests)):
        try:
            open_token(match.group(0), secret)
        except CapabilityError:
            continue
        found.append(match.group(0)[:40] + "…")
    return found


def check_tokens_stay_in_meta(app: HostApp, requests: list[dict[str, Any]]) -> None:
    calls = [record for record in app.runtime.service.journal if record.command in ("list_pages", "observe")]
    assert [record.code for record in calls] == ["ok", "ok"], "the calls were refused: they carried no valid token"
    assert "page_context_token" not in json.dumps(requests)
    leaked = tokens_in(requests, app.runtime.host.store.secret)
    assert leaked == [], f"a capability token reached the model: {leaked}"


def stand_in_turn(handle: str) -> tuple[Reply, ...]:
    return (
        Reply(text=("Listing.",), calls=(Call("c1", "computer_use", ('{"command": "list_pages"}',)),)),
        Reply(calls=(Call("c2", "computer_use", (json.dumps({"command": "observe", "page": handle}),)),)),
        Reply(text=("All seen.",)),
    )


async def run_stand_in_turn(
    start_app: StartApp, console_of: Any, fixture_server: FixtureServer, parts: HostParts | None = None
) -> tuple[HostApp, list[dict[str, Any]]]:
    async with StandIn("anthropic") as api:
        app = await start_app(parts, provider="anthropic", base_url=api.base_url)
        console = await console_of(app)
        handle = await open_fixture(console, fixture_server, "/dom_form/", "left", "Checkout")
        api.answer(*stand_in_turn(handle))
        mark = app.events.next_id
        await console.send("Check the form.", [handle])
        await until_event(app, mark, turn_ended)
        return app, api.requests


@pytest.mark.req("app:tokens-over-http")
async def test_each_call_carries_its_token_in_meta_and_no_token_ever_reaches_the_provider(
    start_app: StartApp, console_of: Any, fixture_server: FixtureServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", API_KEY)
    app, requests = await run_stand_in_turn(start_app, console_of, fixture_server)
    assert len(requests) == 3
    check_tokens_stay_in_meta(app, requests)


class EchoingClient(HostedClient):
    """Broken on purpose: puts the token it minted into the result's message, where the model reads it."""

    async def call(self, request: ProviderRequest, **arguments: Any) -> Any:
        from runtime.capability.verifier import CALL_KEY, TOKEN_KEY

        tool_call, token = request.mint(self.connection)
        raw = await self.client.call_tool("computer_use", arguments, meta={TOKEN_KEY: token, CALL_KEY: tool_call})
        data = dict(raw.structured_content or {})
        data["message"] = f"{data.get('message', '')} (token {token})"
        raw.structured_content = data
        raw.content = [TextContent(type="text", text=json.dumps(data))]
        return raw


@pytest.mark.negative_control
@pytest.mark.req("app:tokens-over-http")
async def test_the_token_check_catches_a_host_that_shows_the_model_its_token(
    start_app: StartApp, console_of: Any, fixture_server: FixtureServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", API_KEY)
    app, requests = await run_stand_in_turn(start_app, console_of, fixture_server, HostParts(client=EchoingClient))
    with pytest.raises(AssertionError, match="a capability token reached the model"):
        check_tokens_stay_in_meta(app, requests)


def visual_turn(handle: str) -> tuple[Reply, ...]:
    observe_visual = json.dumps({"command": "observe", "page": handle, "detail": "visual"})
    return (
        Reply(calls=(Call("v1", "computer_use", (observe_visual,)),)),
        Reply(calls=(Call("v2", "computer_use", ('{"command": "list_pages"}',)),)),
        Reply(text=("Seen.",)),
    )


def check_images_once(requests: list[dict[str, Any]]) -> None:
    """The screenshot is in the request right after the call that took it, and a placeholder in the next one."""
    before, right_after, later = requests
    assert images(before) == []
    assert len(images(right_after)) == 1, "the screenshot did not reach the model right after it was taken"
    assert images(later) == [], f"a screenshot was sent again at {images(later)}"
    assert IMAGE_PLACEHOLDER in json.dumps(later)


async def run_visual_turn(
    start_app: StartApp, console_of: Any, fixture_server: FixtureServer, parts: HostParts | None = None
) -> list[dict[str, Any]]:
    async with StandIn("anthropic") as api:
        app = await start_app(parts, provider="anthropic", base_url=api.base_url)
        console = await console_of(app)
        handle = await open_fixture(console, fixture_server, "/canvas/", "right", "")
        api.answer(*visual_turn(handle))
        mark = app.events.next_id
        await console.send("Have a look at the picture.", [handle])
        await until_event(app, mark, turn_ended)
        return api.requests


@pytest.mark.req("app:images-once")
async def test_a_screenshot_enters_the_next_model_request_only_then_a_placeholder(
    start_app: StartApp, console_of: Any, fixture_server: FixtureServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", API_KEY)
    check_images_once(await run_visual_turn(start_app, console_of, fixture_server))


class StickyConversation(Conversation):
    """Broken on purpose: sends the transcript as kept, old screenshots included."""

    def transcript_for_request(self) -> list[Entry]:
        return list(self.transcript)


@pytest.mark.negative_control
@pytest.mark.req("app:images-once")
async def test_the_images_once_check_catches_a_host_that_keeps_sending_old_screenshots(
    start_app: StartApp, console_of: Any, fixture_server: FixtureServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", API_KEY)
    requests = await run_visual_turn(start_app, console_of, fixture_server, HostParts(conversation=StickyConversation))
    with pytest.raises(AssertionError, match="a screenshot was sent again"):
        check_images_once(requests)


SIGN_IN = [
    LIST,
    observe("Sign in", "I'll look at the sign-in form."),
    {
        "say": "I'll fill in the username.",
        "calls": [
            call(
                command="act",
                computer_session_id={"$session": "Sign in"},
                frame_id={"$frame": "Sign in"},
                action={"type": "type", "ref": {"$ref": ["textbox", "Email or username"]}, "text": "ada@example.com"},
            )
        ],
    },
    {"say": "Thanks. Let me see where things stand.", "calls": [call(command="list_pages")]},
    {"say": "All done."},
]


async def until_needs_user(start_app: StartApp, console_of: Any, server: FixtureServer, tmp_path: Path) -> Any:
    app = await start_app(script=write_task(tmp_path, SIGN_IN))
    console = await console_of(app)
    handle = await open_fixture(console, server, "/login/", "left", "Sign in")
    mark = app.events.next_id
    await console.send("Sign me in, please.", [handle])
    await until_event(app, mark, lambda e: e == {"type": "turn", "state": "needs_user"})
    await console.until("document.querySelector('#history article.card[data-status=needs_user] button.continue')")
    return app, console, handle


@pytest.mark.req("app:needs-user")
async def test_done_continue_sends_a_new_provider_request_with_a_fresh_page_context(
    start_app: StartApp, console_of: Any, fixture_server: FixtureServer, lab_cdp: CDPClient, tmp_path: Path
) -> None:
    app, console, handle = await until_needs_user(start_app, console_of, fixture_server, tmp_path)
    card = "#history article.card[data-status=needs_user]"
    assert handle in await console.text(f"{card} .page")
    assert "needs_user" in await console.text(f"{card} .reason")
    assert await console.text(f"{card} button.continue") == "Done — continue"
    assert app.conversation.model_calls == 3

    # The user goes to the Page and does what was needed there; the Page now shows something else.
    page = await lab_cdp.send("Target.attachToTarget", {"targetId": target_of(app, handle), "flatten": True})
    await lab_cdp.send("Runtime.evaluate", {"expression": "document.title = 'Signed in by hand'"}, page["sessionId"])
    await lab_cdp.send("Target.detachFromTarget", {"sessionId": page["sessionId"]})

    mark = app.events.next_id
    await console.click(f"{card} button.continue")
    await until_event(app, mark, turn_ended)
    assert app.conversation.model_calls == 5
    handed = [e for e in app.conversation.transcript if isinstance(e, UserText)][-1]
    assert handed.text == f"The user has done what was needed on {handle}; continue."
    latest = results(app.conversation.transcript)[-1]
    assert latest.pages is not None
    assert [page.title for page in latest.pages] == ["Signed in by hand"], "the Page Context was not taken afresh"
    assert await console.evaluate(f"document.querySelector('{card} button.continue').disabled")


@pytest.mark.req("app:needs-user")
async def test_stop_turn_on_a_needs_user_card_ends_the_turn_without_another_model_call(
    start_app: StartApp, console_of: Any, fixture_server: FixtureServer, tmp_path: Path
) -> None:
    app, console, _ = await until_needs_user(start_app, console_of, fixture_server, tmp_path)
    mark = app.events.next_id
    await console.click("#history article.card[data-status=needs_user] button.stop")
    await until_event(app, mark, turn_ended)
    assert app.conversation.model_calls == 3
    assert isinstance(app.conversation.transcript[-1], ToolResults)
    await console.until("document.getElementById('turn').dataset.state === 'idle'")


DELETE_ALL = [
    LIST,
    observe("Tasks", "I'll look at the task list."),
    {
        "say": "I'll clear the list.",
        "calls": [
            call(
                command="act",
                computer_session_id={"$session": "Tasks"},
                frame_id={"$frame": "Tasks"},
                action={"type": "click", "ref": {"$ref": ["button", "Delete all tasks"]}},
            )
        ],
    },
    {"say": "Let me check.", "calls": [call(command="list_pages")]},
    {"say": "The list is empty."},
]


@pytest.mark.req("app:needs-user", "policy:allow-once")
async def test_allow_once_on_a_needs_user_card_shows_what_would_be_committed_and_performs_exactly_that_write(
    start_app: StartApp, console_of: Any, fixture_server: FixtureServer, tmp_path: Path
) -> None:
    app = await start_app(script=write_task(tmp_path, DELETE_ALL))
    console = await console_of(app)
    handle = await open_fixture(console, fixture_server, "/shadow/light", "left", "Tasks")
    mark = app.events.next_id
    await console.send("Clear my task list.", [handle])
    await until_event(app, mark, lambda e: e == {"type": "turn", "state": "needs_user"})
    card = "#history article.card[data-status=needs_user]"
    await console.until(f"document.querySelector('{card} button.allow')")
    # A script's button commits nowhere the runtime can read before the press: the card names the control alone.
    assert await console.text(f"{card} .approval") == 'button "Delete all tasks" (delete), this once'
    assert not fixture_server.ledger.snapshot()["writes"], "a write before the user allowed it"

    sent = fixture_server.wait_for_request("/shadow/delete-all")  # registered before the click
    mark = app.events.next_id
    await console.click(f"{card} button.allow")
    await sent
    await until_event(app, mark, turn_ended)
    assert [row["path"] for row in fixture_server.ledger.snapshot()["writes"]] == ["/shadow/delete-all"]
    events = [json.loads(raw) for raw in app.events.since(mark)]
    allowed = [e for e in events if str(e.get("call_id", "")).startswith("allowed-")]
    assert allowed[-1]["status"] == "ok", allowed
    told = [e for e in app.conversation.transcript if isinstance(e, UserText)][-1]
    assert (
        told.text == f"The user allowed your last action once on {handle} and it was performed; observe the Page again."
    )
    assert await console.evaluate(f"document.querySelector('{card} button.allow').disabled")


@pytest.mark.req("app:needs-user", "policy:allow-once")
async def test_a_sign_in_card_offers_no_allow_once(
    start_app: StartApp, console_of: Any, fixture_server: FixtureServer, tmp_path: Path
) -> None:
    _, console, _ = await until_needs_user(start_app, console_of, fixture_server, tmp_path)
    card = "#history article.card[data-status=needs_user]"
    assert await console.evaluate(f"document.querySelectorAll('{card} button.allow, {card} .approval').length") == 0


@pytest.mark.req("app:bad-input")
async def test_a_message_sent_during_a_turn_is_refused_with_a_visible_reason_and_kept_in_the_box(
    start_app: StartApp, console_of: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", API_KEY)
    async with StandIn("anthropic") as api:
        api.answer(Hang(), Reply(text=("Back again.",)))
        app = await start_app(provider="anthropic", base_url=api.base_url)
        console = await console_of(app)
        await console.send("First question.", [])
        await asyncio.wait_for(api.hanging.wait(), 30)
        await console.until("document.getElementById('message').value === ''")  # the console took the first one

        await console.send("A second question, too soon.", [])
        notice = await console.until("document.getElementById('notice').textContent")
        assert "was not sent" in notice
        assert await console.evaluate("document.getElementById('message').value") == "A second question, too soon."
        users = "document.querySelectorAll('#history article.message[data-role=user]').length"
        assert await console.evaluate(users) == 1
        assert [e for e in app.conversation.transcript if isinstance(e, UserText)] == [UserText("First question.")]
        api.release()  # the hung request ends with a 500: the turn waits on its provider-error card
        await console.until("document.querySelector('#history article.card.provider-error button.stop')")
        mark = app.events.next_id
        await console.click("#history article.card.provider-error button.stop")
        await until_event(app, mark, turn_ended)


@pytest.mark.req("app:bad-input")
async def test_closing_the_chat_page_ends_the_running_turn(
    start_app: StartApp, console_of: Any, lab_cdp: CDPClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", API_KEY)
    async with StandIn("anthropic") as api:
        api.answer(Hang())
        app = await start_app(provider="anthropic", base_url=api.base_url)
        console = await console_of(app)
        await console.send("Something long.", [])
        await asyncio.wait_for(api.hanging.wait(), 30)
        assert app.conversation.busy

        mark = app.events.next_id
        await lab_cdp.send("Target.closeTarget", {"targetId": console.target_id})
        await until_event(app, mark, turn_ended)
        assert not app.conversation.busy
        notices = [json.loads(e) for e in app.events.since(mark)]
        assert {"type": "notice", "cause": "turn", "text": "The chat Page was closed: the turn ended."} in notices


@pytest.mark.req("app:bad-input")
async def test_a_provider_error_becomes_a_card_and_retry_continues_with_nothing_lost(
    start_app: StartApp, console_of: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", API_KEY)
    async with StandIn("anthropic") as api:
        api.answer(Failure(529, "overloaded_error", "Overloaded"), Reply(text=("Recovered **fine**.",)))
        app = await start_app(provider="anthropic", base_url=api.base_url)
        console = await console_of(app)
        await console.send("Hello there.", [])
        card = "#history article.card.provider-error[data-status=failed]"
        await console.until(f"document.querySelector('{card} button.retry')")
        assert "server" in await console.text(f"{card} .reason")
        assert await console.evaluate("document.getElementById('turn').dataset.state") == "error"

        mark = app.events.next_id
        await console.click(f"{card} button.retry")
        await until_event(app, mark, turn_ended)
        first, retried = api.requests
        assert retried["messages"] == first["messages"], "the retry did not send the same request"
        await console.until("[...document.querySelectorAll('.body strong')].some(s => s.textContent === 'fine')")
        roles = await console.evaluate(
            "[...document.querySelectorAll('#history article.message')].map(m => m.dataset.role)"
        )
        assert roles == ["user", "assistant", "assistant"]
        assert await console.evaluate(f"document.querySelector('{card}') !== null"), "the error card was lost"
        assert app.conversation.transcript == [UserText("Hello there."), AssistantTurn("Recovered **fine**.")]


@pytest.mark.req("app:bad-input")
async def test_a_missing_api_key_is_a_clear_message_and_never_a_crash(
    start_app: StartApp, console_of: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    app = await start_app(provider="anthropic")
    console = await console_of(app)
    assert "ANTHROPIC_API_KEY" in await console.until("document.getElementById('notice').textContent")

    await console.send("Anyone there?", [])
    card = "#history article.card.provider-error"
    await console.until(f"document.querySelector('{card} .reason')")
    assert "missing_key" in await console.text(f"{card} .reason")
    assert "ANTHROPIC_API_KEY" in await console.text("#notice")
    async with Client(app.mcp_url) as client:  # still serving
        assert [tool.name for tool in (await client.list_tools()).tools] == ["computer_use"]


BACKEND_STEPS = [
    LIST,
    observe("Sign in"),
    SIGN_IN[2],  # needs_user: the turn waits, its session stays live
    {
        "say": "Looking again on the same session.",
        "calls": [call(command="observe", computer_session_id={"$session": "Sign in"})],
    },
    {"say": "That is all for this turn."},
    LIST,
    observe("Sign in", "A new turn, a new session."),
    {"say": "Done."},
]


@pytest.mark.req("app:backend-setting")
async def test_the_backend_setting_is_saved_and_moves_only_new_sessions(
    start_app: StartApp, console_of: Any, fixture_server: FixtureServer, tmp_path: Path
) -> None:
    app = await start_app(script=write_task(tmp_path, BACKEND_STEPS))
    console = await console_of(app)
    # The menu lists the installed backends the app announces (its settings event), the saved one chosen.
    await console.until("document.getElementById('backend').value === 'playwright_mcp'")
    options = await console.evaluate("Array.from(document.getElementById('backend').options, (o) => o.value)")
    assert options == list(installed_backends())
    handle = await open_fixture(console, fixture_server, "/login/", "left", "Sign in")
    mark = app.events.next_id
    await console.send("Sign me in.", [handle])
    await until_event(app, mark, lambda e: e == {"type": "turn", "state": "needs_user"})

    await console.choose("#backend", "open_claude_chrome")
    await until_event(app, mark, lambda e: e.get("type") == "settings" and e["backend"] == "open_claude_chrome")
    saved = json.loads((tmp_path / "config" / FILE_NAME).read_text())
    assert saved == {"backend": "open_claude_chrome"}

    mark = app.events.next_id
    # The app's log has the needs_user turn before the console has drawn its card: wait for the button it shows.
    await console.until("document.querySelector('#history article.card[data-status=needs_user] button.continue')")
    await console.click("#history article.card[data-status=needs_user] button.continue")
    await until_event(app, mark, turn_ended)
    mark = app.events.next_id
    await console.send("Once more.", [handle])
    await until_event(app, mark, turn_ended)

    backends = [(r.computer_session_id, r.backend) for r in results(app.conversation.transcript) if r.backend]
    first, same_session, new_session = backends
    assert first[1] == same_session[1] == "playwright_mcp", "a live session changed backend"
    assert same_session[0] == first[0]
    assert new_session[1] == "open_claude_chrome"
    assert new_session[0] != first[0]
    # The app's log has the turn's end before the console has drawn its last card: wait for that card.
    shown = "[...document.querySelectorAll('#history article.card[data-status=ok] .backend')].map(b => b.textContent)"
    await console.until(f"{shown}.filter(Boolean).at(-1) === 'open_claude_chrome'", "the new session's backend")
    assert (await console.evaluate(f"{shown}.filter(Boolean)"))[0] == "playwright_mcp"

    await app.close()
    again = await start_app()
    assert again.runtime.service.settings.backend == "open_claude_chrome", "the saved setting was not applied"


@pytest.mark.req("app:backend-setting", "app:bad-input")
async def test_an_unreadable_settings_file_gives_the_defaults_and_a_notice(
    start_app: StartApp, console_of: Any, tmp_path: Path
) -> None:
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / FILE_NAME).write_text('{"backend": "netscape_navigator"', encoding="utf-8")
    app = await start_app()
    console = await console_of(app)
    assert "not valid JSON" in await console.until("document.getElementById('notice').textContent")
    assert app.runtime.service.settings.backend == "playwright_mcp"


@pytest.mark.req("app:pages")
async def test_the_access_switch_revises_the_page_and_unticks_it_for_turns(
    start_app: StartApp, console_of: Any, fixture_server: FixtureServer
) -> None:
    app = await start_app()
    console = await console_of(app)
    handles = {
        placement: await open_fixture(console, fixture_server, f"/?{placement}", placement, "")
        for placement in ("left", "right", "above", "below")
    }
    for placement, handle in handles.items():
        assert app.runtime.registry.info(app.runtime.registry.get(handle)).relation == placement

    handle = handles["left"]
    revision = app.runtime.registry.get(handle).revision
    await console.click(f'#pages li.page[data-page="{handle}"] input.access')
    await console.until(f"document.querySelector('#pages li.page[data-page=\"{handle}\"]').dataset.access === 'off'")
    page = app.runtime.registry.get(handle)
    assert not page.access_enabled
    assert page.revision == revision + 1
    assert await console.evaluate(f"document.querySelector('#turn-pages input[data-page=\"{handle}\"]').disabled")


def descendants(pid: int) -> set[int]:
    """The live processes below `pid` (children, their children, ...), by parent id."""
    table = processes()
    found: set[int] = set()
    frontier = {pid}
    while frontier:
        frontier = {p.pid for p in table if p.ppid in frontier and p.state not in ("Z", "X")} - found
        found |= frontier
    return found


@pytest.mark.req("app:launch")
@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM], ids=["sigint", "sigterm"])
async def test_computer_use_app_prints_both_urls_and_on_sigint_or_sigterm_exits_0_leaving_no_process(
    tap: CDPTap, lab_cdp: CDPClient, fixture_server: FixtureServer, tmp_path: Path, stop: signal.Signals
) -> None:
    # The turn ends waiting on a needs_user card (the CAPTCHA is the user's), so its session and backend child are
    # live when the signal comes: a session lives as long as its turn.
    tick = call(
        command="act",
        computer_session_id={"$session": "Create your account"},
        frame_id={"$frame": "Create your account"},
        action={"type": "click", "ref": {"$ref": ["checkbox", "not a robot"]}},
    )
    script = write_task(tmp_path, [LIST, observe("Create your account"), {"say": "Ticking it.", "calls": [tick]}])
    process = await asyncio.create_subprocess_exec(
        str(CLI),
        "app",
        "--cdp-endpoint",
        await tap.endpoint("runtime"),
        "--port",
        "0",
        "--provider",
        "script",
        "--script",
        str(script),
        "--config-dir",
        str(tmp_path / "config"),
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        start_new_session=True,
    )
    assert process.stdout is not None
    try:
        lines = [(await asyncio.wait_for(process.stdout.readline(), 60)).decode() for _ in range(2)]
        assert re.fullmatch(r"MCP: http://127\.0\.0\.1:\d+/mcp\n", lines[0]), lines
        assert re.fullmatch(r"Console: http://127\.0\.0\.1:\d+/[A-Za-z0-9_-]{43}/\n", lines[1]), lines
        mcp_url, console_url = lines[0].split(" ", 1)[1].strip(), lines[1].split(" ", 1)[1].strip()

        async with Client(mcp_url) as third_party:  # any MCP client reaches the tool, and is refused without a token
            assert [tool.name for tool in (await third_party.list_tools()).tools] == ["computer_use"]
            raw = await third_party.call_tool("computer_use", {"command": "list_pages"})
            assert ComputerUseResult.model_validate(raw.structured_content).reason_code == "invalid_capability"

        console = await ConsoleDriver.attach(lab_cdp, console_url)
        chat = console.target_id
        handle = await open_fixture(console, fixture_server, "/captcha/", "left", "Create your account")
        await console.send("Sign me up, please.", [handle])
        await console.until(
            "document.querySelectorAll('#history article.card[data-status=ok]').length === 2", timeout=60
        )
        await console.until("document.getElementById('turn').dataset.state === 'needs_user'")
        children = descendants(process.pid)
        backend = [pid for pid in children if "playwright" in command_line(pid)]
        assert backend, "no backend process ran: the clean-up check would prove nothing"

        process.send_signal(stop)
        assert await asyncio.wait_for(process.wait(), 60) == 0
        left = {pid: command_line(pid) for pid in children if pid in {p.pid for p in processes() if p.state != "Z"}}
        assert left == {}, f"processes left behind: {left}"
        remaining = (await lab_cdp.send("Target.getTargets"))["targetInfos"]
        assert chat not in {t["targetId"] for t in remaining}, "the console window was left open"
    finally:
        if process.returncode is None:
            os.killpg(process.pid, signal.SIGKILL)
            await process.wait()


@pytest.mark.req("app:bad-input")
async def test_a_model_that_never_stops_calling_tools_ends_its_turn_after_40_model_calls(
    start_app: StartApp, console_of: Any, tmp_path: Path
) -> None:
    app = await start_app(script=write_task(tmp_path, [LIST] * 45))
    console = await console_of(app)
    mark = app.events.next_id
    await console.send("Keep going.", [])
    await until_event(app, mark, turn_ended)
    assert app.conversation.model_calls == 40
    assert "after 40 model calls" in await console.until("document.getElementById('notice').textContent")
