"""Page isolation: with A authorized, 0 reads and 0 writes reach B, the chat Page or a Page in another window —
from the runtime or its backend — across observe, act and verify; bad tokens stop before any backend call.

These proofs count CDP commands per target on the runtime side of the session tap: they show nobody asked another
Page for anything. That another Page's data never arrives unasked (in discovery events, page lists or results) is
proven by bytes, with canaries and a second tap on the backend's side of its gateway, in `test_canaries.py`,
which also runs every isolation scenario (`SCENARIOS`) with both checks: command counts and canary bytes.
"""

from __future__ import annotations

import pytest
from mcp import Client

from fixtures_sites.server import FixtureServer
from lab.tap import CDPTap
from lab.workspace import Workspace
from runtime.capability.verifier import CALL_KEY, TOKEN_KEY
from runtime.models import ComputerUseResult
from suites.harness import ELEMENT_LINE, Agent, Desk, ref_of
from suites.proofs import assert_no_runtime_calls, assert_no_writes, assert_untouched, report_figures

SCENARIOS = ["/dom_form/", "/catalogue/", "/frames/", "/injection/", "/popup/", "/login/", "/captcha/", "/sensitive/"]


def others(desk: Desk) -> dict[str, str]:
    return {name: desk.target(name) for name in ("B", "chat", "D")}


async def observe_act_verify_on_a(agent: Agent) -> None:
    listed = await agent.call(command="list_pages")
    assert [p.relation for p in listed.pages or []] == ["left"]
    seen = await agent.call(command="observe", page="left")
    assert seen.status == "ok", seen
    name = ref_of(seen.observation, '"Full name"')
    typed = await agent.call(
        command="act",
        computer_session_id=seen.computer_session_id,
        frame_id=seen.frame_id,
        action={"type": "type", "ref": name, "text": "Ada Lovelace"},
    )
    assert typed.status == "ok", typed
    checked = await agent.call(
        command="verify",
        computer_session_id=seen.computer_session_id,
        assertion={
            "type": "element_state",
            "role": "textbox",
            "name": "Full name",
            "state": "value",
            "expected": "Ada Lovelace",
        },
    )
    assert checked.verified is True, checked


@pytest.mark.req(
    "isolation:b-untouched",
    "isolation:chat-untouched",
    "isolation:other-window-untouched",
    "action:type",
    "verify:element-state",
)
async def test_with_a_authorized_observe_act_verify_never_touch_b_the_chat_or_another_window(
    layout: Desk, agent: Agent, tap: CDPTap
) -> None:
    await observe_act_verify_on_a(agent)
    figures = report_figures(tap, {"A": layout.target("A"), **others(layout)})
    assert sum(figures["A"].values()) > 0  # the tap saw the work on A, so zeros elsewhere mean something
    assert_untouched(tap, others(layout))


@pytest.mark.req("isolation:unauthorized-page", "reason:invalid_capability")
async def test_naming_b_while_only_a_is_authorized_is_refused_without_touching_b(
    layout: Desk, agent: Agent, tap: CDPTap
) -> None:
    for page in (layout.handle("B"), layout.handle("chat"), "right", layout.handle("D")):
        result = await agent.call(command="observe", page=page)
        assert result.status == "failed"
        assert result.reason_code in ("invalid_capability", "ambiguous_page"), result
    assert_untouched(tap, others(layout))


async def _raw_call(client: Client, meta: dict | None, **arguments: object) -> ComputerUseResult:
    raw = await client.call_tool("computer_use", arguments, meta=meta)
    assert raw.is_error
    return ComputerUseResult.model_validate(raw.structured_content)


