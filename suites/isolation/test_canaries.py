"""Page isolation by canary: no byte of another Page reaches a backend or a tool result.

Counting commands per target (test_isolation.py) proves nobody *asked* B for anything; it cannot see B's data
arriving unasked — a discovery event naming B's URL, a `/json/list` answer, B's title copied into a result. So
B, D (another window) and the chat each carry a canary string of their own in URL, title and content (A carries
its own too), and two taps count bytes: the session tap in front of Chromium (label "runtime": the runtime's
registry and gateways) and a second tap ("child") in front of every session's scoped gateway, through which all
of a backend child's CDP traffic passes. Over whole scenarios the child side and every tool result must hold 0
canary bytes and 0 target ids of the other Pages; no frame on either tap may be on a session the tap cannot
attribute; other Pages' discovery reads and events are counted on the runtime side and reported, never allowed
on the child side. Negative controls: a gateway that forwards everything, a result that carries B's title, and
a record on an unknown session are each caught.
"""

from __future__ import annotations

import json
import re
import secrets
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import allure
import pytest

from lab.cdp import CDPClient, CDPError
from lab.tap import CDPTap, Record
from lab.workspace import Workspace
from runtime.assembly import Runtime
from runtime.capability.contexts import ProviderRequest
from runtime.gateway import ScopedGateway
from runtime.models import ComputerUseResult, from_text
from runtime.service import Settings
from runtime.transports.client import HostedClient
from suites.harness import Agent, Desk, client_in_task
from suites.isolation.test_isolation import SCENARIOS, observe_act_verify_on_a
from suites.lab.conftest import browser_ws_url
from suites.proofs import assert_untouched
from suites.sabotage import UnscopedGateway

OTHERS = ("B", "chat", "D")


