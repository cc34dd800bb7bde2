"""Local stand-ins for the model providers' HTTP APIs, for tests that cannot reach the providers.

Each stand-in is a real aiohttp server on 127.0.0.1 that speaks one provider's documented wire format — the
Anthropic Messages API (`POST /v1/messages`, streamed as named Server-Sent Events: `message_start`,
`content_block_start`/`_delta`/`_stop` with `text_delta` and `input_json_delta`, `message_delta`,
`message_stop`) or OpenAI Chat Completions (`POST /v1/chat/completions`, streamed as `data:` chunks of
`chat.completion.chunk` with `delta.content` and `delta.tool_calls[]` fragments, then `data: [DONE]`) — so the
real SDK code paths run with `base_url` pointed at it. It records every request body (what the model would see),
answers with the replies a test queued, checks the API key like the provider does (401 with the provider's error
body), and can be told to fail (any status, or an error event in the middle of a stream) or to hang until the test
releases it (bounded by `HANG_BOUND`, so a forgotten release cannot hang the suite).

`assert_no_secret(requests, secret)` is the "never in what the model sees" check, shared with the app's tests.
"""

from __future__ import annotations

import asyncio
import json
from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from ipaddress import ip_address
from typing import Any, Literal

from aiohttp import web

HANG_BOUND = 30.0
API_KEY = "stand-in-key-0123456789"

Kind = Literal["anthropic", "openai"]


@dataclass(frozen=True)
class Call:
    """A tool call the stand-in's model makes; `arguments` is its JSON text, in the fragments it streams in."""

    id: str
    name: str
    arguments: tuple[str, ...]


@dataclass(frozen=True)
class Reply:
    text: tuple[str, ...] = ()
    calls: tuple[Call, ...] = ()


@dataclass(frozen=True)
class Failure:
    """An error status before any byte of a stream, with the provider's error type."""

    status: int
    type: str
    message: str = "stand-in failure"
    retry_after: str | None = None


@dataclass(frozen=True)
class StreamFailure:
    """A stream that begins (200, some text) and then carries the provider's error object."""

    type: str
    message: str = "stand-in failure mid-stream"
    text: tuple[str, ...] = ()


@dataclass(frozen=True)
class Hang:
    """Answer nothing until released: before the headers, or after streaming `text`."""

    text: tuple[str, ...] = ()


Answer = Reply | Failure | StreamFailure | Hang


def _sse(event: str | None, data: dict[str, Any] | str) -> bytes:
    payload = data if isinstance(data, str) else json.dumps(data)
    return (f"event: {event}\n" if event else "").encode() + f"data: {payload}\n\n".encode()


