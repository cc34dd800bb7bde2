"""OpenClaudeChromeBackend's own: the first-party CDP adapter's Claude-in-Chrome-compatible tool contract
(read_page, find, the action cursor, point clicks only right after a screenshot, key names), its stale-ref checks,
frames, a hidden window, a crashed page, and that it runs no process of its own; behind the runtime's scoped
gateway on top of the lab's tap, as production runs it.

Every CDP call the backend causes on the page is counted by the tap; writes are proven by the fixture server's
ledger; what a human watching the page sees is checked with the lab's own screenshots (its direct connection,
never counted). The flows every backend shares are in `test_backends.py`, parametrized by backend.
"""

from __future__ import annotations

import contextlib
import os
import struct
import zlib
from collections import Counter
from pathlib import Path

import pytest

from backends.open_claude_chrome import OpenClaudeChromeBackend, ToolContract
from backends.open_claude_chrome import keys as keymap
from backends.open_claude_chrome.accessibility import AXItem
from backends.open_claude_chrome.find import Candidate, rank
from backends.open_claude_chrome.refs import REF
from fixtures_sites.scenarios import catalogue
from fixtures_sites.server import FixtureServer
from lab.browser import Chromium
from lab.cdp import CDPClient, CDPError
from lab.tap import CDPTap
from lab.workspace import LabPage, Workspace
from runtime.backend import BackendError, Element
from runtime.models import Action
from suites.backends.conftest import MakeOCC, by_name, page_calls
from suites.sabotage import BlindRefContract, HitBlindRefContract, PlaceBlindRefContract

pytestmark = pytest.mark.req(backend="open_claude_chrome")


def contract_of(backend: OpenClaudeChromeBackend) -> ToolContract:
    assert backend.contract is not None
    return backend.contract


def unique_in_stock_product(start: int = 40) -> catalogue.Product:
    """A product on the first catalogue page whose name no other product on that page has."""
    first_page = catalogue.PRODUCTS[: catalogue.PAGE_SIZE]
    names = Counter(p.name for p in first_page)
    return next(p for p in first_page[start:] if names[p.name] == 1 and p.stock > 0)


def pixel(png: bytes, x: int, y: int) -> tuple[int, int, int]:
    """The RGB of one pixel of an 8-bit RGB/RGBA, non-interlaced PNG (what Chromium's screenshots are)."""
    pos, idat, width, colour = 8, b"", 0, 0
    while pos < len(png):
        (length,) = struct.unpack(">I", png[pos : pos + 4])
        kind, data = png[pos + 4 : pos + 8], png[pos + 8 : pos + 8 + length]
        pos += 12 + length
        if kind == b"IHDR":
            width, _height, _depth, colour = struct.unpack(">IIBB", data[:10])
        elif kind == b"IDAT":
            idat += data
    raw = zlib.decompress(idat)
    bpp = 4 if colour == 6 else 3
    stride = width * bpp
    previous = bytearray(stride)
    for row in range(y + 1):
        start = row * (stride + 1)
        kind, line = raw[start], bytearray(raw[start + 1 : start + 1 + stride])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b = previous[i]
            c = previous[i - bpp] if i >= bpp else 0
            if kind == 1:
                line[i] = (line[i] + a) & 255
            elif kind == 2:
                line[i] = (line[i] + b) & 255
            elif kind == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif kind == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        previous = line
    return previous[x * bpp], previous[x * bpp + 1], previous[x * bpp + 2]


async def lab_screenshot(lab_cdp: CDPClient, page: LabPage) -> bytes:
    """What a human watching the page sees, through the lab's own connection (not counted by the tap)."""
    import base64

    attached = await lab_cdp.send("Target.attachToTarget", {"targetId": page.target_id, "flatten": True})
    try:
        shot = await lab_cdp.send("Page.captureScreenshot", {"format": "png"}, session_id=attached["sessionId"])
    finally:
        await lab_cdp.send("Target.detachFromTarget", {"sessionId": attached["sessionId"]})
    return base64.b64decode(shot["data"])


# -- the contract: reads -------------------------------------------------------------------------------------------


@pytest.mark.req("adapter:snapshot")
async def test_read_page_interactive_lists_the_form_controls_with_roles_names_and_refs(
    claude_backend: OpenClaudeChromeBackend, tap: CDPTap
) -> None:
    page = await contract_of(claude_backend).read_page(filter="interactive")

    lines = page.text.splitlines()
    assert all(REF.fullmatch(n.ref or "") for n in page.nodes)
    assert len(lines) == len(page.nodes) == 14
    roles = Counter(n.role for n in page.nodes)
    assert roles == Counter(link=5, textbox=4, combobox=1, radio=2, checkbox=1, button=1)
    ref = {n.name: n.ref for n in page.nodes}
    assert f'textbox "Full name" [{ref["Full name"]}]' in lines
    assert f'textbox "Email" [{ref["Email"]}] placeholder="you@example.com"' in lines
    assert f'combobox "Country" [{ref["Country"]}] value="Choose a country…"' in lines
    assert f'radio "Standard (3–5 days)" [{ref["Standard (3–5 days)"]}] checked' in lines
    assert f'checkbox "This is a gift" [{ref["This is a gift"]}] unchecked' in lines
    assert f'button "Save and continue" [{ref["Save and continue"]}]' in lines
    assert tap.count(label="backend", category=("screenshot", "focus", "input", "script")) == 0


