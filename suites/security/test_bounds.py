"""Every input bounded (issue 11, part 4): a model's arguments are untrusted input, like page content.

- Every string and list the model sends has a size limit, coordinates must be finite, and an assertion has a
  bounded breadth, depth and number of checks. Over the limit is `invalid_arguments` with a hint, before any backend
  call: the tap counts 0 CDP commands from the runtime's label, on every backend (the in-process MCP client, and the
  SDK's stdio transport on real pipes for NaN and Infinity, which only a raw JSON line can carry).
- Every limit the schema can express is published as `maxLength`/`maxItems`, the enforced one
  (`suites/protocol/test_schema.py` calls at each bound and a step past it; docs/mcp.md, "Limits").
- A model-supplied pattern runs on RE2 (linear time): `(a+)+$` against a 100,000-character title on a real fixture
  page answers `verification_failed`, and another MCP connection is answered meanwhile.

Negative controls: the same checks against a server built over the same real service with the limits lifted (a
subclass of the argument model), and against a verifier that runs Python's backtracking `re` on the event loop.

How "meanwhile" is made deterministic: the check wraps the runtime's matching function (`runtime.verification.
matches`) without changing what it does. When the match starts, the wrapper queues the other connection's call and
arms a watchdog; the queued call can only be served once the event loop runs again, so it is answered within the
bound exactly when the match gives the loop back within it. The watchdog is SIGALRM, which fires even while the loop
is frozen inside a C regex engine (Python's `re` checks for signals as it backtracks): the bound holds for the
broken variant too, and the frozen match is interrupted there, so the control cannot hang the suite.
"""

from __future__ import annotations

import asyncio
import json
import re
import signal
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from types import FrameType
from typing import Any

import pytest
from mcp.server.stdio import stdio_server
from mcp_types.version import OLDEST_SUPPORTED_VERSION
from pydantic import Field

import runtime.transports.adapter as adapter_module
import runtime.transports.mcp.server as server_module
import runtime.verification as verification
from fixtures_sites.server import FixtureServer
from lab.tap import CDPTap
from runtime.arguments import ComputerUseArgs
from runtime.capability.verifier import CALL_KEY, TOKEN_KEY
from runtime.models import Assertion, ComputerUseResult
from runtime.models.action import MAX_KEY, MAX_NAVIGATE_URL, MAX_SHORT, MAX_TEXT, MAX_VALUE, MAX_VALUES
from runtime.models.assertion import MAX_ASSERTED_TEXT, MAX_DEPTH, MAX_NAME, MAX_OF, MAX_PATTERN
from runtime.scope import QUERY_CHARS
from runtime.transports.client import HostedClient
from runtime.transports.mcp.server import build_server
from suites.harness import Agent, Desk, client_in_task, ref_of
from suites.proofs import assert_no_runtime_calls, assert_no_writes
from suites.reliability.conftest import CALL_LIMIT, within
from suites.reliability.test_cancellation import pipe

BOUND = 5.0
"""How long the other connection and the verify itself may take to answer while a catastrophic pattern is matched.
A list_pages answer takes milliseconds; a frozen loop never gives one."""
TITLE = "a" * 100_000 + "!"
CATASTROPHIC = "(a+)+$"
"""Exponential for a backtracking engine on a long run of `a` that does not end the string; linear for RE2."""


def leaf(**fields: Any) -> dict[str, Any]:
    return {"type": "text_present", "text": "Full name", **fields}


def nested(levels: int) -> dict[str, Any]:
    assertion = leaf()
    for _ in range(levels - 1):
        assertion = {"type": "all_of", "of": [assertion]}
    return assertion


