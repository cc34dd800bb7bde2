"""The relay room: each client's own upstream connection, its answers under its own ids, the page endpoint, a
malformed frame and the gateway's close.

Pages A, B and C are open; the gateway is bound to A and connects upstream through the tap, so `tap.by_target()`
counts every command that reached Chromium because of the gateway or a client behind it. The isolation check is
always the same: 0 commands on B and C.
"""

from __future__ import annotations

import asyncio
import json

import aiohttp
import pytest

from lab.cdp import CDPClient, CDPError
from lab.tap import CDPTap
from suites.gateway.conftest import (
    Gateways,
    Pages,
    attach,
    browser_client,
    get_json,
    untouched,
)


@pytest.mark.req("gateway:page-endpoint")
async def test_the_page_endpoint_serves_only_the_bound_page(
    tap: CDPTap, make_gateway: Gateways, three_pages: Pages, clients: list[CDPClient]
) -> None:
    a, b, c = three_pages
    gateway = await make_gateway(a)
    [listed] = (await get_json(gateway.url, "/json/list"))[1]
    page_client = await CDPClient.connect(listed["webSocketDebuggerUrl"])
    clients.append(page_client)
    href = await page_client.send("Runtime.evaluate", {"expression": "location.pathname", "returnByValue": True})
    assert href["result"]["value"] == "/dom_form/"
    with pytest.raises(CDPError, match=r"computer_use gateway: Target\.createTarget"):
        await page_client.send("Target.createTarget", {"url": "about:blank"})
    with pytest.raises(aiohttp.WSServerHandshakeError) as refused:
        clients.append(await CDPClient.connect(listed["webSocketDebuggerUrl"].replace(a.target_id, b.target_id)))
    assert refused.value.status == 403

    assert tap.count(target=a.target_id, method="Runtime.evaluate") == 1
    untouched(tap, b, c)


@pytest.mark.req("gateway:page-endpoint")
async def test_answers_reach_the_client_under_its_own_ids_whole_whether_the_gateway_reads_them_or_not(
    tap: CDPTap, make_gateway: Gateways, three_pages: Pages
) -> None:
    """Answers the gateway does not read pass unparsed with only the id replaced; ids far from the gateway's own
    upstream ids (which count from 1) show the replacement, and a megabyte of tricky text shows nothing else moved."""
    a, b, c = three_pages
    gateway = await make_gateway(a)
    [listed] = (await get_json(gateway.url, "/json/list"))[1]
    text = '"id":1,"result":' + '\u00e9\\"x' * 250_000
    commands = {
        9001: ("Runtime.evaluate", {"expression": json.dumps(text), "returnByValue": True}),
        9002: ("Runtime.callFunctionOn", {"objectId": "no-such-object", "functionDeclaration": "function () {}"}),
        9003: ("Page.getFrameTree", {}),  # an answer the gateway reads (the bound page's document)
    }
    async with aiohttp.ClientSession() as http, http.ws_connect(listed["webSocketDebuggerUrl"], max_msg_size=0) as ws:
        for command_id, (method, params) in commands.items():
            await ws.send_str(json.dumps({"id": command_id, "method": method, "params": params}))
        answers = {}
        while len(answers) < len(commands):
            message = json.loads((await ws.receive(timeout=10)).data)
            answers[message["id"]] = message
    assert sorted(answers) == sorted(commands)
    assert answers[9001]["result"]["result"]["value"] == text
    assert "error" in answers[9002]
    assert answers[9003]["result"]["frameTree"]["frame"]["url"].endswith("/dom_form/")
    untouched(tap, b, c)


@pytest.mark.req("gateway:malformed-frame")
async def test_a_malformed_frame_closes_only_that_client_with_a_reason(
    tap: CDPTap, make_gateway: Gateways, three_pages: Pages, clients: list[CDPClient]
) -> None:
    a, b, c = three_pages
    gateway = await make_gateway(a)
    healthy = await browser_client(gateway.url)
    clients.append(healthy)
    version = (await get_json(gateway.url, "/json/version"))[1]
    async with aiohttp.ClientSession() as http, http.ws_connect(version["webSocketDebuggerUrl"]) as ws:
        await ws.send_str('{"method": "Runtime.evaluate"}')
        closing = await ws.receive(timeout=5)
        assert closing.type in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSED)
        assert ws.close_code == aiohttp.WSCloseCode.UNSUPPORTED_DATA
    [refusal] = gateway.refusals
    assert (refusal.method, refusal.reason) == ("(malformed frame)", "a command needs an integer id")
    assert (await healthy.send("Browser.getVersion"))["product"]
    untouched(tap, a, b, c)


@pytest.mark.req("gateway:close")
async def test_closing_the_gateway_closes_every_client_connection(
    tap: CDPTap, make_gateway: Gateways, three_pages: Pages, clients: list[CDPClient]
) -> None:
    a, _, _ = three_pages
    gateway = await make_gateway(a)
    browser_level = await browser_client(gateway.url)
    [listed] = (await get_json(gateway.url, "/json/list"))[1]
    page_level = await CDPClient.connect(listed["webSocketDebuggerUrl"])
    clients.extend([browser_level, page_level])
    await attach(browser_level, a)

    await gateway.close()
    await asyncio.wait_for(browser_level.closed.wait(), 5)
    await asyncio.wait_for(page_level.closed.wait(), 5)
    with pytest.raises(aiohttp.ClientError):
        await get_json(gateway.url, "/json/version")