@pytest.mark.req("adapter:snapshot")
async def test_read_page_all_shows_the_tree_and_a_ref_id_depth_and_max_chars_narrow_it(
    claude_backend: OpenClaudeChromeBackend,
) -> None:
    contract = contract_of(claude_backend)
    everything = await contract.read_page(filter="all")
    form_group = next(n for n in everything.nodes if n.role == "group" and n.name == "Address")
    assert form_group.ref is not None
    assert 'heading "Shipping details"' in everything.text
    assert ' text "Need help? Call 0800 000 000 ·"' in everything.text

    part = await contract.read_page(filter="all", ref_id=form_group.ref)
    assert [n.name for n in part.nodes if n.role in ("textbox", "combobox")] == ["Street address", "Country"]
    assert part.nodes[0].level == 0
    shallow = await contract.read_page(filter="all", depth=1)
    assert max(n.level for n in shallow.nodes) == 1
    with pytest.raises(BackendError, match="over max_chars=100: pass a smaller depth"):
        await contract.read_page(filter="all", max_chars=100)
    # Refs are stable across reads while the element is the same.
    again = await contract.read_page(filter="interactive")
    country = next(n.ref for n in everything.nodes if (n.role, n.name) == ("combobox", "Country"))
    assert {n.name: n.ref for n in again.nodes}["Country"] == country


@pytest.mark.req("adapter:refs-only")
async def test_find_ranks_the_country_select_first_on_the_form(claude_backend: OpenClaudeChromeBackend) -> None:
    contract = contract_of(claude_backend)
    for query, role, name in (
        ("country select", "combobox", "Country"),
        ("country dropdown", "combobox", "Country"),
        ("email field", "textbox", "Email"),
        ("save button", "button", "Save and continue"),
        ("gift checkbox", "checkbox", "This is a gift"),
        ("express delivery option", "radio", "Express (next day)"),
        ("notes for the courier textarea", "textbox", "Delivery notes"),
    ):
        found = await contract.find(query)
        assert (found.matches[0].role, found.matches[0].name) == (role, name), (query, found.text)


@pytest.mark.req("adapter:refs-only")
@pytest.mark.parametrize("bound_page", ["/catalogue/"], indirect=True)
async def test_find_ranks_the_named_products_add_to_cart_button_first_capped_at_twenty(
    claude_backend: OpenClaudeChromeBackend, fixture_server: FixtureServer
) -> None:
    contract = contract_of(claude_backend)
    product = unique_in_stock_product()
    found = await contract.find(f"add to cart button for {product.name}")
    assert len(found.matches) == 20
    assert found.total > 20
    assert "Be more specific" in found.text
    best = found.matches[0]
    assert (best.role, best.name) == ("button", "Add to cart")
    assert (await contract.find("sort by select")).matches[0].name == "Sort by"
    assert (await contract.find("search bar")).matches[0].role == "searchbox"
    assert (await contract.find("next page link")).matches[0].name == "Next"

    # The best match is that product's own button: clicking it adds exactly that product.
    added = fixture_server.wait_for_request("/catalogue/cart")  # registered before acting
    await contract.computer(action="left_click", ref=best.ref)
    assert (await added).form()["sku"] == product.sku
    assert len(fixture_server.ledger.writes("/catalogue/cart")) == 1


# -- the canonical actions -----------------------------------------------------------------------------------------


@pytest.mark.req("action:type-submit")
async def test_type_with_submit_is_refused_before_anything_is_sent_and_press_enter_submits_the_typed_field(
    claude_backend: OpenClaudeChromeBackend, bound_page: LabPage, tap: CDPTap, fixture_server: FixtureServer
) -> None:
    """The adapter cannot type and submit in one call (the runtime composes it: `types_and_submits` is False); asked
    anyway, it refuses with its advice, and the advice (type, then press Enter) submits the typed field."""
    snapshot = await claude_backend.snapshot()
    name = by_name(snapshot.elements, "textbox", "Full name")
    tap.clear()
    with pytest.raises(BackendError) as refused:
        await claude_backend.act(Action(type="type", ref=name.ref, text="Grace", submit=True), name)
    assert refused.value.kind == "unsupported"
    assert refused.value.advice == "type without submit, then press Enter"
    assert not page_calls(tap, bound_page)

    submitted = fixture_server.wait_for_request("/dom_form/submit")  # registered before acting
    await claude_backend.act(Action(type="type", ref=name.ref, text="Grace Hopper"), name)
    await claude_backend.act(Action(type="press", key="Enter"), None)
    assert (await submitted).form()["full_name"] == "Grace Hopper"
    assert len(fixture_server.ledger.writes("/dom_form/submit")) == 1


@pytest.mark.req("action:type")
async def test_typing_replaces_the_fields_content_and_an_empty_text_clears_it(
    claude_backend: OpenClaudeChromeBackend, bound_page: LabPage, workspace: Workspace
) -> None:
    notes = by_name((await claude_backend.snapshot()).elements, "textbox", "Delivery notes")
    await claude_backend.act(Action(type="type", ref=notes.ref, text="first"), notes)
    notes = by_name((await claude_backend.snapshot()).elements, "textbox", "Delivery notes")
    assert notes.value == "first"
    await claude_backend.act(Action(type="type", ref=notes.ref, text="ring twice\nthen leave it"), notes)
    assert await workspace.evaluate(bound_page, "document.getElementById('notes').value") == "ring twice\nthen leave it"
    notes = by_name((await claude_backend.snapshot()).elements, "textbox", "Delivery notes")
    await claude_backend.act(Action(type="type", ref=notes.ref, text=""), notes)
    assert await workspace.evaluate(bound_page, "document.getElementById('notes').value") == ""


