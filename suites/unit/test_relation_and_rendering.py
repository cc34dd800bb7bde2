"""Relations come from geometry; observations stay inside their budget and lose no element."""

from __future__ import annotations

import pytest

from runtime.backend import Element, Snapshot
from runtime.models.page import Geometry
from runtime.observation import ELEMENT_CHARS, render
from runtime.registry.relation import relation

CHAT = Geometry(left=600, top=0, width=600, height=900)


@pytest.mark.parametrize(
    ("page", "expected"),
    [
        (Geometry(left=0, top=0, width=600, height=900), "left"),
        (Geometry(left=1200, top=0, width=600, height=900), "right"),
        (Geometry(left=600, top=-500, width=600, height=500), "above"),
        (Geometry(left=600, top=900, width=600, height=400), "below"),
        (Geometry(left=700, top=100, width=300, height=300), "overlapping"),
    ],
)
@pytest.mark.req("unit:relation")
def test_the_relation_to_the_chat_is_computed_from_window_bounds(page: Geometry, expected: str) -> None:
    assert relation(page, CHAT, same_workspace=True) == expected


@pytest.mark.req("unit:relation")
def test_a_page_in_another_workspace_window_is_other_window_wherever_it_is() -> None:
    assert relation(Geometry(left=0, top=0, width=600, height=900), CHAT, same_workspace=False) == "other_window"


def _snapshot(count: int) -> Snapshot:
    elements = tuple(Element(f"e{i}", "button", f"Add item number {i} to the cart") for i in range(count))
    return Snapshot(url="http://localhost/c", title="Catalogue", text="Shop " * 1000, elements=elements)


@pytest.mark.req("unit:rendering")
def test_every_element_is_reachable_by_following_next_offset_on_the_same_frame() -> None:
    snapshot = _snapshot(600)
    seen: list[str] = []
    offset: int | None = 0
    pages = 0
    while offset is not None:
        text, offset = render(snapshot, "interactive", offset)
        pages += 1
        body = [line for line in text.splitlines() if line.startswith("[e")]
        assert sum(len(line) + 1 for line in body) <= ELEMENT_CHARS
        seen += [line.split("]")[0][1:] for line in body]
    assert seen == [e.ref for e in snapshot.elements]
    assert pages > 1


@pytest.mark.req("unit:rendering")
def test_a_long_accessible_name_is_cut_to_keep_the_line_short() -> None:
    snapshot = Snapshot("u", "t", "", (Element("e1", "link", "x" * 500),))
    text, _ = render(snapshot, "interactive")
    assert max(len(line) for line in text.splitlines()) < 80
