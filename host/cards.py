"""A card: what the console shows of one tool call (or of a failed model request), in the person's words.

The person reads a headline ("Typed “Ada Lovelace” into Email", "Clicked Subscribe", "Needs you: sign in on
Checkout") and a line for them; the raw call, the reason code and the hint written for the model are one click away
(the console's `<details>`). `Card.event` is the one way a card becomes a console event: every field is clipped
there, whatever built it. Strings from Pages and models (element names, typed text, titles) are only ever data: the
console shows them with `textContent`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Literal

from runtime.failures import DIALOG_OPEN
from runtime.policy import CAPTCHA, PAYMENT, PRESSED, SIGN_IN

SHORT = 300
"""Characters of any one field of a card (page titles, messages and hints come from pages and models)."""
NAME = 60
"""Characters of an element's name or typed text inside a headline."""

Kind = Literal["call", "allowed", "provider_error"]

# `ref role "name"` of an observation's element lines (and of an act's changes, after `~ ` or `+ `).
ELEMENT_LINE_HEAD = re.compile(r'^(?:[~+] )?(?P<ref>[\w-]*\d) (?P<role>\S+)(?: "(?P<name>(?:[^"\\]|\\.)*)")?')
CONCEPT = re.compile(r"\(([^()]{1,40})\)")

NEEDS = {
    SIGN_IN: "sign in",
    CAPTCHA: "solve the CAPTCHA",
    PAYMENT: "enter the payment details",
    DIALOG_OPEN: "answer the dialog",
}
YOURS = "The agent stopped here. Do it on the Page yourself, then press “Done — continue” (or “Stop turn”)."


def clip(text: object, limit: int = SHORT) -> str:
    value = str(text)
    return value if len(value) <= limit else value[: limit - 1] + "…"


def quoted(text: object) -> str:
    return f"“{clip(text, NAME)}”"


def element_names(observation: str) -> dict[str, str]:
    """ref → the element's name (else its role), from an observation's element lines."""
    names: dict[str, str] = {}
    for line in observation.splitlines():
        found = ELEMENT_LINE_HEAD.match(line)
        if found:
            names[found["ref"]] = (found["name"] or found["role"]).replace('\\"', '"')
    return names


def describe_call(arguments: Mapping[str, Any]) -> str:
    """The raw call, one line: the command and what it is about (the card's `<details>`)."""
    parts = [str(arguments.get("command", "?"))]
    if arguments.get("page"):
        parts.append(str(arguments["page"]))
    action = arguments.get("action")
    if isinstance(action, dict):
        parts.append(str(action.get("type", "?")))
        for key in ("ref", "key", "url", "direction"):
            if action.get(key):
                parts.append(str(action[key]))
        if action.get("text") is not None:
            parts.append(json.dumps(str(action["text"]), ensure_ascii=False))
    assertion = arguments.get("assertion")
    if isinstance(assertion, dict):
        parts.append(str(assertion.get("type", "?")))
    if arguments.get("detail") not in (None, "interactive"):
        parts.append(f"detail={arguments['detail']}")
    return clip(" ".join(parts), 200)


# What an action is, in words: (running, done, failed) forms, from the action and the element's name.
def _action_words(action: Mapping[str, Any], names: Mapping[str, str]) -> tuple[str, str, str]:
    kind = str(action.get("type", ""))
    ref = action.get("ref")
    target = clip(names.get(ref, "the element") if isinstance(ref, str) else "the element", NAME)
    if kind == "type":
        text = quoted(action.get("text", ""))
        return f"Typing {text} into {target}", f"Typed {text} into {target}", f"type {text} into {target}"
    if kind == "click":
        return f"Clicking {target}", f"Clicked {target}", f"click {target}"
    if kind == "press":
        key = clip(action.get("key", "a key"), NAME)
        return f"Pressing {key}", f"Pressed {key}", f"press {key}"
    if kind == "navigate":
        url = clip(action.get("url", "an address"), 120)
        return f"Going to {url}", f"Went to {url}", f"go to {url}"
    if kind == "scroll":
        way = clip(action.get("direction", ""), 20)
        return f"Scrolling {way}", f"Scrolled {way}", f"scroll {way}"
    if kind == "select":
        values = ", ".join(quoted(v) for v in action.get("values") or []) or "an option"
        return f"Choosing {values} in {target}", f"Chose {values} in {target}", f"choose {values} in {target}"
    if kind == "hover":
        return f"Pointing at {target}", f"Pointed at {target}", f"point at {target}"
    what = clip(kind or "an action", 20)
    return f"Doing {what} on {target}", f"Did {what} on {target}", f"do {what} on {target}"


