"""How `computer-use eval` reads and grades a model's answer: the text after its last `ANSWER:` line, compared
exactly after collapsing whitespace and ignoring case, nothing else forgiven."""

from __future__ import annotations

import pytest

from host.evals.runner import given_answer, grade, read_tokens
from host.providers.base import AssistantTurn, ToolCall, ToolResult, ToolResults, UserText
from runtime.observation import estimate

pytestmark = pytest.mark.req("eval:runner")


def test_the_answer_is_the_text_after_the_last_answer_line() -> None:
    reply = "First I thought ANSWER: 12 was it.\nANSWER: 167\nOn second look:\n  ANSWER:  168  \n"
    assert given_answer(reply) == "168"


def test_a_reply_without_an_answer_line_has_no_answer_and_fails() -> None:
    assert given_answer("The listing has 168 products.") is None
    assert not grade(None, "168")


def test_whitespace_and_case_are_forgiven() -> None:
    assert grade("lagoon  Ember\tfleece", "Lagoon ember Fleece")


@pytest.mark.parametrize("given", ["167", "168.", "€ 10.99", "10.99", "about 168", "**168**"])
def test_anything_but_whitespace_and_case_is_a_wrong_answer(given: str) -> None:
    expected = "€10.99" if "10.99" in given else "168"
    assert not grade(given, expected)


def test_tokens_count_each_entry_once_per_model_request_that_read_it() -> None:
    call = ToolCall("c1", "computer_use", {"command": "list_pages"})
    transcript = [
        UserText("question"),
        AssistantTurn("", (call,)),
        ToolResults((ToolResult("c1", "x" * 250),)),
        AssistantTurn("ANSWER: 1"),
    ]
    first = estimate("question")
    second = first + estimate('{"command": "list_pages"}') + estimate("x" * 250)
    assert read_tokens(transcript) == first + second
