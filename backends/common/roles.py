"""The one role vocabulary, as the backends name it: the table lives in the runtime (`runtime/roles.py`), which
reads Chromium's accessibility tree itself to verify, so an observation's role words and verify's are one."""

from runtime.roles import (
    CHECKABLE_ROLES,
    CHROMIUM_ROLES,
    FIELD_ROLES,
    INTERACTIVE_ROLES,
    ITEM_ROLES,
    LIVE_ROLES,
    NAMED_TEXT_ROLES,
    REGION_ROLES,
    SKIPPED_ROLES,
    VALUE_ROLES,
    shared_role,
)

__all__ = [
    "CHECKABLE_ROLES",
    "CHROMIUM_ROLES",
    "FIELD_ROLES",
    "INTERACTIVE_ROLES",
    "ITEM_ROLES",
    "LIVE_ROLES",
    "NAMED_TEXT_ROLES",
    "REGION_ROLES",
    "SKIPPED_ROLES",
    "VALUE_ROLES",
    "shared_role",
]
