"""When a write must go to the user instead (`needs_user`): login, CAPTCHA, sensitive or irreversible submits.

Decided by the runtime from the Page's structure (a visible password field, a challenge widget, payment fields)
and from what the target element *is* (its role and accessible name), never from instructions the page
content gives. Reads are never blocked: an agent may look at a login page, it just may not sign in.
"""

from __future__ import annotations

import re

from runtime.backend import Element
from runtime.models import Action
from runtime.probe import Structure

SENSITIVE_NAME = re.compile(
    r"\b(pay|payment|purchase|buy|place (the )?order|checkout now|confirm (order|payment|purchase)|"
    r"delete|remove (my )?account|close (my )?account|deactivate|transfer|send money|withdraw|"
    r"change (my )?(password|email)|cancel (my )?subscription)\b",
    re.I,
)
ACTIVATING_ROLES = frozenset({"button", "link", "menuitem", "checkbox", "radio", "switch", "option", "tab"})


def needs_user(action: Action, element: Element | None, structure: Structure) -> str | None:
    """A message for the user if this action must be handed over; None if the runtime may perform it."""
    if not action.is_write or action.type == "navigate":
        return None
    if structure.has_password:
        return "This Page is a sign-in form. The user must sign in themselves."
    if structure.has_captcha:
        return "This Page shows a CAPTCHA challenge. The user must solve it themselves."
    if element is not None and _activates(action, element) and SENSITIVE_NAME.search(element.name):
        return f'"{element.name}" is a sensitive or irreversible action. The user must confirm it themselves.'
    if structure.has_payment_fields:
        return "This Page asks for payment details. The user must enter and submit them themselves."
    return None


def _activates(action: Action, element: Element) -> bool:
    if action.type == "click":
        return element.role in ACTIVATING_ROLES
    if action.type == "press":
        return action.key in ("Enter", " ", "Space")
    return action.type == "type" and action.submit