@pytest.mark.req("action:type")
@pytest.mark.parametrize("bound_page", ["/shadow/light"], indirect=True)
async def test_a_date_field_takes_an_iso_date_and_refuses_another_form_without_changing(
    claude_backend: OpenClaudeChromeBackend, bound_page: LabPage, workspace: Workspace, tap: CDPTap
) -> None:
    due = by_name((await claude_backend.snapshot()).elements, "textbox", "Due date")
    await claude_backend.act(Action(type="type", ref=due.ref, text="2026-12-24"), due)
    assert await workspace.evaluate(bound_page, "document.getElementById('due').value") == "2026-12-24"
    tap.clear()
    with pytest.raises(BackendError, match="does not take") as refused:
        await claude_backend.act(Action(type="type", ref=due.ref, text="24/12/2026"), due)
    assert refused.value.kind == "element"
    assert await workspace.evaluate(bound_page, "document.getElementById('due').value") == "2026-12-24"
    assert not [m for m in page_calls(tap, bound_page) if m.startswith("Input.")]


SAME_ORIGIN_FRAME = """new Promise(resolve => {
  const frame = document.createElement('iframe');
  frame.style.cssText = 'position: fixed; left: 40px; top: 60px; width: 320px; height: 120px; border: 7px solid #000';
  frame.srcdoc = '<label>Coupon <input id="code"></label>'
      + '<button onclick="parent.__pressed = code.value">Apply</button>';
  frame.onload = () => resolve(true);
  document.body.append(frame);
})"""


@pytest.mark.req("frames:iframe-refs")
async def test_a_same_origin_frames_controls_are_read_and_acted_on_in_place(
    claude_backend: OpenClaudeChromeBackend, bound_page: LabPage, workspace: Workspace
) -> None:
    await workspace.evaluate(bound_page, SAME_ORIGIN_FRAME, await_promise=True)
    snapshot = await claude_backend.snapshot()
    code = by_name(snapshot.elements, "textbox", "Coupon")
    apply = by_name(snapshot.elements, "button", "Apply")
    await claude_backend.act(Action(type="type", ref=code.ref, text="SPRING"), code)
    await claude_backend.act(Action(type="click", ref=apply.ref), apply)
    assert await workspace.evaluate(bound_page, "window.__pressed") == "SPRING"


@pytest.mark.req("frames:iframe-refs", "adapter:unique-refs")
@pytest.mark.parametrize("bound_page", ["/frames/"], indirect=True)
async def test_a_cross_site_iframes_controls_are_read_and_typed_selected_and_clicked_in_place(
    claude_backend: OpenClaudeChromeBackend, bound_page: LabPage, tap: CDPTap, fixture_server: FixtureServer
) -> None:
    snapshot = await claude_backend.snapshot()
    assert "# Chat with Northwind support" in snapshot.text  # the iframe's text, where the iframe is
    outer = by_name(snapshot.elements, "textbox", "Order number")
    message = by_name(snapshot.elements, "textbox", "Your message")
    department = by_name(snapshot.elements, "combobox", "Department")
    send = by_name(snapshot.elements, "button", "Send")
    names = [e.name for e in snapshot.elements]
    assert names.index("Order number") < names.index("Your message")

    sent = fixture_server.wait_for_request("/frames/send")  # registered before acting
    await claude_backend.act(Action(type="type", ref=message.ref, text="Where is NW-48213?"), message)
    await claude_backend.act(Action(type="select", ref=department.ref, values=["Returns"]), department)
    await claude_backend.act(Action(type="click", ref=send.ref), send)
    form = (await sent).form()
    assert form == {"department": "returns", "message": "Where is NW-48213?"}
    assert len(fixture_server.ledger.writes()) == 1
    assert outer.ref != message.ref
    assert tap.count(label="backend", category=("screenshot", "focus")) == 0


# -- stale refs ----------------------------------------------------------------------------------------------------


async def assert_stale_ref_refused(
    backend: OpenClaudeChromeBackend,
    element: Element,
    tap: CDPTap,
    page: LabPage,
    fixture_server: FixtureServer,
) -> None:
    """Acting on a ref whose element moved or was replaced is refused as stale, and no input reaches the page."""
    tap.clear()
    refused: BackendError | None = None
    try:
        await backend.act(Action(type="click", ref=element.ref), element)
    except BackendError as error:
        refused = error
    if refused is None:
        raise AssertionError(f"acting on the stale {element.ref} was not refused")
    assert refused.kind == "stale", refused
    sent = [m for m in page_calls(tap, page) if m.startswith("Input.")]
    assert not sent, f"input reached the page: {sent}"
    assert fixture_server.ledger.writes() == [], "a stale ref wrote"


# Two neighbouring cards in one grid row whose buttons sit at the same height, scrolled into view: swapping them
# (a re-sort) puts the second card's button exactly where the first one's was, so a blind click there would hit it.
SWAPPABLE_PAIR = """(() => {
  const cards = [...document.getElementById('product-grid').children];
  for (let i = 0; i + 1 < cards.length; i++) {
    const [a, b] = [cards[i], cards[i + 1]].map(c => c.querySelector('button').getBoundingClientRect());
    const enabled = !cards[i].querySelector('button').disabled && !cards[i + 1].querySelector('button').disabled;
    if (enabled && a.top === b.top && a.height === b.height) {
      cards[i].scrollIntoView({block: 'center', behavior: 'instant'});
      return i;
    }
  }
  return -1;
})()"""
SWAP = """(i => {
  const grid = document.getElementById('product-grid');
  const [a, b] = [grid.children[i], grid.children[i + 1]];
  grid.insertBefore(b, a);
  return [a.dataset.sku, b.dataset.sku];
})(%d)"""
REPLACE_BUTTON = """(i => {
  const button = document.getElementById('product-grid').children[i].querySelector('button');
  button.replaceWith(button.cloneNode(true));
  return document.querySelectorAll('#product-grid button').length;
})(%d)"""


