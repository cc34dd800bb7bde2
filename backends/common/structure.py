"""The structure a scoped observation needs, from one document-order pass over a Page's tree, the same on every
backend: its regions (`runtime.roles.REGION_ROLES`: landmarks, forms, dialogs, lists, tables), each with the run of
elements it holds and its own text, and each element's nearby text (the row, item or card it sits in,
`runtime.roles.ITEM_ROLES`: its text lines, without its controls' names), which a `query` matches.

A backend writes its walk as a stream of `Entry`s: the text lines and the elements it lists, and where a region or
an item opens, each at its depth in the tree. A container holds what follows it at a greater depth. The stream is
also what the Page's own text is made of (`text_block`), so a region's text reads like the Page's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import NamedTuple

from backends.common.roles import ITEM_ROLES, REGION_ROLES
from runtime.backend import Element, Region

NEAR_CHARS = 300
"""Characters of an element's nearby text kept: a product card's name, rating, price and buttons fit."""
REGION_TEXT_CHARS = 6000
"""Characters of a region's text kept: what the longest observation (`detail=full`) could show of it."""
MAX_REGIONS = 2000
"""Regions kept per snapshot: a Page's structure, not its content, so a few hundred at most on real pages."""
MAX_OPEN = 32
"""Containers open at once, at most: one nested deeper (a Page of lists in lists, thousands deep) is not recorded,
so each text line costs at most this many appends."""


class Entry(NamedTuple):
    kind: str
    """`text` (a line), `element` (an element listed, `value` its name), or a container's role (a region or item
    opens here, `value` its name)."""
    depth: int
    value: str


def opens(role: str) -> bool:
    """Whether a node of this role opens a container the stream records."""
    return role in REGION_ROLES or role in ITEM_ROLES


def text_block(stream: Sequence[Entry]) -> str:
    """The text lines of `stream`, without a label repeated next to its own control or a line repeated."""
    stream = [entry for entry in stream if entry.kind in ("text", "element")]
    lines: list[str] = []
    for i, entry in enumerate(stream):
        if entry.kind != "text":
            continue
        around = (stream[j] for j in (i - 1, i + 1) if 0 <= j < len(stream))
        if entry.value in {e.value for e in around if e.kind == "element"} or (lines and lines[-1] == entry.value):
            continue
        lines.append(entry.value)
    return "\n".join(lines)


@dataclass
class _Open:
    role: str
    name: str
    depth: int
    start: int
    """Elements before it in the stream: the position of its first element."""
    first: int
    """Its position in the stream."""
    limit: int
    lines: list[str] = field(default_factory=list)
    size: int = 0

    def add(self, line: str) -> None:
        if self.size < self.limit and (not self.lines or self.lines[-1] != line):
            self.lines.append(line)
            self.size += len(line) + 1


def structure(stream: Sequence[Entry], elements: Sequence[Element]) -> tuple[tuple[Element, ...], tuple[Region, ...]]:
    """`elements` (one per `element` entry, in order) with their nearby text, and the regions of the stream.

    One pass: each text line goes to every open container that still has room (each keeps at most its bound; a
    full one is passed over), and each element remembers the innermost item it sits in, so a Page of deeply nested
    lists never makes each container re-read everything inside it."""
    kept = _kept(stream)
    owners: list[_Open | None] = []
    regions: list[tuple[int, Region]] = []
    open_: list[_Open] = []
    hungry: list[_Open] = []  # the open containers with room left, in the same order
    items: list[_Open] = []

    def close(container: _Open) -> None:
        if container.role in ITEM_ROLES:
            items.pop()
        elif len(regions) < MAX_REGIONS and (len(owners) > container.start or container.lines):
            text = _bounded("\n".join(container.lines), REGION_TEXT_CHARS)
            region = Region("", container.role, container.name, container.start, len(owners), text)
            regions.append((container.first, region))

    def pop() -> None:
        container = open_.pop()
        if hungry and hungry[-1] is container:
            hungry.pop()
        close(container)

    for index, entry in enumerate(stream):
        while open_ and open_[-1].depth >= entry.depth:
            pop()
        if entry.kind == "element":
            owners.append(items[-1] if items else None)
        elif entry.kind == "text":
            if index in kept:
                for container in hungry:
                    container.add(entry.value)
                if any(container.size >= container.limit for container in hungry):
                    hungry[:] = [container for container in hungry if container.size < container.limit]
        elif opens(entry.kind) and len(open_) < MAX_OPEN:
            item = entry.kind not in REGION_ROLES
            limit = NEAR_CHARS if item else REGION_TEXT_CHARS
            open_.append(_Open(entry.kind, entry.value, entry.depth, len(owners), index, limit))
            hungry.append(open_[-1])
            if item:
                items.append(open_[-1])
    while open_:
        pop()
    near = [_bounded(" ".join(owner.lines), NEAR_CHARS) if owner is not None else "" for owner in owners]
    with_near = tuple(replace(e, near=text) if text else e for e, text in zip(elements, near, strict=True))
    return with_near, tuple(region for _, region in sorted(regions, key=lambda pair: pair[0]))


def _kept(stream: Sequence[Entry]) -> set[int]:
    """The positions of the text lines the Page's text keeps (`text_block`): a label next to its own control is
    the control's name, not text."""
    said = [(i, entry) for i, entry in enumerate(stream) if entry.kind in ("text", "element")]
    kept: set[int] = set()
    for j, (i, entry) in enumerate(said):
        if entry.kind != "text":
            continue
        around = (said[k][1] for k in (j - 1, j + 1) if 0 <= k < len(said))
        if entry.value not in {e.value for e in around if e.kind == "element"}:
            kept.add(i)
    return kept


def _bounded(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit]
