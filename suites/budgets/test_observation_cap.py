"""One observation is capped (`Settings.observation_tokens`, about 2,000 tokens), and a Page that does not fit
is read from what the user sees: the elements in the viewport first, then the rest in document order, continued
with `next_offset` in that order (`runtime/reading/viewport.py`). On every backend, on the realistic article (241
elements, about 2,600 tokens of element lines) scrolled to its middle.

The lab reads which links and buttons intersect the viewport with its own eyes (its CDP session, not the
runtime's), before the observation. Claims: the first read costs at most the cap in o200k tokens; its first element
lines are elements the lab sees in view, and it lists most of them; following `next_offset` reaches every element
of the frame exactly once. Negative controls: a runtime that keeps document order (no in-view matching) is caught,
because the article's header, scrolled out of view, comes first; a runtime that does not count what it renders
(its estimate says 0) answers with the whole frame in one read, over the cap.

A page of 200,000 buttons: the probe's in-view read is bounded (bisection over document order), and lists the
seats the lab sees in view.
"""

from __future__ import annotations

import re

import pytest

from fixtures_sites.server import FixtureServer
from lab.tokens import count_text
from lab.workspace import Workspace
from runtime import observation
from runtime.commands import observe
from runtime.observation import OBSERVATION_TOKENS
from runtime.reading.viewport import IN_VIEW_JS, IN_VIEW_MAX
from suites.budgets.test_realistic_pages import read_all
from suites.harness import ELEMENT_LINE, ELEMENTS_HEADER, Agent, Seen
from suites.proofs import record_cost

ARTICLE = "/realistic/article"
IN_VIEW = r"""[...document.querySelectorAll('a[href], button, input:not([type=hidden]), select, textarea')]
  .filter(el => { const r = el.getBoundingClientRect();
    return r.width > 0 && r.height > 0 && r.bottom > 0 && r.right > 0 && r.top < innerHeight && r.left < innerWidth; })
  .map(el => (el.getAttribute('aria-label') || el.textContent || el.querySelector('img')?.alt || el.value || '')
    .replace(/\s+/g, ' ').trim())"""
MIDDLE = "window.scrollTo(0, (document.documentElement.scrollHeight - innerHeight) / 2), scrollY"
NAME = re.compile(r'^\w+ [\w-]+ "((?:[^"\\]|\\.)*)"')
SHARE = 0.8
"""Of the elements the lab sees in view, the share the first read must list (names may differ a little by backend:
a search box's label, a button's)."""


def names(seen: Seen) -> list[str]:
    """The quoted names of the read's element lines, in order."""
    return [m.group(1) for line in (seen.observation or "").splitlines() if (m := NAME.match(line))]


async def observe_scrolled(one_page_desk, agent: Agent) -> tuple[Seen, list[str]]:  # type: ignore[no-untyped-def]
    desk = await one_page_desk(ARTICLE)
    assert await desk.workspace.evaluate(desk.labs["A"], MIDDLE) > 0
    in_view = [name for name in await desk.workspace.evaluate(desk.labs["A"], IN_VIEW) if name]
    assert in_view, "the lab sees no link or button in the article's middle"
    return await agent.observe(page="left"), in_view


def assert_in_view_first(first: Seen, in_view: list[str]) -> None:
    shown = names(first)
    assert shown[0] in in_view, f"the first element shown, {shown[0]!r}, is not in view; in view: {in_view}"
    listed = sum(1 for name in set(in_view) if name in shown[: len(in_view) + 5])
    assert listed >= SHARE * len(set(in_view)), f"only {listed} of the in-view {sorted(set(in_view))} lead {shown}"


def assert_within_cap(seen: Seen) -> int:
    tokens = count_text(seen.observation or "")
    assert tokens <= OBSERVATION_TOKENS, f"a read costs {tokens} tokens (cap {OBSERVATION_TOKENS})"
    return tokens


@pytest.mark.req("observe:viewport-first", "budget:observation-cap")
async def test_a_page_that_does_not_fit_is_read_from_its_viewport_first_within_the_cap_and_loses_no_element(
    one_page_desk, agent: Agent, backend: str
) -> None:
    first, in_view = await observe_scrolled(one_page_desk, agent)
    assert first.status == "ok", first
    assert first.next_offset is not None, "the article fits one observation: nothing to order"
    assert re.search(r"^elements 1-\d+ of \d+, in view first:$", first.observation or "", re.M), first.observation
    tokens = assert_within_cap(first)
    assert_in_view_first(first, in_view)
    record_cost(
        f"observe-cap-article-{backend}",
        {
            "tokens": tokens,
            "budget": OBSERVATION_TOKENS,
            "elements_first_read": len(names(first)),
            "in_view": len(in_view),
        },
    )
    reads = await read_all(agent, first)
    refs = [
        ELEMENT_LINE.match(line).group(2)
        for seen in reads
        for line in (seen.observation or "").splitlines()  # type: ignore[union-attr]
        if ELEMENT_LINE.match(line)
    ]
    total = int(re.search(ELEMENTS_HEADER, first.observation or "").group(1))  # type: ignore[union-attr]
    assert len(refs) == len(set(refs)) == total, f"{len(refs)} lines, {len(set(refs))} refs, {total} elements"
    for seen in reads:
        assert_within_cap(seen)


@pytest.mark.negative_control
@pytest.mark.req("observe:viewport-first")
async def test_the_viewport_check_catches_a_runtime_that_keeps_document_order(
    one_page_desk, agent: Agent, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(observe, "in_view_first", lambda *args: None)
    first, in_view = await observe_scrolled(one_page_desk, agent)
    with pytest.raises(AssertionError, match="is not in view"):
        assert_in_view_first(first, in_view)


@pytest.mark.req("observe:viewport-first", "bounds:huge-page")
async def test_on_a_page_of_200000_buttons_the_in_view_read_lists_the_seats_in_view(
    workspace: Workspace, fixture_server: FixtureServer
) -> None:
    page = await workspace.open("A", fixture_server.url("/huge/wide?buttons=200000"), workspace.column(0, 3))
    assert await workspace.evaluate(page, MIDDLE) > 0
    in_view = [name for name in await workspace.evaluate(page, IN_VIEW) if name]
    seen = await workspace.evaluate(page, IN_VIEW_JS)
    assert seen["total"] == 200_001  # the seats and "Find my seat"
    listed = [name for _, name in seen["items"]]
    assert len(listed) == min(len(in_view), IN_VIEW_MAX)
    assert listed == in_view[:IN_VIEW_MAX], f"the probe lists {listed[:5]}…, the lab sees {in_view[:5]}…"


@pytest.mark.negative_control
@pytest.mark.req("budget:observation-cap")
async def test_the_cap_check_catches_a_runtime_that_does_not_count_what_it_renders(
    one_page_desk, agent: Agent, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(observation, "estimate", lambda text: 0)  # every line "fits": the whole frame in one read
    first, _ = await observe_scrolled(one_page_desk, agent)
    with pytest.raises(AssertionError, match="a read costs"):
        assert_within_cap(first)
