"""The task-cost bench's pure parts: how each driver finds "the element named X" in its own snapshot text, how our
observe arguments are built (scoped once the tool offers `query`), and the cost arithmetic of a row."""

from __future__ import annotations

import json

import pytest

from lab.tokens import count_text
from suites.bench.tasks import (
    DEVTOOLS,
    OURS,
    PLAYWRIGHT,
    TASKS,
    Read,
    Tally,
    definition_tokens,
    na_figures,
    not_applicable,
    observe_arguments,
    query_words,
    resolve,
    seen,
)

pytestmark = pytest.mark.req("bench:task-cost")

OUR_FRAME = """<page nonce=7f3a2c>
url: http://localhost/catalogue/
elements 1-5 of 5:
qfz1 searchbox "Search"
qfz2 link "Northwind Pro Trail Running Shoe"
qfz3 button "Add to cart"
qfz4 link "Coastwise Ridge Daypack 22 L"
~ qfz5 button "Add to cart"
</page nonce=7f3a2c>"""

PLAYWRIGHT_SNAPSHOT = """### Snapshot
```yaml
- generic [ref=e1]:
  - searchbox "Search the shop" [ref=e6]
  - 'combobox "Sort by: price" [ref=e33]':
    - option "Featured" [selected]
  - link "Northwind Pro Trail Running Shoe" [ref=e40] [cursor=pointer]:
    - /url: /catalogue/product?sku=NW-10000
  - button "Add to cart" [ref=e41]
  - link "Coastwise Ridge Daypack 22 L" [ref=e50] [cursor=pointer]:
  - button "Add to cart" [ref=e51]
  - iframe [ref=e60]:
    - checkbox "I'm not a robot" [ref=f1e3]
```"""

DEVTOOLS_SNAPSHOT = """## Latest page snapshot
uid=1_0 RootWebArea "Shop" url="http://localhost/catalogue/"
  uid=1_6 searchbox "Search the shop"
  uid=1_22 combobox "Sort by" expandable haspopup="menu" value="Featured"
  uid=1_29 link "Northwind Pro Trail Running Shoe" url="http://localhost/catalogue/product?sku=NW-10000"
  uid=1_37 button "Add to cart"
  uid=1_39 link "Coastwise Ridge Daypack 22 L" url="http://localhost/catalogue/product?sku=NW-12044"
  uid=1_41 button "Add to cart"
  uid=1_50 "Add to cart later"
"""


@pytest.mark.parametrize(
    ("driver", "text", "first", "after", "search", "robot"),
    [
        (OURS, OUR_FRAME, "qfz3", "qfz5", "qfz1", None),
        (PLAYWRIGHT, PLAYWRIGHT_SNAPSHOT, "e41", "e51", "e6", "f1e3"),
        (DEVTOOLS, DEVTOOLS_SNAPSHOT, "1_37", "1_41", "1_6", None),
    ],
)
def test_each_driver_finds_the_element_named_x_in_its_own_snapshot_by_name_role_and_anchor(
    driver: str, text: str, first: str, after: str, search: str, robot: str | None
) -> None:
    assert resolve(text, driver, "Add to cart", "button") == first
    assert resolve(text, driver, "Add to cart", "button", after="Coastwise Ridge Daypack 22 L") == after
    assert resolve(text, driver, "Search", "searchbox") == search
    assert resolve(text, driver, "not a robot", "checkbox") == robot
    assert resolve(text, driver, "Add to cart", "link") is None  # the role is part of the match
    assert resolve(text, driver, "Add to cart", after="no such product") is None


def test_a_quoted_yaml_line_and_a_text_node_without_a_role_resolve_as_a_model_would_read_them() -> None:
    assert resolve(PLAYWRIGHT_SNAPSHOT, PLAYWRIGHT, "Sort by", "combobox") == "e33"
    assert resolve(PLAYWRIGHT_SNAPSHOT, PLAYWRIGHT, "Featured") is None  # an option without a ref is not addressable
    assert resolve(DEVTOOLS_SNAPSHOT, DEVTOOLS, "Add to cart later") is None  # text, not an element