def over_limit_calls(session: str, frame: str, ref: str) -> dict[str, dict[str, Any]]:
    """One call per limit, each a single step over it and otherwise valid, addressed to a live session and frame."""

    def act(**action: Any) -> dict[str, Any]:
        return {"command": "act", "computer_session_id": session, "frame_id": frame, "action": action}

    def verify(**assertion: Any) -> dict[str, Any]:
        return {"command": "verify", "computer_session_id": session, "assertion": assertion}

    long_id = "x" * (MAX_SHORT + 1)
    return {
        "page": {"command": "observe", "page": long_id},
        "computer_session_id": {"command": "observe", "computer_session_id": long_id},
        "frame_id": {**act(type="click", ref=ref), "frame_id": long_id},
        "query": {"command": "observe", "computer_session_id": session, "query": "q" * (QUERY_CHARS + 1)},
        "query without a word": {"command": "observe", "computer_session_id": session, "query": " \t "},
        "within": {"command": "observe", "computer_session_id": session, "within": long_id},
        "within without a session": {"command": "observe", "page": "left", "within": "abcr1"},
        "action.ref": act(type="click", ref=long_id),
        "action.text": act(type="type", ref=ref, text="t" * (MAX_TEXT + 1)),
        "action.key": act(type="press", key="K" * (MAX_KEY + 1)),
        "action.url": act(type="navigate", url="http://127.0.0.1/" + "u" * MAX_NAVIGATE_URL),
        "action.values": act(type="select", ref=ref, values=["v"] * (MAX_VALUES + 1)),
        "action.values.0": act(type="select", ref=ref, values=["v" * (MAX_VALUE + 1)]),
        "assertion.pattern": verify(type="title_matches", pattern="a" * (MAX_PATTERN + 1)),
        "assertion.text": verify(type="text_present", text="t" * (MAX_ASSERTED_TEXT + 1)),
        "assertion.ref": verify(type="element_state", ref=long_id, state="visible", expected=True),
        "assertion.role": verify(type="element_count", role="r" * (MAX_SHORT + 1), count=1),
        "assertion.name": verify(type="element_count", role="textbox", name="n" * (MAX_NAME + 1), count=1),
        "assertion.expected": verify(
            type="element_state", role="textbox", name="Full name", state="value", expected="e" * (MAX_TEXT + 1)
        ),
        "assertion.of": verify(type="all_of", of=[leaf()] * (MAX_OF + 1)),
        "assertion depth": verify(**nested(MAX_DEPTH + 1)),
        "assertion parts": verify(type="all_of", of=[{"type": "any_of", "of": [leaf()] * MAX_OF}] * 4),
        "assertion.pattern syntax": verify(type="title_matches", pattern=r"(a)\1"),
    }


def assert_refused_before_backend(results: dict[str, ComputerUseResult], tap: CDPTap) -> None:
    """Every call answered `invalid_arguments` with a hint, and not one CDP command left the runtime."""
    wrong = {
        name: (r.status, r.reason_code, r.message)
        for name, r in results.items()
        if r.reason_code != "invalid_arguments"
    }
    assert not wrong, f"over-limit calls not refused as invalid_arguments: {wrong}"
    assert all(r.hint for r in results.values()), "an invalid_arguments answer without a hint"
    assert_no_runtime_calls(tap)


class UnboundedAssertion(Assertion):
    """The broken variant of the limits: a pattern of any length, as before issue 11."""

    pattern: str | None = Field(None, description="Regex (search).")


class UnboundedArgs(ComputerUseArgs):
    """The arguments with the unbounded assertion."""

    assertion: UnboundedAssertion | None = None


def lift_limits(monkeypatch: pytest.MonkeyPatch) -> None:
    """Serve from here on with the unbounded assertion: servers built from now on publish it (they resolve their
    signature's names then), and the adapter validates every call's arguments with it."""
    monkeypatch.setattr(server_module, "Assertion", UnboundedAssertion)
    monkeypatch.setattr(adapter_module, "ComputerUseArgs", UnboundedArgs)


async def observed_dom_form(one_page_desk: Callable[..., Any], agent: Agent) -> tuple[ComputerUseResult, str]:
    await one_page_desk("/dom_form/")
    seen = await agent.observe(page="left")
    return seen, ref_of(seen, '"Full name"')


@pytest.mark.req("bounds:every-input", "bounds:before-backend", "reason:invalid_arguments")
async def test_every_over_limit_argument_is_invalid_arguments_with_a_hint_before_any_backend_call(
    one_page_desk, agent: Agent, tap: CDPTap, fixture_server: FixtureServer, backend: str
) -> None:
    seen, name = await observed_dom_form(one_page_desk, agent)
    request = await agent.desk.request()  # the host reads the Pages for a model request: before the count starts
    tap.clear()
    calls = over_limit_calls(seen.computer_session_id or "", seen.frame_id or "", name)
    results = {label: await agent.call(request, **arguments) for label, arguments in calls.items()}
    assert_refused_before_backend(results, tap)
    said = {
        "assertion depth": "nest at most",
        "assertion parts": "at most",
        "assertion.pattern syntax": "RE2",
        "query without a word": "query",
        "within without a session": "computer_session_id",
    }
    for label, result in results.items():
        word = said.get(label) or next(part for part in reversed(label.split(".")) if not part.isdigit())
        assert word in result.message, (label, result.message)  # the message names what to fix
        assert len(result.message) < 400, (label, result.message)  # the message names the limit, never echoes input
    assert_no_writes(fixture_server)
    # Nothing was spent: the frame the refused acts carried is still the latest, and a call within the limits works.
    typed = await agent.act(seen, type="type", ref=name, text="t" * 200)
    assert typed.status == "ok", typed