def _verify_words(assertion: Any) -> str:
    if isinstance(assertion, dict) and assertion.get("type") == "text_present":
        return f"that the Page shows {quoted(assertion.get('text', ''))}"
    if isinstance(assertion, dict) and assertion.get("name"):
        return f"{quoted(assertion['name'])}"
    return "the Page"


def words(arguments: Mapping[str, Any], names: Mapping[str, str], page: str) -> tuple[str, str, str]:
    """(running, done, failed) headlines of a `computer_use` call."""
    command = arguments.get("command")
    where = f" {page}" if page else " the Page"
    if command == "list_pages":
        return "Looking at your ticked Pages", "Looked at your ticked Pages", "look at your ticked Pages"
    if command == "observe":
        return f"Reading{where}", f"Read{where}", f"read{where}"
    if command == "verify":
        what = _verify_words(arguments.get("assertion"))
        return f"Checking {what}", f"Checked {what}", f"check {what}"
    action = arguments.get("action")
    if command == "act" and isinstance(action, dict):
        return _action_words(action, names)
    name = clip(command or "a command", 30)
    return f"Running {name}", f"Ran {name}", f"run {name}"


def needs_you(message: str, names: Mapping[str, str], arguments: Mapping[str, Any]) -> str:
    """What the person must do, from the runtime's reason (its own words, never the Page's)."""
    if message in NEEDS:
        return NEEDS[message]
    action = arguments.get("action")
    if message == PRESSED and isinstance(action, dict):
        return f"press {clip(names.get(str(action.get('ref')), 'the control'), NAME)} yourself"
    if "leaves the origin" in message:
        return "open the new site yourself"
    concept = CONCEPT.search(message)
    if concept is not None:
        return f"confirm “{concept.group(1)}” yourself"
    return "take over"


@dataclass(frozen=True)
class Card:
    """One card of an assistant message. Updated in place by `call_id` (running → ok | failed | needs_user)."""

    message: str
    call_id: str
    status: str
    headline: str
    """The person's words: what was done, or what the person must do."""
    kind: Kind = "call"
    detail: str = ""
    """A line for the person below the headline (what went wrong, what to do)."""
    command: str = ""
    """The raw call (shown in the card's details)."""
    page: str = ""
    backend: str = ""
    reason: str = ""
    """`reason_code: message`, as the runtime said it (details)."""
    hint: str = ""
    """The hint the runtime wrote for the model (details; never shown to the person as advice)."""
    summary: str = ""
    """The runtime's message on success (details)."""
    retryable: bool = False
    """A provider error that a retry may get past (a missing key, for one, never is)."""
    approval: dict[str, str] | None = field(default=None)

    def but(self, **changes: Any) -> Card:
        return replace(self, **changes)

    def event(self) -> dict[str, Any]:
        """The card as the console's event: every string bounded."""
        data = asdict(self)
        limits = {"call_id": 100, "command": 200, "page": 160, "reason": 600, "detail": 600, "headline": 240}
        for key, value in data.items():
            if isinstance(value, str):
                data[key] = clip(value, limits.get(key, SHORT))
        if self.approval is not None:
            data["approval"] = {key: clip(value) for key, value in self.approval.items()}
        else:
            del data["approval"]
        return {"type": "card", **data}
