"""The two readers of Chromium's accessibility tree (chrome-devtools-mcp's parser with the shared normalizer, and
open_claude_chrome's own walk) list one tree alike, in the one role vocabulary of `runtime.roles`: the roles their
separate tables once disagreed on (`ColorWell`, `gridcell`, `blockquote`, `image`) included. The runtime's own reads
of that tree (verify's element checks) take the same words back to Chromium's."""

from __future__ import annotations

from typing import Any

import pytest

from backends.chrome_devtools_mcp.snapshot import parse_tree
from backends.common import normalize
from backends.common import roles as backend_roles
from backends.open_claude_chrome import accessibility
from backends.open_claude_chrome.accessibility import AXItem, PageRead
from runtime import roles

pytestmark = pytest.mark.req("adapter:one-role-vocabulary")

TREE: dict[str, Any] = {
    "id": "1_0",
    "role": "RootWebArea",
    "name": "Book a pitch",
    "url": "http://fixtures.test/roles/",
    "children": [
        {"id": "1_1", "role": "StaticText", "name": "Tent colour"},
        {"id": "1_2", "role": "ColorWell", "name": "Tent colour", "value": "#2e7d32"},
        {"id": "1_3", "role": "InputTime", "name": "Arrival time", "value": "14:30"},
        {
            "id": "1_4",
            "role": "gridcell",
            "name": "Lakeside 4",
            "children": [{"id": "1_5", "role": "StaticText", "name": "Lakeside 4"}],
        },
        {
            "id": "1_6",
            "role": "blockquote",
            "name": "Ranger's advice",
            "children": [{"id": "1_7", "role": "StaticText", "name": "Turn around before dark."}],
        },
        {"id": "1_8", "role": "image", "name": "Trail map"},
    ],
}
"""One page as Chromium's accessibility tree names it (the shape of chrome-devtools-mcp's structured snapshot)."""
LISTED = [("textbox", "Tent colour", "#2e7d32"), ("textbox", "Arrival time", "14:30"), ("gridcell", "Lakeside 4", None)]
TEXT = ["Ranger's advice", "Turn around before dark.", "Trail map"]


def ax_items(node: dict[str, Any], parent: AXItem | None = None) -> AXItem:
    """The same tree as open_claude_chrome reads it (`Accessibility.getFullAXTree`)."""
    number = int(node["id"].split("_")[1])
    item = AXItem(node["role"], node["name"], node.get("value"), "", {}, number, "main", False, parent=parent)
    item.children = [ax_items(child, item) for child in node.get("children", [])]
    return item


def test_chrome_devtools_mcp_and_open_claude_chrome_list_one_chromium_tree_alike() -> None:
    url, title, forest = parse_tree(TREE)
    devtools = normalize.normalize(url, title, forest)
    root = ax_items(TREE)
    read = PageRead(url, title, [root], {}, {})
    claude = [(i.shared_role, i.name, i.shown_value) for i in read.items() if i.interactive]

    assert [(e.role, e.name, e.value) for e in devtools.elements] == LISTED
    assert claude == LISTED
    assert devtools.text.splitlines() == TEXT
    assert accessibility.text_lines(read) == TEXT


def test_both_readers_consult_the_one_vocabulary() -> None:
    for table in ("INTERACTIVE_ROLES", "CHECKABLE_ROLES", "VALUE_ROLES", "NAMED_TEXT_ROLES", "LIVE_ROLES"):
        assert getattr(normalize, table) is getattr(roles, table), table
        assert getattr(accessibility, table) is getattr(roles, table), table
        assert getattr(backend_roles, table) is getattr(roles, table), table


def test_a_role_word_of_an_observation_covers_every_chromium_role_that_lists_as_it() -> None:
    assert roles.chromium_roles("textbox") == {"textbox", "ColorWell", "Date", "DateTime", "InputTime"}
    assert roles.chromium_roles("img") == {"img", "image"}
    assert roles.chromium_roles("checkbox") == {"checkbox"}
    for theirs, ours in roles.CHROMIUM_ROLES.items():
        assert theirs in roles.chromium_roles(ours)
        assert {roles.shared_role(role) for role in roles.chromium_roles(ours)} == {ours}
