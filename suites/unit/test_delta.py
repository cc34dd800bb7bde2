"""Delta frames as pure logic: which refs an act's new frame carries over, and what the agent is told changed.

The live proofs (an act on an unchanged ref after a delta lands on that element, on every backend; the token
budget of a one-element change) are in `suites/budgets/test_delta_frames.py`.
"""

from __future__ import annotations

import pytest

from runtime.backend import Element, Snapshot
from runtime.computer_session import PREFIX_CHARS, Frame, view
from runtime.delta import carry
from runtime.observation import render, render_delta
from suites.harness import bare_session

pytestmark = pytest.mark.req("delta:refs-kept", "delta:changes-only")


def upstream(*items: tuple[str, str, str], value: dict[str, str] | None = None) -> tuple[Element, ...]:
    """Backend elements `(backend ref, role, name)`, with values by backend ref."""
    return tuple(Element(ref, role, name, value=(value or {}).get(ref)) for ref, role, name in items)


ROWS = (("e1", "button", "Save A"), ("e2", "button", "Save B"), ("e3", "button", "Save C"))


def shown_of(elements: tuple[Element, ...], prefix: str = "abc") -> tuple[Element, ...]:
    return view(Snapshot("u", "t", "", elements), prefix).elements


def test_an_element_inserted_before_others_is_added_and_every_other_keeps_its_ref() -> None:
    old = upstream(*ROWS)
    shown = shown_of(old)
    new = upstream(("e9", "button", "Save Z"), *ROWS)
    delta = carry(shown, old, new, "xyz")
    assert [e.ref for e in delta.elements] == ["xyz1", "abc1", "abc2", "abc3"]
    assert [e.name for e in delta.elements] == ["Save Z", "Save A", "Save B", "Save C"]
    assert (delta.added, delta.changed, delta.removed, delta.unchanged) == ({0}, set(), (), 3)


def test_elements_that_read_alike_are_told_apart_by_the_backend_ref_not_by_position() -> None:
    old = upstream(("e1", "button", "Delete"), ("e2", "button", "Delete"), ("e3", "button", "Delete"))
    shown = shown_of(old)
    new = upstream(("e1", "button", "Delete"), ("e3", "button", "Delete"))  # the second row went
    delta = carry(shown, old, new, "xyz")
    assert [e.ref for e in delta.elements] == ["abc1", "abc3"]
    assert delta.removed == ("abc2",)


def test_a_typed_value_is_a_change_that_keeps_the_ref() -> None:
    old = upstream(("e1", "textbox", "Name"), ("e2", "button", "Send"))
    new = upstream(("e1", "textbox", "Name"), ("e2", "button", "Send"), value={"e1": "Ada"})
    delta = carry(shown_of(old), old, new, "xyz")
    assert [e.ref for e in delta.elements] == ["abc1", "abc2"]
    assert (delta.changed, delta.added) == ({0}, set())


def test_a_renamed_element_gets_a_new_ref_so_a_held_ref_never_means_something_that_reads_differently() -> None:
    old = upstream(("e1", "button", "Show more"))
    new = upstream(("e1", "button", "Show less"))  # same backend ref (an upstream that keeps it), new name
    delta = carry(shown_of(old), old, new, "xyz")
    assert [e.ref for e in delta.elements] == ["xyz1"]
    assert (delta.added, delta.removed) == ({0}, ("abc1",))


def test_the_changes_name_the_frame_and_show_only_changed_and_added_lines_and_removed_refs() -> None:
    old_snapshot = Snapshot("https://a.test/", "Shop", "Welcome", upstream(*ROWS, ("e4", "textbox", "Search")))
    new_snapshot = Snapshot(
        "https://a.test/",
        "Shop",
        "Welcome",
        upstream(("e9", "link", "Undo"), *ROWS[1:], ("e4", "textbox", "Search"), value={"e4": "tent"}),
    )
    session = bare_session()
    first = session.new_frame(old_snapshot, "interactive", document="doc-1")
    second = session.new_frame(new_snapshot, "interactive", document="doc-1", since=first)
    assert second.delta is not None
    text = render_delta(second.snapshot, first.snapshot, second.delta, "interactive")
    assert text is not None
    lines = text.splitlines()
    refs = [e.ref for e in first.snapshot.elements]
    assert lines[1] == "changes: 1 changed, 1 added, 1 removed, 2 unchanged (refs kept)"
    assert lines[2:-1] == [
        f'+ {second.snapshot.elements[0].ref} link "Undo"',
        f'~ {refs[3]} textbox "Search" ="tent"',
        f"- {refs[0]}",
    ]
    assert not any(line.startswith(("url:", "title:", "text:")) for line in lines)  # none of them changed
    full, _ = render(second.snapshot, "interactive")
    assert len(text) < len(full)


def test_nothing_is_carried_across_documents_or_from_a_frame_whose_document_is_unknown() -> None:
    snapshot = Snapshot("u", "t", "", upstream(*ROWS))
    for before, after in (("doc-1", "doc-2"), (None, None), ("doc-1", None)):
        session = bare_session()
        first = session.new_frame(snapshot, "interactive", document=before)
        second = session.new_frame(snapshot, "interactive", document=after, since=first)
        assert second.delta is None
        assert not {e.ref for e in first.snapshot.elements} & {e.ref for e in second.snapshot.elements}


def test_new_refs_never_collide_with_refs_carried_from_older_frames() -> None:
    session = bare_session()
    frame = session.new_frame(Snapshot("u", "t", "", upstream(*ROWS)), "interactive", document="d")
    for step in range(200):  # each act adds one element and keeps the others: prefixes pile up
        elements = (*frame.upstream.elements, Element(f"n{step}", "button", f"New {step}"))
        frame = session.new_frame(Snapshot("u", "t", "", elements), "interactive", document="d", since=frame)
        refs = [e.ref for e in frame.snapshot.elements]
        assert len(set(refs)) == len(refs)
        assert {frame.element(ref) for ref in refs} == set(frame.upstream.elements)
    assert len({ref[:PREFIX_CHARS] for ref in refs}) > 100  # carried refs of many frames live side by side


def test_a_frame_maps_each_carried_ref_to_the_new_snapshot_element() -> None:
    session = bare_session()
    first = session.new_frame(Snapshot("u", "t", "", upstream(*ROWS)), "interactive", document="d")
    moved = upstream(("e3", "button", "Save C"), ("e1", "button", "Save A"), ("e2", "button", "Save B"))
    second = session.new_frame(Snapshot("u", "t", "", moved), "interactive", document="d", since=first)
    for ref in (e.ref for e in first.snapshot.elements):
        assert isinstance(second, Frame)
        assert second.element(ref) is not None
        assert second.element(ref).name == first.element(ref).name  # type: ignore[union-attr]
