"""Fixtures for the lab's self-tests: scripted workload clients that connect through the tap."""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import aiohttp
import pytest

from lab.cdp import CDPClient
from lab.tap import BROWSER, CDPTap
from lab.workspace import LabPage


async def browser_ws_url(http_endpoint: str) -> str:
    async with aiohttp.ClientSession() as http, http.get(http_endpoint + "/json/version") as response:
        return (await response.json())["webSocketDebuggerUrl"]


class Workload:
    """A scripted CDP client that counts, on its own, every call it makes and which target it is for.

    This count is independent of the tap's session tracking: the script says which page it means.
    """

    def __init__(self, client: CDPClient) -> None:
        self.client = client
        self.expected: dict[str, Counter[str]] = {BROWSER: Counter({"HTTP /json/version": 1})}

    def count(self, target: str, method: str) -> None:
        self.expected.setdefault(target, Counter())[method] += 1

    async def send(
        self, target: str, method: str, params: dict[str, Any] | None = None, session: str | None = None
    ) -> dict[str, Any]:
        self.count(target, method)
        return await self.client.send(method, params, session_id=session)

    async def attach(self, page: LabPage) -> str:
        result = await self.send(page.target_id, "Target.attachToTarget", {"targetId": page.target_id, "flatten": True})
        return result["sessionId"]


Connect = Callable[[str], Awaitable[Workload]]


@pytest.fixture
async def through_tap(tap: CDPTap) -> AsyncIterator[Connect]:
    """`await through_tap(label)`: a Workload on a browser-level CDP connection via the tap; closed after."""
    clients: list[CDPClient] = []

    async def connect(label: str) -> Workload:
        client = await CDPClient.connect(await browser_ws_url(await tap.endpoint(label)))
        clients.append(client)
        return Workload(client)

    yield connect
    for client in clients:
        await client.close()
