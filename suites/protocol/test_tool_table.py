"""docs/mcp.md stays true to the live server: its tool table against `tools/list`, its reason codes against the
runtime's."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from mcp import Client

from runtime.mcp.server import build_server
from runtime.reasons import ReasonCode

DOC = Path(__file__).resolve().parents[2] / "docs" / "mcp.md"


def _section(name: str) -> list[list[str]]:
    text = DOC.read_text(encoding="utf-8")
    body = re.search(rf"<!-- {name} -->(.*?)<!-- /{name} -->", text, re.S)
    assert body, f"docs/mcp.md has no {name} section"
    rows = [line for line in body.group(1).strip().splitlines() if line.startswith("|")][2:]
    return [[cell.strip() for cell in row.strip("|").split("|")] for row in rows]


class _NoService:
    """tools/list never touches the service; anything else would be a bug this makes loud."""

    sabotage = frozenset()


async def _live_tools() -> list:
    async with Client(build_server(_NoService())) as client:  # type: ignore[arg-type]
        return (await client.list_tools()).tools


@pytest.mark.req("protocol:tool-table")
async def test_the_tool_table_in_docs_matches_live_tools_list() -> None:
    documented = {row[0].strip("`"): row[1:] for row in _section("tool-table")}
    live = {}
    for tool in await _live_tools():
        a = tool.annotations
        flags = [str(v).lower() for v in (a.read_only_hint, a.destructive_hint, a.idempotent_hint, a.open_world_hint)]
        params = ", ".join(tool.input_schema["properties"])
        live[tool.name] = [tool.title or "", *flags, params]
    assert documented == live


@pytest.mark.req("protocol:tool-table")
def test_the_reason_codes_in_docs_are_exactly_the_runtimes() -> None:
    assert [row[0].strip("`") for row in _section("reason-codes")] == [code.value for code in ReasonCode]


@pytest.mark.negative_control
@pytest.mark.req("protocol:tool-table")
async def test_the_table_check_catches_a_tool_the_docs_do_not_list() -> None:
    class Leaky(_NoService):
        sabotage = frozenset({"expose_upstream_tools"})

    async with Client(build_server(Leaky())) as client:  # type: ignore[arg-type]
        names = {tool.name for tool in (await client.list_tools()).tools}
    documented = {row[0].strip("`") for row in _section("tool-table")}
    assert names != documented
