"""Actions and Assertions reject what cannot be meant, with a message that says what to fix."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from runtime.models import Action, Assertion

pytestmark = pytest.mark.req("unit:models")


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"type": "click"}, "click needs ref"),
        ({"type": "type", "ref": "e1"}, "type needs text"),
        ({"type": "select", "ref": "e1"}, "select needs values"),
        ({"type": "navigate", "url": "javascript:alert(1)"}, "needs an absolute http"),
        ({"type": "click", "x": 10}, "both x and y"),
        ({"type": "type", "x": 1, "y": 2, "text": "a"}, "takes a ref, not a point"),
        ({"type": "click", "ref": "e1", "x": 1, "y": 2}, "either ref or x/y"),
        ({"type": "click", "ref": "e1", "then": "delete"}, "Extra inputs are not permitted"),
        ({"type": "drag", "ref": "e1"}, "Input should be"),
    ],
)
def test_an_action_missing_what_its_type_needs_is_rejected_with_the_fix(raw: dict, message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        Action.model_validate(raw)


def test_one_action_of_each_type_validates_and_knows_whether_it_writes() -> None:
    actions = [
        Action(type="click", ref="e1"),
        Action(type="type", ref="e2", text="Ada", submit=True),
        Action(type="press", key="Enter"),
        Action(type="scroll", direction="down"),
        Action(type="select", ref="e3", values=["uk"]),
        Action(type="navigate", url="http://localhost/"),
        Action(type="click", x=10, y=20),
    ]
    assert [a.is_write for a in actions] == [True, True, True, False, True, True, True]
    assert actions[-1].is_point
    assert not actions[0].is_point


@pytest.mark.parametrize(
    ("key", "sent"),
    [
        ("Enter", "Enter"),
        ("tab", "Tab"),
        ("Esc", "Escape"),
        (" ", "Space"),
        ("+", "+"),
        ("a", "a"),
        ("F12", "F12"),
        ("Control+A", "Control+A"),
        ("ctrl+a", "Control+a"),
        ("Shift+Tab", "Shift+Tab"),
        ("Meta+Shift+K", "Meta+Shift+K"),
        ("cmd+shift+arrowup", "Meta+Shift+ArrowUp"),
    ],
)
@pytest.mark.req("keys:one-chord")
def test_press_takes_one_key_or_one_chord_spelled_as_every_backend_knows_it(key: str, sent: str) -> None:
    assert Action(type="press", key=key).key == sent


@pytest.mark.parametrize(
    "key",
    ["Tab Tab Enter", "Enter,Enter", "a b", "", "Control+A+B", "Shift+Shift+A", "Control++", "Shift", "Control+",
     "é", "Hyper+A", "Enter\n"],
)  # fmt: skip
@pytest.mark.req("keys:one-chord")
def test_several_keys_or_a_key_one_backend_would_misread_is_rejected_saying_what_press_takes(key: str) -> None:
    with pytest.raises(ValidationError, match="exactly one key or one chord per act"):
        Action(type="press", key=key)


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"type": "all_of", "of": []}, "empty assertion proves nothing"),
        ({"type": "any_of"}, "any_of needs of"),
        ({"type": "text_present", "text": "   "}, "empty assertion proves nothing"),
        ({"type": "element_state", "state": "checked", "expected": True}, "ref, or role and name"),
        ({"type": "element_state", "ref": "e1", "state": "value", "expected": True}, "expected as a string"),
        ({"type": "element_state", "ref": "e1", "state": "checked", "expected": "yes"}, "true or false"),
        ({"type": "url_matches"}, "url_matches needs pattern"),
        ({"type": "url_matches", "pattern": "("}, "not a valid regular expression"),
        ({"type": "element_count", "role": "button", "count": -1}, "greater than or equal to 0"),
    ],
)
def test_an_assertion_that_could_prove_nothing_is_rejected(raw: dict, message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        Assertion.model_validate(raw)


def test_assertions_nest_through_all_of_and_any_of() -> None:
    nested = Assertion.model_validate(
        {
            "type": "all_of",
            "of": [
                {"type": "url_matches", "pattern": "/done"},
                {
                    "type": "any_of",
                    "of": [{"type": "text_present", "text": "Saved"}, {"type": "title_matches", "pattern": "x"}],
                },
            ],
        }
    )
    assert nested.of is not None
    assert nested.of[1].of is not None
    assert len(nested.of[1].of) == 2
