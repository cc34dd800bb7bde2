"""Non-foreground execution: with A covered, minimized or merely unfocused, the act still lands on A and no focus or
foreground call reaches any Page.

Each claim rests on a fact, not on the set-up. The lab reads A's `document.visibilityState` and
`document.hasFocus()` through its own CDP connection (one `Runtime.evaluate`; never the runtime's connection, never
a focus call) before the act and while the answer to the act's write is held, and the write's ledger row carries
the nonce of the Page that sent it. Measured on headless Chromium 156:
- a minimized window is `hidden` and unfocused; a covered one stays `visible` (headless computes no occlusion, and
  the lab keeps occluded windows rendering as a host app does), so "covered" claims geometry (a window opened later
  spans all of A) and no focus, not hidden-ness;
- the first CDP `Input.*` event on a Page (even a `mouseMoved`) gives its document focus without raising or
  activating its window, so the focus half of a precondition holds before the act only; during it the lab checks
  the window half (still minimized and hidden, still covered, still shown), and the tap that no focus call was made.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass

import pytest
from aiohttp import web

from fixtures_sites.server import DEFAULT_WAIT, FixtureServer
from lab.tap import CDPTap
from lab.workspace import LabPage, PageState, Workspace
from runtime.models import ComputerUseResult
from suites.harness import Agent, Desk, ref_of

SUBMIT = "/dom_form/submit"
HOLD_LIMIT = 30.0
NONCE = "document.querySelector('#shipping [name=page_nonce]')?.value ?? null"


@dataclass(frozen=True)
class Seen:
    """A Page's state as the lab read it through its own connection."""

    page: PageState
    window: str  # Chromium's window state: "normal", "minimized", …
    covered_by: tuple[str, ...]  # windows opened after it that span all of it


async def look(workspace: Workspace, page: LabPage) -> Seen:
    return Seen(
        await workspace.page_state(page),
        (await workspace.window(page)).state,
        tuple(p.name for p in await workspace.covered_by(page)),
    )


def check(how: str, seen: Seen, when: str, *, focus: bool) -> None:
    """The precondition `how` names, on what the lab read; `focus=False` leaves out the focus half (see the module)."""
    if how == "covered":
        assert seen.covered_by, f"{when}: no window covers the Page: {seen}"
        assert (seen.window, seen.page.visibility) == ("normal", "visible"), f"{when}: not a shown window: {seen}"
    elif how == "minimized":
        assert seen.window == "minimized", f"{when}: the window is not minimized: {seen}"
        assert seen.page.visibility == "hidden", f"{when}: the minimized Page is not hidden: {seen}"
    else:
        assert not seen.covered_by, f"{when}: the unfocused Page is covered: {seen}"
        assert (seen.window, seen.page.visibility) == ("normal", "visible"), f"{when}: not a shown window: {seen}"
    if focus:
        assert not seen.page.focused, f"{when}: the Page has focus: {seen}"


HOW = ("covered", "minimized", "unfocused")


def assert_no_focus_calls(tap: CDPTap) -> None:
    focus = tap.count(category="focus")
    assert focus == 0, f"{focus} focus/foreground calls: {[r.method for r in tap.records if r.category == 'focus']}"


async def nonces(workspace: Workspace) -> dict[str, str]:
    """The nonce each open form Page carries, read from its DOM by the lab: nonce -> Page name."""
    found = {name: await workspace.evaluate(page, NONCE) for name, page in workspace.pages.items()}
    return {nonce: name for name, nonce in found.items() if nonce}


def assert_written_by(server: FixtureServer, pages: dict[str, str], name: str) -> None:
    """Exactly one write, and its ledger row carries the nonce of Page `name`."""
    writers = [pages.get(row.page_nonce, f"unknown nonce {row.page_nonce!r}") for row in server.ledger.writes(SUBMIT)]
    assert writers == [name], f"writes to {SUBMIT} came from {writers}, expected exactly one from {name}"


class HeldAnswer:
    """The write's answer, started and then held: headers and the page's head go out, the rest waits for `release()`.

    Not the fixture server's `stall()`: that holds the whole answer, and Chromium suspends DevTools messages to a
    frame whose navigation awaits its response, so nothing could read the Page until the act was over (measured:
    `Runtime.evaluate` gets no answer until release). Committed but still loading, the Page answers, and its act
    has reached the server and not finished loading.
    """

    def __init__(self) -> None:
        self.arrived = asyncio.Event()
        self._go = asyncio.Event()

    async def handler(self, request: web.Request) -> web.StreamResponse:
        self.arrived.set()
        answer = web.StreamResponse(headers={"Content-Type": "text/html; charset=utf-8"})
        await answer.prepare(request)
        await answer.write(b"<!doctype html><title>Order details saved</title><h1>Order details saved</h1>")
        with contextlib.suppress(TimeoutError):  # a test that never releases still ends, bounded
            await asyncio.wait_for(self._go.wait(), HOLD_LIMIT)
        await answer.write(b"<p role=status>Thanks, we saved your details.</p>")
        await answer.write_eof()
        return answer

    def release(self) -> None:
        self._go.set()


