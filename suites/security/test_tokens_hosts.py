"""Two hosts on one runtime stay independent: each has its own current turn, so a turn of one never stales the other's
tokens, while a new turn of a host still stales that host's own older tokens.

On every backend: two `Host`s (the runtime's and `Runtime.new_host()`), a turn each on its own Page, calling over two
MCP connections concurrently — observe, act and verify on real Pages, interleaved. The negative control runs the same
check on a runtime whose context store has one current turn for all hosts (the store before hosts had ids): it must
be caught.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest

from lab.tap import CDPTap
from runtime.assembly import Runtime
from runtime.capability.contexts import ContextStore, ProviderRequest
from runtime.models import ComputerUseResult
from runtime.settings import Settings
from runtime.transports.client import HostedClient
from suites.harness import Agent, Desk, client_in_task, ref_of


@pytest.fixture
def store_class() -> type[ContextStore]:
    return ContextStore


@pytest.fixture
async def runtime(tap: CDPTap, backend: str, store_class: type[ContextStore]) -> AsyncIterator[Runtime]:
    """The suite's runtime, with `store_class` as its context store (replaced by the negative control)."""
    rt = await Runtime.connect(await tap.endpoint("runtime"), settings=Settings(backend=backend), store=store_class())
    yield rt
    await rt.close()


@pytest.fixture
async def second_agent(desk: Desk) -> AsyncIterator[Agent]:
    """A second MCP connection to the same runtime."""
    async with client_in_task(desk.runtime.server) as client:
        yield Agent(HostedClient(client), desk)


def assert_ok(result: ComputerUseResult) -> None:
    assert result.status == "ok", result


FULL_NAME = {"type": "element_state", "role": "textbox", "name": "Full name", "state": "value"}


async def both(*calls: Any) -> list[ComputerUseResult]:
    return list(await asyncio.gather(*calls))


async def act_type(agent: Agent, request: ProviderRequest, seen: ComputerUseResult, text: str) -> ComputerUseResult:
    ref = ref_of(seen, '"Full name"')
    return await agent.call(
        request,
        command="act",
        computer_session_id=seen.computer_session_id,
        frame_id=seen.frame_id,
        action={"type": "type", "ref": ref, "text": text},
    )


async def check_independent_hosts(desk: Desk, one_agent: Agent, two_agent: Agent) -> None:
    await desk.open("A", "/dom_form/", desk.workspace.column(0, 3))
    await desk.open("chat", "/chat/", desk.workspace.column(1, 3), chat=True)
    await desk.open("B", "/dom_form/", desk.workspace.column(2, 3))
    one, two = desk.runtime.host, desk.runtime.new_host()
    one_turn = one.start_turn([desk.handle("A")])
    two_turn = two.start_turn([desk.handle("B")])
    one_request, two_request = await one_turn.provider_request(), await two_turn.provider_request()

    seen_a, seen_b = await both(
        one_agent.call(one_request, command="observe", page="left"),
        two_agent.call(two_request, command="observe", page="right"),
    )
    assert_ok(seen_a)
    assert_ok(seen_b)
    typed_a, typed_b = await both(
        act_type(one_agent, one_request, seen_a, "Ada Lovelace"),
        act_type(two_agent, two_request, seen_b, "Grace Hopper"),
    )
    assert_ok(typed_a)
    assert_ok(typed_b)
    # Independent is not shared: the other host's session is not this host's to use.
    crossed = await two_agent.call(
        two_request,
        command="verify",
        computer_session_id=seen_a.computer_session_id,
        assertion={**FULL_NAME, "expected": "Ada Lovelace"},
    )
    assert crossed.reason_code == "invalid_capability", crossed

    one_request, two_request = await one_turn.provider_request(), await two_turn.provider_request()
    checked_a, checked_b = await both(
        one_agent.call(
            one_request,
            command="verify",
            computer_session_id=seen_a.computer_session_id,
            assertion={**FULL_NAME, "expected": "Ada Lovelace"},
        ),
        two_agent.call(
            two_request,
            command="verify",
            computer_session_id=seen_b.computer_session_id,
            assertion={**FULL_NAME, "expected": "Grace Hopper"},
        ),
    )
    assert checked_a.verified is True, checked_a
    assert checked_b.verified is True, checked_b

    # Host 1 starts a new turn: its own older tokens are stale, host 2's are not.
    new_turn = one.start_turn([desk.handle("A")])
    stale, still = await both(
        one_agent.call(one_request, command="list_pages"), two_agent.call(two_request, command="list_pages")
    )
    assert stale.reason_code == "page_context_stale", stale
    assert "turn" in stale.message
    assert_ok(still)
    # And host 2's next turn leaves host 1's new one alone.
    two.start_turn([desk.handle("B")])
    fresh = await one_agent.call(await new_turn.provider_request(), command="list_pages")
    assert_ok(fresh)
    assert [page.handle for page in fresh.pages or []] == [desk.handle("A")]


@pytest.mark.req(
    "capability:independent-hosts",
    "capability:stale",
    "reason:page_context_stale",
    "action:type",
    "verify:element-state",
)
async def test_two_hosts_with_a_turn_each_calling_in_parallel_never_stale_each_other(
    desk: Desk, agent: Agent, second_agent: Agent
) -> None:
    await check_independent_hosts(desk, agent, second_agent)


@dataclass
class OneTurnForAll(ContextStore):
    """Broken on purpose: one current turn for the whole runtime, so any host's new turn ends every other host's."""

    def begin_turn(self, host: str, turn: str) -> None:
        self.turns.clear()
        self.contexts.clear()
        super().begin_turn(host, turn)


@pytest.mark.negative_control
@pytest.mark.parametrize("store_class", [OneTurnForAll])
@pytest.mark.req("capability:independent-hosts")
async def test_the_independence_check_catches_a_store_with_one_turn_for_all_hosts(
    desk: Desk, agent: Agent, second_agent: Agent
) -> None:
    with pytest.raises(AssertionError, match="page_context_stale"):
        await check_independent_hosts(desk, agent, second_agent)
