"""The Anthropic provider: the official `anthropic` SDK, the Messages API with tool use, streamed.

Mapping of the transcript (Messages API):
- the system prompt → `system`; each tool from `tools/list` → `{name, description, input_schema}` unchanged;
- `UserText` → a `user` text block; `AssistantTurn` → an `assistant` message of a text block and one `tool_use`
  block per call;
- `ToolResults` → a `user` message of `tool_result` blocks (`tool_use_id`, the result's JSON text, its image as a
  base64 `image` block when it has one, `is_error`). Consecutive user-side entries (tool results, then the
  "continue" the host adds after a hand-off) become one message, tool results first, as the API requires.

The reply streams as Server-Sent Events: `text_delta`s go to `on_text` as they arrive; a `tool_use` block's input
arrives as `input_json_delta` fragments and is parsed once the stream ends. The SDK's own retries are off (the
console shows an error with a Retry button instead of waiting silently), and every wait is bounded.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from typing import Any

import anthropic
import httpx2

from host.providers.base import (
    MAX_TOOL_CALLS,
    REPLY_CHARS,
    AssistantTurn,
    Entry,
    ModelReply,
    ProviderError,
    TextSink,
    ToolCall,
    ToolResult,
    ToolResults,
    ToolSpec,
    Usage,
)
from host.providers.errors import bounded, status_error

DEFAULT_MODEL = "claude-sonnet-4-5"
MAX_TOKENS = 4096
CONNECT_TIMEOUT = 10.0
READ_TIMEOUT = 90.0
"""Longest silence between two bytes of the answer (the model may think a while before its first token)."""
DEADLINE = 300.0
"""Longest whole request, however steadily an endpoint trickles."""

# The Messages API's error types, by the HTTP status they stand for (a stream can fail after its 200).
ERROR_STATUS = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "api_error": 500,
    "timeout_error": 504,
    "overloaded_error": 529,
}


class AnthropicProvider:
    name = "anthropic"

    def __init__(
        self,
        *,
        api_key: str,
        model: str | None = None,
        base_url: str | None = None,
        read_timeout: float = READ_TIMEOUT,
        deadline: float = DEADLINE,
    ) -> None:
        self.model = model or DEFAULT_MODEL
        self.deadline = deadline
        self._key = api_key
        self.client = anthropic.AsyncAnthropic(
            api_key=api_key,
            base_url=base_url,
            max_retries=0,
            timeout=httpx2.Timeout(read_timeout, connect=CONNECT_TIMEOUT),
        )

    def messages(self, transcript: Sequence[Entry]) -> list[dict[str, Any]]:
        """The transcript as Messages API `messages` (roles alternate; tool results lead their user message)."""
        out: list[dict[str, Any]] = []
        for entry in transcript:
            if isinstance(entry, AssistantTurn):
                blocks: list[dict[str, Any]] = [{"type": "text", "text": entry.text}] if entry.text else []
                blocks += [
                    {"type": "tool_use", "id": call.id, "name": call.name, "input": call.arguments}
                    for call in entry.tool_calls
                ]
                if blocks:
                    out.append({"role": "assistant", "content": blocks})
                continue
            if isinstance(entry, ToolResults):
                blocks = [self.tool_result(result) for result in entry.results]
            else:
                blocks = [{"type": "text", "text": entry.text}]
            if out and out[-1]["role"] == "user":
                out[-1]["content"].extend(blocks)
            else:
                out.append({"role": "user", "content": blocks})
        return out

    def tool_result(self, result: ToolResult) -> dict[str, Any]:
        content: list[dict[str, Any]] = [{"type": "text", "text": result.text}]
        if result.image is not None:
            source = {"type": "base64", "media_type": result.image.media_type, "data": result.image.data}
            content.append({"type": "image", "source": source})
        return {"type": "tool_result", "tool_use_id": result.call_id, "content": content, "is_error": result.is_error}

    async def complete(
        self, system: str, transcript: Sequence[Entry], tools: Sequence[ToolSpec], on_text: TextSink
    ) -> ModelReply:
        request: dict[str, Any] = {
            "model": self.model,
            "max_tokens": MAX_TOKENS,
            "messages": self.messages(transcript),
            "stream": True,
        }
        if system:
            request["system"] = system
        if tools:
            request["tools"] = [
                {"name": tool.name, "description": tool.description, "input_schema": tool.input_schema}
                for tool in tools
            ]
        try:
            async with asyncio.timeout(self.deadline):
                return await self._stream(request, on_text)
        except TimeoutError:
            raise ProviderError("timeout", f"anthropic did not finish within {self.deadline:.0f} s", True) from None
        except anthropic.APITimeoutError:
            raise ProviderError("timeout", "anthropic did not answer in time", True) from None
        except anthropic.APIConnectionError as exc:
            raise ProviderError("server", f"could not reach anthropic at {self.client.base_url}: {exc}", True) from None
        except anthropic.APIStatusError as exc:
            raise self._status_error(exc) from None
        except anthropic.AnthropicError as exc:
            raise ProviderError("bad_request", f"anthropic: {bounded(str(exc), self._key)}") from None
        except httpx2.TimeoutException:
            # The SDK wraps timeouts while it waits for the headers, not while it reads the stream.
            raise ProviderError("timeout", "anthropic stopped streaming its answer", True) from None
        except httpx2.TransportError as exc:
            raise ProviderError("server", f"anthropic's stream broke off: {bounded(str(exc))}", True) from None

    async def _stream(self, request: dict[str, Any], on_text: TextSink) -> ModelReply:
        text: list[str] = []
        calls: dict[int, dict[str, Any]] = {}
        size = 0
        stop_reason = None
        input_tokens: int | None = None
        output: int | None = None
        stream = await self.client.messages.create(**request)
        async with stream:
            async for event in stream:
                kind = getattr(event, "type", None)
                if kind == "content_block_start" and event.content_block.type == "tool_use":
                    if len(calls) >= MAX_TOOL_CALLS:
                        raise ProviderError("server", f"anthropic sent more than {MAX_TOOL_CALLS} tool calls", True)
                    block = event.content_block
                    calls[event.index] = {"id": block.id, "name": block.name, "input": block.input, "json": []}
                elif kind == "content_block_delta":
                    delta = event.delta
                    piece = ""
                    if delta.type == "text_delta":
                        piece = delta.text
                        text.append(piece)
                        await on_text(piece)
                    elif delta.type == "input_json_delta" and event.index in calls:
                        piece = delta.partial_json
                        calls[event.index]["json"].append(piece)
                    size += len(piece)
                    if size > REPLY_CHARS:
                        raise ProviderError("server", "anthropic's reply exceeded the size limit", True)
                elif kind == "message_delta":
                    stop_reason = event.delta.stop_reason
                    output = _tokens(getattr(event, "usage", None), "output_tokens")
                elif kind == "message_start":
                    usage = getattr(event.message, "usage", None)
                    read = ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
                    input_tokens = sum(_tokens(usage, name) or 0 for name in read)
        reported = Usage(input_tokens, output) if input_tokens is not None and output is not None else None
        return ModelReply(
            "".join(text), tuple(self._call(call, stop_reason) for _, call in sorted(calls.items())), reported
        )

    def _call(self, call: dict[str, Any], stop_reason: str | None) -> ToolCall:
        raw = "".join(call["json"])
        try:
            arguments = json.loads(raw) if raw else (call["input"] or {})
        except json.JSONDecodeError:
            cut = " (the reply was cut off at max_tokens)" if stop_reason == "max_tokens" else ""
            why = f"anthropic sent unparsable arguments for {call['name']}{cut}"
            raise ProviderError("server", why, True) from None
        if not isinstance(arguments, dict):
            raise ProviderError("server", f"anthropic sent arguments for {call['name']} that are not an object", True)
        return ToolCall(id=call["id"], name=call["name"], arguments=arguments)

    def _status_error(self, exc: anthropic.APIStatusError) -> ProviderError:
        body = exc.body if isinstance(exc.body, dict) else {}
        error = body.get("error") if isinstance(body.get("error"), dict) else {}
        detail = bounded(str(error.get("message") or exc.message), self._key)
        retry_after = exc.response.headers.get("retry-after")
        if exc.status_code < 400:  # an `error` event inside a stream that began with 200
            kind = str(error.get("type"))
            return status_error(self.name, ERROR_STATUS.get(kind, 500), detail, retry_after, in_stream=kind)
        return status_error(self.name, exc.status_code, detail, retry_after)

    async def close(self) -> None:
        await self.client.close()


def _tokens(usage: Any, name: str) -> int | None:
    """A token count of a usage object of the stream, if it carries one (`message_start`, `message_delta`)."""
    value = getattr(usage, name, None)
    return value if isinstance(value, int) and not isinstance(value, bool) else None