@pytest.mark.negative_control
@pytest.mark.req("bounds:before-backend")
async def test_the_before_backend_check_catches_a_server_whose_pattern_is_unbounded(
    one_page_desk, agent: Agent, tap: CDPTap, monkeypatch: pytest.MonkeyPatch, backend: str
) -> None:
    seen, _ = await observed_dom_form(one_page_desk, agent)
    lift_limits(monkeypatch)
    async with client_in_task(build_server(agent.desk.runtime.service)) as client:
        unbounded = HostedClient(client)
        request = await agent.desk.request()
        tap.clear()
        assertion = {"type": "title_matches", "pattern": "a" * (MAX_PATTERN + 1)}
        raw = await unbounded.call(
            request, command="verify", computer_session_id=seen.computer_session_id, assertion=assertion
        )
        result = ComputerUseResult.model_validate(raw.structured_content)
    with pytest.raises(AssertionError, match="not refused as invalid_arguments"):
        assert_refused_before_backend({"assertion.pattern": result}, tap)
    with pytest.raises(AssertionError, match="CDP commands reached Chromium"):
        assert_no_runtime_calls(tap)  # the oversized pattern was evaluated on the live Page


# -- NaN and Infinity over the stdio transport ----------------------------------------------------------------------


async def raw_stdio_call(desk: Desk, lines: list[str]) -> list[dict[str, Any]]:
    """Serve the runtime's MCP server on the SDK's stdio transport over OS pipes; write `lines` as they are (JSON the
    SDK's client would never produce) and return every answer the server wrote back, in order."""
    server_in, client_out = await pipe()
    client_in, server_out = await pipe()
    lowlevel = desk.runtime.server._lowlevel_server  # what `computer-use serve` runs on the process's stdio

    async def serve() -> None:
        try:
            async with stdio_server(stdin=server_in, stdout=server_out) as (read, write):  # type: ignore[arg-type]
                await lowlevel.run(read, write, lowlevel.create_initialization_options())
        finally:
            server_out.close()

    serving = asyncio.create_task(serve())
    answers: list[dict[str, Any]] = []
    try:
        for line in lines:
            await client_out.write(line + "\n")
            if '"id"' in line:
                answers.append(json.loads(await within(anext(aiter(client_in)), CALL_LIMIT, "the stdio answer")))
    finally:
        client_out.close()
        await within(serving, CALL_LIMIT, "the stdio server's end")
    return answers


@pytest.mark.req("bounds:finite-coordinates", "bounds:before-backend", "reason:invalid_arguments")
async def test_nan_and_infinity_coordinates_on_the_stdio_wire_are_invalid_arguments_before_any_backend_call(
    one_page_desk, agent: Agent, tap: CDPTap, backend: str
) -> None:
    seen, _ = await observed_dom_form(one_page_desk, agent)
    request = await agent.desk.request()
    calls = []
    for number, (x, y) in enumerate([(float("nan"), 10.0), (10.0, float("inf")), (float("-inf"), float("nan"))]):
        tool_call, token = request.mint("conn-raw-stdio")
        action = {"type": "click", "x": x, "y": y}
        params = {
            "name": "computer_use",
            "arguments": {
                "command": "act",
                "computer_session_id": seen.computer_session_id,
                "frame_id": seen.frame_id,
                "action": action,
            },
            "_meta": {TOKEN_KEY: token, CALL_KEY: tool_call},
        }
        calls.append(json.dumps({"jsonrpc": "2.0", "id": number + 2, "method": "tools/call", "params": params}))
    assert "NaN" in calls[0]  # the literals a raw JSON writer emits and the SDK parses
    assert "Infinity" in calls[1]
    hello = {
        "protocolVersion": OLDEST_SUPPORTED_VERSION,
        "capabilities": {},
        "clientInfo": {"name": "raw", "version": "0"},
    }
    tap.clear()
    answers = await raw_stdio_call(
        agent.desk,
        [
            json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": hello}),
            json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}),
            *calls,
        ],
    )
    results = {
        f"call {answer['id']}": ComputerUseResult.model_validate(answer["result"]["structuredContent"])
        for answer in answers[1:]
    }
    assert len(results) == 3
    assert_refused_before_backend(results, tap)
    assert all("finite number" in r.message for r in results.values()), results


# -- a catastrophic pattern -----------------------------------------------------------------------------------------


