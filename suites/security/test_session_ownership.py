"""A ComputerSession is its opener's, and ends with it, on every backend.

The attacker here is a granted MCP client: a client the user granted the same Page (a grant is a host of its own,
`host/grants.py`), holding the chat's `computer_session_id` (a log, a shared transcript, a guess it was handed), on
its own MCP connection with its own valid tokens. It must not use the chat's session, and nothing it sends may reach
the Page. And when the user ends a grant (revoke, deny, its time limit, the client going away), the grant's session
ends at that moment: its backend child exits and its gateway port refuses connections, so a backend or anyone else
holding the gateway URL has nothing left to drive; the client's next call is refused.

The grants are the app's real `GrantStore` on the suite's runtime, minting for the pairing's connection nonce; the
calls go over a real MCP connection to the runtime's server.
"""

from __future__ import annotations

import socket
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest
from mcp import Client

from host.grants import GrantStore, NoGrant, Pairing
from lab.processes import alive_in_group
from lab.tap import CDPTap
from runtime.capability.verifier import CALL_KEY, TOKEN_KEY
from runtime.models import ComputerUseResult, from_text
from runtime.transports.mcp.server import TOOL
from suites.harness import Agent, Clock, Desk, client_in_task, ref_of
from suites.reliability.conftest import CALL_LIMIT, RELEASE_LIMIT, within

FULL_NAME = {"type": "element_state", "role": "textbox", "name": "Full name", "state": "value"}
PAGE_WRITES = ("input", "write", "script", "focus")
"""Tap categories of a command that could change what the Page shows or holds."""


@dataclass
class GrantedClient:
    """A third-party client as the app serves it: a pairing with a grant, its own MCP connection, a token per call."""

    grants: GrantStore
    pairing: Pairing
    client: Client

    async def call(self, token: tuple[str, str] | None = None, **arguments: Any) -> ComputerUseResult:
        """One forwarded call with a freshly minted token (or `token`, minted earlier)."""
        tool_call, secret = token or await self.grants.mint(self.pairing.id)
        raw = await within(
            self.client.call_tool(TOOL, arguments, meta={TOKEN_KEY: secret, CALL_KEY: tool_call}), CALL_LIMIT
        )
        text = raw.content[0].text if raw.content and raw.content[0].type == "text" else ""
        return ComputerUseResult.model_validate(raw.structured_content or from_text(text))


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
async def granted(desk: Desk, clock: Clock) -> AsyncIterator[GrantedClient]:
    """A paired client named "Test Client", not yet granted anything, on an MCP connection of its own."""
    grants = GrantStore(desk.runtime.registry, desk.runtime.new_host, lambda event: None, clock=clock)
    pairing = grants.pair()
    grants.announce(pairing.id, "Test Client")
    async with client_in_task(desk.runtime.server) as client:
        yield GrantedClient(grants, pairing, client)


async def open_form(desk: Desk) -> None:
    await desk.open("A", "/dom_form/", desk.workspace.column(0, 3))
    await desk.open("chat", "/chat/", desk.workspace.column(1, 3), chat=True)


def refuses(url: str) -> bool:
    """Whether nothing accepts a TCP connection at the URL's loopback port any more."""
    port = int(url.rsplit(":", 1)[1].split("/", 1)[0])
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) != 0


def assert_refused(result: ComputerUseResult, code: str) -> None:
    assert result.status == "failed", result
    assert result.reason_code == code, result
    assert "page=" in (result.hint or ""), f"the hint does not say how to go on: {result}"


# -- another holder of the id -------------------------------------------------------------------------------------


async def check_session_is_its_openers(desk: Desk, agent: Agent, thief: GrantedClient, tap: CDPTap) -> None:
    """The chat observes A; a client granted A too uses the chat's session id and latest frame to type into A and
    to observe: both refused `invalid_capability` (the hint: observe A by its handle), no command that could change
    the Page reached it, and the field is still empty. The chat's next turn holding the same id: `page_context_stale`
    (sessions end with their turn)."""
    desk.authorize("A")
    seen = await agent.observe(page=desk.handle("A"))
    thief.grants.grant(thief.pairing.id, [desk.handle("A")], "revoke")
    journal = len(desk.runtime.service.journal)
    reached: Counter[str] = Counter()

    async def stolen(**arguments: Any) -> ComputerUseResult:
        # Minting reads the Pages' previews for the grant's Page Context (the host's own read, not the call's):
        # the tap counts from after it.
        token = await thief.grants.mint(thief.pairing.id)
        tap.clear()
        result = await thief.call(token, computer_session_id=seen.computer_session_id, **arguments)
        reached.update({c: tap.count(target=desk.target("A"), label="runtime", category=c) for c in PAGE_WRITES})
        return result

    action = {"type": "type", "ref": ref_of(seen, '"Full name"'), "text": "stolen"}
    typed = await stolen(command="act", frame_id=seen.frame_id, action=action)
    observed = await stolen(command="observe")
    assert_refused(typed, "invalid_capability")
    assert_refused(observed, "invalid_capability")
    assert +reached == Counter(), f"the refused calls reached the Page: {dict(reached)}"
    codes = [r.code for r in list(desk.runtime.service.journal)[journal:]]
    assert codes == ["invalid_capability", "invalid_capability"], codes
    empty = await agent.verify(seen, **FULL_NAME, expected="")
    assert empty.verified is True, f"the field changed: {empty}"
    desk.authorize("A")  # the chat's next turn: the earlier turn's session ended with it
    later = await agent.call(command="observe", computer_session_id=seen.computer_session_id)
    assert_refused(later, "page_context_stale")
    own = await thief.call(command="observe", page=desk.handle("A"))  # the hint works: a session of its own
    assert own.status == "ok", own
    assert own.computer_session_id != seen.computer_session_id


