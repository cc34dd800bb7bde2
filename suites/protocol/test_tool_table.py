"""docs/mcp.md stays true to the live server: its tool, parameter, commands and limits tables against `tools/list`,
its reason codes against the runtime's, and each documented reason code against a place in `runtime/` that emits it.

The comparison is one function per table (live rows, documented rows, a list of differences, each naming what
differs), so the negative controls feed the same functions a doctored `tools/list` or a doctored copy of the docs
and see the difference named: a check that cannot fail proves nothing.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp.types import Tool

from runtime.reasons import ReasonCode
from runtime.transports.mcp.server import TOOL
from suites.harness import tools_only_server
from suites.protocol.test_schema import bounds
from suites.sabotage import expose_upstream_tool

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "mcp.md"
RUNTIME = ROOT / "runtime"
NOT_EMITTED = "not yet emitted"
NONE = "—"
"""What a documented cell says where the schema has nothing (no description)."""
TICKED = re.compile(r"`([^`]+)`")

Rows = dict[str, dict[str, str]]


async def _live_tools() -> list[Tool]:
    async with Client(tools_only_server()) as client:
        return (await client.list_tools()).tools


def documented(text: str, name: str) -> Rows:
    """The rows of the table between `<!-- name -->` markers, keyed by their first cell (backticks stripped)."""
    body = re.search(rf"<!-- {name} -->(.*?)<!-- /{name} -->", text, re.S)
    assert body, f"docs/mcp.md has no {name} section"
    lines = [line for line in body.group(1).strip().splitlines() if line.startswith("|")]
    header, rows = _cells(lines[0]), [_cells(line) for line in lines[2:]]
    return {row[0].strip("`"): dict(zip(header[1:], row[1:], strict=True)) for row in rows}


def _cells(line: str) -> list[str]:
    return [cell.strip() for cell in re.split(r"(?<!\\)\|", line.strip().strip("|"))]


def differences(table: str, live: Rows, docs: Rows) -> list[str]:
    """Every row only one side has, and every cell the two sides disagree on, in words that name it."""
    found = [f"{table}: `{key}` is in tools/list but not in docs/mcp.md" for key in live if key not in docs]
    found += [f"{table}: `{key}` is in docs/mcp.md but not in tools/list" for key in docs if key not in live]
    for key in live.keys() & docs.keys():
        for column, value in live[key].items():
            if docs[key].get(column) != value:
                found.append(
                    f"{table}: `{key}` {column}: docs say {docs[key].get(column)!r}, tools/list says {value!r}"
                )
    return found


# -- the live side ---------------------------------------------------------------------------------------------


def tool_rows(tools: list[Tool]) -> Rows:
    rows = {}
    for tool in tools:
        a = tool.annotations
        flags = (a.read_only_hint, a.destructive_hint, a.idempotent_hint, a.open_world_hint) if a else (None,) * 4
        names = ("read-only", "destructive", "idempotent", "open-world")
        rows[tool.name] = {
            "title": tool.title or "",
            **{name: str(flag).lower() for name, flag in zip(names, flags, strict=True)},
            "parameters": ", ".join(tool.input_schema.get("properties", {})),
        }
    return rows


def _the_tool(tools: list[Tool]) -> Tool:
    return next(tool for tool in tools if tool.name == TOOL)


def json_type(schema: Mapping[str, Any]) -> str:
    """A property's JSON type as the docs write it: `string: a, b` for an enum, `array of X`, `X or Y`."""
    if "$ref" in schema:
        return "object"
    if "anyOf" in schema:
        return " or ".join(json_type(branch) for branch in schema["anyOf"])
    kind = schema.get("type", "?")
    if kind == "array":
        return f"array of {json_type(schema.get('items', {}))}"
    if "enum" in schema:
        return f"{kind}: " + ", ".join(f"`{value}`" for value in schema["enum"])
    return str(kind)


