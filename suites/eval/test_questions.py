"""The evaluation set as data (host/evals/questions.xml and its script): ten independent, read-only questions over
the fixture sites, each with one short answer, each on Pages the fixture server serves without writing."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from fixtures_sites.scenarios import ROUTES
from host.evals.runner import QUESTIONS, SCRIPT, EvalFileError, Question, load_questions, load_script
from host.providers.script import parse_steps

pytestmark = pytest.mark.req("eval:set")

WRITES = re.compile(
    r"\b(add|buy|book|click|tap|type|enter|fill|submit|subscribe|save|delete|remove|change|set|select|press|tick|"
    r"check out|sign (?:in|up)|log in|order|purchase|send|post|upload|edit|update|write)\b",
    re.IGNORECASE,
)
"""Verbs that would ask for a change (imperatives); a read-only question uses none of them."""


def asks_to_change(question: Question) -> list[str]:
    return WRITES.findall(question.question)


def route_of(path: str):
    bare = path.split("?", 1)[0]
    return next((route for route in ROUTES if route.path == bare and route.method in ("GET", "*")), None)


def test_the_set_has_ten_questions_each_with_a_question_an_answer_and_its_pages() -> None:
    questions = load_questions(QUESTIONS)
    assert len(questions) == 10
    assert all(q.question and q.answer and q.pages for q in questions)


def test_ids_and_questions_are_unique() -> None:
    questions = load_questions(QUESTIONS)
    assert len({q.id for q in questions}) == len(questions)
    assert len({q.question.casefold() for q in questions}) == len(questions)


def test_every_answer_is_short_and_one_line() -> None:
    for question in load_questions(QUESTIONS):
        assert len(question.answer) <= 40, question.id
        assert "\n" not in question.answer, question.id


def test_no_question_asks_to_change_anything() -> None:
    offending = {q.id: asks_to_change(q) for q in load_questions(QUESTIONS) if asks_to_change(q)}
    assert not offending, f"questions asking for a change: {offending}"


def test_every_page_of_a_question_is_a_fixture_route_that_reads_and_never_writes() -> None:
    for question in load_questions(QUESTIONS):
        for path in question.pages:
            route = route_of(path)
            assert route is not None, f"question {question.id}: no fixture route serves {path}"
            assert not route.write, f"question {question.id}: {path} writes"
            assert not route.attacker, f"question {question.id}: {path} is an attacker route"
            assert not route.stall, f"question {question.id}: {path} stalls"


def test_the_packaged_script_has_steps_for_exactly_the_questions_with_two_calls_or_more_each() -> None:
    questions = load_questions(QUESTIONS)
    script = load_script(SCRIPT)
    assert set(script) == {q.id for q in questions}
    for qid, raw in script.items():
        steps = parse_steps(raw)
        assert sum(len(step.calls) for step in steps) >= 2, qid
        assert all(name == "computer_use" for step in steps for name, _ in step.calls), qid
        commands = {arguments["command"] for step in steps for _, arguments in step.calls}
        assert commands <= {"list_pages", "observe"}, f"question {qid}'s script does more than read: {commands}"


def test_a_question_file_with_a_duplicate_id_or_a_missing_answer_is_refused(tmp_path: Path) -> None:
    pair = "<qa_pair id='1'><pages><page>/realistic/shop</page></pages><question>Q?</question>{answer}</qa_pair>"
    duplicate = tmp_path / "duplicate.xml"
    duplicate.write_text(f"<evaluation>{pair.format(answer='<answer>1</answer>') * 2}</evaluation>")
    missing = tmp_path / "missing.xml"
    missing.write_text(f"<evaluation>{pair.format(answer='')}</evaluation>")
    with pytest.raises(EvalFileError, match="two qa_pairs have the id 1"):
        load_questions(duplicate)
    with pytest.raises(EvalFileError, match="needs a <question> and an <answer>"):
        load_questions(missing)


@pytest.mark.negative_control
def test_the_read_only_check_flags_a_question_that_asks_for_a_write() -> None:
    write = Question(
        "x", "Add the cheapest mug to the cart, then tell me the cart's total.", "€10.99", ("/catalogue/",)
    )
    assert asks_to_change(write) == ["Add"]
