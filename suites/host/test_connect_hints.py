"""A refusal's hint fits the caller. A client through `computer-use connect` never sees a token, so a refused
capability tells it to ask for a grant in the console's MCP clients panel; a host that mints its own tokens is told
about `page_context_token`. Both from the same refusal of the same runtime: a Page outside the grant, a call
without a token."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from fixtures_sites.server import FixtureServer
from host.grants import GRANT_HINT
from runtime.models import ComputerUseResult
from suites.harness import client_in_task
from suites.host.conftest import StartApp
from suites.host.test_connect import asking, grant, open_fixture, result_of
from suites.host.test_connect_boundary import CONNECT, connect_client

pytestmark = [pytest.mark.req("cli:hints"), pytest.mark.starts_early]


def assert_the_hint_speaks_of_grants(refused: ComputerUseResult, text: str) -> None:
    assert refused.reason_code == "invalid_capability", refused
    assert "page_context_token" not in (refused.hint or ""), f"a connect client is told about tokens: {refused.hint}"
    assert refused.hint == GRANT_HINT, refused.hint
    assert "MCP clients panel" in text, f"the text content says another hint: {text}"


async def hint_scenario(
    start_app: StartApp, console_of: Any, fixture_server: FixtureServer, tmp_path: Path, command: tuple[str, ...]
) -> None:
    app = await start_app()
    console = await console_of(app)
    form = await open_fixture(console, fixture_server, "/dom_form/", "left", "Checkout")
    other = await open_fixture(console, fixture_server, "/catalogue/", "right", "")
    with (tmp_path / "connect.stderr").open("w") as errlog:
        async with connect_client(app.config_dir, errlog, command) as client:
            await client.list_tools()
            await grant(console, await asking(console), [form])
            raw = await client.call_tool("computer_use", {"command": "observe", "page": other})
    text = raw.content[0].text if raw.content and raw.content[0].type == "text" else ""
    assert_the_hint_speaks_of_grants(result_of(raw), text)
    async with client_in_task(app.runtime.server) as host:  # a host of its own, which forgot its token
        refused = result_of(await host.call_tool("computer_use", {"command": "list_pages"}))
    assert refused.reason_code == "invalid_capability", refused
    assert "page_context_token" in (refused.hint or ""), f"a host is not told about tokens: {refused.hint}"


async def test_a_client_through_connect_is_told_about_grants_and_a_host_about_tokens(
    start_app: StartApp, console_of: Any, fixture_server: FixtureServer, tmp_path: Path
) -> None:
    await hint_scenario(start_app, console_of, fixture_server, tmp_path, CONNECT)


@pytest.mark.negative_control
async def test_the_hint_check_catches_a_connect_that_passes_the_runtime_s_hint_on(
    start_app: StartApp, console_of: Any, fixture_server: FixtureServer, tmp_path: Path
) -> None:
    with pytest.raises(AssertionError, match="a connect client is told about tokens"):
        await hint_scenario(
            start_app, console_of, fixture_server, tmp_path, ("suites.host.connect_variant", "runtime_hints")
        )
