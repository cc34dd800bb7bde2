"""Scoped observation: which of a frame's elements, and which of its text, one read shows.

A model that needs one row of a long list should not pay for the list. `observe` takes a `query` (the elements whose
name, value or nearby text, the row, item or card they sit in, contain every word of it, case-insensitive) and/or
`within` (a region of the latest frame: a landmark, a form, a dialog, a list, a table; its refs are on the
observation's `regions` line). The frame still holds the backend's whole snapshot: every ref of it resolves, an act
on it answers in changes against all of it, and the next observe without a scope shows everything. The scope only
selects what is rendered (`runtime.observation.render`), and a continuation (`offset`) pages through the same
selection.

The query is the model's input: it is bounded (`QUERY_CHARS`), matched as cleaned words, and never echoed; only the
runtime's own words and the frame's (cleaned, quoted) strings are shown.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from runtime.backend import Element, Region, Snapshot
from runtime.text import clean

QUERY_CHARS = 100
"""The longest `query` (published as `maxLength`): a few words a model picks from a question or a frame."""
REGIONS_SHOWN = 12
"""Regions named on an observation's `regions` line at most: the largest, in document order. Each costs about 8
tokens; a read that fits shows none (there is nothing to narrow)."""


def words_of(query: str) -> tuple[str, ...]:
    """The words a query matches, cleaned and case-folded as page strings are compared to them."""
    return tuple(clean(query, QUERY_CHARS).casefold().split())


@dataclass(frozen=True)
class Scope:
    """What a read of a frame shows: the elements in `region` (of the frame's view, None for the whole Page) that
    match every one of `words` (none: all of them)."""

    words: tuple[str, ...] = ()
    region: Region | None = None

    def holds(self, position: int, element: Element) -> bool:
        if self.region is not None and not self.region.start <= position < self.region.end:
            return False
        return self.matches(element)

    def matches(self, element: Element) -> bool:
        if not self.words:
            return True
        haystack = " ".join((element.name, element.value or "", element.near)).casefold()
        return all(word in haystack for word in self.words)

    def positions(self, snapshot: Snapshot, order: Sequence[int] | None) -> list[int]:
        """The positions of the elements it shows, in the frame's order."""
        elements = snapshot.elements
        return [p for p in (range(len(elements)) if order is None else order) if self.holds(p, elements[p])]

    def text(self, snapshot: Snapshot, positions: Sequence[int]) -> str:
        """The text it shows: the region's own (else the Page's); with words, only its lines that contain them all,
        then the nearby text of the elements that matched by it alone (the card whose title has the words, which
        its buttons do not), each once: a match by name needs no more words to explain it."""
        base = snapshot.text if self.region is None else self.region.text
        if not self.words:
            return base
        nearby: list[str] = []
        for position in sorted(positions):
            element = snapshot.elements[position]
            near = element.near
            if near and near not in nearby and not self.matches(replace(element, near="")):
                nearby.append(near)
        lines = [
            line
            for line in base.split("\n")
            if all(word in line.casefold() for word in self.words) and not any(line in near for near in nearby)
        ]
        return "\n".join([*lines, *nearby])

    def regions(self, snapshot: Snapshot) -> list[Region]:
        """The regions inside it worth naming on a read that does not fit: those holding elements, the largest
        `REGIONS_SHOWN`, in document order."""
        outer = self.region
        inside = [
            r
            for r in snapshot.regions
            if r.end > r.start
            and r != outer
            and (outer is None or (outer.start <= r.start and r.end <= outer.end))
            and r.end - r.start < len(snapshot.elements)
        ]
        largest = sorted(inside, key=lambda r: r.end - r.start, reverse=True)[:REGIONS_SHOWN]
        return [r for r in inside if r in largest]


def same_region(regions: Sequence[Region], region: Region, among: Sequence[Region]) -> Region | None:
    """The region of `regions` (a newer snapshot's) that is `region` of `among` (an earlier one's): the same role
    and name, and as many of those before it. None when the Page no longer has it."""
    key = (region.role, region.name)
    nth = [(r.role, r.name) for r in among[: among.index(region)]].count(key)
    alike = [r for r in regions if (r.role, r.name) == key]
    return alike[nth] if nth < len(alike) else None
