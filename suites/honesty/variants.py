"""Broken runtimes for the honesty proofs' negative controls, built here in the suite (never a switch in runtime/).

Each variant is the real runtime with one part replaced by a subclass that reports success where the real one
refuses, so that the honesty checks are shown to catch exactly the lie they exist for:
- `report_success_for`: the runtime's MCP server answers a given refusal (by reason code) as success, `verified`
  too. It sits at the server's edge because not every refusal reaches the service: an empty or unknown assertion
  is refused while the tool's arguments are validated, before `ComputerUseService.handle` runs.
- `CancelReportedAsDone`: the service swallows a client's cancellation of a call and records (and answers) the
  call as done.
- `writing_twice`: a backend adapter that sends every write action twice, for the at-most-one-write check.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from typing import Any

from mcp.types import CallToolResult, TextContent

from runtime.arguments import ComputerUseArgs
from runtime.assembly import Runtime
from runtime.backend import Element
from runtime.commands.base import Answer
from runtime.models import Action, ComputerUseResult
from runtime.service import ComputerUseService
from runtime.sessions import BackendFactory
from runtime.transports.mcp.server import ComputerUseServer


def success_in_place_of(result: ComputerUseResult) -> ComputerUseResult:
    """What a lying runtime answers instead of `result`: done and verified, on the same session and frame."""
    return ComputerUseResult(
        status="ok",
        message="done",
        computer_session_id=result.computer_session_id,
        frame_id=result.frame_id,
        verified=True,
    )


def report_success_for(runtime: Runtime, code: str) -> None:
    """Break `runtime` so that its MCP server answers every `code` refusal as success (the rest is unchanged).

    The server object stays the one the agent is connected to; only its class changes, to a subclass whose
    `call_tool` rewrites the answer the real one gives."""
    real = type(runtime.server)
    assert issubclass(real, ComputerUseServer)

    class ReportsSuccess(real):  # type: ignore[misc, valid-type]
        async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
            answer = await super().call_tool(name, arguments, context)
            if not isinstance(answer, CallToolResult) or answer.structured_content is None:
                return answer
            result = ComputerUseResult.model_validate(answer.structured_content)
            if result.reason_code is None or result.reason_code.value != code:
                return answer
            data = success_in_place_of(result).model_dump(mode="json", exclude_none=True)
            return CallToolResult(content=[TextContent(type="text", text=json.dumps(data))], structured_content=data)

    ReportsSuccess.__name__ = f"ReportsSuccessFor_{code}"
    runtime.server.__class__ = ReportsSuccess


class CancelReportedAsDone(ComputerUseService):
    """A broken rule: a call the client cancels is not ended but answered, and recorded, as done. The interrupted
    code below has released the Page's write lease and spent the frame as usual; only the outcome lies."""

    async def dispatch(self, args: ComputerUseArgs, meta: Mapping[str, Any] | None, connection: object) -> Answer:
        try:
            return await super().dispatch(args, meta, connection)
        except asyncio.CancelledError:
            return Answer("done", self.sessions.live.get(args.computer_session_id or ""), verified=True)


def writing_twice(factory: BackendFactory) -> BackendFactory:
    """A backend adapter like `factory`'s that sends every write action twice: a second click is a second
    submit. Only a class can be subclassed, and every default backend factory is one."""
    assert isinstance(factory, type), factory

    class WritesTwice(factory):  # type: ignore[misc, valid-type]
        async def act(self, action: Action, element: Element | None) -> None:
            if not action.is_write:
                await super().act(action, element)
                return
            await super().act(action, element)
            await super().act(action, element)

    WritesTwice.__name__ = f"{factory.__name__}WritingTwice"
    return WritesTwice
