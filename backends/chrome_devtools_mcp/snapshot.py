"""Parse a `take_snapshot` answer of chrome-devtools-mcp 1.11.0 into a normalized `Snapshot`.

The upstream answers twice: as text (`## Latest page snapshot`, then one `uid=1_2 role "name" attr="value"` line
per node) and, with `--experimentalStructuredContent`, as `structuredContent.snapshot`, the same tree as JSON:

    {"id": "1_0", "role": "RootWebArea", "name": <title>, "url": <url>, "children": [
        {"id": "1_17", "role": "textbox", "name": "Full name", "value": "Ada", "required": true},
        {"id": "1_16", "role": "StaticText", "name": "Full name"}, ...]}

Only the JSON is parsed. The text is not a grammar: names and values are written between quotes *unescaped*
(`value="Ada "Countess""`), and a name may contain a newline, so page text could forge whole element lines there.

The tree is Puppeteer's "interesting" AX tree with Chromium's role names; it is mapped onto the shared `AriaNode`
vocabulary and normalized by `backends.common.normalize`, so the agent reads what it reads from the default backend:

- Chromium's own role names become the shared vocabulary's (`backends.common.roles.shared_role`): `StaticText` ->
  a text node, `image` -> `img`, a date, time or colour field -> `textbox` (its inner parts dropped); structural
  roles (`generic`, `none`, `LabelText`, ...) pass through and only their children count; `LineBreak`/`ListMarker`
  are dropped;
- `checked`/`pressed` (`true` or `"mixed"`), `disabled`, `selected`, heading `level` -> attrs; `value` of a textbox,
  searchbox, spinbutton, slider or combobox -> its inline text (the current value);
- the root `RootWebArea` gives url and title; a frame's own `RootWebArea` (inside an `Iframe`) is a container.

Uids are `<snapshot>_<n>`, and a node keeps its uid across snapshots while it lives. The upstream keys that reuse on
`loaderId_backendNodeId`. Backend node ids are numbered per renderer process, so the key is unique only while every
frame has its loaderId, which Puppeteer learns from `init` lifecycle events alone; for a Page loaded before the
upstream attached, the runtime's gateway sends the `init` Chromium does not replay (`runtime.gateway.relay`).
Should the same uid still name two nodes in one snapshot (seen without that: a main-frame textbox and a textbox in a
cross-site iframe), the upstream resolves it to whichever came last. Such a uid addresses nothing reliably, so every
node that carries it loses its ref (it stays readable as text, marked as not addressable).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator, Mapping
from typing import Any

from backends.common.normalize import AriaNode, compact, normalize
from backends.common.roles import FIELD_ROLES, INTERACTIVE_ROLES, SKIPPED_ROLES, VALUE_ROLES, shared_role
from runtime.backend import Snapshot

__all__ = ["UID", "SnapshotTreeError", "nodes_of", "parse_snapshot", "parse_tree"]

UID = re.compile(r"^\d+_\d+$")
"""The upstream's uid syntax. The adapter sends nothing else as a uid."""


class SnapshotTreeError(ValueError):
    """The upstream answer does not have the shape this parser knows."""