def card_button(elements: tuple[Element, ...], card: int) -> Element:
    """The button of the `card`-th product card ("Add to cart", or a disabled "Out of stock")."""
    buttons = [e for e in elements if e.role == "button" and e.name in ("Add to cart", "Out of stock")]
    return buttons[card]


@pytest.mark.req("adapter:element-errors", "honesty:stale-frame")
@pytest.mark.parametrize("bound_page", ["/catalogue/"], indirect=True)
async def test_a_resorted_list_makes_the_old_ref_stale_and_nothing_is_written(
    claude_backend: OpenClaudeChromeBackend,
    bound_page: LabPage,
    tap: CDPTap,
    fixture_server: FixtureServer,
    workspace: Workspace,
) -> None:
    card = await workspace.evaluate(bound_page, SWAPPABLE_PAIR)
    assert card >= 0
    button = card_button((await claude_backend.snapshot()).elements, card)
    moved, now_there = await workspace.evaluate(bound_page, SWAP % card)  # the same element, one place later
    await assert_stale_ref_refused(claude_backend, button, tap, bound_page, fixture_server)

    button = card_button((await claude_backend.snapshot()).elements, card)
    assert await workspace.evaluate(bound_page, REPLACE_BUTTON % card) >= 300  # an equal twin in its place
    await assert_stale_ref_refused(claude_backend, button, tap, bound_page, fixture_server)

    # Observed again, the button now in that place is acted on normally: the product that is there now.
    fresh = card_button((await claude_backend.snapshot()).elements, card)
    added = fixture_server.wait_for_request("/catalogue/cart")  # registered before acting
    await claude_backend.act(Action(type="click", ref=fresh.ref), fresh)
    assert (await added).form()["sku"] == now_there != moved
    assert len(fixture_server.ledger.writes("/catalogue/cart")) == 1


@pytest.mark.req("adapter:element-errors")
@pytest.mark.negative_control
@pytest.mark.parametrize("bound_page", ["/catalogue/"], indirect=True)
async def test_the_stale_ref_check_catches_a_variant_that_clicks_the_refs_old_point_blindly(
    make_claude_backend: MakeOCC,
    bound_page: LabPage,
    tap: CDPTap,
    fixture_server: FixtureServer,
    workspace: Workspace,
) -> None:
    blind = await make_claude_backend()
    assert blind.session is not None
    blind.contract = BlindRefContract(blind.session)  # clicks a ref where it was, without the re-check
    card = await workspace.evaluate(bound_page, SWAPPABLE_PAIR)
    button = card_button((await blind.snapshot()).elements, card)
    moved, now_there = await workspace.evaluate(bound_page, SWAP % card)
    added = fixture_server.wait_for_request("/catalogue/cart")  # registered before acting
    with pytest.raises(AssertionError, match="was not refused"):
        await assert_stale_ref_refused(blind, button, tap, bound_page, fixture_server)
    # The blind click landed on whatever sits there now: the other product went into the cart.
    assert (await added).form()["sku"] == now_there != moved
    assert len(fixture_server.ledger.writes("/catalogue/cart")) == 1


@pytest.mark.req("adapter:refs-only")
async def test_a_ref_from_another_document_is_stale_and_refused_without_input(
    claude_backend: OpenClaudeChromeBackend, bound_page: LabPage, tap: CDPTap, fixture_server: FixtureServer
) -> None:
    snapshot = await claude_backend.snapshot()
    submit = by_name(snapshot.elements, "button", "Save and continue")
    await claude_backend.act(
        Action(type="navigate", url=fixture_server.url("/dom_form/")), None
    )  # same page, new document
    tap.clear()
    with pytest.raises(BackendError, match="no longer shows") as stale:
        await claude_backend.act(Action(type="click", ref=submit.ref), submit)
    assert stale.value.kind == "stale"  # (a string that is not a ref at all: `suites/backends/test_backends.py`)
    assert not page_calls(tap, bound_page)
    assert fixture_server.ledger.writes() == []


# -- shadow roots --------------------------------------------------------------------------------------------------

SHADOW_STATE = """(() => {
  const app = document.querySelector('task-app').shadowRoot;
  const items = [...app.querySelectorAll('task-item')].map(item => item.shadowRoot);
  return {
    tasks: items.map(row => [row.querySelector('label').textContent, row.querySelector('input').checked]),
    show: app.querySelector('#show').value,
    draft: app.querySelector('#new-task').value,
    due: app.querySelector('#due').value,
    scrolled: window.__scrolled === true,
  };
})()"""
"""The shadow app's state, read by the lab: the app's shadow root, and each task row's own one inside it."""
MOVE_INTO_NEXT_ROW = """(() => {
  const items = [...document.querySelector('task-app').shadowRoot.querySelectorAll('task-item')];
  const box = items[0].shadowRoot.querySelector('input');
  items[1].shadowRoot.querySelector('li').prepend(box);  // the same element, in another host's shadow root
  return items[1].shadowRoot.querySelectorAll('input').length;
})()"""
CHECKED = """[...document.querySelector('task-app').shadowRoot.querySelectorAll('task-item')]
  .flatMap(item => [...item.shadowRoot.querySelectorAll('input')]).filter(box => box.checked).length"""