def parameter_rows(tools: list[Tool]) -> Rows:
    """Each parameter of the tool, and each field of an object parameter (`action.text`): type and description."""
    schema = _the_tool(tools).input_schema
    rows = {}
    for name, prop in schema["properties"].items():
        rows[name] = {"type": json_type(prop), "description": prop.get("description", NONE)}
        if "$ref" in prop:
            fields = schema["$defs"][prop["$ref"].removeprefix("#/$defs/")]["properties"]
            for field, sub in fields.items():
                rows[f"{name}.{field}"] = {"type": json_type(sub), "description": sub.get("description", NONE)}
    return rows


def limit_rows(tools: list[Tool]) -> Rows:
    """Each bound the input schema publishes, as the Limits table writes it: `maxLength` 64."""
    return {
        path: {"published": f"`{keyword}` {limit}"}
        for path, (keyword, limit) in bounds(_the_tool(tools).input_schema).items()
    }


def command_differences(tools: list[Tool], docs: Rows) -> list[str]:
    """The commands table lists exactly the tool's commands; for each, `needs` names every parameter tools/list
    describes as that command's (`observe: ...`), and every name in backticks in `needs` or `returns` is a
    parameter, a result field or a value one of them takes."""
    tool = _the_tool(tools)
    params = tool.input_schema["properties"]
    commands = params["command"]["enum"]
    found = [f"commands: `{c}` is in tools/list but not in docs/mcp.md" for c in commands if c not in docs]
    found += [f"commands: `{c}` is in docs/mcp.md but not in tools/list" for c in docs if c not in commands]
    words = _names_in(tool.input_schema) | _names_in(tool.output_schema or {})
    for command, row in docs.items():
        needs = set(TICKED.findall(row.get("needs", "")))
        for name, prop in params.items():
            if prop.get("description", "").startswith(f"{command}:") and name not in needs:
                found.append(f"commands: `{command}` needs does not name `{name}`, which tools/list gives {command}")
        for column in ("needs", "returns"):
            for word in TICKED.findall(row.get(column, "")):
                if re.fullmatch(r"[a-z_]+", word) and word not in words:
                    found.append(f"commands: `{command}` {column} names `{word}`, which tools/list does not have")
    return found


def _names_in(schema: Any) -> set[str]:
    """Every property name and enum value anywhere in a schema."""
    names: set[str] = set()
    if isinstance(schema, dict):
        names |= set(schema.get("properties", {})) | {str(v) for v in schema.get("enum", [])}
        for value in schema.values():
            names |= _names_in(value)
    elif isinstance(schema, list):
        for item in schema:
            names |= _names_in(item)
    return names


# -- reason codes ----------------------------------------------------------------------------------------------


def emitters(source: Path = RUNTIME) -> dict[str, list[str]]:
    """Where the runtime's source produces each reason code: every `ReasonCode.<name>` outside its definition
    (runtime/reasons.py) that is not a comparison (`code is ReasonCode.needs_user` reads a code, it emits none)."""
    sites: dict[str, list[str]] = {}
    for path in sorted(source.rglob("*.py")):
        if path == source / "reasons.py":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        compared = {id(node) for cmp in ast.walk(tree) if isinstance(cmp, ast.Compare) for node in ast.walk(cmp)}
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id == "ReasonCode"
                and id(node) not in compared
            ):
                sites.setdefault(node.attr, []).append(f"{path.relative_to(source.parent)}:{node.lineno}")
    return sites


def reason_code_differences(codes: list[str], docs: Rows, sites: Mapping[str, list[str]]) -> list[str]:
    """docs list exactly `codes`, in order; each is emitted somewhere in runtime/ unless docs say it is not yet,
    and one docs call not yet emitted has no emitter."""
    found = []
    if list(docs) != codes:
        found.append(f"reason codes: docs list {list(docs)}, the runtime has {codes}")
    for code in codes:
        marked = NOT_EMITTED in docs.get(code, {}).get("when", "")
        if not sites.get(code) and not marked:
            found.append(f"reason codes: nothing in runtime/ emits `{code}` and docs do not say it is {NOT_EMITTED}")
        if sites.get(code) and marked:
            found.append(f"reason codes: docs say `{code}` is {NOT_EMITTED}, but {sites[code][0]} emits it")
    return found


def assert_none(found: list[str]) -> None:
    assert not found, "docs/mcp.md differs from the runtime:\n" + "\n".join(found)