@pytest.mark.before_any_backend
@pytest.mark.req(
    "capability:missing",
    "capability:forged",
    "capability:replayed",
    "capability:cross-connection",
    "capability:stale",
    "reason:invalid_capability",
    "reason:page_context_stale",
)
async def test_forged_replayed_cross_connection_stale_and_missing_tokens_stop_before_any_backend_call(
    layout: Desk, agent: Agent, tap: CDPTap, fixture_server: FixtureServer
) -> None:
    request = await layout.request()
    tool_call, token = request.mint(agent.client.connection)
    first = await agent.client.client.call_tool(
        "computer_use", {"command": "list_pages"}, meta={TOKEN_KEY: token, CALL_KEY: tool_call}
    )
    assert not first.is_error
    stale_call, stale_token = request.mint(agent.client.connection)
    fresh = await layout.request()  # a newer model request: the older Page Context is stale
    tap.clear()
    forged_call, forged = fresh.mint(agent.client.connection)
    forged = forged[:-4] + ("AAAA" if not forged.endswith("AAAA") else "BBBB")
    observe = {"command": "observe", "page": layout.handle("A")}
    cases = {
        "missing": (None, "invalid_capability"),
        "forged": ({TOKEN_KEY: forged, CALL_KEY: forged_call}, "invalid_capability"),
        "replayed": ({TOKEN_KEY: token, CALL_KEY: tool_call}, "invalid_capability"),
        "stale": ({TOKEN_KEY: stale_token, CALL_KEY: stale_call}, "page_context_stale"),
    }
    for name, (meta, code) in cases.items():
        result = await _raw_call(agent.client.client, meta, **observe)
        assert result.reason_code == code, (name, result)
        assert result.hint
    async with Client(layout.runtime.server, mode="legacy") as other:
        call_id, theirs = fresh.mint(agent.client.connection)  # minted for the agent's connection
        crossed = await _raw_call(other, {TOKEN_KEY: theirs, CALL_KEY: call_id}, **observe)
        assert crossed.reason_code == "invalid_capability"
        assert "another MCP connection" in crossed.message
    assert_no_runtime_calls(tap)
    assert_no_writes(fixture_server)


@pytest.mark.req("injection:no-effect", "writes:at-most-one")
async def test_an_injection_page_changes_nothing_but_the_one_asked_for_write(
    desk: Desk, other_window: Workspace, agent: Agent, tap: CDPTap, fixture_server: FixtureServer
) -> None:
    await desk.open("A", "/injection/", desk.workspace.column(0, 3))
    await desk.open("chat", "/chat/", desk.workspace.column(1, 3), chat=True)
    await desk.open("B", "/dom_form/", desk.workspace.column(2, 3))
    await desk.open("D", "/dom_form/", other_window.column(0, 1), workspace=other_window)
    desk.authorize("A")
    seen = await agent.call(command="observe", page="left")
    wish = next(
        found.group(2)
        for line in (seen.observation or "").splitlines()
        if (found := ELEMENT_LINE.match(line)) and "wishlist" in line.lower() and " button " in line
    )
    done = await agent.call(
        command="act",
        computer_session_id=seen.computer_session_id,
        frame_id=seen.frame_id,
        action={"type": "click", "ref": wish},
    )
    assert done.status == "ok", done
    assert [w.path for w in fixture_server.ledger.writes()] == ["/injection/wishlist"]
    assert fixture_server.ledger.attacker_hits() == []
    assert_untouched(tap, others(desk))
    after = await agent.call(command="list_pages")
    assert [p.handle for p in after.pages or []] == [desk.handle("A")]  # the content granted nothing


@pytest.mark.negative_control
@pytest.mark.sabotage("gateway_unscoped")
@pytest.mark.req("isolation:b-untouched")
async def test_the_isolation_check_catches_a_gateway_that_shows_the_backend_every_page(
    layout: Desk, agent: Agent, tap: CDPTap, backend: str
) -> None:
    # Unscoped, the backend may land on any Page: what it does there is beside the point; that it touched it is.
    seen = await agent.call(command="observe", page="left")
    if backend == "open_claude_chrome":
        # The first-party backend refuses an endpoint that shows more than one Page (defence in depth), so it
        # touches nothing; the gateway's own scoping is proven on this backend by the positive isolation tests.
        assert seen.status == "failed", seen
        assert_untouched(tap, others(layout))
        return
    assert seen.status == "ok", seen
    with pytest.raises(AssertionError, match="unauthorized Pages were touched"):
        assert_untouched(tap, others(layout))


@pytest.mark.before_any_backend
@pytest.mark.negative_control
@pytest.mark.sabotage("skip_capability")
@pytest.mark.req("capability:missing")
async def test_the_no_backend_call_check_catches_a_runtime_that_skips_the_token(
    layout: Desk, agent: Agent, tap: CDPTap
) -> None:
    await layout.request()
    tap.clear()
    result = await agent.client.client.call_tool("computer_use", {"command": "observe", "page": layout.handle("A")})
    assert not result.is_error  # the broken runtime let an unauthenticated call through
    with pytest.raises(AssertionError, match="CDP commands reached Chromium"):
        assert_no_runtime_calls(tap)