REBUILD_LAST_ROW = """(() => {
  const items = [...document.querySelector('task-app').shadowRoot.querySelectorAll('task-item')];
  const old = items[items.length - 1];
  const twin = document.createElement('task-item');  // a new host, a new shadow root, an equal row in it
  Object.assign(twin.dataset, old.dataset);
  old.replaceWith(twin);
  return twin.shadowRoot.querySelector('label').textContent;
})()"""


@pytest.mark.req("parity:shadow-acts")
@pytest.mark.parametrize("bound_page", ["/shadow/"], indirect=True)
async def test_refs_inside_nested_shadow_roots_are_scrolled_to_typed_into_clicked_and_selected_in_place(
    claude_backend: OpenClaudeChromeBackend, bound_page: LabPage, workspace: Workspace
) -> None:
    await workspace.evaluate(bound_page, "addEventListener('scroll', () => window.__scrolled = true, {once: true})")
    await workspace.evaluate(bound_page, "document.body.style.paddingTop = '150vh'; scrollTo(0, 0)")
    elements = (await claude_backend.snapshot()).elements
    water = by_name(elements, "checkbox", "Water the plants")  # two shadow roots deep
    await claude_backend.act(Action(type="scroll", ref=water.ref, direction="down"), water)
    draft = by_name(elements, "textbox", "New task")  # one shadow root deep
    await claude_backend.act(Action(type="type", ref=draft.ref, text="Pay rent"), draft)
    due = by_name(elements, "textbox", "Due date")
    await claude_backend.act(Action(type="type", ref=due.ref, text="2026-12-24"), due)
    await claude_backend.act(Action(type="click", ref=water.ref), water)
    show = by_name((await claude_backend.snapshot()).elements, "combobox", "Show")
    await claude_backend.act(Action(type="select", ref=show.ref, values=["Done"]), show)
    assert await workspace.evaluate(bound_page, SHADOW_STATE) == {
        "tasks": [["Water the plants", True]],
        "show": "done",
        "draft": "Pay rent",
        "due": "2026-12-24",
        "scrolled": True,
    }


@pytest.mark.req("adapter:element-errors")
@pytest.mark.parametrize("bound_page", ["/shadow/"], indirect=True)
async def test_an_element_moved_into_another_shadow_host_or_whose_host_was_rebuilt_is_stale_and_gets_no_input(
    claude_backend: OpenClaudeChromeBackend,
    bound_page: LabPage,
    tap: CDPTap,
    fixture_server: FixtureServer,
    workspace: Workspace,
) -> None:
    elements = (await claude_backend.snapshot()).elements
    milk = by_name(elements, "checkbox", "Buy milk")
    water = by_name(elements, "checkbox", "Water the plants")
    assert await workspace.evaluate(bound_page, MOVE_INTO_NEXT_ROW) == 2
    await assert_stale_ref_refused(claude_backend, milk, tap, bound_page, fixture_server)
    assert await workspace.evaluate(bound_page, REBUILD_LAST_ROW) == "Water the plants"
    await assert_stale_ref_refused(claude_backend, water, tap, bound_page, fixture_server)
    assert await workspace.evaluate(bound_page, CHECKED) == 0

    # Observed again, the rebuilt row's checkbox is acted on normally.
    fresh = by_name((await claude_backend.snapshot()).elements, "checkbox", "Water the plants")
    await claude_backend.act(Action(type="click", ref=fresh.ref), fresh)
    assert (await workspace.evaluate(bound_page, SHADOW_STATE))["tasks"][-1] == ["Water the plants", True]


@pytest.mark.req("adapter:element-errors")
@pytest.mark.negative_control
@pytest.mark.parametrize("bound_page", ["/shadow/"], indirect=True)
async def test_the_shadow_stale_check_catches_a_variant_that_does_not_compare_the_elements_place(
    make_claude_backend: MakeOCC,
    bound_page: LabPage,
    tap: CDPTap,
    fixture_server: FixtureServer,
    workspace: Workspace,
) -> None:
    blind = await make_claude_backend()
    assert blind.session is not None
    blind.contract = PlaceBlindRefContract(blind.session)
    milk = by_name((await blind.snapshot()).elements, "checkbox", "Buy milk")
    assert await workspace.evaluate(bound_page, MOVE_INTO_NEXT_ROW) == 2
    with pytest.raises(AssertionError, match="was not refused"):
        await assert_stale_ref_refused(blind, milk, tap, bound_page, fixture_server)
    assert await workspace.evaluate(bound_page, CHECKED) == 1  # the moved box was ticked in the other row


SLOTTED = """(() => {
  const host = document.createElement('div');
  host.innerHTML = '<button id="unslotted">Hidden</button>'
    + '<button slot="main" onclick="window.__pressed = 1">Go</button>';
  const root = host.attachShadow({mode: 'open'});
  root.innerHTML = '<p>Step</p><span><slot name="main"></slot></span>';
  const inner = root.querySelector('span').attachShadow({mode: 'open'});
  inner.innerHTML = '<b>Wrapped</b><slot></slot>';
  document.body.prepend(host);
  const save = document.createElement('button');  // some of its text in a closed shadow root, out of reach
  save.innerHTML = '<span>Save</span>';
  save.onclick = () => window.__saved = 1;
  const closed = save.querySelector('span').attachShadow({mode: 'closed'});
  closed.innerHTML = '<i>★</i><slot></slot>';
  document.body.prepend(save);
  return host.querySelector('#unslotted').getClientRects().length;
})()"""


