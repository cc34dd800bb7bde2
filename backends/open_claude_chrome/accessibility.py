"""Reading the bound page: Chromium's accessibility tree for roles, names and states, and a DOM snapshot for the
identity of each element (where it sits in the DOM, what it contains) and where it was drawn.

One read is `DOMSnapshot.captureSnapshot` + `Accessibility.getFullAXTree` of the main frame, + one
`getFullAXTree` per same-process child frame, + for each out-of-process (cross-site) iframe the same two calls on
its own session and a `DOM.getFrameOwner` to know which <iframe> shows it. Every frame's tree is spliced under its
<iframe> element. No page JavaScript runs, nothing is focused, no pixels leave the page.

The AX tree is what a screen reader gets, so it already drops what is hidden (`display: none`, `aria-hidden`) and
computes names from labels, `aria-labelledby`, contents and placeholders. Ignored nodes are skipped but their
children are not (Chromium marks plain wrappers ignored and keeps their content).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from backends.common.roles import (
    CHECKABLE_ROLES,
    INTERACTIVE_ROLES,
    LIVE_ROLES,
    NAMED_TEXT_ROLES,
    SKIPPED_ROLES,
    VALUE_ROLES,
    shared_role,
)
from backends.open_claude_chrome.session import PageSession, ProtocolError

TRANSPARENT_ROLES = frozenset(
    {
        "generic",
        "none",
        "presentation",
        "LayoutTable",
        "LayoutTableRow",
        "LayoutTableCell",
        "Legend",
        "LabelText",
        "MenuListPopup",
        "Abbr",
        "Ruby",
        "Pre",
        "strong",
        "emphasis",
        "Section",
    }
)
"""Wrappers shown only when they carry a name of their own; their children move up a level."""
TEXT_ROLE = "StaticText"


@dataclass(eq=False)
class AXItem:
    """One accessibility node. `backend_id` is the DOM node's backend id (None for purely virtual nodes)."""

    role: str
    name: str
    value: str | None
    description: str
    props: dict[str, Any]
    backend_id: int | None
    frame_id: str
    ignored: bool
    children: list[AXItem] = field(default_factory=list)
    parent: AXItem | None = None

    @property
    def shared_role(self) -> str:
        """Its role in the one vocabulary every backend lists (`backends.common.roles`); `role` keeps Chromium's
        word, which the contract's own answers show."""
        return shared_role(self.role)

    @property
    def interactive(self) -> bool:
        if self.ignored or self.shared_role not in INTERACTIVE_ROLES:
            return False
        # A native select's options are its value, not controls of their own.
        return not (self.role == "option" and self.parent is not None and self.parent.role == "MenuListPopup")

    @property
    def checked(self) -> bool | None:
        state = self.props.get("checked")
        if state is None and "pressed" in self.props:
            state = self.props["pressed"]
        if state in ("true", True):
            return True
        if state in ("false", False):
            return False if self.shared_role in CHECKABLE_ROLES or "pressed" in self.props else None
        return None

    @property
    def disabled(self) -> bool:
        return bool(self.props.get("disabled"))

    @property
    def shown_value(self) -> str | None:
        if self.shared_role in VALUE_ROLES and self.value not in (None, ""):
            return str(self.value)
        return None


@dataclass(frozen=True)
class DomFacts:
    """What identifies an element in its document, read from the DOM snapshot."""

    tag: str
    attrs: dict[str, str]
    path: tuple[int, ...]
    """Element-sibling index at each level from <html> down, in the flat tree: a shadow host's children are its
    shadow root's, a slot's are the elements assigned to it (the tree the page is drawn from, and the one the
    snapshot walks; an element inside nested shadow roots has a place in it like any other)."""
    signature: str
    """Tag, identifying attributes and whitespace-free text of its flat subtree (open shadow content and slotted
    content as drawn; text in closed shadow roots left out): what the element *is*."""
    centre: tuple[float, float] | None
    """The centre of its box in viewport CSS px at the read, or None if it has no box."""


SIGNATURE_ATTRS = ("id", "name", "type", "role", "aria-label")
SIGNATURE_TEXT = 200


def signature(tag: str, attrs: dict[str, str], text: str) -> str:
    """Must equal what `refs.CHECK_JS` computes in the page for the same element."""
    parts = [tag.lower(), *(attrs.get(a, "") for a in SIGNATURE_ATTRS), "".join(text.split())[:SIGNATURE_TEXT]]
    return "|".join(parts)


