"""The Anthropic and OpenAI providers through their real SDKs, against local stand-ins of the providers' APIs.

These machines cannot reach the providers, so `base_url` points each official SDK at `suites/host/wire.py`, which
speaks the provider's documented wire format (streaming SSE) and records every request body. What is asserted is
what a provider would have received: the tool schema of the runtime's live `tools/list`, the transcript in the
provider's tool-result form, an image only in the request right after the result that carried it, no token; and
what the host gets back: text in order as it streams, tool calls whose arguments arrived in pieces, and each
failure as the `ProviderError` kind the console shows.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from host.providers import make_provider
from host.providers.anthropic import AnthropicProvider
from host.providers.base import (
    IMAGE_PLACEHOLDER,
    AssistantTurn,
    Entry,
    Image,
    ProviderError,
    ToolCall,
    ToolResult,
    ToolResults,
    ToolSpec,
    Usage,
    UserText,
)
from host.providers.openai import OpenAIProvider
from runtime.capability.token import Claims, new_secret, sign
from runtime.capability.verifier import CALL_KEY, TOKEN_KEY
from runtime.models import ComputerUseResult, PageInfo, as_text
from suites.harness import tools_only_server
from suites.host.wire import (
    API_KEY,
    Call,
    Failure,
    Hang,
    Reply,
    StandIn,
    StreamFailure,
    assert_no_secret,
    images,
)

REPO = Path(__file__).resolve().parents[2]
KINDS = ("anthropic", "openai")
KEY_ENV = {"anthropic": "ANTHROPIC_API_KEY", "openai": "OPENAI_API_KEY"}
BASE_ENV = {"anthropic": "ANTHROPIC_BASE_URL", "openai": "OPENAI_BASE_URL"}
CLASSES: dict[str, type[AnthropicProvider] | type[OpenAIProvider]] = {
    "anthropic": AnthropicProvider,
    "openai": OpenAIProvider,
}
REQ = {"anthropic": "provider:anthropic", "openai": "provider:openai"}
PNG_1 = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
PNG_2 = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="


async def live_tools() -> list[ToolSpec]:
    """The runtime's `tools/list`, over a real MCP client, as the host hands it to a provider."""
    async with Client(tools_only_server()) as client:
        tools = (await client.list_tools()).tools
    return [ToolSpec(tool.name, tool.description or "", tool.input_schema) for tool in tools]


def page(handle: str = "p1", title: str = "Subscribe", url: str = "http://127.0.0.1:8000/form") -> PageInfo:
    return PageInfo(handle=handle, relation="left", title=title, url=url, preview="Email Subscribe", revision=1)


def result_text(result: ComputerUseResult) -> str:
    """A result as the host's agent loop puts it in the transcript."""
    return as_text(result.model_dump(mode="json", exclude_none=True))


LIST = ToolCall("call_list", "computer_use", {"command": "list_pages"})
OBSERVE = ToolCall("call_observe", "computer_use", {"command": "observe", "page": "p1", "detail": "visual"})
CLICK = ToolCall(
    "call_click",
    "computer_use",
    {"command": "act", "computer_session_id": "s1", "frame_id": "f1", "action": {"type": "click", "ref": "e4"}},
)
LISTED = ComputerUseResult(status="ok", message="1 authorized Page(s).", pages=[page()])
OBSERVED = ComputerUseResult(
    status="ok",
    message="Observed with backend playwright_mcp.",
    computer_session_id="s1",
    backend="playwright_mcp",
    frame_id="f1",
    page=page(),
    observation='url: http://127.0.0.1:8000/form\ntitle: Subscribe\nelements 1-2 of 2:\ne3 textbox "Email"\n'
    'e4 button "Subscribe"',
)
CLICKED = ComputerUseResult.model_validate({**OBSERVED.model_dump(), "frame_id": "f2", "message": "click done"})


