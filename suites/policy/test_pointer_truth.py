"""Pointer truth: a click is judged with the pointer already where it presses, by ref and by point alike.

The `pointer` scenario (fixtures_sites/scenarios/pointer.py) holds five controls that change as the pointer reaches
them: a row's "Delete" shown only while the row is hovered, "View details" that says "Buy now" while hovered, "Save
draft" that says "Confirm purchase" once pressed, "Add to wishlist" that a hover covers with "Pay now", and "Move to
folder" that says "Delete forever" two animation frames after the pointer arrives (the Page's answer is two frames:
the one the move is delivered in and the next, `runtime/pointer.py`). Before
the pointer comes, nothing sensitive is under their points. On every backend, by point and by ref, each is the
user's (`needs_user`, by ref after at most one `stale_observation` that shows it as it became) and the ledger holds
0 writes; a benign control the hover reveals ("Copy link") is reachable by ref (a scroll to its row rests the
pointer there and the act's answer lists it) and by point. The negative control judges before the pointer moves,
through the runtime's pointer seam (`Parts.pointer`), and is caught.

"Pin" grows into view instead (0 px wide until its row is hovered, full width once a 600 ms CSS transition has run,
as Swagger UI's copy button): the hover's answer lists it by ref once the Page has answered, and a click on that ref
pins. Its negative control reads the hover's answer before the Page answers (the `Parts.hovered` seam) on
playwright_mcp, whose snapshot gives a 0 px control no ref, and is caught.
"""

from __future__ import annotations

import pytest

from fixtures_sites.scenarios.pointer import COPY, DELETE, DETAILS, DRAFT, FOLDER, WISHLIST
from fixtures_sites.server import FixtureServer
from suites.harness import Agent, Seen, ref_of

SENSITIVE = {
    "Delete": DELETE,
    "View details": DETAILS,
    "Save draft": DRAFT,
    "Add to wishlist": WISHLIST,
    "Move to folder": FOLDER,
}
EXPECTED = {**dict.fromkeys(SENSITIVE, "needs_user"), "Copy link": "ok"}
"""Each control's verdict when clicked at its point (`by_point`)."""
BY_REF = {
    **EXPECTED,
    **dict.fromkeys(("View details", "Add to wishlist", "Move to folder"), "stale_observation, then needs_user"),
}
"""Each control's verdict when clicked by its ref (`by_ref`): one the pointer renames or covers as it arrives is
refused as `stale_observation` first (the runtime read it once the Page had answered the pointer), then handed to
the user under what it became; "Save draft" changes only as it is pressed."""
BENIGN_WRITES = ["/pointer/copy"]
BECOMES = {
    "View details": "Buy now",
    "Save draft": "Confirm purchase",
    "Add to wishlist": "Pay now",
    "Move to folder": "Delete forever",
}
"""What a control is (or what lies over it) once the pointer has reached it or pressed it."""


def written(server: FixtureServer) -> list[str]:
    return [row.path for row in server.ledger.writes()]


def assert_pointer_truth(verdicts: dict[str, str], server: FixtureServer, expected: dict[str, str] = EXPECTED) -> None:
    """The proof's check: every sensitive control handed to the user (by the way `expected` says), the benign one
    done, and the only write the benign one's."""
    assert verdicts == expected, f"verdicts {verdicts}, ledger {written(server)}"
    assert written(server) == BENIGN_WRITES, f"writes without the user: {written(server)}"


async def reveal(agent: Agent, seen: Seen) -> Seen:
    """A scroll to the first row's checkbox: the pointer rests on the row, and the answer lists what it shows."""
    shown = await agent.act(seen, type="scroll", direction="down", ref=ref_of(seen, "checkbox", "Milk"))
    assert shown.status == "ok", shown
    return shown


async def by_point(agent: Agent, server: FixtureServer) -> dict[str, str]:
    """Each control clicked at its point, right after a screenshot (a point is good for the next request only)."""
    verdicts = {}
    for name, (x, y) in [*SENSITIVE.items(), ("Copy link", COPY)]:
        seen = await agent.observe(page="left", detail="visual")
        copied = server.wait_for_request("/pointer/copy") if name == "Copy link" else None
        verdicts[name] = (await agent.act(seen, type="click", x=x, y=y)).status
        if copied is not None and verdicts[name] == "ok":
            await copied
    return verdicts