class DomDocument:
    """One document of a `DOMSnapshot.captureSnapshot` answer, indexed by backend node id."""

    def __init__(self, doc: dict[str, Any], strings: list[str]) -> None:
        self._strings = strings
        nodes = doc["nodes"]
        self.frame_id: str = self._str(doc.get("frameId", -1))
        self.url: str = self._str(doc.get("documentURL", -1))
        self.title: str = self._str(doc.get("title", -1))
        self.scroll = (float(doc.get("scrollOffsetX", 0)), float(doc.get("scrollOffsetY", 0)))
        self.parent: list[int] = nodes.get("parentIndex", [])
        self.node_type: list[int] = nodes.get("nodeType", [])
        self.node_name: list[int] = nodes.get("nodeName", [])
        self.node_value: list[int] = nodes.get("nodeValue", [])
        self.attributes: list[list[int]] = nodes.get("attributes", [])
        backend: list[int] = nodes.get("backendNodeId", [])
        self.index = {backend_id: i for i, backend_id in enumerate(backend)}
        self.pseudo = set(nodes.get("pseudoType", {}).get("index", []))
        # The snapshot walks the flat tree: a shadow root is no node of it (its children hang under the host, slotted
        # nodes under their slot), and `shadowRootType` marks every node *inside* a shadow tree with its root's mode.
        scopes = nodes.get("shadowRootType", {})
        self.closed = {i for i, mode in zip(scopes.get("index", []), scopes.get("value", []), strict=False)
                       if self._str(mode) == "closed"}  # fmt: skip
        content = nodes.get("contentDocumentIndex", {})
        self.content_document = dict(zip(content.get("index", []), content.get("value", []), strict=False))
        self.children: list[list[int]] = [[] for _ in self.parent]
        self.sibling_index = [0] * len(self.parent)
        counts: dict[int, int] = {}
        for i, p in enumerate(self.parent):
            if p < 0:
                continue
            self.children[p].append(i)
            if self.node_type[i] == 1 and i not in self.pseudo:
                self.sibling_index[i] = counts.get(p, 0)
                counts[p] = self.sibling_index[i] + 1
        layout = doc.get("layout", {})
        self.bounds = dict(zip(layout.get("nodeIndex", []), layout.get("bounds", []), strict=False))

    def _str(self, index: int) -> str:
        return self._strings[index] if 0 <= index < len(self._strings) else ""

    def attrs(self, i: int) -> dict[str, str]:
        flat = self.attributes[i] if i < len(self.attributes) else []
        return {self._str(flat[k]): self._str(flat[k + 1]) for k in range(0, len(flat) - 1, 2)}

    def text(self, i: int, limit: int) -> str:
        """The text of node i's flat subtree, whitespace removed, up to `limit` characters; text in closed shadow
        roots is left out (the page's own JavaScript, and so `refs.CHECK_JS`, cannot read it)."""
        out: list[str] = []
        size = 0
        stack = list(reversed(self.children[i]))
        while stack and size < limit:
            n = stack.pop()
            if n in self.pseudo:
                continue
            kind = self.node_type[n]
            if kind in (3, 4):
                if n in self.closed:
                    continue
                chunk = "".join(self._str(self.node_value[n]).split())
                out.append(chunk)
                size += len(chunk)
            elif kind == 1:
                stack.extend(reversed(self.children[n]))
        return "".join(out)[:limit]

    def facts(self, backend_id: int) -> DomFacts | None:
        i = self.index.get(backend_id)
        if i is None or self.node_type[i] != 1:
            return None
        path: list[int] = []
        node = i
        while (parent := self.parent[node]) >= 0 and self.node_type[parent] != 9:
            path.append(self.sibling_index[node])
            node = parent
        path.reverse()
        attrs = self.attrs(i)
        tag = self._str(self.node_name[i]).lower()
        box = self.bounds.get(i)
        centre = None
        if box and box[2] > 0 and box[3] > 0:
            centre = (box[0] + box[2] / 2 - self.scroll[0], box[1] + box[3] / 2 - self.scroll[1])
        return DomFacts(tag, attrs, tuple(path), signature(tag, attrs, self.text(i, SIGNATURE_TEXT)), centre)

    def iframe_documents(self) -> dict[int, int]:
        """backend id of each iframe element → index of its content document in the snapshot."""
        backend_of = {i: b for b, i in self.index.items()}
        return {backend_of[i]: doc for i, doc in self.content_document.items() if i in backend_of}