class TappedGateway(ScopedGateway):
    """The real scoped gateway, handed to its backend through the child tap: every byte crosses a tap."""

    def __init__(self, child: CDPTap, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.child = child

    async def start(self) -> str:
        return await self.child.endpoint("child", upstream=await super().start())


class ForwardEverything(TappedGateway, UnscopedGateway):
    """Broken on purpose (negative control): every target is visible and every command forwarded."""


@dataclass
class RecordingAgent(Agent):
    """The agent, keeping every tool result it receives whole (all content blocks and structured content)."""

    results: list[str] = field(default_factory=list)

    async def call(self, request: ProviderRequest | None = None, **arguments: Any) -> ComputerUseResult:
        request = request or await self.desk.request()
        raw = await self.client.call(request, **arguments)
        self.results.append(raw.model_dump_json())
        return ComputerUseResult.model_validate(raw.structured_content or from_text(raw.content[0].text))


@pytest.fixture
async def child() -> AsyncIterator[CDPTap]:
    """The second tap. Each of its ports forwards to one session's gateway; its own upstream (the discard port) is
    never used, so nothing on this tap can reach Chromium but through a gateway."""
    child_tap = await CDPTap("http://127.0.0.1:9").start()
    yield child_tap
    await child_tap.close()


@pytest.fixture
def gateway_class() -> type[TappedGateway]:
    return TappedGateway


@pytest.fixture
async def runtime(
    tap: CDPTap, child: CDPTap, backend: str, gateway_class: type[TappedGateway]
) -> AsyncIterator[Runtime]:
    """The real runtime through the session tap, each gateway behind the child tap."""

    def make(*args: Any, **kwargs: Any) -> ScopedGateway:
        return gateway_class(child, *args, **kwargs)

    rt = await Runtime.connect(await tap.endpoint("runtime"), settings=Settings(backend=backend), gateway_factory=make)
    yield rt
    await rt.close()


@pytest.fixture
async def agent(desk: Desk) -> AsyncIterator[RecordingAgent]:
    async with client_in_task(desk.runtime.server) as client:
        yield RecordingAgent(HostedClient(client), desk)


@dataclass
class Canaries:
    """Each Page's canary, and the needles no backend or result may carry (other Pages' canaries and ids)."""

    of: dict[str, str]
    forbidden: dict[str, str]
    """needle -> what it is ("B canary", "chat target id", …)."""


async def canary_desk(desk: Desk, other_window: Workspace, path: str, tap: CDPTap, child: CDPTap) -> Canaries:
    """A (showing `path`) left of the chat, B right of it, D in another window; only A authorized. Canaries in
    every URL, title and content; the chat is the real chat page with its canary added by the lab's own hands."""
    of = {name: f"CANARY-{name}-{secrets.token_hex(8)}" for name in ("A", *OTHERS)}
    sep = "&" if "?" in path else "?"
    await desk.open("A", f"{path}{sep}c={of['A']}", desk.workspace.column(0, 3))
    await desk.open("chat", f"/chat/?c={of['chat']}", desk.workspace.column(1, 3), chat=True)
    await desk.workspace.evaluate(
        desk.labs["chat"],
        f"document.title += ' {of['chat']}'; document.body.append('{of['chat']}'); document.title",
    )
    await desk.open("B", f"/canary/?c={of['B']}", desk.workspace.column(2, 3))
    await desk.open("D", f"/canary/?c={of['D']}", other_window.column(0, 1), workspace=other_window)
    desk.authorize("A")
    forbidden = {of[name]: f"{name} canary" for name in OTHERS}
    forbidden |= {desk.target(name): f"{name} target id" for name in OTHERS}
    for instrument in (tap, child):
        instrument.watch(of["A"], *forbidden)
    return Canaries(of, forbidden)


def assert_no_canary_bytes_on_the_child_side(child: CDPTap, canaries: Canaries) -> None:
    """Every byte between the backend and its gateway: 0 frames with another Page's canary or target id."""
    seen = Counter(
        (canaries.forbidden[s.needle], s.direction, s.kind, s.method)
        for s in child.sightings(label="child")
        if s.needle in canaries.forbidden
    )
    assert not seen, f"other Pages' bytes reached a backend child: {dict(seen)}"


def assert_no_canary_bytes_in_results(agent: RecordingAgent, canaries: Canaries) -> None:
    """Every tool result whole (content blocks and structured content): 0 canary bytes, 0 other target ids."""
    found = {what: sum(needle in r for r in agent.results) for needle, what in canaries.forbidden.items()}
    found = {what: n for what, n in found.items() if n}
    assert not found, f"other Pages' bytes in {found} tool result(s)"


def assert_no_unknown_sessions(*taps: CDPTap) -> None:
    unknown: list[Record] = [r for t in taps for r in t.unknown_sessions()]
    assert not unknown, f"{len(unknown)} tap records on unknown sessions: {unknown[:5]}"


def report_discovery(tap: CDPTap, child: CDPTap, desk: Desk, canaries: Canaries) -> dict[str, Any]:
    """Discovery reads/events about each Page and canary sightings, per tap; attached and printed."""
    figures: dict[str, Any] = {}
    for side, instrument in (("runtime", tap), ("child", child)):
        figures[side] = {
            "discovery": {
                f"{name} {kind}s": instrument.count(target=desk.target(name), category="discovery", kind=kind)
                for name in ("A", *OTHERS)
                for kind in ("command", "event")
                if instrument.count(target=desk.target(name), category="discovery", kind=kind)
            },
            "canary frames": {name: len(instrument.sightings(canaries.of[name])) for name in ("A", *OTHERS)},
            "records": len(instrument.records),
        }
    allure.attach(json.dumps(figures, indent=2), "canaries and discovery per tap", "application/json")
    print(f"canaries: {figures}")
    return figures


def assert_confined(tap: CDPTap, child: CDPTap, agent: RecordingAgent, desk: Desk, canaries: Canaries) -> None:
    figures = report_discovery(tap, child, desk, canaries)
    # The child tap saw the backend's work on A, A's own canary included: zeros elsewhere mean something.
    assert child.count(target=desk.target("A"), label="child") > 0, "no backend traffic crossed the child tap"
    assert figures["child"]["canary frames"]["A"] > 0, "A's own canary never crossed the child tap"
    # The registry's own connection did see every other Page's canary: the pages carry them for real.
    assert all(figures["runtime"]["canary frames"][name] > 0 for name in OTHERS), figures["runtime"]
    assert agent.results, "no tool result was collected"
    assert_no_canary_bytes_on_the_child_side(child, canaries)
    others = {desk.target(name) for name in OTHERS}
    stray = [r for r in child.records if r.target in others]
    assert not stray, f"child-side records about other Pages: {stray[:5]}"
    assert_no_canary_bytes_in_results(agent, canaries)
    assert_no_unknown_sessions(tap, child)


@pytest.mark.parametrize("path", ["flow", *SCENARIOS])
@pytest.mark.req(
    "isolation:canary-child-bytes",
    "isolation:canary-result-bytes",
    "isolation:no-unknown-session",
    "isolation:discovery-confined",
    "isolation:every-scenario",
    "isolation:b-untouched",
    "isolation:chat-untouched",
    "isolation:other-window-untouched",
)
async def test_no_byte_of_b_the_chat_or_another_window_reaches_a_backend_or_a_result_in_any_scenario(
    desk: Desk, other_window: Workspace, agent: RecordingAgent, tap: CDPTap, child: CDPTap, path: str
) -> None:
    canaries = await canary_desk(desk, other_window, "/dom_form/" if path == "flow" else path, tap, child)
    if path == "flow":
        await observe_act_verify_on_a(agent)
    else:
        seen = await agent.observe(page=desk.handle("A"))
        title = next(line for line in (seen.observation or "").splitlines() if line.startswith("title: "))
        checked = await agent.verify(seen, type="title_matches", pattern="^" + re.escape(title[7:27]))
        assert checked.verified is True, checked
    assert_confined(tap, child, agent, desk, canaries)
    assert_untouched(tap, {name: desk.target(name) for name in OTHERS})  # and not one command, from any client


@pytest.mark.negative_control
@pytest.mark.parametrize("gateway_class", [ForwardEverything])
@pytest.mark.req("isolation:canary-child-bytes", "isolation:discovery-confined")
async def test_the_canary_check_catches_a_gateway_that_forwards_everything(
    desk: Desk, other_window: Workspace, agent: RecordingAgent, tap: CDPTap, child: CDPTap, backend: str
) -> None:
    canaries = await canary_desk(desk, other_window, "/dom_form/", tap, child)
    seen = await agent.call(command="observe", page="left")
    if backend == "open_claude_chrome":
        # It refuses an endpoint that shows more than one Page — having read that endpoint's page list, which is
        # exactly where the other Pages' canaries show up on the child side.
        assert seen.status == "failed", seen
    else:
        assert seen.status == "ok", seen
    report_discovery(tap, child, desk, canaries)
    with pytest.raises(AssertionError, match="other Pages' bytes reached a backend child"):
        assert_no_canary_bytes_on_the_child_side(child, canaries)


@pytest.mark.negative_control
@pytest.mark.req("isolation:canary-result-bytes")
async def test_the_result_check_catches_a_list_pages_that_carries_b_s_title(
    desk: Desk,
    other_window: Workspace,
    agent: RecordingAgent,
    tap: CDPTap,
    child: CDPTap,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    canaries = await canary_desk(desk, other_window, "/dom_form/", tap, child)
    assert (await agent.call(command="list_pages")).status == "ok"
    assert_no_canary_bytes_in_results(agent, canaries)  # the real list_pages passes the check
    registry = desk.runtime.registry
    await registry.refresh([desk.handle("B")])  # B's real title, as the browser reports it
    info, b = registry.info, desk.pages["B"]
    assert canaries.of["B"] in b.title  # the leak this variant adds is real
    monkeypatch.setattr(
        registry, "info", lambda page: info(page).model_copy(update={"title": f"{page.title} | {b.title}"})
    )
    listed = await agent.call(command="list_pages")
    assert listed.status == "ok", listed
    with pytest.raises(AssertionError, match="other Pages' bytes in"):
        assert_no_canary_bytes_in_results(agent, canaries)


@pytest.mark.negative_control
@pytest.mark.req("isolation:no-unknown-session")
async def test_the_unknown_session_check_catches_a_command_on_a_session_the_tap_never_saw_created(
    tap: CDPTap,
) -> None:
    client = await CDPClient.connect(await browser_ws_url(await tap.endpoint("stray")))
    try:
        await client.send("Target.getTargets")
        assert_no_unknown_sessions(tap)
        with pytest.raises(CDPError):  # Chromium knows no such session either; the tap recorded it all the same
            await client.send("Runtime.evaluate", {"expression": "1"}, session_id="F00D" * 8)
    finally:
        await client.close()
    with pytest.raises(AssertionError, match="1 tap records on unknown sessions"):
        assert_no_unknown_sessions(tap)
