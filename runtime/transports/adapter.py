"""The path every adapter shares: arguments → validation → the one service → the result envelope.

The MCP tool (`runtime/transports/mcp/server.py`) and the plain HTTP API (`runtime/transports/http_api.py`) differ only
in how a call arrives (a `tools/call` with `_meta`, or a POST with headers) and how its envelope leaves
(structuredContent plus a text block, or a JSON body). What a call may carry, what a malformed one is told, and what a
result looks like are decided here, once, so the two cannot drift apart.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from runtime.arguments import ComputerUseArgs
from runtime.commands.base import Outcome
from runtime.models import ComputerUseResult
from runtime.models.action import MAX_SHORT
from runtime.reasons import ReasonCode
from runtime.service import ComputerUseService

LOCATION = 8
"""Parts of an error's location quoted: a nesting beyond it is elided (the depth limit is in the message)."""
OBJECTS = ("action", "assertion")
"""The arguments that are objects."""


def quoted(name: object) -> str:
    """A model-supplied key, bounded: the message must not become a copy of an oversized argument."""
    text = str(name)
    return text if len(text) <= MAX_SHORT else text[:MAX_SHORT] + "…"


def explain(error: ValidationError) -> str:
    parts = []
    for item in error.errors()[:3]:
        loc = [quoted(part) for part in item["loc"]]
        where = ".".join(loc if len(loc) <= LOCATION else [*loc[:LOCATION], "…"])
        message = item["msg"].removeprefix("Value error, ")
        parts.append(f"{where}: {message}" if where else message)
    return "; ".join(parts)


def invalid(message: str) -> Outcome:
    return Outcome(ComputerUseResult.fail(ReasonCode.invalid_arguments, message))


def unknown_arguments(arguments: Mapping[str, Any]) -> Outcome | None:
    """`invalid_arguments` naming (a few of) the keys `computer_use` does not take; None when there are none."""
    unknown = sorted(set(arguments) - set(ComputerUseArgs.model_fields))
    if not unknown:
        return None
    allowed = ", ".join(ComputerUseArgs.model_fields)
    named = ", ".join(quoted(name) for name in unknown[:3])
    more = f" and {len(unknown) - 3} more" if len(unknown) > 3 else ""
    return invalid(f"unknown argument(s) {named}{more}; computer_use takes {allowed}")


def unquoted(arguments: Mapping[str, Any]) -> dict[str, Any]:
    """The arguments with an `action` or `assertion` sent as a JSON string read as the object it holds: some clients
    send nested objects that way (the MCP SDK's own validation reads them so: "Claude Desktop is prone to this")."""
    read = dict(arguments)
    for name in OBJECTS:
        value = arguments.get(name)
        if isinstance(value, str):
            try:
                read[name] = json.loads(value)
            except (ValueError, RecursionError):
                continue  # not JSON: validation says what is wrong with it
    return read


def parse(arguments: Mapping[str, Any]) -> ComputerUseArgs | Outcome:
    """The validated arguments, or `invalid_arguments` (with a hint) saying what is wrong with them: the one
    validation of a call's arguments, whichever transport it came on."""
    refused = unknown_arguments(arguments)
    if refused is not None:
        return refused
    try:
        return ComputerUseArgs.model_validate(unquoted(arguments))
    except ValidationError as exc:
        return invalid(explain(exc))


async def serve(
    service: ComputerUseService, arguments: Mapping[str, Any], meta: Mapping[str, Any] | None, connection: object
) -> Outcome:
    """One `computer_use` call: its arguments checked (`parse`), then the service, which checks the capability
    (`meta`, bound to `connection`) before any backend call."""
    args = parse(arguments)
    if isinstance(args, Outcome):
        return args
    return await service.handle(args, meta, connection)


def envelope(outcome: Outcome) -> dict[str, Any]:
    """The result as JSON: MCP's structuredContent and the HTTP API's body.

    Absent rather than null: the published schema (compacted) types optional fields without null. A field at its
    default (no screenshot attached) is absent too: every result is paid for in the model's context.
    """
    return outcome.result.model_dump(mode="json", exclude_none=True, exclude_defaults=True)