@pytest.mark.req("adapter:element-errors")
async def test_a_slotted_control_is_placed_through_its_slot_an_unslotted_one_gets_no_ref_and_closed_text_is_left_out(
    claude_backend: OpenClaudeChromeBackend, bound_page: LabPage, workspace: Workspace
) -> None:
    assert await workspace.evaluate(bound_page, SLOTTED) == 0  # not drawn: outside every slot
    elements = (await claude_backend.snapshot()).elements
    assert not [e for e in elements if e.name == "Hidden"]
    go = by_name(elements, "button", "Go")  # light DOM, drawn through a slot two shadow roots deep
    await claude_backend.act(Action(type="click", ref=go.ref), go)
    assert await workspace.evaluate(bound_page, "window.__pressed") == 1
    save = next(e for e in elements if e.role == "button" and "Save" in e.name)  # a closed shadow root inside it
    await claude_backend.act(Action(type="click", ref=save.ref), save)
    assert await workspace.evaluate(bound_page, "window.__saved") == 1


SELF_DRAWN = """(() => {
  window.__pressed = [];
  const press = (el, what) => el.addEventListener('click', () => window.__pressed.push(what));
  // A switch that draws itself in its own shadow root (as ion-toggle): its centre is a track no light node holds.
  const toggle = document.createElement('div');
  toggle.setAttribute('role', 'switch');
  toggle.setAttribute('aria-checked', 'false');
  toggle.setAttribute('aria-label', 'Alerts');
  toggle.style.display = 'inline-block';
  toggle.attachShadow({mode: 'open'}).innerHTML =
    '<label><span style="display:inline-block;width:60px;height:30px;background:#888"></span></label>';
  press(toggle, 'switch');
  // A listbox whose options are slotted into its shadow root, each option drawing its text through a slot of its
  // own (as sl-select and sl-option): the text at an option's centre is hit as that slot.
  const list = document.createElement('div');
  list.setAttribute('role', 'listbox');
  list.setAttribute('aria-label', 'Animals');
  list.attachShadow({mode: 'open'}).innerHTML = '<div style="padding:4px"><slot></slot></div>';
  for (const animal of ['Cats', 'Dogs']) {
    const option = document.createElement('div');
    option.setAttribute('role', 'option');
    option.setAttribute('aria-selected', 'false');
    option.textContent = animal;
    option.attachShadow({mode: 'open'}).innerHTML = '<div style="padding:6px"><slot></slot></div>';
    press(option, animal);
    list.append(option);
  }
  document.body.prepend(toggle, list);
  return toggle.shadowRoot.elementFromPoint(...(r => [r.x + r.width / 2, r.y + r.height / 2])(
    toggle.getBoundingClientRect())).localName;
})()"""
COVER_SWITCH = """(() => {
  // Another host drawn over the switch: its own shadow part is what the switch's centre hits now.
  const toggle = document.querySelector('[role=switch]');
  const r = toggle.getBoundingClientRect();
  const cover = document.createElement('div');
  Object.assign(cover.style, {position: 'fixed', left: r.left + 'px', top: r.top + 'px', width: r.width + 'px',
                              height: r.height + 'px'});
  cover.attachShadow({mode: 'open'}).innerHTML = '<div style="width:100%;height:100%;background:#fff"></div>';
  cover.addEventListener('click', () => window.__pressed.push('cover'));
  document.body.append(cover);
  return document.elementFromPoint(r.x + r.width / 2, r.y + r.height / 2) === cover;
})()"""


@pytest.mark.req("parity:shadow-acts", "adapter:element-errors")
async def test_a_control_that_draws_itself_in_its_own_shadow_root_is_clicked_by_ref_and_one_drawn_over_is_refused(
    claude_backend: OpenClaudeChromeBackend, bound_page: LabPage, tap: CDPTap, workspace: Workspace
) -> None:
    assert await workspace.evaluate(bound_page, SELF_DRAWN) == "span"
    elements = (await claude_backend.snapshot()).elements
    toggle = by_name(elements, "switch", "Alerts")
    dogs = by_name(elements, "option", "Dogs")
    await claude_backend.act(Action(type="click", ref=toggle.ref), toggle)
    await claude_backend.act(Action(type="click", ref=dogs.ref), dogs)
    assert await workspace.evaluate(bound_page, "window.__pressed") == ["switch", "Dogs"]

    # As strict as before: a re-sorted option is stale, and a host drawn over the switch takes no click.
    await workspace.evaluate(
        bound_page, "(o => o.parentNode.prepend(o))(document.querySelectorAll('[role=option]')[1])"
    )
    tap.clear()
    with pytest.raises(BackendError) as stale:
        await claude_backend.act(Action(type="click", ref=dogs.ref), dogs)
    assert stale.value.kind == "stale"
    assert await workspace.evaluate(bound_page, COVER_SWITCH) is True
    with pytest.raises(BackendError, match="on top of it") as covered:
        await claude_backend.act(Action(type="click", ref=toggle.ref), toggle)
    assert covered.value.kind == "element"
    assert not [m for m in page_calls(tap, bound_page) if m.startswith("Input.")]
    assert await workspace.evaluate(bound_page, "window.__pressed") == ["switch", "Dogs"]