@dataclass
class PageRead:
    """One read of the page: the AX forest (child frames spliced in) and the DOM documents, per frame."""

    url: str
    title: str
    roots: list[AXItem]
    documents: dict[str, DomDocument]
    loaders: dict[str, str]
    """frame id → loader id of the document each frame showed at the read."""

    def facts(self, item: AXItem) -> DomFacts | None:
        doc = self.documents.get(item.frame_id)
        if doc is None or item.backend_id is None:
            return None
        return doc.facts(item.backend_id)

    def attrs(self, item: AXItem) -> dict[str, str]:
        doc = self.documents.get(item.frame_id)
        if doc is None or item.backend_id is None or item.backend_id not in doc.index:
            return {}
        return doc.attrs(doc.index[item.backend_id])

    def items(self) -> Iterator[AXItem]:
        """Every node, in document order."""
        stack = list(reversed(self.roots))
        while stack:
            item = stack.pop()
            yield item
            stack.extend(reversed(item.children))

    def find_backend(self, frame_id: str, backend_id: int) -> AXItem | None:
        return next((i for i in self.items() if i.frame_id == frame_id and i.backend_id == backend_id), None)


def _value(raw: dict[str, Any] | None) -> Any:
    return None if raw is None else raw.get("value")


def _build(nodes: list[dict[str, Any]], frame_id: str) -> AXItem | None:
    if not nodes:
        return None
    items: dict[str, AXItem] = {}
    for node in nodes:
        props = {p["name"]: _value(p.get("value")) for p in node.get("properties", [])}
        value = _value(node.get("value"))
        items[node["nodeId"]] = AXItem(
            role=str(_value(node.get("role")) or ""),
            name=str(_value(node.get("name")) or ""),
            value=None if value is None else str(value),
            description=str(_value(node.get("description")) or ""),
            props=props,
            backend_id=node.get("backendDOMNodeId"),
            frame_id=frame_id,
            ignored=bool(node.get("ignored")),
        )
    root: AXItem | None = None
    for node in nodes:
        item = items[node["nodeId"]]
        for child_id in node.get("childIds", []):
            child = items.get(child_id)
            if child is not None and child.parent is None and child is not item:
                child.parent = item
                item.children.append(child)
        if node.get("parentId") is None and root is None:
            root = item
    return root


async def _read_renderer(
    session: PageSession, session_id: str, root_frame: str
) -> tuple[list[DomDocument], dict[str, AXItem]]:
    """One renderer's part of the page: its DOM snapshot (its documents) and each document's AX tree."""
    snapshot = await session.send(
        "DOMSnapshot.captureSnapshot", {"computedStyles": [], "includeDOMRects": False}, session=session_id
    )
    strings: list[str] = snapshot.get("strings", [])
    docs = [DomDocument(doc, strings) for doc in snapshot.get("documents", [])]
    roots: dict[str, AXItem] = {}
    for doc in docs:
        if not doc.frame_id:
            continue
        params = {} if doc.frame_id == root_frame else {"frameId": doc.frame_id}
        try:
            nodes = (await session.send("Accessibility.getFullAXTree", params, session=session_id))["nodes"]
        except ProtocolError:
            continue  # a child frame detached between the two reads
        root = _build(nodes, doc.frame_id)
        if root is not None:
            roots[doc.frame_id] = root
    return docs, roots


async def read(session: PageSession) -> PageRead:
    """Read the page once: per renderer (the page's, then each out-of-process iframe's) a DOM snapshot and the AX
    tree of each document it holds; each frame's tree is spliced under its <iframe> element."""
    main_frame = session.main_frame_id
    docs, roots = await _read_renderer(session, session.session_id, main_frame)
    documents = {doc.frame_id: doc for doc in docs if doc.frame_id}
    # The <iframe> element that shows each frame: (frame of the element, its backend id) → the frame it shows.
    owner: dict[tuple[str, int], str] = {}
    for doc in docs:
        for backend_id, content in doc.iframe_documents().items():
            if 0 <= content < len(docs) and docs[content].frame_id:
                owner[(doc.frame_id, backend_id)] = docs[content].frame_id
    for child in await session.children_ready():
        state = session.frames.get(child.frame_id)
        try:
            docs_of_child, roots_of_child = await _read_renderer(session, child.session_id, child.frame_id)
            element = await session.send("DOM.getFrameOwner", {"frameId": child.frame_id}, session=child.parent_session)
        except ProtocolError:
            continue  # it went away while we read
        documents.update({doc.frame_id: doc for doc in docs_of_child if doc.frame_id})
        roots.update(roots_of_child)
        if state is not None and state.parent_id:
            owner[(state.parent_id, element["backendNodeId"])] = child.frame_id
        for doc in docs_of_child:
            for backend_id, content in doc.iframe_documents().items():
                if 0 <= content < len(docs_of_child) and docs_of_child[content].frame_id:
                    owner[(doc.frame_id, backend_id)] = docs_of_child[content].frame_id
    main_root = roots.pop(main_frame, None)
    forest = [main_root] if main_root is not None else []
    stack = list(forest)
    while stack and roots:
        item = stack.pop()
        shown_frame = owner.get((item.frame_id, item.backend_id or -1))
        if shown_frame in roots:
            child_root = roots.pop(shown_frame)
            child_root.parent = item
            item.children.append(child_root)
        stack.extend(item.children)  # a spliced frame's own iframes are reached too
    main_doc = documents.get(main_frame)
    url = main_doc.url if main_doc is not None else session.main.url
    title = main_doc.title if main_doc is not None else ""
    loaders = {frame_id: state.loader_id for frame_id, state in session.frames.items()}
    return PageRead(url, title, forest, documents, loaders)


