"""Matching the probe's in-view elements to a backend's elements (`runtime/reading/viewport.py`): pure logic."""

from __future__ import annotations

import pytest

from runtime.backend import Element
from runtime.reading.viewport import in_view_first

pytestmark = pytest.mark.req("observe:viewport-first")


def _elements(*names: str) -> tuple[Element, ...]:
    return tuple(Element(f"e{i}", "link", name) for i, name in enumerate(names))


def test_the_in_view_elements_come_first_in_document_order_then_the_rest() -> None:
    elements = _elements("Home", "One", "Two", "Three", "Four", "Five")
    assert in_view_first(elements, 6, [[3, "Three"], [4, "four "]]) == [3, 4, 0, 1, 2, 5]


def test_of_many_elements_with_one_name_the_one_nearest_the_scaled_index_is_taken() -> None:
    elements = _elements(*["Add to cart"] * 100)
    # The probe counts twice as many interactive elements (say, a hidden input per form): index 120 is about 60.
    assert in_view_first(elements, 200, [[120, "Add to cart"], [122, "Add to cart"]])[:2] == [60, 61]


def test_a_fixed_header_and_the_scrolled_content_are_both_in_view() -> None:
    elements = _elements("Menu", *[f"Story {i}" for i in range(50)])
    order = in_view_first(elements, 51, [[0, "Menu"], [31, "Story 30"], [32, "Story 31"]])
    assert order is not None
    assert order[:3] == [0, 31, 32]


def test_nothing_matched_leaves_the_document_order() -> None:
    assert in_view_first(_elements("A", "B"), 2, [[0, "Other"], ["x", 3], [1, ""]]) is None
