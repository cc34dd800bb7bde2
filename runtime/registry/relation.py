"""Where a Page is relative to the chat Page, computed from real window geometry, never hard-coded."""

from __future__ import annotations

from runtime.models.page import Geometry, Relation


def relation(page: Geometry, chat: Geometry, same_workspace: bool) -> Relation:
    """left/right/above/below when the two panes do not overlap on that axis; other_window across workspaces.

    Panes that overlap on both axes (one covers the other) are `overlapping`: the relation words cannot name
    them, so observe needs the exact handle.
    """
    if not same_workspace:
        return "other_window"
    if page.right <= chat.left:
        return "left"
    if page.left >= chat.right:
        return "right"
    if page.bottom <= chat.top:
        return "above"
    if page.top >= chat.bottom:
        return "below"
    return "overlapping"