# -- walking what is shown --------------------------------------------------------------------------------------


def shown(root: AXItem, max_depth: int | None) -> Iterator[tuple[AXItem, int]]:
    """(item, level) of every node a reader shows, in document order: ignored and skipped nodes are left out,
    unnamed wrappers are transparent (their children take their level). Nothing deeper than `max_depth`."""
    stack: list[tuple[AXItem, int]] = [(root, 0)]
    while stack:
        item, level = stack.pop()
        if item.role in SKIPPED_ROLES:
            continue
        hidden = item.ignored or (item.role in TRANSPARENT_ROLES and not item.name)
        if not hidden:
            if max_depth is not None and level > max_depth:
                continue
            yield item, level
        below = level if hidden else level + 1
        stack.extend((child, below) for child in reversed(item.children))


def _compact(text: str) -> str:
    return " ".join(text.split())


def text_lines(read: PageRead) -> list[str]:
    """The page's readable text, main content first: headings marked `#`, select options listed, a label next to
    its own control and repeated lines dropped. Text inside a control is its name, so it is not repeated."""
    stream: list[tuple[str, str]] = []
    skip: list[AXItem] = []

    def add(line: str) -> None:
        line = _compact(line)
        if line and any(c.isalnum() for c in line):
            stream.append(("text", line))

    def visit(start: AXItem) -> None:
        # An explicit stack, not recursion: a page nested thousands of levels deep must not reach Python's recursion
        # limit. (item, nested): inside a control or heading only further controls count (the text is its name).
        stack: list[tuple[AXItem, bool]] = [(start, False)]
        while stack:
            item, inside = stack.pop()
            if inside and not item.interactive:
                stack.extend((child, True) for child in reversed(item.children))
                continue
            if item.role in SKIPPED_ROLES or any(item is s for s in skip):
                continue
            if item.ignored:
                stack.extend((child, False) for child in reversed(item.children))
            elif item.interactive:
                stream.append(("element", _compact(item.name)))
                options = [c.name for c in _descendants(item) if c.role == "option" and not c.interactive]
                if options:
                    add(f'{item.role} "{_compact(item.name)}" options: ' + " | ".join(_compact(o) for o in options))
                stack.extend((child, True) for child in reversed(item.children))
            elif item.role == "heading":
                level = int(item.props.get("level") or 2)
                add("#" * max(1, min(level, 6)) + " " + (item.name or _flat(item)))
                stack.extend((child, True) for child in reversed(item.children))
            elif item.role == TEXT_ROLE:
                add(item.name)
            else:
                if item.name and item.shared_role in NAMED_TEXT_ROLES:
                    add((f"[{item.role}] " if item.role in LIVE_ROLES else "") + item.name)
                stack.extend((child, False) for child in reversed(item.children))

    main = next((i for r in read.roots for i in _descendants(r) if i.role == "main" and not i.ignored), None)
    if main is not None:  # "prioritizing article content": the main landmark first, the page around it after
        visit(main)
        skip.append(main)
    for root in read.roots:
        visit(root)
    lines: list[str] = []
    for i, (kind, value) in enumerate(stream):
        if kind != "text":
            continue
        neighbours = {stream[j][1] for j in (i - 1, i + 1) if 0 <= j < len(stream) and stream[j][0] == "element"}
        if value in neighbours or (lines and lines[-1] == value):
            continue
        if lines and value.lstrip("#") == " " + lines[-1]:
            lines[-1] = value  # a region named by its own heading: the heading says it once
            continue
        lines.append(value)
    return lines


def ancestors(item: AXItem) -> Iterator[AXItem]:
    node = item.parent
    while node is not None:
        yield node
        node = node.parent


def _descendants(item: AXItem) -> Iterator[AXItem]:
    stack = list(reversed(item.children))
    while stack:
        node = stack.pop()
        yield node
        stack.extend(reversed(node.children))


def descendant_text(item: AXItem, limit: int = 300) -> str:
    """The visible text under a node (its static texts), for matching containers by content."""
    out: list[str] = []
    size = 0
    for node in _descendants(item):
        if node.role == TEXT_ROLE and node.name:
            out.append(_compact(node.name))
            size += len(out[-1]) + 1
            if size >= limit:
                break
    return " ".join(out)


def _flat(item: AXItem) -> str:
    return descendant_text(item, 10_000)