def all_differences(tools: list[Tool], text: str) -> list[str]:
    return (
        differences("tools", tool_rows(tools), documented(text, "tool-table"))
        + differences("parameters", parameter_rows(tools), documented(text, "parameter-table"))
        + command_differences(tools, documented(text, "commands"))
        + differences("limits", limit_rows(tools), documented(text, "limits"))
    )


# -- proofs ----------------------------------------------------------------------------------------------------


@pytest.mark.req("protocol:tool-table", "protocol:tool-table-params")
async def test_the_tool_parameter_and_commands_tables_in_docs_match_live_tools_list() -> None:
    assert_none(all_differences(await _live_tools(), DOC.read_text(encoding="utf-8")))


@pytest.mark.req("protocol:tool-table", "protocol:reason-codes-emitted")
def test_the_reason_codes_in_docs_are_exactly_the_runtimes_and_each_is_emitted_or_marked_not_yet() -> None:
    docs = documented(DOC.read_text(encoding="utf-8"), "reason-codes")
    assert_none(reason_code_differences([code.value for code in ReasonCode], docs, emitters()))


# -- negative controls: doctored tools/list ----------------------------------------------------------------------


async def _tools_with_an_extra_tool() -> list[Tool]:
    server = tools_only_server()
    expose_upstream_tool(server)
    async with Client(server) as client:
        return (await client.list_tools()).tools


def _destructive(tool: Tool) -> None:
    tool.annotations.destructive_hint = True  # type: ignore[union-attr]


def _page_described_otherwise(tool: Tool) -> None:
    tool.input_schema["properties"]["page"]["description"] = "observe: any Page at all."


def _offset_as_string(tool: Tool) -> None:
    tool.input_schema["properties"]["offset"]["type"] = "string"


def _action_key_undescribed(tool: Tool) -> None:
    del tool.input_schema["$defs"]["Action"]["properties"]["key"]["description"]


def _action_ref_unbounded(tool: Tool) -> None:
    del tool.input_schema["$defs"]["Action"]["properties"]["ref"]["maxLength"]


def _new_parameter(tool: Tool) -> None:
    tool.input_schema["properties"]["timeout"] = {"type": "number", "description": "observe: seconds to wait."}


def _new_command(tool: Tool) -> None:
    tool.input_schema["properties"]["command"]["enum"].append("screenshot")


DOCTORED_TOOLS: dict[str, tuple[Callable[[Tool], None], str]] = {
    "annotation": (_destructive, r"tools: `computer_use` destructive: docs say 'false', tools/list says 'true'"),
    "description": (_page_described_otherwise, r"parameters: `page` description: .*any Page at all"),
    "type": (_offset_as_string, r"parameters: `offset` type: docs say 'integer', tools/list says 'string'"),
    "nested description": (_action_key_undescribed, r"parameters: `action.key` description: .*'—'"),
    "bound": (_action_ref_unbounded, r"limits: `action.ref` is in docs/mcp.md but not in tools/list"),
    "parameter": (_new_parameter, r"parameters: `timeout` is in tools/list but not in docs/mcp.md"),
    "command": (_new_command, r"commands: `screenshot` is in tools/list but not in docs/mcp.md"),
}


@pytest.mark.negative_control
@pytest.mark.req("protocol:tool-table")
async def test_the_table_check_catches_a_tool_the_docs_do_not_list() -> None:
    tools = await _tools_with_an_extra_tool()
    with pytest.raises(AssertionError, match=r"tools: `browser_snapshot` is in tools/list but not in docs/mcp\.md"):
        assert_none(all_differences(tools, DOC.read_text(encoding="utf-8")))


@pytest.mark.negative_control
@pytest.mark.req("protocol:tool-table", "protocol:tool-table-params")
@pytest.mark.parametrize("change", DOCTORED_TOOLS, ids=str)
async def test_the_table_check_catches_a_doctored_tools_list(change: str) -> None:
    doctor, message = DOCTORED_TOOLS[change]
    tools = [tool.model_copy(deep=True) for tool in await _live_tools()]
    doctor(_the_tool(tools))
    with pytest.raises(AssertionError, match=message):
        assert_none(all_differences(tools, DOC.read_text(encoding="utf-8")))


