"""A real third-party client against the installed app: the MCP Inspector CLI on `http://127.0.0.1:18100/mcp`
sees exactly one tool and, having no token (only the app that owns the chat mints them), gets `invalid_capability`
— before any CDP call reaches a Page.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from lab.cdp import CDPClient
from lab.tap import CDPTap
from suites.installed.conftest import MCP_URL, ROOT, AppProcess, Installed, tidy_windows
from suites.installed.taskset import LABEL

pytestmark = pytest.mark.starts_early

INSPECTOR = ROOT / "backends" / "node_modules" / ".bin" / "mcp-inspector"
UPSTREAM = ROOT / "backends" / "node_modules" / ".bin" / "playwright-mcp"
INSPECTOR_TIMEOUT = 90.0
TOOL_ERROR = 5
"""The Inspector CLI's exit status when the tool answered `isError`."""


def assert_only_computer_use(listed: dict) -> None:
    names = [tool["name"] for tool in listed["tools"]]
    assert names == ["computer_use"], f"tools/list shows {names}"


async def inspector(*args: str, tmp_path: Path, exit_code: int = 0) -> dict:
    """Run the Inspector CLI (its own HOME and temp dir) and return the JSON result it wrote."""
    output = tmp_path / "inspector-result.json"
    output.unlink(missing_ok=True)
    process = await asyncio.create_subprocess_exec(
        str(INSPECTOR), "--cli", "--format", "json", "--output", str(output), *args,
        env={**os.environ, "HOME": str(tmp_path), "TMPDIR": str(tmp_path)},
        cwd=str(tmp_path),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        _, err = await asyncio.wait_for(process.communicate(), INSPECTOR_TIMEOUT)
    except TimeoutError:
        process.kill()
        await process.wait()
        raise AssertionError(f"the Inspector CLI did not finish within {INSPECTOR_TIMEOUT:g}s") from None
    assert process.returncode == exit_code, err.decode()[-2000:]
    return json.loads(output.read_text(encoding="utf-8"))


@pytest.fixture
async def app(installed: Installed, tap: CDPTap, lab_cdp: CDPClient, tmp_path: Path) -> AsyncIterator[AppProcess]:
    """The installed app on 18100 (no script: nobody talks to it but the Inspector)."""
    async with tidy_windows(lab_cdp):
        started = await AppProcess.start(
            installed, cdp_endpoint=await tap.endpoint(LABEL), config_dir=tmp_path / "config", log=tmp_path / "app.log"
        )
        try:
            yield started
        finally:
            if started.process.returncode is None:
                await started.interrupt()
            await started.kill()


@pytest.mark.req("protocol:third-party-client", "protocol:one-tool", "capability:missing", "app:launch")
async def test_the_mcp_inspector_cli_sees_one_tool_on_the_installed_app_and_is_refused_without_a_token(
    app: AppProcess, tap: CDPTap, tmp_path: Path
) -> None:
    listed = await inspector(app.mcp_url, "--transport", "http", "--method", "tools/list", tmp_path=tmp_path)
    assert_only_computer_use(listed)
    before = len(tap.records)
    called = await inspector(
        app.mcp_url, "--transport", "http", "--method", "tools/call", "--tool-name", "computer_use",
        "--tool-arg", "command=list_pages", tmp_path=tmp_path, exit_code=TOOL_ERROR,
    )  # fmt: skip
    assert called["isError"] is True
    assert called["structuredContent"]["reason_code"] == "invalid_capability"
    assert called["structuredContent"]["hint"]
    on_pages = [
        r.method for r in tap.records[before:] if r.label == LABEL and r.kind == "command" and r.target != "browser"
    ]
    assert on_pages == [], f"a refused call still reached Pages: {on_pages}"
    assert app.mcp_url == MCP_URL


@pytest.mark.negative_control
@pytest.mark.req("protocol:third-party-client", "protocol:one-tool")
async def test_the_one_tool_check_catches_a_server_that_exposes_upstream_tools(tmp_path: Path) -> None:
    # The broken variant: the Inspector lists the raw upstream @playwright/mcp, which exposes its own tools.
    listed = await inspector(str(UPSTREAM), "--method", "tools/list", tmp_path=tmp_path)
    with pytest.raises(AssertionError, match="tools/list shows"):
        assert_only_computer_use(listed)