class LoopFrozen(Exception):
    """Raised by the watchdog into a match that held the event loop past the bound."""


@dataclass
class Watchdog:
    """A bound that holds over a frozen event loop: SIGALRM, armed when the match starts."""

    bound: float
    expired: bool = False
    match_code: Any = None

    def arm(self) -> None:
        signal.signal(signal.SIGALRM, self._fire)
        signal.setitimer(signal.ITIMER_REAL, self.bound)

    def _fire(self, signum: int, frame: FrameType | None) -> None:
        self.expired = True
        while frame is not None:  # interrupt the match only; anywhere else the flag is enough
            if frame.f_code is self.match_code:
                raise LoopFrozen(f"the pattern held the event loop for more than {self.bound:g}s")
            frame = frame.f_back


@contextmanager
def watched_matching(
    monkeypatch: pytest.MonkeyPatch, engine: Callable[[str, str], bool], other: Callable[[], Any]
) -> Iterator[tuple[Watchdog, list[asyncio.Task[tuple[ComputerUseResult, bool]]]]]:
    """Wrap the runtime's matching function: at the match's start, queue `other()` and arm the watchdog."""
    dog = Watchdog(BOUND)
    queued: list[asyncio.Task[tuple[ComputerUseResult, bool]]] = []

    async def answered() -> tuple[ComputerUseResult, bool]:
        result = await other()
        return result, dog.expired

    def observed(pattern: str, text: str) -> bool:
        queued.append(asyncio.get_running_loop().create_task(answered()))
        dog.arm()
        return engine(pattern, text)

    dog.match_code = observed.__code__
    previous = signal.getsignal(signal.SIGALRM)
    monkeypatch.setattr(verification, "matches", observed)
    try:
        yield dog, queued
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


async def catastrophic_verify(
    desk: Desk, agent: Agent, monkeypatch: pytest.MonkeyPatch, engine: Callable[[str, str], bool]
) -> tuple[ComputerUseResult, bool, ComputerUseResult, bool]:
    """Observe A, give it a 100,000-character title, and verify `(a+)+$` against it while another connection asks
    list_pages. Returns (verify answer, answered late, other answer, answered late)."""
    seen = await agent.observe(page="left")
    await desk.workspace.evaluate(desk.labs["A"], f"document.title = {json.dumps(TITLE)}")
    request = await desk.request()  # one model request: two tool calls, one per connection
    async with client_in_task(desk.runtime.server) as client:
        other = Agent(HostedClient(client), desk)
        with watched_matching(monkeypatch, engine, lambda: other.call(request, command="list_pages")) as (dog, queued):
            verified = await within(
                agent.call(
                    request,
                    command="verify",
                    computer_session_id=seen.computer_session_id,
                    assertion={"type": "title_matches", "pattern": CATASTROPHIC},
                ),
                CALL_LIMIT,
            )
            verify_late = dog.expired
            assert len(queued) == 1, "the pattern was never matched"
            listed, other_late = await within(queued[0], CALL_LIMIT, "the other connection")
    return verified, verify_late, listed, other_late


def assert_served_meanwhile(
    verified: ComputerUseResult, verify_late: bool, listed: ComputerUseResult, late: bool
) -> None:
    assert not late, f"another connection was not answered within {BOUND:g}s while the pattern was matched"
    assert not verify_late, f"the verify did not answer within {BOUND:g}s"
    assert listed.status == "ok", listed
    assert verified.reason_code == "verification_failed", verified
    assert len("".join(verified.failures or [])) < 1000, "the failure copied the whole title"


@pytest.mark.req("bounds:linear-patterns")
async def test_a_catastrophic_pattern_against_a_long_title_fails_verification_and_other_connections_are_served(
    one_page_desk, agent: Agent, monkeypatch: pytest.MonkeyPatch, backend: str
) -> None:
    desk = await one_page_desk("/dom_form/")
    assert_served_meanwhile(*await catastrophic_verify(desk, agent, monkeypatch, verification.matches))


@pytest.mark.negative_control
@pytest.mark.req("bounds:linear-patterns")
async def test_the_served_meanwhile_check_catches_python_re_on_the_event_loop(
    one_page_desk, agent: Agent, monkeypatch: pytest.MonkeyPatch, backend: str
) -> None:
    desk = await one_page_desk("/dom_form/")

    def backtracking(pattern: str, text: str) -> bool:
        return re.search(pattern, text) is not None

    outcome = await catastrophic_verify(desk, agent, monkeypatch, backtracking)
    with pytest.raises(AssertionError, match="was not answered within"):
        assert_served_meanwhile(*outcome)
