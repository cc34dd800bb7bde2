"""MCP progress: a `tools/call` that carries `_meta.progressToken` gets `notifications/progress` at the phases of a
long observe or act (the policy read, the backend's action, the re-observation), a bounded number, all before its
result; a call without a token gets none. And `computer-use eval` shows which question runs.

A real MCP client over the SDK's transport, in-process, against the runtime on the lab's Chromium; every other
message the server sends is recorded too, so a stray progress notification would show."""

from __future__ import annotations

import io
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from mcp import Client
from mcp.types import CallToolResult, ProgressNotification

import runtime.transports.mcp.server
from host.evals.runner import Progress
from runtime.capability.verifier import CALL_KEY, TOKEN_KEY
from runtime.models import ComputerUseResult
from runtime.transports.client import HostedClient
from runtime.transports.mcp.progress import PHASE_WORDS
from runtime.transports.mcp.server import TOOL
from suites.harness import Desk, client_in_task, ref_of

pytestmark = pytest.mark.req("cli:progress")


@dataclass
class Watched:
    """A client of the runtime that records every notification the server sends it."""

    hosted: HostedClient
    desk: Desk
    notifications: list[Any] = field(default_factory=list)

    async def call(self, with_progress: bool, **arguments: Any) -> tuple[ComputerUseResult, list[str]]:
        """One call (a fresh token); with `with_progress`, a progress callback (so a progressToken): the result and
        the progress messages in the order they came, each checked to come before the result."""
        tool_call, token = (await self.desk.request()).mint(self.hosted.connection)
        heard: list[str] = []
        done = False

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            assert not done, "a progress notification came after the result"
            assert progress == len(heard) + 1, f"progress {progress} after {len(heard)} notification(s)"
            heard.append(message or "")

        before = len(self.notifications)
        raw: CallToolResult = await self.hosted.client.call_tool(
            TOOL,
            arguments,
            progress_callback=on_progress if with_progress else None,
            meta={TOKEN_KEY: token, CALL_KEY: tool_call},
        )
        done = True
        stray = [n for n in self.notifications[before:] if isinstance(n, ProgressNotification)]
        recorded = [n.params.message or "" for n in stray]
        if with_progress:  # the recorder sees what the callback hears: its silence below means something
            assert recorded == heard, f"the recorder saw {recorded}, the callback heard {heard}"
        return ComputerUseResult.model_validate(raw.structured_content), heard if with_progress else recorded


@pytest.fixture
async def watched(one_page_desk: Callable[[str], Awaitable[Desk]]) -> AsyncIterator[Watched]:
    desk = await one_page_desk("/dom_form/")
    seen: list[Any] = []

    async def record(message: Any) -> None:
        seen.append(getattr(message, "root", message))

    def opened() -> Client:
        return Client(desk.runtime.server, mode="legacy", message_handler=record)

    async with client_in_task(None, opened=opened) as client:
        yield Watched(HostedClient(client), desk, seen)


def assert_progress_is_reported(heard: list[str], *phases: str) -> None:
    assert heard, "no progress notification for a call that asked for progress"
    assert len(heard) <= len(PHASE_WORDS), f"{len(heard)} notifications: more than one a phase"
    assert len(set(heard)) == len(heard), f"a phase reported twice: {heard}"
    for phase in phases:
        assert PHASE_WORDS[phase] in heard, f"{PHASE_WORDS[phase]!r} is not among {heard}"


async def progress_scenario(watched: Watched) -> None:
    """observe, then act, each with a progressToken; then both again without one."""
    seen, heard = await watched.call(True, command="observe", page="left")
    assert seen.status == "ok", seen
    assert_progress_is_reported(heard, "backend_snapshot", "frame")
    action = {"type": "type", "ref": ref_of(seen, '"Full name"'), "text": "Ada"}
    acted, heard = await watched.call(
        True, command="act", computer_session_id=seen.computer_session_id, frame_id=seen.frame_id, action=action
    )
    assert acted.status == "ok", acted
    assert_progress_is_reported(heard, "policy", "backend_act", "frame")
    again, heard = await watched.call(False, command="observe", computer_session_id=seen.computer_session_id)
    assert again.status == "ok", again
    assert heard == [], f"progress without a progressToken: {heard}"


async def test_a_call_with_a_progress_token_hears_its_phases_and_one_without_hears_nothing(watched: Watched) -> None:
    await progress_scenario(watched)


@pytest.mark.negative_control
async def test_the_progress_check_catches_a_server_that_ignores_the_progress_token(
    watched: Watched, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(runtime.transports.mcp.server, "progress_token", lambda meta: None)
    with pytest.raises(AssertionError, match="no progress notification"):
        await progress_scenario(watched)


# -- computer-use eval's progress line ---------------------------------------------------------------------------


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_eval_progress_is_a_line_a_question_or_one_updating_line_on_a_terminal() -> None:
    piped, terminal = io.StringIO(), Terminal()
    for stream in (piped, terminal):
        progress = Progress(stream)
        for number in (1, 2):
            progress.show(f"[{number}/2] question {number}: asking")
            progress.clear()
    assert piped.getvalue().splitlines() == [
        "computer-use eval: [1/2] question 1: asking",
        "computer-use eval: [2/2] question 2: asking",
    ]
    assert "\n" not in terminal.getvalue()
    assert terminal.getvalue().count("\r\x1b[K") == 4  # each line drawn over the last, then cleared