@pytest.mark.req("adapter:element-errors")
@pytest.mark.negative_control
async def test_the_covered_switch_check_catches_a_variant_that_does_not_hit_test_the_refs_centre(
    make_claude_backend: MakeOCC, bound_page: LabPage, workspace: Workspace
) -> None:
    blind = await make_claude_backend()
    assert blind.session is not None
    blind.contract = HitBlindRefContract(blind.session)
    assert await workspace.evaluate(bound_page, SELF_DRAWN) == "span"
    toggle = by_name((await blind.snapshot()).elements, "switch", "Alerts")
    assert await workspace.evaluate(bound_page, COVER_SWITCH) is True
    await blind.act(Action(type="click", ref=toggle.ref), toggle)  # not refused
    assert await workspace.evaluate(bound_page, "window.__pressed") == ["cover"]  # the click went to the cover


# -- the action cursor ---------------------------------------------------------------------------------------------


@pytest.mark.req("adapter:snapshot")
async def test_the_cursor_is_drawn_by_the_overlay_is_visible_and_never_enters_the_dom_or_the_next_read(
    claude_backend: OpenClaudeChromeBackend,
    bound_page: LabPage,
    tap: CDPTap,
    workspace: Workspace,
    lab_cdp: CDPClient,
) -> None:
    contract = contract_of(claude_backend)
    count = "document.querySelectorAll('*').length"
    before_nodes = await workspace.evaluate(bound_page, count)
    before = await contract.read_page(filter="all")
    email = next(n for n in before.nodes if n.name == "Email")
    tap.clear()
    clicked = await contract.computer(action="left_click", ref=email.ref)
    assert clicked.point is not None
    assert page_calls(tap, bound_page)["Overlay.highlightRect"] == 1

    assert await workspace.evaluate(bound_page, count) == before_nodes
    assert await workspace.evaluate(bound_page, "document.activeElement.id") == "email"  # the click landed
    after = await contract.read_page(filter="all")
    assert after.text == before.text
    x, y = round(clicked.point[0]), round(clicked.point[1])
    seen = pixel(await lab_screenshot(lab_cdp, bound_page), x, y)
    # Orange over a white field: the marker is there for a human to see.
    assert seen[0] > 200, f"no cursor drawn at {(x, y)}: {seen}"
    assert seen[2] < 150, f"no cursor drawn at {(x, y)}: {seen}"

    # An agent's screenshot shows the page, not the marker; and the marker is gone for the human too.
    png = await claude_backend.screenshot()
    assert pixel(png, x, y) == (255, 255, 255)
    assert pixel(await lab_screenshot(lab_cdp, bound_page), x, y) == (255, 255, 255)


# -- point clicks ------------------------------------------------------------------------------------------------------


@pytest.mark.req("adapter:point-click")
async def test_a_point_click_is_accepted_only_as_the_call_right_after_a_screenshot(
    claude_backend: OpenClaudeChromeBackend, bound_page: LabPage, tap: CDPTap, workspace: Workspace
) -> None:
    box = await workspace.evaluate(
        bound_page,
        "(() => { const r = document.getElementById('gift').getBoundingClientRect();"
        " return [r.x + r.width / 2, r.y + r.height / 2]; })()",
    )
    point = Action(type="click", x=box[0], y=box[1])
    tap.clear()
    with pytest.raises(BackendError, match="right after a screenshot") as early:
        await claude_backend.act(point, None)
    assert early.value.kind == "stale"
    assert not page_calls(tap, bound_page)

    await claude_backend.screenshot()
    await claude_backend.act(point, None)
    assert await workspace.evaluate(bound_page, "document.getElementById('gift').checked") is True
    with pytest.raises(BackendError, match="right after a screenshot"):
        await claude_backend.act(point, None)  # the image described the page before that click, not now
    assert await workspace.evaluate(bound_page, "document.getElementById('gift').checked") is True


# -- not in the foreground -----------------------------------------------------------------------------------------


@pytest.mark.req("foreground:minimized")
async def test_a_minimized_window_still_gets_typed_into_clicked_and_submitted_without_focus_calls(
    claude_backend: OpenClaudeChromeBackend,
    bound_page: LabPage,
    tap: CDPTap,
    fixture_server: FixtureServer,
    workspace: Workspace,
) -> None:
    assert (await workspace.minimize(bound_page)).state == "minimized"
    assert await workspace.evaluate(bound_page, "document.visibilityState") == "hidden"
    snapshot = await claude_backend.snapshot()
    name = by_name(snapshot.elements, "textbox", "Full name")
    submit = by_name(snapshot.elements, "button", "Save and continue")

    submitted = fixture_server.wait_for_request("/dom_form/submit")  # registered before acting
    await claude_backend.act(Action(type="type", ref=name.ref, text="Hidden Hopper"), name)
    await claude_backend.act(Action(type="click", ref=submit.ref), submit)
    assert (await submitted).form()["full_name"] == "Hidden Hopper"
    assert len(fixture_server.ledger.writes("/dom_form/submit")) == 1
    assert tap.count(label="backend", category="focus") == 0
    assert (await workspace.window(bound_page)).state == "minimized"  # nothing raised it


# -- failures ------------------------------------------------------------------------------------------------------


