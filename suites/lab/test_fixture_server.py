"""The fixture server's test API, driven by real Chromium: ledger counts, waits registered before acting,
stall routes that hold and release, and a reset that leaves nothing pending."""

from __future__ import annotations

import pytest
from aiohttp import web

from fixtures_sites.server import FixtureServer, ResetError
from lab.workspace import LabPage, Workspace

pytestmark = pytest.mark.req("lab:fixture-server")

SUBMIT = "/dom_form/submit"


def exactly_one_write(server: FixtureServer, path: str) -> None:
    rows = server.ledger.writes(path)
    assert len(rows) == 1, f"{len(rows)} writes to {path}: {rows}"


@pytest.fixture
async def form(workspace: Workspace, fixture_server: FixtureServer) -> LabPage:
    return await workspace.open("form", fixture_server.url("/dom_form/"), workspace.column(0, 2))


@pytest.mark.req("lab:ledger")
async def test_one_form_post_from_the_browser_is_one_ledger_row(
    workspace: Workspace, fixture_server: FixtureServer, form: LabPage
) -> None:
    submitted = fixture_server.wait_for_request(SUBMIT)
    await workspace.evaluate(
        form,
        "document.querySelector('#full_name').value = 'Ada Lovelace';"
        "document.querySelector('#country').value = 'uk';"
        "document.querySelector('#shipping').requestSubmit()",
    )
    request = await submitted

    assert request.form()["full_name"] == "Ada Lovelace"
    assert request.form()["country"] == "uk"
    exactly_one_write(fixture_server, SUBMIT)
    [row] = fixture_server.ledger.writes()
    assert (row.scenario, row.method, row.test_id) == ("dom_form", "POST", fixture_server.ledger.test_id)


@pytest.mark.req("lab:ledger")
async def test_the_ledger_is_read_once_and_empty_after_reset(
    workspace: Workspace, fixture_server: FixtureServer, form: LabPage
) -> None:
    submitted = fixture_server.wait_for_request(SUBMIT)
    await workspace.evaluate(form, "fetch('/dom_form/submit', {method: 'POST', body: 'a=1'}).then(r => r.status)", True)
    await submitted
    assert len(fixture_server.ledger.take()) == 1
    assert fixture_server.ledger.take() == []

    await workspace.evaluate(form, "fetch('/dom_form/submit', {method: 'POST', body: 'a=2'}).then(r => r.status)", True)
    assert len(fixture_server.ledger.writes()) == 1
    fixture_server.reset()
    assert fixture_server.ledger.writes() == []


@pytest.mark.req("lab:ledger")
async def test_pages_load_from_both_origins_and_the_ledger_tells_them_apart(
    workspace: Workspace, fixture_server: FixtureServer
) -> None:
    cross = await workspace.open("cross", fixture_server.url("/dom_form/", cross=True), workspace.column(1, 2))
    assert await workspace.evaluate(cross, "location.origin") == fixture_server.cross_origin
    await workspace.evaluate(cross, "fetch('/dom_form/submit', {method: 'POST', body: 'x'}).then(r => r.ok)", True)
    [row] = fixture_server.ledger.writes()
    assert row.origin == fixture_server.cross_origin.removeprefix("http://")


async def test_a_stall_route_holds_its_answer_until_the_test_releases_it(
    workspace: Workspace, fixture_server: FixtureServer, form: LabPage
) -> None:
    async def never_called(request: web.Request) -> web.Response:
        return web.Response(text="not held")

    fixture_server.set_route("/held", never_called, write=True)
    stall = fixture_server.stall("/held")
    await workspace.evaluate(
        form,
        "window.__settled = false; window.__answer = fetch('/held', {method: 'POST', body: 'w'})"
        ".then(r => r.text()).finally(() => { window.__settled = true; })",
    )
    request = await stall.started()

    assert request.method == "POST"
    assert stall.holding
    exactly_one_write(fixture_server, "/held")  # counted on arrival, while the answer is held
    assert await workspace.evaluate(form, "window.__settled") is False

    stall.release(text="released", content_type="text/plain")
    assert await workspace.evaluate(form, "window.__answer", await_promise=True) == "released"
    assert not stall.holding


async def test_a_wait_registered_before_acting_is_bounded_when_nothing_comes(fixture_server: FixtureServer) -> None:
    waiter = fixture_server.wait_for_request("/never", timeout=0.05)
    with pytest.raises(TimeoutError, match="no request to /never"):
        await waiter