async def submit_watched(
    agent: Agent, desk: Desk, server: FixtureServer, how: str, relation: str = "left", watched: str = "A"
) -> ComputerUseResult:
    """Fill and submit the form on the Page at `relation`, checking Page `watched` before the act and while the
    answer to its write is held (the act reached the server and its navigation has not finished loading)."""
    page = desk.labs[watched]
    check(how, await look(desk.workspace, page), "before the act", focus=True)
    seen = await agent.observe(page=relation)
    typed = await agent.act(seen, type="type", ref=ref_of(seen, '"Full name"'), text="Katherine Johnson")
    assert typed.status == "ok", typed
    held = HeldAnswer()
    server.set_route(SUBMIT, held.handler, method="POST", write=True)
    click = asyncio.create_task(agent.act(typed, type="click", ref=ref_of(typed, '"Save and continue"')))
    arrived = asyncio.create_task(asyncio.wait_for(held.arrived.wait(), DEFAULT_WAIT))
    try:
        await asyncio.wait({arrived, click}, return_when=asyncio.FIRST_COMPLETED)
        if not arrived.done():
            raise AssertionError(f"the act ended before its write reached the server: {click.result()}")
        arrived.result()
        check(how, await look(desk.workspace, page), "during the act", focus=False)
        assert await desk.workspace.evaluate(page, "document.readyState") == "loading", "the answer was not held"
    finally:
        arrived.cancel()
        held.release()
        done = await click
    return done


MINIMIZED_NEEDS_FRAMES = pytest.mark.xfail_on(
    "playwright_mcp",
    "chrome_devtools_mcp",
    reason="headless Chromium stops animation frames in a minimized window, and the actionability checks of both "
    "upstreams (Playwright's; Puppeteer's locator in chrome-devtools-mcp: stable bounding box, in viewport) wait for "
    "one; only focus emulation (a focus call the gateway absorbs) would restart them",
)


@pytest.mark.parametrize(
    "how",
    [
        pytest.param("covered", marks=pytest.mark.req("foreground:occluded")),
        pytest.param("minimized", marks=[MINIMIZED_NEEDS_FRAMES, pytest.mark.req("foreground:minimized")]),
        pytest.param("unfocused", marks=pytest.mark.req("foreground:unfocused")),
    ],
)
@pytest.mark.req(
    "foreground:no-focus-calls", "foreground:preconditions-checked", "writes:at-most-one", "writes:page-attributed"
)
async def test_an_act_lands_on_a_covered_minimized_or_unfocused_page_without_any_focus_call(
    one_page_desk, agent: Agent, tap: CDPTap, fixture_server: FixtureServer, how: str
) -> None:
    desk: Desk = await one_page_desk("/dom_form/")
    a = desk.labs["A"]
    if how == "covered":
        await desk.workspace.occlude(a, fixture_server.url("/chat/"))
    elif how == "minimized":
        assert (await desk.workspace.minimize(a)).state == "minimized"
    else:
        await desk.workspace.open("newer", fixture_server.url("/dom_form/"), desk.workspace.column(2, 3))
    pages = await nonces(desk.workspace)
    submitted = fixture_server.wait_for_request(SUBMIT)

    done = await submit_watched(agent, desk, fixture_server, how)

    assert done.status == "ok", done
    assert (await submitted).form()["full_name"] == "Katherine Johnson"
    assert_written_by(fixture_server, pages, "A")
    assert_no_focus_calls(tap)
    check(how, await look(desk.workspace, a), "after the act", focus=False)


@pytest.mark.negative_control
@pytest.mark.parametrize("how", HOW)
@pytest.mark.req("foreground:preconditions-checked")
async def test_each_precondition_check_fails_on_a_page_where_it_does_not_hold(
    workspace: Workspace, fixture_server: FixtureServer, how: str
) -> None:
    """A plain window beside the chat is not covered and not minimized; the shell activates it to make it focused."""
    a = await workspace.open("A", fixture_server.url("/dom_form/"), workspace.column(0, 3))
    await workspace.open("chat", fixture_server.url("/chat/"), workspace.column(1, 3))
    if how == "unfocused":
        assert await workspace.focus(a) is True
    with pytest.raises(AssertionError, match="before the act"):
        check(how, await look(workspace, a), "before the act", focus=True)


@pytest.mark.negative_control
@pytest.mark.req("writes:page-attributed")
async def test_the_landed_on_a_check_catches_a_write_from_b(
    one_page_desk, agent: Agent, fixture_server: FixtureServer
) -> None:
    """The same flow with B (the same form, right of the chat) authorized instead: the nonce names B."""
    desk: Desk = await one_page_desk("/dom_form/")
    await desk.open("B", "/dom_form/", desk.workspace.column(2, 3))
    desk.authorize("B")
    pages = await nonces(desk.workspace)

    done = await submit_watched(agent, desk, fixture_server, "unfocused", relation="right", watched="B")

    assert done.status == "ok", done
    assert_written_by(fixture_server, pages, "B")
    with pytest.raises(AssertionError, match=r"came from \['B'\], expected exactly one from A"):
        assert_written_by(fixture_server, pages, "A")


@pytest.mark.negative_control
@pytest.mark.sabotage("bring_to_front")
@pytest.mark.req("foreground:no-focus-calls", "foreground:preconditions-checked")
async def test_the_focus_checks_catch_a_runtime_that_raises_the_page(
    one_page_desk, agent: Agent, tap: CDPTap, fixture_server: FixtureServer
) -> None:
    """The runtime raises A before each act (`Page.bringToFront`): the tap counts the calls."""
    await one_page_desk("/dom_form/")
    await submit_watched(agent, agent.desk, fixture_server, "unfocused")
    with pytest.raises(AssertionError, match="focus/foreground calls"):
        assert_no_focus_calls(tap)
