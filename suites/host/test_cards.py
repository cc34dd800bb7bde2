"""Cards in the person's words (host/cards.py): what each call's headline says, what a hand-over asks of the person,
and that every field of the event is bounded whatever a Page or a model put in it."""

from __future__ import annotations

import pytest

from host.cards import Card, element_names, needs_you, words
from runtime.failures import DIALOG_OPEN
from runtime.policy import CAPTCHA, SIGN_IN

OBSERVATION = "\n".join(
    ["<page nonce=abc>", 'kja4 textbox "First name"', 'kja5 button "Save"', "kja6 checkbox", "</page nonce=abc>"]
)
NAMES = element_names(OBSERVATION)


@pytest.mark.req("app:cards-in-words")
@pytest.mark.parametrize(
    ("arguments", "done"),
    [
        ({"command": "act", "action": {"type": "type", "ref": "kja4", "text": "Ada Lovelace"}},
         "Typed “Ada Lovelace” into First name"),
        ({"command": "act", "action": {"type": "click", "ref": "kja5"}}, "Clicked Save"),
        ({"command": "act", "action": {"type": "click", "ref": "kja6"}}, "Clicked checkbox"),
        ({"command": "act", "action": {"type": "press", "key": "Enter"}}, "Pressed Enter"),
        ({"command": "act", "action": {"type": "navigate", "url": "https://example.com/"}},
         "Went to https://example.com/"),
        ({"command": "observe", "page": "page-2"}, "Read Checkout"),
        ({"command": "list_pages"}, "Looked at your ticked Pages"),
        ({"command": "verify", "assertion": {"type": "text_present", "text": "Subscribed"}},
         "Checked that the Page shows “Subscribed”"),
    ],
)  # fmt: skip
def test_a_card_headline_says_what_was_done_in_plain_words(arguments: dict, done: str) -> None:
    assert words(arguments, NAMES, "Checkout")[1] == done


@pytest.mark.req("app:cards-in-words")
@pytest.mark.parametrize(
    ("message", "asked"),
    [
        (SIGN_IN, "sign in"),
        (CAPTCHA, "solve the CAPTCHA"),
        (DIALOG_OPEN, "answer the dialog"),
        ("This control is a sensitive or irreversible action (delete). The user must confirm it.",
         "confirm “delete” yourself"),
    ],
)  # fmt: skip
def test_a_hand_over_asks_the_person_for_what_the_runtime_needs(message: str, asked: str) -> None:
    assert needs_you(message, NAMES, {}) == asked


@pytest.mark.req("app:cards-in-words")
def test_every_field_of_a_card_event_is_bounded() -> None:
    flood = "<img src=x onerror=alert(1)>" * 1000
    fields = {"detail": flood, "command": flood, "page": flood, "reason": flood, "hint": flood}
    event = Card("m1", flood, "failed", flood, **fields).event()
    assert event["type"] == "card"
    assert all(len(value) <= 600 for value in event.values() if isinstance(value, str)), {
        key: len(value) for key, value in event.items() if isinstance(value, str)
    }
    long_name = element_names('e1 textbox "' + "x" * 5000 + '"')
    assert len(words({"command": "act", "action": {"type": "click", "ref": "e1"}}, long_name, "")[1]) < 100