def conversation(*, click: bool = False, click_image: str | None = None) -> list[Entry]:
    """A realistic transcript: list_pages, a visual observe (its screenshot), and, with `click`, a click (with
    `click_image`, a result that carries a newer screenshot)."""
    observed = ToolResult(OBSERVE.id, result_text(OBSERVED), Image("image/png", PNG_1))
    clicked = ToolResult(CLICK.id, result_text(CLICKED), Image("image/png", click_image) if click_image else None)
    entries: list[Entry] = [
        UserText("Subscribe ada@example.com on the form at my left."),
        AssistantTurn("Let me look.", (LIST,)),
        ToolResults((ToolResult(LIST.id, result_text(LISTED)),)),
        AssistantTurn("", (OBSERVE,)),
        ToolResults((observed,)),
    ]
    if click:
        entries += [AssistantTurn("Clicking Subscribe.", (CLICK,)), ToolResults((clicked,))]
    return entries


def placeholdered(transcript: list[Entry]) -> list[Entry]:
    """The transcript as the agent loop sends it once the model has answered: older images replaced."""
    out: list[Entry] = []
    for entry in transcript:
        if isinstance(entry, ToolResults):
            entry = ToolResults(
                tuple(
                    replace(r, image=None, text=f"{r.text}\n{IMAGE_PLACEHOLDER}") if r.image else r
                    for r in entry.results
                )
            )
        out.append(entry)
    return out


class Sink:
    def __init__(self) -> None:
        self.pieces: list[str] = []
        self.queue: asyncio.Queue[str] = asyncio.Queue()

    async def __call__(self, text: str) -> None:
        self.pieces.append(text)
        self.queue.put_nowait(text)


@pytest.fixture(params=[pytest.param(k, marks=pytest.mark.req(REQ[k])) for k in KINDS])
def kind(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
async def api(kind: str) -> AsyncIterator[StandIn]:
    async with StandIn(kind) as stand_in:  # type: ignore[arg-type]
        yield stand_in


@pytest.fixture
async def provider(kind: str, api: StandIn, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Any]:
    """The provider as the app makes it: the factory, the key from the environment, base_url at the stand-in."""
    monkeypatch.setenv(KEY_ENV[kind], API_KEY)
    made = make_provider(kind, base_url=api.base_url)
    yield made
    await made.close()


async def quiet(_: str) -> None:
    return None


# -- what the provider sends --------------------------------------------------------------------------------------


def sent_tools(kind: str, body: dict[str, Any]) -> list[ToolSpec]:
    if kind == "anthropic":
        return [ToolSpec(t["name"], t["description"], t["input_schema"]) for t in body["tools"]]
    assert all(t["type"] == "function" for t in body["tools"])
    return [
        ToolSpec(t["function"]["name"], t["function"]["description"], t["function"]["parameters"])
        for t in body["tools"]
    ]


async def test_the_tool_schema_sent_is_exactly_the_runtimes_live_tools_list(
    provider: Any, api: StandIn, kind: str
) -> None:
    tools = await live_tools()
    assert [tool.name for tool in tools] == ["computer_use"]
    await provider.complete("system prompt", [UserText("hi")], tools, quiet)
    assert sent_tools(kind, api.requests[0]) == tools


@pytest.mark.req("provider:anthropic")
async def test_anthropic_gets_the_transcript_as_messages_with_tool_use_and_tool_result_blocks() -> None:
    async with StandIn("anthropic") as api:
        provider = AnthropicProvider(api_key=API_KEY, base_url=api.base_url)
        transcript = [*conversation(), UserText("The user has done what was needed on p1; continue.")]
        await provider.complete("system prompt", transcript, await live_tools(), quiet)
        await provider.close()
    body = api.requests[0]
    assert body["system"] == "system prompt"
    assert body["model"] == "claude-sonnet-4-5"
    assert body["stream"] is True
    assert body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "Subscribe ada@example.com on the form at my left."}]},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Let me look."},
                {"type": "tool_use", "id": "call_list", "name": "computer_use", "input": {"command": "list_pages"}},
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "call_list",
                    "content": [{"type": "text", "text": result_text(LISTED)}],
                    "is_error": False,
                }
            ],
        },
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "call_observe", "name": "computer_use", "input": OBSERVE.arguments}],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "call_observe",
                    "content": [
                        {"type": "text", "text": result_text(OBSERVED)},
                        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG_1}},
                    ],
                    "is_error": False,
                },
                {"type": "text", "text": "The user has done what was needed on p1; continue."},
            ],
        },
    ]