class StandIn:
    """One provider's API on a loopback port. Use as `async with StandIn("anthropic") as api: api.base_url`."""

    def __init__(self, kind: Kind, *, api_key: str = API_KEY) -> None:
        self.kind = kind
        self.api_key = api_key
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.answers: deque[Answer] = deque()
        self.released = asyncio.Event()
        self.hanging = asyncio.Event()
        self._runner: web.AppRunner | None = None
        self.port = 0

    @property
    def base_url(self) -> str:
        """What the SDK takes as `base_url` (OpenAI's includes the `/v1` prefix, Anthropic's does not)."""
        root = f"http://127.0.0.1:{self.port}"
        return root + "/v1" if self.kind == "openai" else root

    def answer(self, *answers: Answer) -> None:
        self.answers.extend(answers)

    def release(self) -> None:
        self.released.set()

    async def __aenter__(self) -> StandIn:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        path = "/v1/messages" if self.kind == "anthropic" else "/v1/chat/completions"
        app.router.add_post(path, self._handle)
        self._runner = web.AppRunner(app, shutdown_timeout=1.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.release()
        if self._runner is not None:
            await self._runner.cleanup()

    # -- one request ----------------------------------------------------------------------------------------

    def _authorized(self, request: web.Request) -> bool:
        if self.kind == "anthropic":
            given = request.headers.get("x-api-key") or request.headers.get("authorization", "").removeprefix("Bearer ")
        else:
            given = request.headers.get("authorization", "").removeprefix("Bearer ")
        return given == self.api_key

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        # A page in the lab's browser can reach this port too: the SDKs send no Origin, a page's request always does.
        if request.remote is None or not ip_address(request.remote).is_loopback or "Origin" in request.headers:
            return web.Response(status=403)
        if not self._authorized(request):
            return self._error(Failure(401, self._auth_type, "invalid api key"))
        body = await request.json()
        self.requests.append(body)
        self.headers.append(dict(request.headers))
        answer = self.answers.popleft() if self.answers else Reply(text=("(no answer queued)",))
        if isinstance(answer, Failure):
            return self._error(answer)
        if isinstance(answer, Hang) and not answer.text:
            await self._hang()
            return self._error(Failure(500, "api_error", "released"))
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        await response.prepare(request)
        if isinstance(answer, Reply):
            events = self._events(answer)
        else:
            events = self._events(Reply(text=answer.text), finish=False)
        for chunk in events:
            await response.write(chunk)
        if isinstance(answer, Hang):
            await self._hang()
        elif isinstance(answer, StreamFailure):
            await response.write(self._stream_error(answer))
        await response.write_eof()
        return response

    async def _hang(self) -> None:
        self.hanging.set()
        try:
            async with asyncio.timeout(HANG_BOUND):
                await self.released.wait()
        except TimeoutError:
            pass

    @property
    def _auth_type(self) -> str:
        return "authentication_error" if self.kind == "anthropic" else "invalid_request_error"

    def _error(self, failure: Failure) -> web.Response:
        if self.kind == "anthropic":
            body: dict[str, Any] = {"type": "error", "error": {"type": failure.type, "message": failure.message}}
        else:
            body = {"error": {"message": failure.message, "type": failure.type, "param": None, "code": None}}
        headers = {"retry-after": failure.retry_after} if failure.retry_after else {}
        return web.json_response(body, status=failure.status, headers=headers)

    def _stream_error(self, failure: StreamFailure) -> bytes:
        if self.kind == "anthropic":
            return _sse("error", {"type": "error", "error": {"type": failure.type, "message": failure.message}})
        return _sse(None, {"error": {"message": failure.message, "type": failure.type, "param": None, "code": None}})

    def _events(self, reply: Reply, *, finish: bool = True) -> Iterator[bytes]:
        if self.kind == "anthropic":
            return self._anthropic(reply, finish)
        return self._openai(reply, finish)

    def _anthropic(self, reply: Reply, finish: bool) -> Iterator[bytes]:
        message = {
            "id": "msg_standin",
            "type": "message",
            "role": "assistant",
            "model": self.requests[-1].get("model", "?"),
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": 1, "output_tokens": 1},
        }
        yield _sse("message_start", {"type": "message_start", "message": message})
        yield _sse("ping", {"type": "ping"})
        index = 0
        if reply.text:
            start = {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}
            yield _sse("content_block_start", start)
            for piece in reply.text:
                delta = {"type": "text_delta", "text": piece}
                yield _sse("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta})
            if not finish:
                return
            yield _sse("content_block_stop", {"type": "content_block_stop", "index": 0})
            index = 1
        for offset, call in enumerate(reply.calls):
            block = {"type": "tool_use", "id": call.id, "name": call.name, "input": {}}
            at = index + offset
            yield _sse("content_block_start", {"type": "content_block_start", "index": at, "content_block": block})
            for piece in call.arguments:
                delta = {"type": "input_json_delta", "partial_json": piece}
                yield _sse("content_block_delta", {"type": "content_block_delta", "index": at, "delta": delta})
            yield _sse("content_block_stop", {"type": "content_block_stop", "index": at})
        stop = "tool_use" if reply.calls else "end_turn"
        yield _sse(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop, "stop_sequence": None},
                "usage": {"output_tokens": 9},
            },
        )
        yield _sse("message_stop", {"type": "message_stop"})

    def _openai(self, reply: Reply, finish: bool) -> Iterator[bytes]:
        model = self.requests[-1].get("model", "?")

        def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> bytes:
            choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
            data = {
                "id": "chatcmpl-standin",
                "object": "chat.completion.chunk",
                "created": 0,
                "model": model,
                "choices": [choice],
            }
            return _sse(None, data)

        yield chunk({"role": "assistant", "content": ""})
        for piece in reply.text:
            yield chunk({"content": piece})
        if not finish:
            return
        for index, call in enumerate(reply.calls):
            head = {"index": index, "id": call.id, "type": "function", "function": {"name": call.name, "arguments": ""}}
            yield chunk({"tool_calls": [head]})
            for piece in call.arguments:
                yield chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
        yield chunk({}, "tool_calls" if reply.calls else "stop")
        yield _sse(None, "[DONE]")


# -- what the model sees ------------------------------------------------------------------------------------


def _strings(value: Any, path: str) -> Iterator[tuple[str, str]]:
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield f"{path}.{key}", str(key)
            yield from _strings(item, f"{path}.{key}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _strings(item, f"{path}[{index}]")


def assert_no_secret(requests: Sequence[Any], secret: str) -> None:
    """No request body (JSON, as recorded by a stand-in) contains `secret` in any key or string value.

    Fails on an empty secret or no requests at all: a check over nothing would prove nothing.
    """
    assert secret, "assert_no_secret needs the secret it looks for"
    assert requests, "no request was recorded: the check would prove nothing"
    found = [
        f"request {number}{path}"
        for number, body in enumerate(requests)
        for path, text in _strings(body, "")
        if secret in text
    ]
    assert not found, f"the secret reached the model at: {', '.join(found[:10])}"


def images(request: dict[str, Any]) -> list[str]:
    """Where a request body carries an image (either wire format): the paths of its image parts."""
    out: list[str] = []

    def walk(value: Any, path: str) -> None:
        if isinstance(value, dict):
            if value.get("type") in ("image", "image_url"):
                out.append(path)
            for key, item in value.items():
                walk(item, f"{path}.{key}")
        elif isinstance(value, list):
            for index, item in enumerate(value):
                walk(item, f"{path}[{index}]")

    walk(request, "")
    return out
