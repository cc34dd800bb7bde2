"""When a write must go to the user instead (`needs_user`): login, CAPTCHA, payment, sensitive or irreversible
commits, and navigation to an origin the user did not authorize.

Decided from the runtime's own reads a moment before the input (runtime/reading/probe.py for the Page's structure in
every frame, runtime/reading/commit.py for the element the write goes through and what it commits), never from the frame
the agent saw and never from instructions the page gives. Names are one signal among several (runtime/sensitivity.py);
the structure (password and card fields, challenge widgets, another site's form) and what activating the element does
(its form's submit controls and action, its link) are the others. Reads are never blocked: an agent may look at a
login page, it just may not sign in. The rules, and their limits, are written down in docs/policy.md.

Messages never quote the page: they name the rule and the concept, so page text cannot speak in the runtime's voice.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

from runtime.models import Action
from runtime.reading.commit import CommitTargets, Target
from runtime.reading.probe import Structure
from runtime.sensitivity import ACTIVATING_ROLES, mismatch, sensitive, sensitive_url

TOGGLES = frozenset({"checkbox", "switch", "radio", "menuitemcheckbox", "menuitemradio"})
"""Controls whose press flips their own state: the press rule spares them (`_through`)."""
ACTIVATING_TAGS = frozenset({"button", "a", "summary", "select", "option", "label"})
SIGN_IN = "This Page is a sign-in form. The user must sign in themselves."
CAPTCHA = "This Page shows a CAPTCHA challenge. The user must solve it themselves."
PRESSED = "This control reacts to being pressed and can change what it does as it is pressed. The user must press it."
PAYMENT = "This Page asks for payment details. The user must enter and submit them themselves."


@dataclass(frozen=True)
class Handover:
    """Why a write goes to the user. `concept` is set when it goes for its name alone (what the control, choice, form
    or address says: delete, pay, send…): the user may then allow that one write (`runtime/capability/approval.py`).
    Sign-in, CAPTCHA, card fields, another site's form, a control that may change under the pointer or whose names
    disagree, and a new origin stay the user's own to do."""

    message: str
    concept: str | None = None
    target: Target | None = None
    """The live element the verdict was read from (none for a navigation)."""


def needs_user(
    action: Action, reading: CommitTargets, structure: Structure | None, authorized_url: str
) -> Handover | None:
    """Why this action must be handed over to the user; None if the runtime may perform it.

    `authorized_url`: the Page's address when the user authorized it for this request (its origin is the one the
    agent may navigate within)."""
    if action.type == "navigate":
        return navigation(action.url or "", authorized_url)
    if not action.is_write or structure is None:
        return None
    if structure.has_password:
        return Handover(SIGN_IN)
    if structure.has_captcha:
        return Handover(CAPTCHA)
    for target in reading.targets:
        reason = _through(action, target, structure, reading.hover_unread)
        if reason is not None:
            # A write the user may allow once goes for its name alone: any rule that would hand it over anyway
            # (a press or pointer listener, a sign-in or card form, names that disagree…) decides instead.
            return _unnamed(action, reading, structure) or reason if reason.concept is not None else reason
    if structure.has_payment_fields:
        return Handover(PAYMENT)
    return None


def _unnamed(action: Action, reading: CommitTargets, structure: Structure) -> Handover | None:
    """The first verdict on `reading` that does not come from what a name says."""
    for target in reading.targets:
        reason = _through(action, target, structure, reading.hover_unread, by_name=False)
        if reason is not None:
            return reason
    return Handover(PAYMENT) if structure.has_payment_fields else None


def navigation(url: str, authorized_url: str) -> Handover | None:
    """A new origin is the user's to approve; on the authorized origin, an address that names an action (a GET
    with a side effect, `/delete?id=1`) is checked like a write."""
    if _origin(url) != _origin(authorized_url):
        return Handover(
            "This navigation leaves the origin the user authorized for this Page. "
            "The user must approve the new site (open it themselves, then authorize it)."
        )
    concept = sensitive_url(url)
    if concept is not None:
        return Handover(f"This address performs an action ({concept}). The user must confirm it themselves.", concept)
    return None


def _origin(url: str) -> tuple[str, str]:
    parts = urlsplit(url)
    return parts.scheme.lower(), (parts.netloc or "").lower()


def _through(
    action: Action, target: Target, structure: Structure, hover_unread: bool = False, by_name: bool = True
) -> Handover | None:
    """The verdict for one live element the write goes through (`hover_unread`: read before the pointer reached it,
    so a control that listens for the pointer may still change as it arrives; `by_name=False`: every rule but those
    that judge what a name, a choice or an address says)."""

    def named(message: str, concept: str) -> Handover:
        return Handover(message, concept, target)

    foreign = target.iframe_frame_id or (target.frame.frame_id if not target.frame.top else None)
    if foreign is not None and foreign in structure.foreign_forms:
        return Handover(
            "This control is part of another site's form embedded in the Page. The user must use it themselves."
        )
    activates = action.type in ("click", "press") and not target.text_entry
    control = target.role in ACTIVATING_ROLES or target.role in ACTIVATING_TAGS or target.commits_form
    if activates and control:
        concept = sensitive(*target.names, target.visible)
        if concept == "sign in" and target.role == "link" and not target.commits_form:
            concept = None  # a link to the sign-in page; its form is guarded by structure (the password field)
        if concept is not None and by_name:
            return named(
                f"This control is a sensitive or irreversible action ({concept}). The user must confirm it.", concept
            )
    if action.type == "click" and control and target.listens_press and target.role not in TOGGLES:
        # Read after the pointer reached it, but the press and the release are one backend call: what it becomes
        # under the press is never read, so it is judged as what it may become. A toggle is spared: many widgets
        # flip their state on the press itself (a JSON editor's boolean), and what it became is its state, which
        # verify reads.
        return Handover(PRESSED)
    commits = target.commits_form or bool(target.href)
    if commits and activates and target.accessible_name and mismatch(target.accessible_name, target.visible):
        return Handover(
            "This control's accessible name and its visible text disagree. "
            "The user must check what it does and activate it themselves."
        )
    if (commits or (hover_unread and control)) and activates and target.listens_pointer:
        return Handover(
            "This control reacts to the pointer and can change what it says as it is pressed. The user must use it."
        )
    if action.type == "select":
        chosen = [label for label, value in target.options if label in action.values or value in action.values]  # type: ignore[operator]
        concept = sensitive(*chosen)
        if concept is not None and by_name:
            return named(
                f"This choice is a sensitive or irreversible action ({concept}). The user must make it themselves.",
                concept,
            )
    if target.commits_form and target.form is not None:
        form = target.form
        if form.password:
            return Handover(SIGN_IN)
        if form.payment:
            return Handover(PAYMENT)
        concept = sensitive(*form.submitters, *form.checks) or sensitive_url(form.action)
        if concept is not None and by_name:
            return named(
                f"This submits a sensitive or irreversible form ({concept}). The user must confirm it themselves.",
                concept,
            )
    if target.href and activates:
        concept = sensitive_url(target.href)
        if concept is not None and by_name:
            return named(f"This link performs an action ({concept}). The user must confirm it themselves.", concept)
    return None