def nodes_of(tree: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    """Every node of the JSON tree, in document order."""
    stack = [tree]
    while stack:
        node = stack.pop()
        yield node
        children = node.get("children") or []
        if not isinstance(children, list):
            raise SnapshotTreeError(f"children of {node.get('id')!r} is not a list")
        stack.extend(reversed(children))


def _str(value: Any) -> str:
    if isinstance(value, bool) or value is None:
        return ""
    return str(value)


def _attrs(node: Mapping[str, Any], ref: str | None) -> dict[str, str]:
    attrs: dict[str, str] = {}
    if ref is not None:
        attrs["ref"] = ref
    for state in ("checked", "pressed"):
        value = node.get(state)
        if value is True:
            attrs[state] = ""
        elif value == "mixed":
            attrs[state] = "mixed"
    if node.get("disabled") is True:
        attrs["disabled"] = ""
    if node.get("selected") is True:
        attrs["selected"] = ""
    if "level" in node:
        attrs["level"] = _str(node["level"])
    return attrs


def _convert(tree: Mapping[str, Any], ambiguous: set[str]) -> AriaNode | None:
    """The JSON tree as `AriaNode`s, built bottom-up with an explicit stack: a page nested thousands of levels deep
    costs memory in proportion to its depth, never Python's recursion limit."""
    converted: dict[int, AriaNode | None] = {}
    # (node, depth, parent role, children done); a node is finished once every child of it is.
    stack: list[tuple[Mapping[str, Any], int, str, bool]] = [(tree, 0, "", False)]
    while stack:
        node, depth, parent, done = stack.pop()
        raw_role = node.get("role")
        if not isinstance(raw_role, str) or raw_role in SKIPPED_ROLES:
            converted[id(node)] = None
            continue
        role = shared_role(raw_role)
        name = _str(node.get("name"))
        uid = node.get("id")
        if not isinstance(uid, str) or not UID.fullmatch(uid):
            raise SnapshotTreeError(f"node without a uid: {str(node)[:80]}")
        if role == "text":
            converted[id(node)] = AriaNode("text", text=name, depth=depth)
            continue
        kids = [] if raw_role in FIELD_ROLES else node.get("children") or []  # the browser's own parts of the field
        if not done:
            stack.append((node, depth, parent, True))
            stack.extend((child, depth + 1, role, False) for child in reversed(kids))
            continue
        children = [c for child in kids if (c := converted.pop(id(child))) is not None]
        converted[id(node)] = _node(node, role, name, uid, depth, parent, children, ambiguous)
    return converted[id(tree)]


def _node(
    node: Mapping[str, Any],
    role: str,
    name: str,
    uid: str,
    depth: int,
    parent: str,
    children: list[AriaNode],
    ambiguous: set[str],
) -> AriaNode:
    value = _str(node.get("value")) or None
    # A native select's options are its value and its choices, read as text (as from the default backend), not
    # elements: the canonical action on them is `select` on the combobox.
    choice = role == "option" and parent == "combobox"
    if uid in ambiguous and role in INTERACTIVE_ROLES and not choice:
        # Not addressable: keep what it says, without a ref the agent could use.
        label = " ".join(p for p in (role, name, value if role in VALUE_ROLES else None) if p)
        note = AriaNode("text", text=f"{label} (not addressable)", depth=depth)
        rest = [c for c in children if not (c.role == "text" and compact(c.text or "") == compact(name))]
        return AriaNode("generic", depth=depth, children=[note, *rest])
    ref = None if uid in ambiguous or choice else uid
    text = value if role in VALUE_ROLES else None
    props = {"url": _str(node["url"])} if "url" in node else {}
    return AriaNode(role, name, _attrs(node, ref), text, props, children, depth)


def parse_tree(tree: Mapping[str, Any]) -> tuple[str, str, list[AriaNode]]:
    """(url, title, forest) of a structured snapshot tree."""
    if not isinstance(tree, Mapping) or tree.get("role") != "RootWebArea":
        raise SnapshotTreeError("the snapshot root is not a RootWebArea")
    counts = Counter(node.get("id") for node in nodes_of(tree))
    ambiguous = {uid for uid, n in counts.items() if isinstance(uid, str) and n > 1}
    root = _convert(tree, ambiguous)
    assert root is not None
    return _str(tree.get("url")), _str(tree.get("name")), root.children


def parse_snapshot(structured: Mapping[str, Any] | None, text: str) -> Snapshot:
    """A whole `take_snapshot` answer (structured content + its text) -> Snapshot."""
    if not structured or "snapshot" not in structured:
        raise SnapshotTreeError("no structuredContent.snapshot in the answer (--experimentalStructuredContent off?)")
    url, title, roots = parse_tree(structured["snapshot"])
    # No dialog handling here: while a JavaScript dialog is open the upstream refuses take_snapshot ("A dialog is
    # open (confirm: ...)"), so an answer with a snapshot never has one.
    return normalize(url, title, roots, upstream_chars=len(text))
