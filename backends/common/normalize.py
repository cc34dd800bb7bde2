"""Normalize an upstream's accessibility tree into the runtime's `Snapshot`: one shape, whatever the backend.

Each backend parses its upstream's own format (Playwright's ARIA YAML, chrome-devtools-mcp's AX JSON) into a forest
of `AriaNode`s; everything after that is here, so the agent reads the same text-with-refs from every backend:

- interactive roles with a ref become `Element`s (role, name, value, checked, disabled, depth), in document order;
- headings, text and the names of labelling containers become the bounded `text`, with a label that sits right
  next to its own control, and repeated lines, dropped;
- a select's options are readable as text; nothing under `aria-hidden` counts;
- regions (landmarks, forms, dialogs, lists, tables) and each element's nearby text, for scoped observations
  (`backends.common.structure`).

Which roles are elements, values, checked states or named containers is the one vocabulary of
`backends.common.roles`. An `AriaNode` carries Playwright's vocabulary: `attrs` holds `ref`, `checked` (`""` or
`"mixed"`), `disabled`, `selected`, `pressed`, `level`, `aria-hidden`; `text` is the node's single inline text (a
textbox's value, a button's label); role `text` is a text node.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from backends.common.roles import CHECKABLE_ROLES, INTERACTIVE_ROLES, LIVE_ROLES, NAMED_TEXT_ROLES, VALUE_ROLES
from backends.common.structure import Entry, opens, structure, text_block
from runtime.backend import Element, Snapshot

_NOISE = re.compile(r"^[\W_]{0,2}$")  # separators such as "·", "›", "|"


@dataclass
class AriaNode:
    role: str
    name: str = ""
    attrs: dict[str, str] = field(default_factory=dict)
    text: str | None = None  # the single inline text child (`- key: text`)
    props: dict[str, str] = field(default_factory=dict)
    children: list[AriaNode] = field(default_factory=list)
    depth: int = 0

    @property
    def ref(self) -> str | None:
        return self.attrs.get("ref")


def compact(text: str) -> str:
    return " ".join(text.split())


NAME_FROM_CONTENT = frozenset({"link", "button", "menuitem", "tab"})
"""Roles whose accessible name comes from their content (accname: "name from content"). An upstream that leaves
such a node nameless but lists what is inside (Playwright: `<a><img alt="Blue jacket"></a>` is a bare `link` over
`img "Blue jacket"`) gets its name from that content, as the browser computes it: the model can tell such links
apart, and the name is the one the runtime re-reads on the live Page before a write."""


def _element(node: AriaNode) -> Element:
    name = node.name or (_flat(node) if node.role in NAME_FROM_CONTENT else "")
    value: str | None = None
    if node.role == "combobox" or node.role == "listbox":
        selected = [c.name for c in node.children if c.role == "option" and "selected" in c.attrs]
        value = ", ".join(selected) if selected else node.text
    elif node.role in VALUE_ROLES:
        value = node.text
    checked: bool | None = None
    if node.role in CHECKABLE_ROLES or "checked" in node.attrs:
        state = node.attrs.get("checked")
        checked = None if state == "mixed" else state is not None
    elif "pressed" in node.attrs:
        checked = None if node.attrs["pressed"] == "mixed" else True
    return Element(
        ref=node.ref or "",
        role=node.role,
        name=compact(name),
        value=compact(value) if value is not None else None,
        checked=checked,
        disabled="disabled" in node.attrs,
        level=node.depth,
    )


MAX_ELEMENTS = 50_000
"""Interactive elements kept per snapshot. The runtime shows about a hundred per observation page, so this many is
already more than an agent can page through; past it, memory and parse time grow with the page and nothing is
gained. Those beyond it are counted in `Snapshot.elements_dropped`, which the runtime says in its own words."""
MAX_TEXT_LINES = 20_000
"""Text lines kept per snapshot (the runtime shows at most a few thousand characters of them)."""


@dataclass
class _Walk:
    """One pass over the forest, with an explicit stack: a page nested thousands of levels deep costs memory in
    proportion to its depth, never Python's recursion limit."""

    elements: list[Element] = field(default_factory=list)
    # Document-order stream of text lines, element names and where regions and items open, each at its depth: for
    # de-duplicating labels next to their control, and for the Page's structure (`backends.common.structure`).
    stream: list[Entry] = field(default_factory=list)
    dropped: int = 0
    lines: int = 0

    def text(self, line: str, depth: int) -> None:
        line = compact(line)
        if line and not _NOISE.match(line) and self.lines < MAX_TEXT_LINES:
            self.lines += 1
            self.stream.append(Entry("text", depth, line))

    def walk(self, roots: list[AriaNode]) -> None:
        # (node, nested): inside an element or heading only further interactive elements matter (their text is the
        # name), so a nested node is entered only for the elements under it.
        stack: list[tuple[AriaNode, bool]] = [(root, False) for root in reversed(roots)]
        while stack:
            node, nested = stack.pop()
            if "aria-hidden" in node.attrs:
                continue
            interactive = bool(node.ref) and node.role in INTERACTIVE_ROLES
            if nested and not interactive:
                stack.extend((child, True) for child in reversed(node.children))
                continue
            if node.role == "text":
                self.text(node.text or "", node.depth)
            elif interactive:
                self._element(node)
                # interactive content nested inside (rare, e.g. a link in a cell)
                stack.extend((c, True) for c in reversed(node.children) if c.role != "option" or c.ref)
            elif node.role == "heading":
                level = int(node.attrs.get("level") or 2)
                label = node.name or node.text or _flat(node)
                if label:
                    self.text("#" * max(1, min(level, 6)) + " " + label, node.depth)
                stack.extend((child, True) for child in reversed(node.children))
            else:
                if opens(node.role):
                    self.stream.append(Entry(node.role, node.depth, compact(node.name)))
                prefix = f"[{node.role}] " if node.role in LIVE_ROLES else ""
                if node.name and node.role in NAMED_TEXT_ROLES:
                    self.text(prefix + node.name + (f": {node.text}" if node.text else ""), node.depth + 1)
                elif node.text is not None:
                    self.text(prefix + node.text, node.depth + 1)
                stack.extend((child, False) for child in reversed(node.children))

    def _element(self, node: AriaNode) -> None:
        if len(self.elements) >= MAX_ELEMENTS:
            self.dropped += 1
            return
        element = _element(node)
        self.elements.append(element)
        self.stream.append(Entry("element", node.depth, element.name))
        options = [c.name for c in node.children if c.role == "option" and not c.ref]
        if options:
            line = f"{node.role} {json.dumps(element.name, ensure_ascii=False)} options: " + " | ".join(options)
            self.text(line, node.depth + 1)


def _flat(node: AriaNode) -> str:
    """The readable content under a node: names and texts of its descendants (a named node stands for its subtree)."""
    parts: list[str] = []
    stack = [node]
    while stack:
        item = stack.pop()
        if item is not node and (item.role == "text" or item.name):
            parts.append(item.text or "" if item.role == "text" else item.name)
            continue
        parts.append(item.text or "")
        stack.extend(child for child in reversed(item.children) if "aria-hidden" not in child.attrs)
    return " ".join(p for p in parts if p)


def normalize(url: str, title: str, roots: list[AriaNode], upstream_chars: int = 0) -> Snapshot:
    walk = _Walk()
    walk.walk(roots)
    elements, regions = structure(walk.stream, walk.elements)
    return Snapshot(
        url=url,
        title=title,
        text=text_block(walk.stream),
        elements=elements,
        upstream_chars=upstream_chars,
        elements_dropped=walk.dropped,
        regions=regions,
    )
