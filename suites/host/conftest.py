"""Fixtures for the host app's suites: the app started in-process on the lab's Chromium (its runtime behind the tap),
and the console driven the way a person would, through the lab's own CDP connection.

The lab reads and clicks the console's DOM with its own hands (`Runtime.evaluate` on a session of its own, never
through the tap), so the tap counts only what the app and its runtime do. Waits are events: the app's event log for
what the app decided, a MutationObserver in the console page (bounded) for what the console shows.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from host.app import AppConfig, HostApp, HostParts
from lab.cdp import CDPClient
from lab.tap import CDPTap

EVENT_TIMEOUT = 60.0
"""Seconds a test waits for the app to tell the console something (a turn may start a backend)."""

DOM_TIMEOUT = 30.0

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


@dataclass
class Console:
    """The console Page, seen and used through the lab's hands."""

    lab_cdp: CDPClient
    session: str
    target: str

    async def evaluate(self, expression: str, *, timeout: float = 10.0) -> Any:
        result = await self.lab_cdp.send(
            "Runtime.evaluate",
            {"expression": expression, "awaitPromise": True, "returnByValue": True},
            session_id=self.session,
            timeout=timeout,
        )
        if "exceptionDetails" in result:
            details = result["exceptionDetails"]
            raise AssertionError(details.get("exception", {}).get("description") or details.get("text"))
        return result["result"].get("value")

    async def until(self, condition: str, timeout: float = DOM_TIMEOUT) -> Any:
        """Wait until the JS expression `condition` is truthy in the console (checked on every DOM change)."""
        script = f"""new Promise((resolve, reject) => {{
            const test = () => {{ try {{ return ({condition}); }} catch (error) {{ return undefined; }} }};
            const now = test();
            if (now) {{ resolve(now); return; }}
            const observer = new MutationObserver(() => {{
                const value = test();
                if (value) {{ observer.disconnect(); clearTimeout(timer); resolve(value); }}
            }});
            observer.observe(document, {{subtree: true, childList: true, attributes: true, characterData: true}});
            const timer = setTimeout(() => {{
                observer.disconnect();
                reject(new Error("the console never showed: " + {json.dumps(condition)}));
            }}, {int(timeout * 1000)});
        }})"""
        return await self.evaluate(script, timeout=timeout + 5)

    async def click(self, selector: str) -> None:
        await self.evaluate(f"document.querySelector({json.dumps(selector)}).click()")

    async def text(self, selector: str) -> str:
        return await self.evaluate(f"document.querySelector({json.dumps(selector)})?.textContent ?? ''")

    async def write(self, text: str) -> None:
        """Put `text` in the message box, as typing would (value and an input event)."""
        await self.evaluate(
            f"""(() => {{ const box = document.getElementById('message'); box.value = {json.dumps(text)};
            box.dispatchEvent(new Event('input', {{bubbles: true}})); }})()"""
        )

    async def tick(self, handle: str) -> None:
        selector = f'#turn-pages input[data-page="{handle}"]'
        await self.until(f"document.querySelector({json.dumps(selector)})")
        box = f"document.querySelector({json.dumps(selector)})"
        await self.evaluate(f"{box}.checked || {box}.click()")

    async def send(self, text: str, pages: list[str]) -> None:
        """Write, tick `pages`, press Send; with no Page ticked, also answer the console's warning with "Send
        without a Page" (the console sends nothing until then)."""
        await self.write(text)
        for handle in pages:
            await self.tick(handle)
        await self.click("#send")
        if not await self.evaluate("document.querySelectorAll('#turn-pages input[data-page]:checked').length"):
            await self.until("document.querySelector('#notice button.send-anyway')")
            await self.click("#notice button.send-anyway")

    async def open_url(self, url: str, placement: str) -> str:
        """Open `url` through the console's form; returns the new Page's handle once the Pages list shows it."""
        before = await self.evaluate("[...document.querySelectorAll('#pages li.page')].map(li => li.dataset.page)")
        await self.evaluate(
            f"""(() => {{ document.getElementById('open-url').value = {json.dumps(url)};
            document.getElementById('open-placement').value = {json.dumps(placement)};
            document.getElementById('open').click(); }})()"""
        )
        known = json.dumps(before)
        return await self.until(
            f"[...document.querySelectorAll('#pages li.page')].map(li => li.dataset.page)"
            f".find(handle => !{known}.includes(handle))"
        )


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
async def console_of(lab_cdp: CDPClient) -> AsyncIterator[Callable[[HostApp], Awaitable[Console]]]:
    """`await console_of(app)`: the lab's own session on the app's console Page."""
    sessions: list[str] = []

    async def attach(app: HostApp) -> Console:
        assert app.chat_page is not None, "the app did not open its console"
        target = app.chat_page.cdp_target_id
        attached = await lab_cdp.send("Target.attachToTarget", {"targetId": target, "flatten": True})
        sessions.append(attached["sessionId"])
        console = Console(lab_cdp, attached["sessionId"], target)
        await console.until("document.body.dataset.connection === 'live'")
        return console

    yield attach
    for session in sessions:
        with contextlib.suppress(Exception):  # the console may be closed already (by the test or the app)
            await lab_cdp.send("Target.detachFromTarget", {"sessionId": session})
