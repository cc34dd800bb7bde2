"""The one role vocabulary: which accessibility roles the agent sees as elements, which carry a value or a checked
state, and which containers' names are read as text, the same on every backend and in the runtime's own reads.

It lives in the runtime because the runtime reads Chromium's accessibility tree itself (`verify`'s element checks,
`runtime/verification.py`): an agent names a role in the words an observation showed it (a date field is a
`textbox`), and `chromium_roles` says which of Chromium's roles that word covers. The backends import it from here
(`backends/common/roles.py`).

The names are ARIA's, as `@playwright/mcp` (the default backend) writes them. chrome-devtools-mcp and
open_claude_chrome read Chromium's own accessibility tree, which says some things in words of its own; `shared_role`
turns those into this vocabulary before any table here is consulted:

- `<input type=color|date|time|datetime-local|month|week>` is Chromium's `ColorWell`, `Date`, `InputTime`,
  `DateTime`: the agent sees one `textbox` with its label and its value, as Playwright lists it (its role for every
  input type without an ARIA role of its own).
- `image` is ARIA 1.3's (and Chromium's) synonym of `img`; `StaticText` is a text node; `RootWebArea` and `Iframe`
  are a document and the element that shows a frame.

Every other role passes through: an ARIA role is spelled the same in both trees.
"""

from __future__ import annotations

INTERACTIVE_ROLES = frozenset(
    {
        "button",
        "link",
        "textbox",
        "searchbox",
        "checkbox",
        "radio",
        "combobox",
        "listbox",
        "option",
        "menuitem",
        "menuitemcheckbox",
        "menuitemradio",
        "tab",
        "switch",
        "slider",
        "spinbutton",
        "treeitem",
        "gridcell",
    }
)
"""Roles listed as elements (with a ref the agent acts on). `gridcell` is one: a cell of an ARIA grid is a widget
the grid moves focus to (a data grid's cell, a calendar's day in a date picker), not a table's `cell`."""
FIELD_ROLES = frozenset({"ColorWell", "Date", "DateTime", "InputTime"})
"""Chromium's own roles for `<input type=color|date|datetime-local|time|month|week>`, listed as one `textbox` with its
label and value. chrome-devtools-mcp also lists the browser's own parts of a date or time field (Month, Day and Year
spinbuttons, each named twice, and a "Show date picker" button), which no page made and no other backend shows."""
CHROMIUM_ROLES = {
    "image": "img",
    "StaticText": "text",
    "RootWebArea": "document",
    "Iframe": "iframe",
    **dict.fromkeys(FIELD_ROLES, "textbox"),
}
"""Chromium's words for roles this vocabulary spells otherwise."""
SKIPPED_ROLES = frozenset({"InlineTextBox", "ListMarker", "LineBreak"})
"""Chromium's nodes that are never shown: the text they carry is already their parent's."""
CHECKABLE_ROLES = frozenset({"checkbox", "radio", "switch", "menuitemcheckbox", "menuitemradio"})
"""Roles whose state is a checked flag; no checked state means unchecked."""
VALUE_ROLES = frozenset({"textbox", "searchbox", "spinbutton", "slider", "combobox"})
"""Roles whose text is their current value, not a label."""
NAMED_TEXT_ROLES = frozenset(
    {
        "group",
        "radiogroup",
        "region",
        "dialog",
        "alertdialog",
        "alert",
        "status",
        "log",
        "note",
        "tooltip",
        "table",
        "figure",
        "img",
        "tabpanel",
        "cell",
        "columnheader",
        "rowheader",
        "caption",
        "term",
        "definition",
        "blockquote",
        "math",
    }
)
"""Containers whose accessible name is read as text (it labels what follows, or is all an image says)."""
REGION_ROLES = frozenset(
    {
        "banner",
        "main",
        "navigation",
        "contentinfo",
        "complementary",
        "search",
        "region",
        "form",
        "dialog",
        "alertdialog",
        "list",
        "table",
        "grid",
        "tabpanel",
        "feed",
    }
)
"""Parts of a Page an observation can be scoped to (`within`): the landmarks, a form, a dialog, a list, a table."""
ITEM_ROLES = frozenset({"listitem", "row", "article"})
"""The row, item or card an element sits in: its text is the element's nearby text, which a `query` matches."""
LIVE_ROLES = frozenset({"status", "alert", "log"})
"""Live regions: their text is marked with the role (`[status] Saved`), since it reports what just happened."""


def shared_role(role: str) -> str:
    """A role of Chromium's accessibility tree in this vocabulary."""
    return CHROMIUM_ROLES.get(role, role)


def chromium_roles(role: str) -> frozenset[str]:
    """Every role of Chromium's accessibility tree that this vocabulary's `role` names (`textbox`: a text field, and a
    date, time or colour field); the inverse of `shared_role`."""
    return frozenset({role, *(theirs for theirs, ours in CHROMIUM_ROLES.items() if ours == role)})