async def test_a_wait_for_the_second_request_resolves_on_the_second_and_not_the_first(
    workspace: Workspace, fixture_server: FixtureServer, form: LabPage
) -> None:
    post = "fetch('/dom_form/submit', {method: 'POST'}).then(r => r.status)"
    first = fixture_server.wait_for_request("/dom_form/submit")
    second = fixture_server.wait_for_request("/dom_form/submit", count=2, timeout=0.05)
    await workspace.evaluate(form, post, await_promise=True)
    await first
    with pytest.raises(TimeoutError, match=r"within 0.05s \(1 of 2 still expected\)"):
        await second  # one request came: the wait for the second still bounds out
    second = fixture_server.wait_for_request("/dom_form/submit", count=2)
    for _ in range(2):
        await workspace.evaluate(form, post, await_promise=True)
    assert (await second).path == "/dom_form/submit"


async def test_reset_rejects_pending_waiters_and_answers_held_requests(
    workspace: Workspace, fixture_server: FixtureServer, form: LabPage
) -> None:
    waiter = fixture_server.wait_for_request("/never")
    stall = fixture_server.stall("/dom_form/submit")
    await workspace.evaluate(form, "window.__held = fetch('/dom_form/submit', {method: 'POST'}).then(r => r.status)")
    await stall.started()

    leftovers = fixture_server.reset()

    assert leftovers == ["waiter for /never", "held answer for /dom_form/submit"]
    with pytest.raises(ResetError):
        await waiter
    assert await workspace.evaluate(form, "window.__held", await_promise=True) == 503


@pytest.mark.negative_control
@pytest.mark.req("lab:ledger")
async def test_the_exactly_once_check_catches_a_page_that_submits_twice(
    workspace: Workspace, fixture_server: FixtureServer, form: LabPage
) -> None:
    double = "Promise.all([1, 2].map(() => fetch('/dom_form/submit', {method: 'POST', body: 'dup'})))"
    await workspace.evaluate(form, double + ".then(rs => rs.length)", await_promise=True)
    with pytest.raises(AssertionError, match="2 writes"):
        exactly_one_write(fixture_server, SUBMIT)


NONCE = "document.querySelector('#shipping [name=page_nonce]').value"


def one_write_from(server: FixtureServer, nonce: str) -> None:
    nonces = [row.page_nonce for row in server.ledger.writes(SUBMIT)]
    assert nonces == [nonce], f"writes to {SUBMIT} came from {nonces}, not from {nonce}"


async def submit_from(workspace: Workspace, page: LabPage) -> str:
    """Submit the page's form the way a user would (a navigation) and return the nonce the page carried."""
    nonce = await workspace.evaluate(page, NONCE)
    await workspace.evaluate(
        page,
        "document.querySelector('#full_name').value = 'Ada';"
        "setTimeout(() => document.querySelector('#shipping').requestSubmit(), 0)",
    )
    return nonce


@pytest.mark.req("lab:ledger", "writes:page-attributed")
async def test_each_ledger_row_names_the_page_that_wrote_it_by_its_nonce(
    workspace: Workspace, fixture_server: FixtureServer, form: LabPage
) -> None:
    named = await workspace.open("named", fixture_server.url("/dom_form/?page_nonce=named-1"), workspace.column(1, 2))
    first = fixture_server.wait_for_request(SUBMIT)
    nonce = await submit_from(workspace, form)
    await first
    one_write_from(fixture_server, nonce)
    second = fixture_server.wait_for_request(SUBMIT)
    assert await submit_from(workspace, named) == "named-1"
    await second

    assert len(nonce) == 16  # a fresh nonce per load when the URL names none
    assert [row.page_nonce for row in fixture_server.ledger.writes(SUBMIT)] == [nonce, "named-1"]


@pytest.mark.negative_control
@pytest.mark.req("lab:ledger", "writes:page-attributed")
@pytest.mark.parametrize("writer", ["another page", "a body without the field"])
async def test_the_nonce_check_catches_a_write_from_another_page_or_without_the_field(
    workspace: Workspace, fixture_server: FixtureServer, form: LabPage, writer: str
) -> None:
    mine = await workspace.evaluate(form, NONCE)
    if writer == "another page":
        other = await workspace.open("other", fixture_server.url("/dom_form/"), workspace.column(1, 2))
        submitted = fixture_server.wait_for_request(SUBMIT)
        await submit_from(workspace, other)
        await submitted
    else:
        await workspace.evaluate(form, "fetch('/dom_form/submit', {method: 'POST', body: 'x=1'}).then(r => r.ok)", True)
    with pytest.raises(AssertionError, match="came from"):
        one_write_from(fixture_server, mine)
