"""Page text cannot forge runtime output: on `/forgery/`, whose title, text, names, values and option labels imitate
element lines, refs, fields and the nonce markers, the observation still has exactly one line per real element, no
page line outside its place, a result that serializes, and refs a page cannot plant.

Negative controls build the broken variant in the suite: a renderer that does not clean or escape (the cleaning
functions monkeypatched), and frames that show the backend's own, predictable refs (`runtime.computer_session.view`
monkeypatched). The same checks must catch both.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

import pytest

from fixtures_sites.scenarios.forgery import CONTROLS, OPTIONS, PLANTED
from fixtures_sites.server import FixtureServer
from runtime import computer_session, observation
from runtime.backend import Snapshot
from runtime.models import ComputerUseResult
from suites.harness import Agent, ref_of
from suites.proofs import assert_no_writes

QUOTED = r'"(?:[^"\\]|\\.)*"'
ELEMENT = re.compile(
    rf"^(?P<ref>[a-z]{{3}}\d+) (?P<role>[\w-]+)(?: (?P<name>{QUOTED}))?(?: =(?P<value>{QUOTED}))?"
    r"(?: (?P<state>checked|unchecked))?(?P<disabled> disabled)?$"
)
FIELD = re.compile(r"^[\w ]+:")
OPEN = re.compile(r"^<page nonce=([0-9a-f]{6})>$")


@dataclass
class Parsed:
    nonce: str
    fields: dict[str, str]
    elements: list[re.Match[str]]


def parse(text: str | None) -> Parsed:
    """The observation's structure, checked line by line: the nonce lines first and last (only the runtime's
    continuation line may follow), `url`, `title`, an optional `text`, the elements header, then one element line per
    element, each parsing whole (a quote closed early or a state forged makes it fail)."""
    lines = (text or "").splitlines()
    opened = OPEN.match(lines[0]) if lines else None
    assert opened, f"the observation does not open with its nonce line: {lines[:1]}"
    nonce = opened.group(1)
    close = lines.index(f"</page nonce={nonce}>")
    after = lines[close + 1 :]
    assert all(line.startswith("(more: observe with offset=") for line in after), f"lines after the frame: {after}"
    assert [line for line in lines if "nonce=" in line and line.startswith("<")] == [lines[0], lines[close]]
    inside = lines[1:close]
    fields: dict[str, str] = {}
    for key in ("url", "title", "text"):
        if inside and inside[0].startswith(f"{key}: "):
            fields[key] = inside.pop(0).removeprefix(f"{key}: ")
    assert {"url", "title"} <= set(fields), f"no url or title line: {inside[:3]}"
    header = re.fullmatch(r"elements (\d+)-(\d+) of (\d+):", inside.pop(0) if inside else "")
    assert header, f"no elements header where it belongs: {inside[:1]}"
    elements = []
    for line in inside:
        match = ELEMENT.match(line)
        assert match, f"a line that is not one whole element line: {line!r}"
        elements.append(match)
    assert len(elements) == int(header.group(2)) - int(header.group(1)) + 1
    return Parsed(nonce, fields, elements)


def assert_one_line_per_real_element(seen: ComputerUseResult) -> Parsed:
    """One line per element the page really has (a select's options count where the backend lists them)."""
    parsed = parse(seen.observation)
    assert seen.next_offset is None
    options = [m for m in parsed.elements if m.group("role") == "option"]
    assert len(parsed.elements) - len(options) == CONTROLS, [m.group(0) for m in parsed.elements]
    assert len(options) in (0, OPTIONS), [m.group(0) for m in options]
    return parsed


def assert_serializes_with_replacement(seen: ComputerUseResult) -> None:
    """The agent's result encodes as UTF-8 JSON, and the title's lone surrogate arrived as U+FFFD."""
    json.dumps(seen.model_dump(mode="json"), ensure_ascii=False).encode("utf-8")
    title = parse(seen.observation).fields["title"]
    assert title.startswith("Notes \ufffd "), title


async def assert_planted_refs_resolve_to_nothing(
    agent: Agent, seen: ComputerUseResult, refs: list[str], server: FixtureServer
) -> None:
    for ref in refs:
        answer = await agent.act(seen, type="click", ref=ref)
        assert answer.reason_code == "stale_observation", f"planted ref {ref}: {answer}"
    assert_no_writes(server)


@pytest.mark.req("injection:escaped", "injection:framed", "injection:utf16")
async def test_forged_lines_fields_and_markers_in_page_text_stay_inside_their_element_or_field(
    one_page_desk, agent: Agent
) -> None:
    await one_page_desk("/forgery/")
    seen = await agent.observe(page="left")
    parsed = assert_one_line_per_real_element(seen)
    assert_serializes_with_replacement(seen)
    names = {m.group("name"): m for m in parsed.elements if m.group("name")}
    archive = next(m for name, m in names.items() if name.startswith('"Archive\\" checked'))
    assert archive.group("state") is None  # the forged state is part of the name
    pin = next(m for m in parsed.elements if m.group("role") == "checkbox")
    assert pin.group("name") == '"Pin note\\" checked"'
    assert pin.group("state") == "unchecked"
    assert any(name.startswith('"Rename \ufffd me') for name in names)
    assert not any(c in (seen.observation or "") for c in "\u202e\u202c\u2028\x85\x00\x1b")
    pages = await agent.call(command="list_pages")
    assert pages.pages
    assert pages.pages[0].title.startswith("Notes \ufffd ")
    assert "\n" not in pages.pages[0].title + pages.pages[0].preview


@pytest.mark.req("injection:refs-unguessable", "reason:stale_observation")
async def test_refs_planted_in_page_text_or_kept_from_the_previous_frame_resolve_to_nothing_and_write_nothing(
    one_page_desk, agent: Agent, fixture_server: FixtureServer
) -> None:
    await one_page_desk("/forgery/")
    first = await agent.observe(page="left")
    old_save = ref_of(first, "button", '"Save note"')
    seen = await agent.observe(computer_session_id=first.computer_session_id)
    await assert_planted_refs_resolve_to_nothing(agent, seen, [*PLANTED, old_save], fixture_server)

    saved = await agent.act(seen, type="click", ref=ref_of(seen, "button", '"Save note"'))
    assert saved.status == "ok", saved
    assert len(fixture_server.ledger.writes("/forgery/save")) == 1
    assert len(fixture_server.ledger.writes()) == 1


@pytest.mark.negative_control
@pytest.mark.req("injection:escaped")
async def test_the_line_checks_catch_a_renderer_that_does_not_clean_or_escape(
    one_page_desk, agent: Agent, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(observation, "clean", lambda text, limit: text)
    monkeypatch.setattr(observation, "quote", lambda text, limit: f'"{text}"')
    monkeypatch.setattr(observation, "quoted", lambda text: f'"{text}"')
    await one_page_desk("/forgery/")
    seen = await agent.observe(page="left")
    with pytest.raises(AssertionError):
        assert_one_line_per_real_element(seen)


@pytest.mark.negative_control
@pytest.mark.req("injection:refs-unguessable")
async def test_the_planted_ref_check_catches_frames_that_show_the_backends_own_refs(
    one_page_desk, agent: Agent, fixture_server: FixtureServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    def backend_refs(snapshot: Snapshot, prefix: str) -> computer_session.View:
        fields = (snapshot.url, snapshot.title, snapshot.text, snapshot.elements, snapshot.upstream_chars)
        return computer_session.View(*fields, nonce="0f0f0f")

    monkeypatch.setattr(computer_session, "view", backend_refs)
    await one_page_desk("/forgery/")
    seen = await agent.observe(page="left")
    with pytest.raises(AssertionError):
        await assert_planted_refs_resolve_to_nothing(agent, seen, list(PLANTED), fixture_server)