@pytest.mark.req("sessions:owner", "reason:invalid_capability")
async def test_a_client_granted_the_same_page_cannot_use_the_chats_session_id_and_nothing_reaches_the_page(
    desk: Desk, agent: Agent, granted: GrantedClient, tap: CDPTap
) -> None:
    await open_form(desk)
    await check_session_is_its_openers(desk, agent, granted, tap)


@pytest.mark.negative_control
@pytest.mark.sabotage("shared_sessions")
@pytest.mark.req("sessions:owner")
async def test_the_ownership_check_catches_a_manager_that_lets_any_holder_of_the_id_use_a_session(
    desk: Desk, agent: Agent, granted: GrantedClient, tap: CDPTap
) -> None:
    await open_form(desk)
    with pytest.raises(AssertionError):
        await check_session_is_its_openers(desk, agent, granted, tap)


# -- a grant that ends ----------------------------------------------------------------------------------------------


def end_grant(granted: GrantedClient, clock: Clock, how: str) -> None:
    grants, pairing = granted.grants, granted.pairing.id
    if how == "revoke":
        grants.revoke(pairing)
    elif how == "deny":
        grants.deny(pairing)
    elif how == "expiry":
        clock.now += 61
        grants.expire()  # what the app's timer runs when the time limit is due
    else:
        grants.unpair(pairing)  # the client's pairing connection closed


async def check_grant_end_ends_its_session(desk: Desk, granted: GrantedClient, clock: Clock, how: str) -> None:
    """The client observes A under its grant; the grant ends (`how`). Before any further call: the session's backend
    child has exited, its gateway port refuses connections, its work dir is gone. Then the client's next call, with
    a token minted before the end, is refused, and no new token is minted."""
    bound = "time" if how == "expiry" else "revoke"
    granted.grants.grant(granted.pairing.id, [desk.handle("A")], bound, 1 if bound == "time" else None)
    seen = await granted.call(command="observe", page=desk.handle("A"))
    assert seen.status == "ok", seen
    session = desk.runtime.service.sessions.live[seen.computer_session_id or ""]
    pid = getattr(session.backend, "pid", None)
    spare = await granted.grants.mint(granted.pairing.id)
    end_grant(granted, clock, how)
    await within(desk.runtime.service.sessions.settle(), RELEASE_LIMIT, "closing the ended grant's session")
    remains = []
    if not refuses(session.gateway.url):
        remains.append(f"its gateway still accepts connections at {session.gateway.url}")
    if pid is not None and (left := alive_in_group(pid)):
        remains.append(f"its backend child's processes {left}")
    if session.workdir.exists():
        remains.append(f"its work dir {session.workdir}")
    assert remains == [], f"the grant ended ({how}) but not its session: {'; '.join(remains)}"
    late = await granted.call(spare, command="observe", computer_session_id=seen.computer_session_id)
    assert late.status == "failed", late
    assert late.reason_code in ("page_context_stale", "invalid_capability"), late
    with pytest.raises(NoGrant):
        await granted.grants.mint(granted.pairing.id)


@pytest.mark.parametrize("how", ["revoke", "deny", "expiry", "unpair"])
@pytest.mark.req("sessions:end-with-owner", "connect:revoke")
async def test_ending_a_grant_ends_its_session_at_once_child_exited_and_gateway_port_refusing(
    desk: Desk, granted: GrantedClient, clock: Clock, how: str
) -> None:
    await open_form(desk)
    await check_grant_end_ends_its_session(desk, granted, clock, how)


@pytest.mark.negative_control
@pytest.mark.sabotage("sessions_outlive_grants")
@pytest.mark.req("sessions:end-with-owner")
async def test_the_grant_end_check_catches_a_manager_whose_sessions_outlive_their_grant(
    desk: Desk, granted: GrantedClient, clock: Clock
) -> None:
    await open_form(desk)
    with pytest.raises(AssertionError, match="but not its session"):
        await check_grant_end_ends_its_session(desk, granted, clock, "revoke")
