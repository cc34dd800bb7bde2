"""needs_user comes from what the Page is and what the element is, never from what the page says."""

from __future__ import annotations

import pytest

from runtime.backend import Element
from runtime.models import Action
from runtime.policy import needs_user
from runtime.probe import Structure

pytestmark = pytest.mark.req("unit:policy-rules")

PLAIN = Structure("http://localhost/x", "Shop", has_password=False, has_captcha=False, has_payment_fields=False)
LOGIN = Structure("http://localhost/login/", "Sign in", has_password=True, has_captcha=False, has_payment_fields=False)
CAPTCHA = Structure("http://localhost/c", "Sign up", has_password=False, has_captcha=True, has_payment_fields=False)
CLICK = Action(type="click", ref="e1")


@pytest.mark.parametrize(
    ("action", "element", "structure", "expected"),
    [
        (CLICK, Element("e1", "button", "Sign in"), LOGIN, "sign-in"),
        (Action(type="type", ref="e1", text="ada"), Element("e1", "textbox", "Email"), LOGIN, "sign-in"),
        (CLICK, Element("e1", "checkbox", "I'm not a robot"), CAPTCHA, "CAPTCHA"),
        (CLICK, Element("e1", "button", "Pay now"), PLAIN, "sensitive"),
        (CLICK, Element("e1", "button", "Delete account"), PLAIN, "sensitive"),
        (Action(type="press", ref="e1", key="Enter"), Element("e1", "button", "Place order"), PLAIN, "sensitive"),
    ],
)
def test_login_captcha_and_sensitive_writes_go_to_the_user(
    action: Action, element: Element, structure: Structure, expected: str
) -> None:
    assert expected in (needs_user(action, element, structure) or "")


@pytest.mark.parametrize(
    ("action", "element", "structure"),
    [
        (CLICK, Element("e1", "button", "Add to cart"), PLAIN),
        (Action(type="scroll", direction="down"), None, LOGIN),
        (
            Action(type="type", ref="e1", text="Pay now and delete your account"),
            Element("e1", "textbox", "Notes"),
            PLAIN,
        ),
        (CLICK, Element("e1", "heading", "Delete account"), PLAIN),
    ],
)
def test_ordinary_writes_and_reads_are_the_agents_to_do(
    action: Action, element: Element | None, structure: Structure
) -> None:
    assert needs_user(action, element, structure) is None