@pytest.mark.req("provider:openai")
async def test_openai_gets_tool_messages_and_the_image_in_a_user_message_right_after_them() -> None:
    async with StandIn("openai") as api:
        provider = OpenAIProvider(api_key=API_KEY, base_url=api.base_url)
        await provider.complete("system prompt", conversation(), await live_tools(), quiet)
        await provider.close()
    body = api.requests[0]
    assert body["model"] == "gpt-4.1"
    assert body["stream"] is True
    assert body["messages"] == [
        {"role": "system", "content": "system prompt"},
        {"role": "user", "content": "Subscribe ada@example.com on the form at my left."},
        {
            "role": "assistant",
            "content": "Let me look.",
            "tool_calls": [
                {
                    "id": "call_list",
                    "type": "function",
                    "function": {"name": "computer_use", "arguments": json.dumps(LIST.arguments)},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_list", "content": result_text(LISTED)},
        {
            "role": "assistant",
            "tool_calls": [
                {
                    "id": "call_observe",
                    "type": "function",
                    "function": {"name": "computer_use", "arguments": json.dumps(OBSERVE.arguments)},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_observe", "content": result_text(OBSERVED)},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "The screenshot of tool call call_observe:"},
                {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG_1}"}},
            ],
        },
    ]


async def send_image_sequence(provider: Any, api: StandIn) -> list[dict[str, Any]]:
    """Three requests as the agent loop sends them: right after a screenshot; after the model answered it (the loop
    replaced it with the placeholder) and a click without one; after a click that brought a newer screenshot."""
    tools = await live_tools()
    before = len(api.requests)
    await provider.complete("s", conversation(), tools, quiet)
    await provider.complete("s", placeholdered(conversation(click=True)), tools, quiet)
    newer = conversation(click=True, click_image=PNG_2)
    await provider.complete("s", [*placeholdered(newer[:-1]), newer[-1]], tools, quiet)
    return api.requests[before:]


def check_images_once(requests: list[dict[str, Any]]) -> None:
    """Each screenshot is in the request right after the result that carried it, and in no later request."""
    first, later, newest = requests
    assert len(images(first)) == 1
    assert images(first)[0].startswith(f".messages[{len(first['messages']) - 1}]")  # the newest message
    assert images(later) == [], f"a screenshot was sent again at {images(later)}"
    assert IMAGE_PLACEHOLDER in json.dumps(later)
    assert PNG_1 not in json.dumps(later)
    assert len(images(newest)) == 1
    assert PNG_2 in json.dumps(newest)
    assert PNG_1 not in json.dumps(newest)


@pytest.mark.req("app:images-once")
async def test_an_image_is_sent_in_the_request_right_after_its_result_and_never_again(
    provider: Any, api: StandIn
) -> None:
    check_images_once(await send_image_sequence(provider, api))


class StickyImages:
    """Broken on purpose: remembers each tool result's screenshot and sends it again with every later request
    (a provider-side cache the placeholder cannot undo)."""

    seen: dict[str, Image]

    async def complete(self, system: str, transcript: Any, tools: Any, on_text: Any) -> Any:
        seen = self.__dict__.setdefault("seen", {})
        restored: list[Entry] = []
        for entry in transcript:
            if isinstance(entry, ToolResults):
                seen.update((r.call_id, r.image) for r in entry.results if r.image is not None)
                entry = ToolResults(tuple(replace(r, image=r.image or seen.get(r.call_id)) for r in entry.results))
            restored.append(entry)
        return await super().complete(system, restored, tools, on_text)  # type: ignore[misc]


class StickyAnthropic(StickyImages, AnthropicProvider):
    pass


class StickyOpenAI(StickyImages, OpenAIProvider):
    pass


@pytest.mark.negative_control
@pytest.mark.req("app:images-once")
async def test_the_images_once_check_catches_a_provider_that_resends_old_screenshots(kind: str, api: StandIn) -> None:
    sticky = {"anthropic": StickyAnthropic, "openai": StickyOpenAI}[kind](api_key=API_KEY, base_url=api.base_url)
    try:
        requests = await send_image_sequence(sticky, api)
    finally:
        await sticky.close()
    with pytest.raises(AssertionError, match="a screenshot was sent again"):
        check_images_once(requests)


# -- what the host gets back ----------------------------------------------------------------------------------


async def test_text_reaches_the_console_piece_by_piece_while_the_model_is_still_streaming(
    provider: Any, api: StandIn
) -> None:
    api.answer(Hang(text=("Look", "ing at ", "the form")))
    sink = Sink()
    task = asyncio.create_task(provider.complete("s", [UserText("hi")], [], sink))
    try:
        async with asyncio.timeout(10):
            got = [await sink.queue.get() for _ in range(3)]
            await api.hanging.wait()
        assert got == ["Look", "ing at ", "the form"]
        assert not task.done()  # the stream is still open: the text came as it arrived, not at the end
    finally:
        api.release()
        async with asyncio.timeout(10):
            reply = await task
    assert reply.text == "Looking at the form"


async def test_tool_calls_are_parsed_from_arguments_split_across_stream_chunks(provider: Any, api: StandIn) -> None:
    api.answer(
        Reply(
            text=("Typing ", "and clicking."),
            calls=(
                Call(
                    "call_a",
                    "computer_use",
                    (
                        '{"comm',
                        'and": "act", "computer_session_id": "s1", "fra',
                        'me_id": "f1", ',
                        '"action": {"type": "type", "ref": "e3", "text": "ad\\u00',
                        'e9@example.com"}}',
                    ),
                ),
                Call("call_b", "computer_use", ("", '{"command"', ': "list_pages"}')),
            ),
        )
    )
    sink = Sink()
    reply = await provider.complete("s", [UserText("hi")], await live_tools(), sink)
    assert sink.pieces == ["Typing ", "and clicking."]
    assert reply.text == "Typing and clicking."
    assert reply.tool_calls == (
        ToolCall(
            "call_a",
            "computer_use",
            {
                "command": "act",
                "computer_session_id": "s1",
                "frame_id": "f1",
                "action": {"type": "type", "ref": "e3", "text": "adé@example.com"},
            },
        ),
        ToolCall("call_b", "computer_use", {"command": "list_pages"}),
    )


async def test_a_reply_without_tool_calls_is_a_final_text(provider: Any, api: StandIn) -> None:
    api.answer(Reply(text=("Done: ", "subscribed.")))
    reply = await provider.complete("s", [UserText("hi")], await live_tools(), quiet)
    assert reply.text == "Done: subscribed."
    assert reply.tool_calls == ()


async def test_the_usage_a_provider_reports_comes_with_its_reply(kind: str, provider: Any, api: StandIn) -> None:
    api.answer(Reply(text=("Done.",)))
    reply = await provider.complete("s", [UserText("hi")], await live_tools(), quiet)
    # The Anthropic stand-in reports 1 input and 9 output tokens, as the Messages API's stream does (message_start,
    # message_delta); the OpenAI one, like Chat Completions unless asked for usage, reports none.
    assert reply.usage == (Usage(1, 9) if kind == "anthropic" else None)


@pytest.mark.parametrize(
    ("answer", "error_kind", "retryable"),
    [
        (Failure(401, "authentication_error", "invalid x-api-key"), "auth", False),
        (Failure(403, "permission_error", "not allowed"), "auth", False),
        (Failure(429, "rate_limit_error", "slow down", retry_after="7"), "rate_limit", True),
        (Failure(500, "api_error", "internal"), "server", True),
        (Failure(503, "overloaded_error", "busy"), "server", True),
        (Failure(400, "invalid_request_error", "bad tool schema"), "bad_request", False),
        (StreamFailure("overloaded_error", text=("Half a rep",)), "server", True),
        (StreamFailure("rate_limit_error"), "rate_limit", True),
    ],
    ids=["401", "403", "429", "500", "503", "400", "stream-overloaded", "stream-rate-limit"],
)
async def test_each_provider_failure_is_the_error_kind_the_console_shows(
    provider: Any, api: StandIn, answer: Any, error_kind: str, retryable: bool
) -> None:
    api.answer(answer)
    with pytest.raises(ProviderError) as caught:
        await provider.complete("s", [UserText("hi")], [], quiet)
    assert (caught.value.kind, caught.value.retryable) == (error_kind, retryable)
    assert answer.message in caught.value.message
    if isinstance(answer, Failure) and answer.retry_after:
        assert "retry after 7 s" in caught.value.message
    assert len(api.requests) == 1  # the SDK's own retries are off: the console's Retry button decides


async def test_a_wrong_api_key_is_an_auth_error_that_names_the_variable_and_never_shows_the_key(
    kind: str, api: StandIn, monkeypatch: pytest.MonkeyPatch
) -> None:
    wrong = "sk-wrong-0123456789abcdef"
    monkeypatch.setenv(KEY_ENV[kind], wrong)
    provider = make_provider(kind, base_url=api.base_url)
    try:
        api.answer(Failure(401, "authentication_error", f"Incorrect API key provided: {wrong}"))
        with pytest.raises(ProviderError) as caught:
            await provider.complete("s", [UserText("hi")], [], quiet)
    finally:
        await provider.close()
    assert caught.value.kind == "auth"
    assert KEY_ENV[kind] in caught.value.message
    assert wrong not in str(caught.value)


async def test_a_provider_that_stops_answering_is_a_retryable_timeout(kind: str, api: StandIn) -> None:
    provider = CLASSES[kind](api_key=API_KEY, base_url=api.base_url, read_timeout=0.5)
    try:
        for hang in (Hang(), Hang(text=("Half a ",))):  # before the headers, then in the middle of the stream
            api.answer(hang)
            with pytest.raises(ProviderError) as caught:
                await provider.complete("s", [UserText("hi")], [], quiet)
            assert (caught.value.kind, caught.value.retryable) == ("timeout", True)
    finally:
        api.release()
        await provider.close()


async def test_a_provider_that_trickles_forever_is_cut_off_by_the_deadline(kind: str, api: StandIn) -> None:
    provider = CLASSES[kind](api_key=API_KEY, base_url=api.base_url, read_timeout=30, deadline=0.5)
    api.answer(Hang(text=("Still ",)))
    try:
        with pytest.raises(ProviderError) as caught:
            await provider.complete("s", [UserText("hi")], [], quiet)
    finally:
        api.release()
        await provider.close()
    assert (caught.value.kind, caught.value.retryable) == ("timeout", True)
    assert "did not finish within" in caught.value.message


async def test_an_unreachable_endpoint_is_a_retryable_server_error(kind: str) -> None:
    async with StandIn(kind) as gone:  # type: ignore[arg-type]
        url = gone.base_url
    provider = CLASSES[kind](api_key=API_KEY, base_url=url)
    try:
        with pytest.raises(ProviderError) as caught:
            await provider.complete("s", [UserText("hi")], [], quiet)
    finally:
        await provider.close()
    assert (caught.value.kind, caught.value.retryable) == ("server", True)
    assert "could not reach" in caught.value.message


# -- making and closing a provider --------------------------------------------------------------------------------


async def test_a_missing_key_is_a_missing_key_error_that_says_what_to_set(
    kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(KEY_ENV[kind], raising=False)
    with pytest.raises(ProviderError) as caught:
        make_provider(kind)
    assert caught.value.kind == "missing_key"
    assert f"set {KEY_ENV[kind]}" in caught.value.message


async def test_a_missing_sdk_is_an_error_that_says_what_to_install(kind: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV[kind], API_KEY)
    monkeypatch.setitem(sys.modules, kind, None)  # what `import anthropic` meets when the package is not installed
    monkeypatch.delitem(sys.modules, f"host.providers.{kind}")
    with pytest.raises(ProviderError) as caught:
        make_provider(kind)
    assert caught.value.kind == "bad_request"
    assert f"pip install {kind}" in caught.value.message


@pytest.mark.req("provider:anthropic", "provider:openai", "provider:script")
def test_the_host_runs_without_the_provider_sdks_until_one_is_chosen() -> None:
    code = (
        "import sys; from host.providers import make_provider; make_provider('script'); "
        "import host.providers.script; print(sorted(m for m in ('anthropic', 'openai') if m in sys.modules))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.strip() == "[]"


async def test_the_base_url_comes_from_the_environment_as_the_sdks_read_it(
    kind: str, api: StandIn, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEY_ENV[kind], API_KEY)
    monkeypatch.setenv(BASE_ENV[kind], api.base_url)
    provider = make_provider(kind, model="compatible-model")
    try:
        await provider.complete("s", [UserText("hi")], [], quiet)
    finally:
        await provider.close()
    assert api.requests[0]["model"] == "compatible-model"


async def test_close_closes_the_sdk_client(provider: Any) -> None:
    await provider.close()
    assert provider.client.is_closed()


# -- never in what the model sees -----------------------------------------------------------------------------


def minted_token() -> str:
    """A real capability token, as the host mints one for a call (signed claims; the secret is this test's)."""
    claims = Claims(
        token_id="req-1-call-1:0123456789abcdef",
        connection="conn-0123456789abcdef",
        host="host-1",
        turn="turn-1",
        provider_request="req-1",
        tool_call="req-1-call-1",
        pages={"p1": 1},
        access_revision=1,
        expires_at=120.0,
    )
    return sign(claims, new_secret())


class LeakyAnthropic(AnthropicProvider):
    """Broken on purpose: serializes each tool result with the MCP request's `_meta` (the token) in its text."""

    meta: dict[str, str]

    def tool_result(self, result: ToolResult) -> dict[str, Any]:
        leaked = replace(result, text=json.dumps({"_meta": self.meta, "result": result.text}))
        return super().tool_result(leaked)


class LeakyOpenAI(OpenAIProvider):
    """Broken on purpose: the same leak, in the OpenAI mapping."""

    meta: dict[str, str]

    def messages(self, system: str, transcript: Any) -> list[dict[str, Any]]:
        out = super().messages(system, transcript)
        for message in out:
            if message["role"] == "tool":
                message["content"] = json.dumps({"_meta": self.meta, "result": message["content"]})
        return out


async def _sent_with(cls: type[Any], kind: str, token: str) -> list[dict[str, Any]]:
    async with StandIn(kind) as api:  # type: ignore[arg-type]
        provider = cls(api_key=API_KEY, base_url=api.base_url)
        provider.meta = {TOKEN_KEY: token, CALL_KEY: "req-1-call-1"}
        try:
            await provider.complete("s", conversation(), await live_tools(), quiet)
        finally:
            await provider.close()
    return api.requests


@pytest.mark.req("app:tokens-over-http")
@pytest.mark.parametrize(("kind", "cls"), [("anthropic", AnthropicProvider), ("openai", OpenAIProvider)])
async def test_the_token_of_a_call_is_never_in_what_the_model_sees(kind: str, cls: type[Any]) -> None:
    token = minted_token()
    requests = await _sent_with(cls, kind, token)
    assert_no_secret(requests, token)


@pytest.mark.negative_control
@pytest.mark.req("app:tokens-over-http")
@pytest.mark.parametrize(("kind", "cls"), [("anthropic", LeakyAnthropic), ("openai", LeakyOpenAI)])
async def test_the_secret_check_catches_a_provider_that_leaks_the_token_into_a_tool_result(
    kind: str, cls: type[Any]
) -> None:
    token = minted_token()
    requests = await _sent_with(cls, kind, token)
    with pytest.raises(AssertionError, match="the secret reached the model"):
        assert_no_secret(requests, token)
