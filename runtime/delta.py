"""Delta: what changed between two frames of a ComputerSession, so an `act` pays for the change, not the page.

After a write the runtime re-observes the whole Page (the backend's snapshot is the truth) but tells the agent only
the difference against the frame the act was made on: added, removed and changed element lines, the url, title and
text if they changed, and how many elements are unchanged. An unchanged element keeps its ref in the new frame, so
the agent goes on with the refs it already has; each kept ref maps to the *new* snapshot's element (what the backend
acts on), never to the old one.

Identity is the backend's own: all three backends keep an element's ref while the element lives in the same
document (Playwright's aria ref, chrome-devtools-mcp's uid, our adapter's node key), and Playwright gives an element
a new ref when its role or name changes. So an element of the new snapshot is "the same" as one of the old when it
has the same backend ref, role and name *and* both snapshots are of the same document (the gateway's
`ScopedGateway.document`; a new document may reuse backend refs for other elements, so nothing is carried across
one). A same element that reads differently now (a typed value, a checked box, a disabled button) is "changed": it
keeps its ref and its new line is shown. An element whose name changed is removed and added under a new ref: a
ref the agent holds never silently means an element that reads differently.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from runtime.backend import Element


@dataclass(frozen=True)
class Delta:
    """The change from the act's frame to a new frame: `elements` are the new frame's, refs assigned."""

    elements: tuple[Element, ...]
    changed: frozenset[int]
    """Positions (in `elements`) of elements that kept their ref but read differently now."""
    added: frozenset[int]
    removed: tuple[str, ...]
    """Refs of the old frame that no element of the new one carries."""

    @property
    def unchanged(self) -> int:
        return len(self.elements) - len(self.changed) - len(self.added)


def carry(shown: Sequence[Element], old: Sequence[Element], new: Sequence[Element], prefix: str) -> Delta:
    """The new snapshot's elements with the agent's refs.

    `shown` are the old frame's elements as the agent read them (runtime refs), `old` the backend's elements behind
    them (backend refs), `new` the backend's elements now. An element that is the same as one of the old keeps the
    ref the agent holds; every other gets `prefix` followed by its 1-based position in `new`."""
    held = {(e.ref, e.role, e.name): agent.ref for agent, e in zip(shown, old, strict=True)}
    before = {agent.ref: agent for agent in shown}
    elements: list[Element] = []
    changed: set[int] = set()
    added: set[int] = set()
    for position, element in enumerate(new):
        ref = held.pop((element.ref, element.role, element.name), None)
        if ref is None:
            added.add(position)
            ref = f"{prefix}{position + 1}"
        elif _state(before[ref]) != _state(element):
            changed.add(position)
        elements.append(replace(element, ref=ref))
    gone = set(held.values())
    removed = tuple(agent.ref for agent in shown if agent.ref in gone)
    return Delta(tuple(elements), frozenset(changed), frozenset(added), removed)


def _state(element: Element) -> tuple[str | None, bool | None, bool]:
    return (element.value, element.checked, element.disabled)