# -- negative controls: doctored docs ------------------------------------------------------------------------------

DOCTORED_DOCS: dict[str, tuple[str, str, str]] = {
    "annotation": ("| false | true | command,", "| false | false | command,", r"`computer_use` open-world"),
    "description": (
        "| observe: full adds text; visual one screenshot; diagnostics console errors and failed requests. |",
        "| observe: full adds text. |",
        r"parameters: `detail` description: docs say 'observe: full adds text.'",
    ),
    "type": ("| `action.x` | number |", "| `action.x` | integer |", r"parameters: `action.x` type: docs say 'integer'"),
    "missing parameter": (
        "| `frame_id` | string |",
        "| `frame_ident` | string |",
        r"parameters: `frame_id` is in tools/list but not",
    ),
    "command": ("| `verify` |", "| `check` |", r"commands: `check` is in docs/mcp.md but not in tools/list"),
    "command needs": (
        "| `act` | `computer_session_id`, the latest `frame_id`, one `action` |",
        "| `act` | `computer_session_id`, one `action` |",
        r"commands: `act` needs does not name `frame_id`",
    ),
    "limit": (
        "| `maxLength` 33 |",
        "| `maxLength` 64 |",
        r"limits: `action.key` published: docs say '`maxLength` 64', tools/list says '`maxLength` 33'",
    ),
    "command returns": ("`next_offset`;", "`next_page`;", r"commands: `observe` returns names `next_page`"),
}


@pytest.mark.negative_control
@pytest.mark.req("protocol:tool-table", "protocol:tool-table-params")
@pytest.mark.parametrize("change", DOCTORED_DOCS, ids=str)
async def test_the_table_check_catches_a_doctored_table(change: str) -> None:
    old, new, message = DOCTORED_DOCS[change]
    text = DOC.read_text(encoding="utf-8")
    assert text.count(old) == 1, f"the doctoring of {change} must change exactly one place"
    with pytest.raises(AssertionError, match=message):
        assert_none(all_differences(await _live_tools(), text.replace(old, new)))


@pytest.mark.negative_control
@pytest.mark.req("protocol:reason-codes-emitted")
def test_the_reason_code_check_catches_a_documented_code_nothing_emits() -> None:
    text = DOC.read_text(encoding="utf-8")
    added = "| `rate_limited` | too many calls |\n<!-- /reason-codes -->"
    docs = documented(text.replace("<!-- /reason-codes -->", added), "reason-codes")
    codes = [*(code.value for code in ReasonCode), "rate_limited"]  # a runtime that declares it, as docs do
    with pytest.raises(AssertionError, match="nothing in runtime/ emits `rate_limited`"):
        assert_none(reason_code_differences(codes, docs, emitters()))


@pytest.mark.negative_control
@pytest.mark.req("protocol:reason-codes-emitted")
def test_the_reason_code_check_catches_a_code_docs_no_longer_mark_as_not_yet_emitted() -> None:
    docs = documented(DOC.read_text(encoding="utf-8"), "reason-codes")
    unmarked = {code: {"when": row["when"].replace(NOT_EMITTED, "")} for code, row in docs.items()}
    codes = [code.value for code in ReasonCode]
    with pytest.raises(AssertionError, match=f"nothing in runtime/ emits `{ReasonCode.cancelled.value}`"):
        assert_none(reason_code_differences(codes, unmarked, emitters()))


@pytest.mark.negative_control
@pytest.mark.req("protocol:reason-codes-emitted")
def test_the_emitter_scan_does_not_count_a_comparison_as_an_emitter(tmp_path: Path) -> None:
    (tmp_path / "reads.py").write_text("def f(code):\n    return code is ReasonCode.timeout\n", encoding="utf-8")
    (tmp_path / "emits.py").write_text(
        "def g():\n    raise Refusal(ReasonCode.target_lost, 'gone')\n", encoding="utf-8"
    )
    sites = emitters(tmp_path)
    assert set(sites) == {"target_lost"}, sites