def test_a_scoped_read_asks_for_the_needles_words_only_once_the_tool_offers_query() -> None:
    today = {"properties": {"command": {}, "page": {}, "detail": {}, "offset": {}}}
    scoped = {"properties": {**today["properties"], "query": {}, "within": {}}}
    read = Read("Save Lagoon ember Fleece to wishlist")
    assert observe_arguments(today, "p1", read) == {"command": "observe", "page": "p1"}
    assert observe_arguments(scoped, "p1", read) == {
        "command": "observe",
        "page": "p1",
        "query": "Save Lagoon ember Fleece wishlist",
    }
    assert observe_arguments(scoped, "p1", read, scoped=False) == {"command": "observe", "page": "p1"}
    assert observe_arguments(today, "p1", Read("14 min read", text=True))["detail"] == "full"
    assert observe_arguments(scoped, "p1", None) == {"command": "observe", "page": "p1"}  # a read before an act
    assert query_words("of 168") == "168"
    assert query_words("€10.99") == "€10.99"


def test_a_needle_is_seen_across_line_wraps_and_indentation_but_not_in_part() -> None:
    assert seen("Showing 1–24 of 168", ["- paragraph [ref=e36]: Showing 1–24\n    of 168"])
    assert not seen("of 1680", ["Showing 1–24 of 168"])
    assert not seen("anything", [])


def test_a_rows_tokens_are_the_definitions_once_plus_every_answer_text_and_image() -> None:
    tools = [{"name": "browser_click", "description": "Click", "inputSchema": {"type": "object"}}]
    shown = json.dumps([{"name": "browser_click", "description": "Click", "input_schema": {"type": "object"}}],
                       separators=(",", ":"))  # fmt: skip
    assert definition_tokens(tools) == count_text(shown)
    tally = Tally(TASKS["dom_form"], PLAYWRIGHT, definition=1000)
    tally.add("browser_snapshot", 300)
    tally.add("browser_click", 20)
    tally.add("browser_take_screenshot", 5, images=1229)
    figures = tally.figures()
    assert figures["tokens"] == 1000 + 300 + 20 + 5 + 1229
    assert (figures["answer_tokens"], figures["image_tokens"], figures["calls"]) == (325, 1229, 3)
    assert figures["valid"] is True
    assert figures["failure"] is None


def test_a_driver_that_did_not_reach_the_end_is_a_failed_row_with_its_first_reason() -> None:
    tally = Tally(TASKS["catalogue"], OURS)
    tally.add("computer_use observe", 900)
    tally.fail("answer 'Added to cart' not on the Page")
    tally.fail("ledger writes [], expected ['/catalogue/cart']")
    figures = tally.figures()
    assert figures["valid"] is False
    assert figures["failure"] == "answer 'Added to cart' not on the Page"


def test_a_task_without_a_raw_equivalent_is_not_applicable_to_the_raw_drivers_only_and_never_a_cost() -> None:
    sensitive = TASKS["sensitive"]
    assert not_applicable(sensitive, OURS) is None
    assert not_applicable(sensitive, PLAYWRIGHT) == sensitive.raw
    record = na_figures(sensitive, DEVTOOLS)
    assert record["valid"] is None
    assert "tokens" not in record
    assert not_applicable(TASKS["stall"], OURS) == TASKS["stall"].na
    assert not_applicable(TASKS["canvas"], OURS) is None


def test_the_task_set_has_the_parity_tasks_the_ten_questions_and_five_realistic_tasks() -> None:
    from suites.parity.tasks import TASKS as PARITY_TASKS

    groups = [task.group for task in TASKS.values()]
    assert {name for name, task in TASKS.items() if task.group == "parity"} == set(PARITY_TASKS)
    assert groups.count("eval") == 10
    assert groups.count("realistic") >= 5
    for task in TASKS.values():
        assert task.steps or task.na, f"{task.name}: no steps and no reason"
        assert (
            task.answer
            or task.writes
            or task.raw_writes
            or task.check
            or task.popup
            or task.na
            or all(getattr(step, "handover", False) for step in task.steps)
        ), f"{task.name}: nothing proves it happened"
