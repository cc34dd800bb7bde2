"""Fixtures for the host app's suites: the app started in-process on the lab's Chromium (its runtime behind the tap),
and the console driven the way a person would (`suites/console_driver.py`, the lab's own CDP connection, never
through the tap), so the tap counts only what the app and its runtime do. Waits are events: the app's event log for
what the app decided, the driver's bounded waits in the console page for what the console shows.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from host.app import AppConfig, HostApp, HostParts
from lab.cdp import CDPClient
from lab.tap import CDPTap
from suites.console_driver import ConsoleDriver

EVENT_TIMEOUT = 60.0
"""Seconds a test waits for the app to tell the console something (a turn may start a backend)."""

StartApp = Callable[..., Awaitable[HostApp]]


def write_task(directory: Path, steps: list[dict[str, Any]], name: str = "task.json") -> Path:
    """A script provider task file: one step per model reply."""
    path = directory / name
    path.write_text(json.dumps(steps, indent=2), encoding="utf-8")
    return path


def call(**arguments: Any) -> dict[str, Any]:
    """One `computer_use` call of a script step."""
    return {"name": "computer_use", "arguments": arguments}


async def until_event(app: HostApp, start: int, predicate: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
    """The first event at or after index `start` of the app's event log that satisfies `predicate` (bounded).

    Take `start = app.events.next_id` before the action that should cause the event: nothing is missed."""
    async with asyncio.timeout(EVENT_TIMEOUT):
        async for _, raw in app.events.follow(start):
            event = json.loads(raw)
            if predicate(event):
                return event
    raise AssertionError("the app's event log closed before the event came")


def turn_ended(event: dict[str, Any]) -> bool:
    return event == {"type": "turn", "state": "idle"}


@pytest.fixture
async def start_app(tap: CDPTap, tmp_path: Path) -> AsyncIterator[StartApp]:
    """`await start_app(parts, **config)`: the app on the lab's Chromium (behind the tap, label "runtime"), MCP and
    console on free ports, settings in a temporary config dir, the script provider unless told otherwise, made of
    `parts` (a negative control's broken one; None: the app's own); closed after."""
    apps: list[HostApp] = []

    async def start(parts: HostParts | None = None, **overrides: Any) -> HostApp:
        options: dict[str, Any] = {
            "cdp_endpoint": await tap.endpoint("runtime"),
            "mcp_port": 0,
            "console_port": 0,
            "provider": "script",
            "config_dir": tmp_path / "config",
            **overrides,
        }
        app = await HostApp.start(AppConfig(**options), parts)
        apps.append(app)
        return app

    yield start
    for app in reversed(apps):
        await app.close()


@pytest.fixture
async def console_of(lab_cdp: CDPClient) -> AsyncIterator[Callable[[HostApp], Awaitable[ConsoleDriver]]]:
    """`await console_of(app)`: the lab's own session on the app's console Page, once the console is live."""
    drivers: list[ConsoleDriver] = []

    async def attach(app: HostApp) -> ConsoleDriver:
        assert app.chat_page is not None, "the app did not open its console"
        driver = await ConsoleDriver.attach(lab_cdp, app.console_url, target_id=app.chat_page.cdp_target_id)
        drivers.append(driver)
        return driver

    yield attach
    for driver in drivers:
        await driver.detach()