@pytest.mark.req("adapter:target-lost")
async def test_a_crashed_page_is_target_lost(
    claude_backend: OpenClaudeChromeBackend, bound_page: LabPage, lab_cdp: CDPClient
) -> None:
    await claude_backend.snapshot()
    attached = await lab_cdp.send("Target.attachToTarget", {"targetId": bound_page.target_id, "flatten": True})
    crashed = lab_cdp.wait_for_event("Target.targetCrashed", predicate=lambda p: p["targetId"] == bound_page.target_id)
    await lab_cdp.send("Target.setDiscoverTargets", {"discover": True})
    with contextlib.suppress(CDPError, TimeoutError):  # the renderer dies before it can answer
        await lab_cdp.send("Page.crash", session_id=attached["sessionId"], timeout=2.0)
    await crashed
    with pytest.raises(BackendError) as lost:
        await claude_backend.snapshot()
    assert lost.value.kind == "target_lost"
    assert "crashed" in str(lost.value)


@pytest.mark.req("adapter:timeout")
@pytest.mark.parametrize("bound_page", ["/stall/"], indirect=True)
async def test_a_click_whose_navigation_is_held_is_a_timeout_after_exactly_one_write(
    make_claude_backend: MakeOCC, fixture_server: FixtureServer
) -> None:
    claude_backend = await make_claude_backend(navigation_timeout=1.0)
    submit = by_name((await claude_backend.snapshot()).elements, "button", "Submit expense")
    held = fixture_server.stall("/stall/write")  # registered before acting
    with pytest.raises(BackendError) as error:
        await claude_backend.act(Action(type="click", ref=submit.ref), submit)
    assert error.value.kind == "timeout"
    await held.started()
    assert len(fixture_server.ledger.writes("/stall/write")) == 1
    held.release(text="<title>Expense submitted</title>", content_type="text/html")


# -- process -----------------------------------------------------------------------------------------------------------


def descendants(pid: int) -> dict[int, tuple[int, str]]:
    """pid → (process group, name) of every live descendant of `pid`."""
    table: dict[int, tuple[int, int, str]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        name = stat[stat.index("(") + 1 : stat.rindex(")")]
        state, ppid, pgid = stat[stat.rindex(")") + 2 :].split()[:3]
        if state not in ("Z", "X"):
            table[int(entry.name)] = (int(ppid), int(pgid), name)
    found: dict[int, tuple[int, str]] = {}
    frontier = [pid]
    while frontier:
        parent = frontier.pop()
        for child, (ppid, pgid, name) in table.items():
            if ppid == parent and child not in found:
                found[child] = (pgid, name)
                frontier.append(child)
    return found


@pytest.mark.req("adapter:child-hygiene")
async def test_no_process_but_chromium_runs_beside_the_runtime_while_the_backend_works(
    claude_backend: OpenClaudeChromeBackend, chromium: Chromium, fixture_server: FixtureServer
) -> None:
    snapshot = await claude_backend.snapshot()
    await claude_backend.act(
        Action(type="type", ref=by_name(snapshot.elements, "textbox", "Email").ref, text="a@b.c"), None
    )
    await claude_backend.screenshot()
    others = {pid: name for pid, (pgid, name) in descendants(os.getpid()).items() if pgid != chromium.process.pid}
    assert others == {}, f"processes beside the runtime, Chromium and the fixture server: {others}"


# -- unit: no browser ----------------------------------------------------------------------------------------------


@pytest.mark.req("adapter:error-kinds")
def test_key_names_become_keydown_keyup_pairs_with_modifier_bits() -> None:
    enter = keymap.events(keymap.parse("Enter")[0])
    assert [e["type"] for e in enter] == ["keyDown", "keyUp"]
    assert enter[0]["text"] == "\r"
    assert enter[0]["windowsVirtualKeyCode"] == 13
    select_all = keymap.parse("ctrl+a")[0]
    assert select_all.modifiers == 2
    assert keymap.events(select_all)[0]["type"] == "rawKeyDown"  # a shortcut types nothing
    assert [c.key.key for c in keymap.parse("Backspace Backspace shift+Tab esc")] == [
        "Backspace",
        "Backspace",
        "Tab",
        "Escape",
    ]
    assert keymap.modifier_bits("cmd+shift") == 12
    with pytest.raises(keymap.UnknownKey):
        keymap.parse("hyper+x")


def _candidate(role: str, name: str, order: int, **fields: str) -> Candidate:
    item = AXItem(role, name, None, fields.get("description", ""), {}, order, "main", False)
    words = {key: set(value.lower().split()) for key, value in fields.items()}
    base = {k: set() for k in ("name", "placeholder", "description", "value", "text", "context", "attrs")}
    return Candidate(item, order, {**base, "name": set(name.lower().split()), **words})


@pytest.mark.req("adapter:parser")
def test_ranking_weighs_role_words_descriptions_and_name_coverage() -> None:
    pool = [
        _candidate("link", "Kestrel Evo Daypack 22 L", 1),
        _candidate("button", "Add to cart", 2, description="Summitline Evo Daypack 22 L"),
        _candidate("button", "Add to cart", 3, description="Kestrel Evo Daypack 22 L"),
        _candidate("link", "Page 1", 4),
        _candidate("link", "Next", 5),
    ]
    assert [s.item.backend_id for s in rank("add to cart button for the Kestrel Evo Daypack", pool)][:3] == [3, 2, 1]
    assert rank("next page link", pool)[0].item.name == "Next"
    assert rank("Kestrel daypack", pool)[0].item.role == "link"
    assert rank("unrelated words", pool) == []
