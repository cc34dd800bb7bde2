"""Every field of the tool's input schema is described and bounded, and every published bound is the one enforced
(issue 31, decision 4; spec 004: a client can only respect a bound it is told).

- `gaps` walks the input schema a real MCP client gets from `tools/list` (every property at every level: the
  parameters, `action`'s and `assertion`'s fields, array items, each branch of a union) and names every property
  without a description, every string without `maxLength` (an enum is bounded by its values) and every array without
  `maxItems`.
- `bounds` finds, by the same walk, every published `maxLength`, `maxItems`, `minimum` and `maximum`. For each, a call
  through the MCP client with a value at the bound passes argument validation (the service receives it), and one a
  step past it is `invalid_arguments` naming the field, and never reaches the service. A bound published on a new
  field fails the check until `EXAMPLES` has a call for it: it is covered from the day it is published.

The service behind the server here is `ArgumentsOnly`, which records what reaches it: argument validation is pure
logic in front of the service, and a call the service never receives cannot reach a backend.
`suites/security/test_bounds.py` proves the same refusals on a live Page on every backend, where the CDP tap counts 0
commands from the runtime.

Negative controls: the same checks on a server built from a doctored `Action` (`UndescribedAction`,
`DishonestAction`), swapped in through the name the server resolves its signature with, as test_bounds lifts its
limits.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from mcp import Client
from pydantic import Field

import runtime.transports.adapter as adapter_module
import runtime.transports.mcp.server as server_module
from runtime.arguments import ComputerUseArgs
from runtime.commands.base import Outcome
from runtime.models import Action, ComputerUseResult
from runtime.models.action import MAX_SHORT, MAX_TEXT
from runtime.transports.mcp.server import TOOL, build_server
from suites.proofs import record_cost

Schema = dict[str, Any]
LIMITS = ("maxLength", "maxItems", "minimum", "maximum")


@dataclass
class ArgumentsOnly:
    """Stands where the service would and keeps the arguments that reached it: the ones validation let through."""

    received: list[ComputerUseArgs] = field(default_factory=list)

    async def handle(self, args: ComputerUseArgs, meta: object, connection: object) -> Outcome:
        self.received.append(args)
        return Outcome(ComputerUseResult(status="ok", message="arguments accepted"))


def walk(schema: Schema) -> Iterator[tuple[str, Schema, bool]]:
    """(path, subschema, is a property) for every property of the schema at every level, its array items
    (`action.values[]`) and each branch of a union (`assertion.expected|1`); each `$defs` entry is entered once."""
    defs, entered = schema.get("$defs", {}), set()

    def visit(path: str, node: Schema) -> Iterator[tuple[str, Schema, bool]]:
        ref = node.get("$ref", "").removeprefix("#/$defs/")
        if ref:
            if ref in entered:
                return
            entered.add(ref)
            node = defs[ref]
        for name, prop in node.get("properties", {}).items():
            where = f"{path}.{name}" if path else name
            yield where, prop, True
            yield from visit(where, prop)
        if "items" in node:
            yield f"{path}[]", node["items"], False
            yield from visit(f"{path}[]", node["items"])
        for number, branch in enumerate(node.get("anyOf", [])):
            yield f"{path}|{number}", branch, False
            yield from visit(f"{path}|{number}", branch)

    yield from visit("", schema)


def gaps(schema: Schema) -> list[str]:
    """Every property without a description, string without `maxLength` (enums aside), array without `maxItems`."""
    found = []
    for path, node, is_property in walk(schema):
        if is_property and not node.get("description"):
            found.append(f"{path}: no description")
        if node.get("type") == "string" and "enum" not in node and "maxLength" not in node:
            found.append(f"{path}: a string without maxLength")
        if node.get("type") == "array" and "maxItems" not in node:
            found.append(f"{path}: an array without maxItems")
    return found


def bounds(schema: Schema) -> dict[str, tuple[str, int]]:
    """path -> (keyword, limit) for every bound the schema publishes; a union branch's is its property's."""
    return {
        path.split("|")[0]: (keyword, node[keyword])
        for path, node, _ in walk(schema)
        for keyword in LIMITS
        if keyword in node
    }


# -- at the bound and one past it ------------------------------------------------------------------------------------


def act(**action: Any) -> dict[str, Any]:
    return {"command": "act", "computer_session_id": "s1", "frame_id": "f1", "action": action}


def verify(**assertion: Any) -> dict[str, Any]:
    return {"command": "verify", "computer_session_id": "s1", "assertion": assertion}


def padded(start: str) -> Callable[[int], str]:
    """Strings of a given length that begin with `start` (a valid URL, key...) and are padded with `x`."""
    return lambda size: start.ljust(size, "x")


PLAIN = padded("")


LEAF = {"type": "text_present", "text": "Saved"}


@dataclass(frozen=True)
class Example:
    """A call that is valid but for the one field, and a value of that field of a given size (length, items, value)."""

    call: Callable[[Any], dict[str, Any]]
    sized: Callable[[int], Any] = PLAIN


EXAMPLES: dict[str, Example] = {
    "page": Example(lambda v: {"command": "observe", "page": v}),
    "offset": Example(lambda v: {"command": "observe", "page": "left", "offset": v}, lambda n: n),
    "computer_session_id": Example(lambda v: {"command": "observe", "computer_session_id": v}),
    "query": Example(lambda v: {"command": "observe", "page": "left", "query": v}),
    "within": Example(lambda v: {"command": "observe", "computer_session_id": "s1", "within": v}),
    "frame_id": Example(lambda v: {**act(type="click", ref="e1"), "frame_id": v}),
    "action.ref": Example(lambda v: act(type="click", ref=v)),
    "action.text": Example(lambda v: act(type="type", ref="e1", text=v)),
    "action.key": Example(lambda v: act(type="press", key=v), padded("Control+Shift+Alt+Meta+ArrowRight")),
    "action.values": Example(lambda v: act(type="select", ref="e1", values=v), lambda n: ["v"] * n),
    "action.values[]": Example(lambda v: act(type="select", ref="e1", values=[v])),
    "action.url": Example(lambda v: act(type="navigate", url=v), padded("https://example.test/")),
    "assertion.pattern": Example(lambda v: verify(type="title_matches", pattern=v)),
    "assertion.text": Example(lambda v: verify(type="text_present", text=v)),
    "assertion.ref": Example(lambda v: verify(type="element_state", ref=v, state="visible", expected=True)),
    "assertion.role": Example(lambda v: verify(type="element_count", role=v, count=1)),
    "assertion.name": Example(lambda v: verify(type="element_count", role="textbox", name=v, count=1)),
    "assertion.expected": Example(lambda v: verify(type="element_state", ref="e1", state="value", expected=v)),
    "assertion.count": Example(lambda v: verify(type="element_count", role="button", count=v), lambda n: n),
    "assertion.of": Example(lambda v: verify(type="all_of", of=v), lambda n: [LEAF] * n),
}
"""One example call per bounded field. At `minimum`/`maximum` an integer is the bound; past it, one less/more."""

PAST = {"maxLength": 1, "maxItems": 1, "maximum": 1, "minimum": -1}


async def dishonest_bounds(client: Client, service: ArgumentsOnly) -> list[str]:
    """Every published bound the server does not enforce as published: a value at it refused, or one past it
    accepted (or refused without naming the field); and every bound with no example call here."""
    (tool,) = (await client.list_tools()).tools
    found = []
    for path, (keyword, limit) in bounds(tool.input_schema).items():
        example = EXAMPLES.get(path)
        if example is None:
            found.append(f"{path}: {keyword} {limit} is published, but EXAMPLES has no call to check it with")
            continue
        for size, accept in ((limit, True), (limit + PAST[keyword], False)):
            service.received.clear()
            answer = await client.call_tool(TOOL, example.call(example.sized(size)))
            result = ComputerUseResult.model_validate(answer.structured_content)
            past = f"{path}: a value past {keyword} {limit}"
            if accept and not service.received:
                found.append(f"{path}: a value at {keyword} {limit} was refused: {result.message}")
            elif not accept and service.received:
                found.append(f"{past} was accepted")
            elif not accept and result.reason_code != "invalid_arguments":
                found.append(f"{past} was answered {result.reason_code}, not invalid_arguments")
            elif not accept and path.replace("[]", ".0") not in result.message:  # the location, as `explain` writes it
                found.append(f"{past} was refused without naming it: {result.message}")
    return found


async def schema_of_server() -> Schema:
    async with Client(build_server(ArgumentsOnly())) as client:  # type: ignore[arg-type]
        (tool,) = (await client.list_tools()).tools
    return tool.input_schema


async def bound_findings() -> list[str]:
    service = ArgumentsOnly()
    async with Client(build_server(service)) as client:  # type: ignore[arg-type]
        return await dishonest_bounds(client, service)


# -- proofs --------------------------------------------------------------------------------------------------------


@pytest.mark.req("protocol:schema-described-bounded")
async def test_every_field_of_the_tool_schema_is_described_and_every_string_and_array_is_bounded() -> None:
    schema = await schema_of_server()
    assert gaps(schema) == []
    fields = [node for _, node, is_property in walk(schema) if is_property]
    sized = [node for _, node, _ in walk(schema) if node.get("type") in ("string", "array") and "enum" not in node]
    record_cost(
        "tool-schema",
        {
            "fields": len(fields),
            "described": sum(1 for node in fields if node.get("description")),
            "strings_and_arrays": len(sized),
            "bounds_published": len(bounds(schema)),
        },
    )


@pytest.mark.req("bounds:published")
async def test_a_value_at_every_published_bound_passes_and_one_past_it_is_invalid_arguments_before_the_service() -> (
    None
):
    assert await bound_findings() == []


# -- negative controls: doctored models --------------------------------------------------------------------------


class UndescribedAction(Action):
    """Broken: a ref with neither description nor bound, and a values list of unbounded length and items."""

    ref: str | None = None
    values: list[str] | None = Field(None, description="select: option values or labels.")


class DishonestAction(Action):
    """Broken: a ref limit published but not enforced, and a text limit enforced one short of the published one."""

    ref: str | None = Field(None, description="A ref.", json_schema_extra={"maxLength": MAX_SHORT})
    text: str | None = Field(None, max_length=MAX_TEXT - 1, json_schema_extra={"maxLength": MAX_TEXT})


class DishonestArgs(ComputerUseArgs):
    """Validates an action as `DishonestAction` (the adapter's one validation of the arguments)."""

    action: DishonestAction | None = None


@pytest.mark.negative_control
@pytest.mark.req("protocol:schema-described-bounded")
async def test_the_schema_check_names_a_field_without_description_a_string_and_an_array_without_bounds(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(server_module, "Action", UndescribedAction)
    assert gaps(await schema_of_server()) == [
        "action.ref: no description",
        "action.ref: a string without maxLength",
        "action.values: an array without maxItems",
        "action.values[]: a string without maxLength",
    ]


@pytest.mark.negative_control
@pytest.mark.req("bounds:published")
async def test_the_bound_check_names_a_bound_published_but_not_enforced_and_one_enforced_below_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(server_module, "Action", DishonestAction)  # what the tool publishes
    monkeypatch.setattr(adapter_module, "ComputerUseArgs", DishonestArgs)  # what the adapter enforces
    assert await bound_findings() == [
        f"action.ref: a value past maxLength {MAX_SHORT} was accepted",
        f"action.text: a value at maxLength {MAX_TEXT} was refused: "
        f"action.text: String should have at most {MAX_TEXT - 1} characters",
    ]


@pytest.mark.negative_control
@pytest.mark.req("bounds:published")
async def test_the_bound_check_names_a_bound_it_has_no_example_call_for(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(EXAMPLES, "assertion.role")
    assert await bound_findings() == [
        f"assertion.role: maxLength {MAX_SHORT} is published, but EXAMPLES has no call to check it with"
    ]
