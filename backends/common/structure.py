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
from dataclasses import dataclass, replace
from typing import NamedTuple

from backends.common.roles import ITEM_ROLES, REGION_ROLES
from runtime.backend import Element, Region

NEAR_CHARS = 300
"""Characters of an element's nearby text kept: a product card's name, rating, price and buttons fit."""
REGION_TEXT_CHARS = 6000
"""Characters of a region's text kept: what the longest observation (`detail=full`) could show of it."""
MAX_REGIONS = 2000
"""Regions kept per snapshot: a Page's structure, not its content, so a few hundred at most on real pages."""


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


def structure(stream: Sequence[Entry], elements: Sequence[Element]) -> tuple[tuple[Element, ...], tuple[Region, ...]]:
    """`elements` (one per `element` entry, in order) with their nearby text, and the regions of the stream."""
    near = [""] * len(elements)
    regions: list[tuple[int, Region]] = []
    open_: list[_Open] = []
    count = 0

    def close(container: _Open, end: int) -> None:
        body = stream[container.first + 1 : end]
        if container.role in REGION_ROLES:
            if len(regions) < MAX_REGIONS and (count > container.start or body):
                text = _bounded(text_block(body), REGION_TEXT_CHARS)
                regions.append(
                    (container.first, Region("", container.role, container.name, container.start, count, text))
                )
            return
        # Its text lines, not its controls' names: a query for one card's button ("wishlist") must not match the
        # card's every other control through that button's name.
        words = _bounded(" ".join(text_block(body).split("\n")), NEAR_CHARS)
        for position in range(container.start, min(count, len(near))):
            near[position] = near[position] or words  # the innermost item closes first

    for index, entry in enumerate(stream):
        while open_ and open_[-1].depth >= entry.depth:
            close(open_.pop(), index)
        if entry.kind == "element":
            count += 1
        elif entry.kind != "text" and opens(entry.kind):
            open_.append(_Open(entry.kind, entry.value, entry.depth, count, index))
    while open_:
        close(open_.pop(), len(stream))
    with_near = tuple(replace(e, near=text) if text else e for e, text in zip(elements, near, strict=True))
    return with_near, tuple(region for _, region in sorted(regions, key=lambda pair: pair[0]))


def _bounded(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit]