async def by_ref(agent: Agent, server: FixtureServer) -> dict[str, str]:
    """Each control clicked by the ref an observation gave it; a control that changed as the pointer reached it
    (renamed, or covered) is `stale_observation` once, and the observation after it names what it became, which is
    clicked by its ref."""
    verdicts = {}
    seen = await agent.observe(page="left")
    assert '"Delete"' not in (seen.observation or ""), "a hover-only control is listed with no pointer on its row"
    seen = await reveal(agent, seen)
    assert '"Delete"' in (seen.observation or ""), seen.observation
    assert '"Copy link"' in (seen.observation or ""), seen.observation
    verdicts["Delete"] = (await agent.act(seen, type="click", ref=ref_of(seen, "button", '"Delete"'))).status
    for name, became in BECOMES.items():
        seen = await agent.observe(page="left")
        acted = await agent.act(seen, type="click", ref=ref_of(seen, "button", f'"{name}"'))
        if acted.reason_code == "stale_observation":
            assert "observe again" in f"{acted.message} {acted.hint}", acted
            seen = await agent.observe(page="left")
            assert f'"{became}"' in (seen.observation or ""), f"what {name} became is not shown:\n{seen.observation}"
            acted = await agent.act(seen, type="click", ref=ref_of(seen, "button", f'"{became}"'))
            verdicts[name] = f"stale_observation, then {acted.status}"
        else:
            verdicts[name] = acted.status
    seen = await reveal(agent, await agent.observe(page="left"))
    copied = server.wait_for_request("/pointer/copy")  # registered before acting
    verdicts["Copy link"] = (await agent.act(seen, type="click", ref=ref_of(seen, "button", '"Copy link"'))).status
    if verdicts["Copy link"] == "ok":
        await copied
    return verdicts


async def pin(agent: Agent, server: FixtureServer) -> str:
    """Hover the first row (a scroll to its checkbox), then click the "Pin" its hover grew into view, by the ref the
    agent knows once it has read the hover's answer."""
    seen = await reveal(agent, await agent.observe(page="left"))
    ref = ref_of(seen, "button", '"Pin"')
    pinned = server.wait_for_request("/pointer/pin")  # registered before acting
    acted = await agent.act(seen, type="click", ref=ref)
    if acted.status == "ok":
        await pinned
    return acted.status


@pytest.mark.req("policy:hover-reveals")
async def test_a_control_a_hover_grows_into_view_is_in_the_hovers_answer_and_clicked_by_its_ref(
    one_page_desk, agent: Agent, fixture_server: FixtureServer
) -> None:
    await one_page_desk("/pointer/")
    assert await pin(agent, fixture_server) == "ok"
    assert written(fixture_server) == ["/pointer/pin"]


@pytest.mark.negative_control
@pytest.mark.backends("playwright_mcp")
@pytest.mark.sabotage("hover_unanswered")
@pytest.mark.req("policy:hover-reveals")
async def test_the_hover_check_catches_a_runtime_that_reads_the_hovers_answer_before_the_page_answers(
    one_page_desk, agent: Agent, fixture_server: FixtureServer
) -> None:
    await one_page_desk("/pointer/")
    with pytest.raises(AssertionError, match='"Pin"'):
        await pin(agent, fixture_server)
    assert written(fixture_server) == []


@pytest.mark.req("policy:pointer-truth", "reason:needs_user")
async def test_a_control_the_pointer_reveals_or_renames_is_the_users_when_clicked_by_point(
    one_page_desk, agent: Agent, fixture_server: FixtureServer
) -> None:
    await one_page_desk("/pointer/")
    assert_pointer_truth(await by_point(agent, fixture_server), fixture_server)


@pytest.mark.req("policy:pointer-truth", "policy:hover-reveals", "reason:needs_user")
async def test_a_control_the_pointer_reveals_or_renames_is_the_users_when_clicked_by_ref(
    one_page_desk, agent: Agent, fixture_server: FixtureServer
) -> None:
    await one_page_desk("/pointer/")
    assert_pointer_truth(await by_ref(agent, fixture_server), fixture_server, BY_REF)


@pytest.mark.negative_control
@pytest.mark.sabotage("judge_before_pointer")
@pytest.mark.req("policy:pointer-truth")
async def test_the_pointer_truth_check_catches_a_runtime_that_judges_before_the_pointer_moves(
    one_page_desk, agent: Agent, fixture_server: FixtureServer
) -> None:
    await one_page_desk("/pointer/")
    deleted = fixture_server.wait_for_request("/pointer/delete")  # registered before acting
    bought = fixture_server.wait_for_request("/pointer/buy")
    verdicts = await by_point(agent, fixture_server)
    await deleted
    await bought
    with pytest.raises(AssertionError, match=r"verdicts|writes without the user"):
        assert_pointer_truth(verdicts, fixture_server)


@pytest.mark.negative_control
@pytest.mark.sabotage("answer_unawaited")
@pytest.mark.req("policy:pointer-truth")
async def test_the_pointer_truth_check_catches_a_runtime_that_reads_before_the_page_answers_the_pointer(
    one_page_desk, agent: Agent, fixture_server: FixtureServer
) -> None:
    await one_page_desk("/pointer/")
    verdicts = await by_ref(agent, fixture_server)
    # Read at delivery, "Move to folder" is still itself: the click goes on (and erases), or, when the commit read
    # comes after the Page's answer, is handed to the user as "Delete forever" without ever being told it changed.
    with pytest.raises(AssertionError, match=r"'Move to folder': '(ok|needs_user)'"):
        assert_pointer_truth(verdicts, fixture_server, BY_REF)
