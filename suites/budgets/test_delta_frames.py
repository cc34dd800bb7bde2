"""Delta frames on real backends: an act answers with what changed, and the refs the agent holds stay true.

After a write the runtime re-observes and tells only the change against the act's frame (`runtime/delta.py`).
Two claims, each on every backend, each with a negative control:
- an act that changes one element of the catalogue (typing into its search box) is answered in at most 150 tokens
  of the content block a client passes on (against about 1,700 for the whole frame);
- a ref the agent read before an act, of an element the act left alone, is that same element afterwards, even
  when the act inserted an element before it (the catalogue's "Checkout" link appears in the header once the cart
  has an item): the fixture server's ledger shows which product's form the held ref submitted.
"""

from __future__ import annotations

import re

import pytest

from fixtures_sites.server import FixtureServer
from lab.tokens import count_text
from runtime import delta
from runtime.commands import observe
from suites.harness import Agent, Desk, Seen, ref_of
from suites.proofs import record_cost

ACT_BUDGET = 150
"""o200k tokens of the content block answering an act that changes one element of the catalogue."""
ADD = 'button "Add to cart"'
CHECKOUT_SHOWN = """new Promise(resolve => {
  const link = document.getElementById("checkout");
  const poll = setInterval(() => { if (!link.hidden) { clearInterval(poll); resolve(true); } }, 20);
  setTimeout(() => { clearInterval(poll); resolve(!link.hidden); }, 5000);
})"""
SKUS = "[...document.querySelectorAll('form.add-to-cart input[name=sku]')].map(input => input.value)"


def changes(seen: Seen) -> str:
    """The act's changes header, e.g. `1 changed, 0 added, 0 removed, 977 unchanged`."""
    found = re.search(r"^changes: (.*) \(refs kept\)$", seen.observation or "", re.M)
    assert found, f"the act did not answer with its changes:\n{seen.observation}"
    return found.group(1)


async def type_into_search(one_page_desk, agent: Agent) -> Seen:  # type: ignore[no-untyped-def]
    await one_page_desk("/catalogue/")
    seen = await agent.observe(page="left")
    return await agent.act(seen, type="type", ref=ref_of(seen, '"Search products"'), text="tent")


def assert_within_act_budget(typed: Seen) -> int:
    assert typed.status == "ok", typed
    tokens = count_text(typed.content)
    assert tokens <= ACT_BUDGET, f"the act's answer costs {tokens} tokens (budget {ACT_BUDGET}):\n{typed.content}"
    return tokens


@pytest.mark.req("delta:changes-only")
async def test_an_act_that_changes_one_element_of_the_catalogue_is_answered_in_at_most_150_tokens(
    one_page_desk, agent: Agent, backend: str
) -> None:
    typed = await type_into_search(one_page_desk, agent)
    assert re.fullmatch(r"1 changed, 0 added, 0 removed, \d+ unchanged", changes(typed)), typed.observation
    assert re.search(r'^~ \w+ searchbox "Search products" ="tent"$', typed.observation or "", re.M)
    tokens = assert_within_act_budget(typed)
    whole = await agent.observe(computer_session_id=typed.computer_session_id)
    record_cost(
        f"act-delta-catalogue-{backend}",
        {"tokens": tokens, "budget": ACT_BUDGET, "full_frame_tokens": count_text(whole.content)},
    )


@pytest.mark.negative_control
@pytest.mark.req("delta:changes-only")
async def test_the_act_budget_check_catches_an_act_answered_with_the_whole_frame(
    one_page_desk, agent: Agent, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(observe, "render_delta", lambda *args: None)  # a runtime that never tells only changes
    typed = await type_into_search(one_page_desk, agent)
    with pytest.raises(AssertionError, match="the act's answer costs"):
        assert_within_act_budget(typed)


async def held_ref_flow(desk: Desk, agent: Agent, server: FixtureServer, wait: float = 15.0) -> None:
    """Observe the catalogue, add the 2nd product, let the "Checkout" link appear before every product (one of
    the next two answers lists it as added), type into the search box, then click the 5th product's "Add to cart"
    by the ref read in the first observation: the ledger must show the 5th product's form."""
    await desk.open("A", "/catalogue/", desk.workspace.column(0, 3))
    await desk.open("chat", "/chat/", desk.workspace.column(1, 3), chat=True)
    desk.authorize("A")
    seen = await agent.observe(page="left")
    buttons = [line.split(" ", 1)[0] for line in (seen.observation or "").splitlines() if ADD in line]
    skus = await desk.workspace.evaluate(desk.labs["A"], SKUS)
    assert len(buttons) >= 5
    assert len(skus) >= len(buttons)  # the first read shows the first products only

    added = server.wait_for_request("/catalogue/cart")
    first = await agent.act(seen, type="click", ref=buttons[1])
    assert first.status == "ok", first
    assert (await added).form()["sku"] == skus[1]
    assert await desk.workspace.evaluate(desk.labs["A"], CHECKOUT_SHOWN, await_promise=True) is True

    typed = await agent.act(first, type="type", ref=ref_of(seen, '"Search products"'), text="tent")
    assert typed.status == "ok", typed
    told = (first.observation or "") + "\n" + (typed.observation or "")  # the link may show in either answer
    assert re.search(r'^\+ \w+ link "Checkout"$', told, re.M), told

    held = server.wait_for_request("/catalogue/cart", wait)
    second = await agent.act(typed, type="click", ref=buttons[4])  # read before both acts, never shown since
    assert second.status == "ok", second
    try:
        written = (await held).form()["sku"]
    except TimeoutError:
        raise AssertionError("the held ref submitted no cart form") from None
    assert written == skus[4], f"the held ref of the 5th product's button submitted {written}, not {skus[4]}"
    assert [w.path for w in server.ledger.writes()] == ["/catalogue/cart"] * 2


@pytest.mark.req("delta:refs-kept", "writes:at-most-one")
async def test_a_ref_held_from_before_an_act_that_inserted_an_element_above_it_still_clicks_that_element(
    desk: Desk, agent: Agent, fixture_server: FixtureServer
) -> None:
    await held_ref_flow(desk, agent, fixture_server)


def by_position(shown, old, new, prefix):  # type: ignore[no-untyped-def]
    """A broken carry: the element at each position takes the ref shown at that position before (what a delta
    without element identity would do)."""
    honest = delta.carry(shown, old, new, prefix)
    refs = [e.ref for e in shown]
    elements = tuple(
        e if i >= len(refs) else type(e)(**{**vars(e), "ref": refs[i]}) for i, e in enumerate(honest.elements)
    )
    return type(honest)(elements, honest.changed, honest.added, honest.removed)


@pytest.mark.negative_control
@pytest.mark.req("delta:refs-kept")
async def test_the_held_ref_check_catches_refs_carried_by_position(
    desk: Desk, agent: Agent, fixture_server: FixtureServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    from runtime import computer_session

    monkeypatch.setattr(computer_session, "carry", by_position)
    with pytest.raises(AssertionError, match=r"held ref|Checkout"):
        await held_ref_flow(desk, agent, fixture_server, wait=3.0)
