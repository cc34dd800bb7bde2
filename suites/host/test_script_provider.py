"""The script provider: a task file's steps, their references resolved against realistic earlier results.

The results in these transcripts are `ComputerUseResult`s serialized exactly as the host's agent loop puts them in
the transcript (`runtime.models.as_text`: the JSON of the result, its observation on the lines after, and the image
placeholder appended once the model has seen its image).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from host.providers import make_provider
from host.providers.base import (
    IMAGE_PLACEHOLDER,
    AssistantTurn,
    Entry,
    ModelReply,
    ProviderError,
    ToolCall,
    ToolResult,
    ToolResults,
    UserText,
)
from host.providers.script import FINAL, MAX_BYTES, ScriptProvider
from runtime.models import ComputerUseResult, PageInfo, as_text

pytestmark = pytest.mark.req("provider:script")

DEMO = Path(__file__).resolve().parents[2] / "host" / "scripts" / "demo.json"
FORM = PageInfo(
    handle="page-3f2a",
    relation="left",
    title="Subscribe — computer-use demo",
    url="http://127.0.0.1:41234/",
    preview="Subscribe The computer-use demo",
    revision=2,
)
NEWS = PageInfo(
    handle="page-9c1d", relation="right", title="Daily News", url="http://127.0.0.1:8000/news", preview="", revision=1
)


def observation(title: str, *lines: str, text: str = "") -> str:
    head = [f"url: {FORM.url}", f"title: {title}"] + ([f"text: {text}"] if text else [])
    return "\n".join([*head, f"elements 1-{len(lines)} of {len(lines)}:", *lines])


FORM_LINES = ('e3 textbox "Email"', 'e4 button "Subscribe"', 'e5 link "Subscribe to the digest"')


def listed(*pages: PageInfo) -> ComputerUseResult:
    return ComputerUseResult(status="ok", message=f"{len(pages)} authorized Page(s).", pages=list(pages))


def observed(
    frame: str, *lines: str, session: str = "cs-71", page: PageInfo = FORM, text: str = ""
) -> ComputerUseResult:
    return ComputerUseResult(
        status="ok",
        message="Observed with backend playwright_mcp.",
        computer_session_id=session,
        backend="playwright_mcp",
        frame_id=frame,
        page=page,
        observation=observation(page.title, *lines, text=text),
    )


def verified(session: str = "cs-71") -> ComputerUseResult:
    return ComputerUseResult(
        status="ok",
        message="verified on the live Page",
        computer_session_id=session,
        backend="playwright_mcp",
        verified=True,
    )


def text_of(result: ComputerUseResult) -> str:
    return as_text(result.model_dump(mode="json", exclude_none=True))


class Run:
    """A transcript built the way the agent loop builds it: each reply, then the results of its calls."""

    def __init__(self, message: str = "Subscribe me on the demo Page.") -> None:
        self.transcript: list[Entry] = [UserText(message)]

    def reply(self, reply: ModelReply) -> None:
        self.transcript.append(AssistantTurn(reply.text, reply.tool_calls))

    def results(self, *results: ComputerUseResult, placeholder: bool = False) -> None:
        calls = self.transcript[-1].tool_calls  # type: ignore[union-attr]
        texts = [text_of(r) + (f"\n{IMAGE_PLACEHOLDER}" if placeholder else "") for r in results]
        self.transcript.append(ToolResults(tuple(ToolResult(c.id, t) for c, t in zip(calls, texts, strict=True))))


def script(tmp_path: Path, steps: list[dict[str, Any]]) -> ScriptProvider:
    path = tmp_path / "task.json"
    path.write_text(json.dumps(steps), encoding="utf-8")
    return ScriptProvider.load(path)


def call(**arguments: Any) -> dict[str, Any]:
    return {"name": "computer_use", "arguments": arguments}


async def quiet(_: str) -> None:
    return None


async def complete(provider: ScriptProvider, run: Run) -> ModelReply:
    reply = await provider.complete("system", run.transcript, [], quiet)
    run.reply(reply)
    return reply


STEPS = [
    {"say": "Listing.", "calls": [call(command="list_pages")]},
    {"say": "Observing.", "calls": [call(command="observe", page={"$page": "computer-use demo"})]},
    {
        "say": "Typing.",
        "calls": [
            call(
                command="act",
                computer_session_id={"$session": "demo"},
                frame_id={"$frame": "demo"},
                action={"type": "type", "ref": {"$ref": ["textbox", "email"]}, "text": "ada@example.com"},
            )
        ],
    },
    {
        "say": "Clicking.",
        "calls": [
            call(
                command="act",
                computer_session_id={"$session": "demo"},
                frame_id={"$frame": "demo"},
                action={"type": "click", "ref": {"$ref": ["button", "Subscribe"]}},
            )
        ],
    },
    {"say": "Checking.", "calls": [call(command="verify", computer_session_id={"$session": "127.0.0.1:41234"})]},
]


async def test_references_resolve_to_the_handle_session_frame_and_ref_of_the_latest_results(tmp_path: Path) -> None:
    provider, run = script(tmp_path, STEPS), Run()
    assert (await complete(provider, run)).tool_calls == (
        ToolCall("script-1-1", "computer_use", {"command": "list_pages"}),
    )
    run.results(listed(NEWS, FORM))
    assert (await complete(provider, run)).tool_calls[0].arguments == {"command": "observe", "page": "page-3f2a"}
    # A visual observe: the loop has since replaced its image with the placeholder after the JSON.
    run.results(observed("fr-1", *FORM_LINES), placeholder=True)
    typed = (await complete(provider, run)).tool_calls[0].arguments
    assert typed == {
        "command": "act",
        "computer_session_id": "cs-71",
        "frame_id": "fr-1",
        "action": {"type": "type", "ref": "e3", "text": "ada@example.com"},
    }
    # The act answered with a new frame whose refs changed: the newest result wins.
    run.results(observed("fr-2", 'e9 textbox "Email" ="ada@example.com"', 'e10 button "Subscribe" disabled'))
    clicked = (await complete(provider, run)).tool_calls[0].arguments
    assert (clicked["frame_id"], clicked["action"]["ref"]) == ("fr-2", "e10")
    run.results(observed("fr-3", 'e10 button "Subscribe"', text="Subscribed ada@example.com"))
    checked = (await complete(provider, run)).tool_calls[0].arguments
    assert checked == {"command": "verify", "computer_session_id": "cs-71"}


async def test_a_ref_prefers_the_exact_name_and_refuses_to_guess_between_near_names(tmp_path: Path) -> None:
    provider = script(
        tmp_path,
        [
            {"calls": [call(command="observe", page="left")]},
            {"calls": [call(ref={"$ref": ["link", "Subscribe to the digest"]})]},
            {"calls": [call(ref={"$ref": ["link", "digest"]})]},
        ],
    )
    run, lines = Run(), (*FORM_LINES, 'e6 link "Subscribe to the digest (weekly)"')
    await complete(provider, run)
    run.results(observed("fr-1", *lines))
    assert (await complete(provider, run)).tool_calls[0].arguments == {"ref": "e5"}
    run.results(observed("fr-2", *lines))
    with pytest.raises(ProviderError) as caught:
        await provider.complete("s", run.transcript, [], quiet)
    assert caught.value.kind == "script"
    assert caught.value.message.startswith("step 3:")
    assert "matches 2 elements" in caught.value.message


@pytest.mark.parametrize(
    ("reference", "why"),
    [
        ({"$ref": ["button", "Unsubscribe"]}, "matches no element line"),
        ({"$page": "Weather"}, "matches no Page of the latest list_pages"),
        ({"$page": "127.0.0.1"}, "matches 2 Pages"),
        ({"$session": "Daily News"}, "finds no earlier result with a computer_session_id"),
        ({"$frame": "Daily News"}, "finds no earlier result with a frame_id"),
    ],
    ids=["ref", "page-none", "page-several", "session", "frame"],
)
async def test_an_unresolvable_reference_is_a_script_error_naming_the_step(
    tmp_path: Path, reference: dict[str, Any], why: str
) -> None:
    provider = script(tmp_path, [*STEPS[:2], {"say": "Next.", "calls": [call(command="observe", page=reference)]}])
    run = Run()
    await complete(provider, run)
    run.results(listed(NEWS, FORM))
    await complete(provider, run)
    run.results(observed("fr-1", *FORM_LINES))
    with pytest.raises(ProviderError) as caught:
        await provider.complete("s", run.transcript, [], quiet)
    assert caught.value.kind == "script"
    assert caught.value.message.startswith("step 3:")
    assert why in caught.value.message


async def test_a_page_reference_before_any_list_pages_says_so(tmp_path: Path) -> None:
    provider = script(tmp_path, [STEPS[1]])
    with pytest.raises(ProviderError, match=r"step 1: .* needs an earlier list_pages result"):
        await provider.complete("s", [UserText("go")], [], quiet)


async def test_the_next_step_is_the_number_of_replies_so_far_so_a_retry_gets_the_same_step(tmp_path: Path) -> None:
    provider, run = script(tmp_path, STEPS), Run()
    await complete(provider, run)
    run.results(listed(FORM))
    first = await provider.complete("s", run.transcript, [], quiet)
    again = await provider.complete("s", run.transcript, [], quiet)
    assert first == again
    assert first.text == "Observing."
    assert first.tool_calls[0].id == "script-2-1"


async def test_the_end_of_the_script_is_a_final_reply_without_calls(tmp_path: Path) -> None:
    provider = script(tmp_path, [{"say": "One step only."}])
    run = Run()
    assert await complete(provider, run) == ModelReply("One step only.", ())
    run.transcript.append(UserText("And now?"))
    assert await complete(provider, run) == ModelReply(FINAL, ())


async def test_say_streams_through_on_text_in_a_few_chunks(tmp_path: Path) -> None:
    say = "I'll type the email address into the **Email** box, then press `Subscribe`."
    provider = script(tmp_path, [{"say": say}])
    pieces: list[str] = []

    async def sink(text: str) -> None:
        pieces.append(text)

    reply = await provider.complete("s", [UserText("go")], [], sink)
    assert "".join(pieces) == say == reply.text
    assert 2 <= len(pieces) <= 3


async def test_the_demo_script_runs_the_demo_form_to_the_end(tmp_path: Path) -> None:
    provider, run = ScriptProvider.load(DEMO), Run()
    answers = {
        "list_pages": lambda: listed(FORM),
        "observe": lambda: observed("fr-1", 'e3 textbox "Email"', 'e4 button "Subscribe"'),
        "act": lambda: observed(f"fr-{len(run.transcript)}", 'e3 textbox "Email"', 'e4 button "Subscribe"'),
        "verify": verified,
    }
    commands = []
    for _ in range(len(provider.steps) + 1):
        reply = await complete(provider, run)
        if not reply.tool_calls:
            break
        commands += [(c.arguments["command"], c.arguments.get("action", {}).get("type")) for c in reply.tool_calls]
        run.results(*(answers[c.arguments["command"]]() for c in reply.tool_calls))
    assert commands == [("list_pages", None), ("observe", None), ("act", "type"), ("act", "click"), ("verify", None)]
    acts = [
        c
        for e in run.transcript
        if isinstance(e, AssistantTurn)
        for c in e.tool_calls
        if c.arguments["command"] == "act"
    ]
    assert [c.arguments["action"]["ref"] for c in acts] == ["e3", "e4"]
    assert acts[0].arguments["action"]["text"] == "ada@example.com"
    verify = run.transcript[-3].tool_calls[0].arguments  # type: ignore[union-attr]
    assert verify["assertion"] == {"type": "text_present", "text": "Subscribed"}
    assert reply.tool_calls == ()
    assert reply.text


async def test_without_a_script_the_provider_says_how_to_configure_a_model() -> None:
    reply = await make_provider("script").complete("s", [UserText("hi")], [], quiet)
    assert reply.tool_calls == ()
    assert "ANTHROPIC_API_KEY" in reply.text
    assert "OPENAI_API_KEY" in reply.text


@pytest.mark.parametrize(
    ("content", "why"),
    [
        ('{"steps": []}', "a script is a JSON list of steps"),
        ('[{"say": "hi", "do": []}]', 'step 1: a step is an object with "say" and/or "calls"'),
        ('[{"say": 3}]', 'step 1: "say" is a string'),
        ('[{}, {"calls": [{"name": "computer_use"}]}]', 'step 2, call 1: a call is {"name": ..., "arguments": {...}}'),
        (
            '[{"calls": [{"name": "computer_use", "arguments": {"page": {"$pages": "x"}}}]}]',
            "a reference is one key of",
        ),
        ('[{"calls": [{"name": "computer_use", "arguments": {"ref": {"$ref": "Email"}}}]}]', '$ref takes ["role"'),
        ('[{"calls": [{"name": "computer_use", "arguments": {"page": {"$page": 1}}}]}]', "$page takes a substring"),
        ("[{]", "is not JSON"),
    ],
    ids=["not-a-list", "unknown-key", "say-type", "call-shape", "unknown-reference", "ref-shape", "page-type", "json"],
)
def test_an_invalid_script_is_refused_at_load_with_what_is_wrong(tmp_path: Path, content: str, why: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(ProviderError) as caught:
        make_provider("script", script=path)
    assert caught.value.kind == "script"
    assert why in caught.value.message


def test_a_script_larger_than_the_limit_is_refused_without_reading_it_all(tmp_path: Path) -> None:
    path = tmp_path / "huge.json"
    path.write_text(json.dumps([{"say": "x" * 10_000}] * (MAX_BYTES // 10_000 + 1)), encoding="utf-8")
    with pytest.raises(ProviderError, match="larger than 1000000 bytes"):
        ScriptProvider.load(path)


def test_a_missing_script_file_is_a_script_error(tmp_path: Path) -> None:
    with pytest.raises(ProviderError, match="cannot read the script"):
        make_provider("script", script=tmp_path / "absent.json")


SHOP = PageInfo(
    handle="page-5b10",
    relation="right",
    title="Outdoor gear — Alder & Pine",
    url="http://127.0.0.1:8000/realistic/shop",
    preview="",
    revision=1,
)
SHOP_LINES = ('a1 checkbox "Alder (18)" unchecked', 'a2 checkbox "Tundra (86)" unchecked')


def read_shop(*lines: str, frame: str = "cs-9-f1", next_offset: int | None = None, text: str = "") -> ComputerUseResult:
    result = observed(frame, *lines, session="cs-9", page=SHOP, text=text)
    return result.model_copy(update={"next_offset": next_offset})


async def test_a_match_in_say_is_the_text_its_regex_captured_in_the_latest_observation_on_that_page(
    tmp_path: Path,
) -> None:
    provider = script(
        tmp_path,
        [
            {"say": "Listing.", "calls": [call(command="list_pages")]},
            {"say": "Reading.", "calls": [call(command="observe", page={"$page": "/realistic/shop"})]},
            {"say": ["ANSWER: ", {"$match": ["/realistic/shop", r'checkbox "([^"(]+) \(86\)"']}, "."]},
        ],
    )
    run = Run("Which brand has the most products?")
    await complete(provider, run)
    run.results(listed(SHOP, NEWS))
    await complete(provider, run)
    run.results(read_shop(*SHOP_LINES, text="Showing 1–24 of 168"))
    reply = await complete(provider, run)
    assert reply.text == "ANSWER: Tundra."
    assert reply.tool_calls == ()


async def test_a_match_reads_what_the_page_said_not_what_the_script_expected(tmp_path: Path) -> None:
    steps = [
        {"say": "Reading.", "calls": [call(command="observe", page="page-5b10")]},
        {"say": ["ANSWER: ", {"$match": ["alder & pine", r"Showing \S+ of (\d+)"]}]},
    ]
    answers = []
    for total in ("168", "171"):
        run = Run()
        provider = script(tmp_path, steps)
        await complete(provider, run)
        run.results(read_shop(*SHOP_LINES, text=f"Showing 1–24 of {total}"))
        answers.append((await complete(provider, run)).text)
    assert answers == ["ANSWER: 168", "ANSWER: 171"]


async def test_a_match_takes_the_newest_observation_in_which_it_matches_so_a_continuation_can_answer(
    tmp_path: Path,
) -> None:
    provider = script(
        tmp_path,
        [
            {"say": "Reading.", "calls": [call(command="observe", page="page-5b10")]},
            {
                "say": "The rest.",
                "calls": [
                    call(
                        command="observe",
                        page="page-5b10",
                        frame_id={"$frame": "/realistic/shop"},
                        offset={"$next_offset": "/realistic/shop"},
                    )
                ],
            },
            {
                "say": [
                    "first ",
                    {"$match": ["shop", r'link "(Help[^"]*)"']},
                    ", last ",
                    {"$match": ["shop", r"(Lagoon \w+)"]},
                ]
            },
        ],
    )
    run = Run()
    await complete(provider, run)
    run.results(read_shop('a1 link "Help centre"', *SHOP_LINES, next_offset=3))
    second = await complete(provider, run)
    assert second.tool_calls[0].arguments["offset"] == 3
    assert second.tool_calls[0].arguments["frame_id"] == "cs-9-f1"
    run.results(read_shop('a4 button "Save Lagoon ember Fleece to wishlist"', frame="cs-9-f1"))
    third = await complete(provider, run)
    assert third.text == "first Help centre, last Lagoon ember"


@pytest.mark.parametrize(
    ("pattern", "why"),
    [
        (r'checkbox "(\w+) \(\d+\)"', "captures 2 different texts in one observation ('Alder', 'Tundra')"),
        (r"Summit \(\d+\)", "matches in no earlier observation on a Page matching '/realistic/shop'"),
    ],
    ids=["two-values", "no-match"],
)
async def test_a_match_that_captures_two_texts_or_none_is_a_script_error_never_a_guess(
    tmp_path: Path, pattern: str, why: str
) -> None:
    provider = script(
        tmp_path,
        [
            {"say": "Reading.", "calls": [call(command="observe", page="page-5b10")]},
            {"say": ["ANSWER: ", {"$match": ["/realistic/shop", pattern]}]},
        ],
    )
    run = Run()
    await complete(provider, run)
    run.results(read_shop(*SHOP_LINES))
    with pytest.raises(ProviderError) as caught:
        await complete(provider, run)
    assert caught.value.kind == "script"
    assert caught.value.message.startswith("step 2: ")
    assert why in caught.value.message


async def test_a_match_on_another_page_does_not_count(tmp_path: Path) -> None:
    provider = script(
        tmp_path,
        [
            {"say": "Reading.", "calls": [call(command="observe", page="page-3f2a")]},
            {"say": ["ANSWER: ", {"$match": ["/realistic/shop", r'textbox "(Email)"']}]},
        ],
    )
    run = Run()
    await complete(provider, run)
    run.results(observed("cs-71-f1", *FORM_LINES))
    with pytest.raises(ProviderError, match="matches in no earlier observation"):
        await complete(provider, run)


@pytest.mark.parametrize(
    ("say", "why"),
    [
        ([{"$match": ["shop", "(unclosed"]}], "$match has an invalid regex"),
        ([{"$match": "Showing"}], '$match takes ["page substring", "regex"]'),
        ([{"$page": "shop"}], 'a part is a string or {"$match"'),
        ([3], 'a part is a string or {"$match"'),
    ],
    ids=["bad-regex", "match-shape", "other-reference", "not-a-part"],
)
def test_an_invalid_say_part_is_refused_at_load(tmp_path: Path, say: list[Any], why: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps([{"say": say}]), encoding="utf-8")
    with pytest.raises(ProviderError) as caught:
        ScriptProvider.load(path)
    assert why in caught.value.message
