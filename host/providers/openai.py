"""The OpenAI provider: the official `openai` SDK, Chat Completions with function tools, streamed.

Mapping of the transcript (Chat Completions):
- the system prompt → a `system` message; each tool from `tools/list` → `{type: function, function: {name,
  description, parameters}}` with `parameters` exactly the tool's input schema;
- `UserText` → a `user` message; `AssistantTurn` → an `assistant` message with its text and `tool_calls`
  (arguments as the JSON string the API expects);
- `ToolResults` → one `role: tool` message per result (`tool_call_id`, the result's JSON text). A tool message
  can carry text only, so a result's image goes in one `user` message right after that batch of tool messages:
  a text part naming the tool call, then an `image_url` part with a `data:` URL. It cannot go earlier: the API
  wants the tool messages to follow their assistant message directly.

The reply streams as chunks: `delta.content` goes to `on_text` as it arrives; a tool call arrives as fragments
keyed by `index` (id and name first, the arguments string in pieces) and is parsed once the stream ends. The SDK's
own retries are off (the console shows an error with a Retry button instead), and every wait is bounded.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from typing import Any

import httpx2
import openai

from host.providers.base import (
    MAX_TOOL_CALLS,
    REPLY_CHARS,
    AssistantTurn,
    Entry,
    ModelReply,
    ProviderError,
    TextSink,
    ToolCall,
    ToolResults,
    ToolSpec,
    Usage,
)
from host.providers.errors import bounded, status_error

DEFAULT_MODEL = "gpt-4.1"
CONNECT_TIMEOUT = 10.0
READ_TIMEOUT = 90.0
"""Longest silence between two bytes of the answer."""
DEADLINE = 300.0
"""Longest whole request, however steadily an endpoint trickles."""


def _error_status(error: dict[str, Any]) -> int:
    """The HTTP status an error object inside a stream stands for (the stream itself began with 200)."""
    words = f"{error.get('type')} {error.get('code')}"
    if "rate_limit" in words or "insufficient_quota" in words:
        return 429
    if "invalid_api_key" in words or "authentication" in words or "permission" in words:
        return 401
    if "invalid_request" in words or "context_length" in words:
        return 400
    return 500


class OpenAIProvider:
    name = "openai"

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
        self.client = openai.AsyncOpenAI(
            api_key=api_key,
            base_url=base_url,
            max_retries=0,
            timeout=httpx2.Timeout(read_timeout, connect=CONNECT_TIMEOUT),
        )

    def messages(self, system: str, transcript: Sequence[Entry]) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = [{"role": "system", "content": system}] if system else []
        for entry in transcript:
            if isinstance(entry, AssistantTurn):
                message: dict[str, Any] = {"role": "assistant"}
                if entry.text or not entry.tool_calls:
                    message["content"] = entry.text
                if entry.tool_calls:
                    message["tool_calls"] = [
                        {
                            "id": call.id,
                            "type": "function",
                            "function": {"name": call.name, "arguments": json.dumps(call.arguments)},
                        }
                        for call in entry.tool_calls
                    ]
                out.append(message)
            elif isinstance(entry, ToolResults):
                out += [
                    {"role": "tool", "tool_call_id": result.call_id, "content": result.text} for result in entry.results
                ]
                images: list[dict[str, Any]] = []
                for result in entry.results:
                    if result.image is not None:
                        url = f"data:{result.image.media_type};base64,{result.image.data}"
                        images.append({"type": "text", "text": f"The screenshot of tool call {result.call_id}:"})
                        images.append({"type": "image_url", "image_url": {"url": url}})
                if images:
                    out.append({"role": "user", "content": images})
            else:
                out.append({"role": "user", "content": entry.text})
        return out

    async def complete(
        self, system: str, transcript: Sequence[Entry], tools: Sequence[ToolSpec], on_text: TextSink
    ) -> ModelReply:
        request: dict[str, Any] = {"model": self.model, "messages": self.messages(system, transcript), "stream": True}
        if tools:
            request["tools"] = [
                {
                    "type": "function",
                    "function": {"name": tool.name, "description": tool.description, "parameters": tool.input_schema},
                }
                for tool in tools
            ]
        try:
            async with asyncio.timeout(self.deadline):
                return await self._stream(request, on_text)
        except TimeoutError:
            raise ProviderError("timeout", f"openai did not finish within {self.deadline:.0f} s", True) from None
        except openai.APITimeoutError:
            raise ProviderError("timeout", "openai did not answer in time", True) from None
        except openai.APIConnectionError as exc:
            raise ProviderError("server", f"could not reach openai at {self.client.base_url}: {exc}", True) from None
        except openai.APIStatusError as exc:
            body = exc.body if isinstance(exc.body, dict) else {}
            error = body.get("error") if isinstance(body.get("error"), dict) else body
            detail = bounded(str(error.get("message") or exc.message), self._key)
            raise status_error(self.name, exc.status_code, detail, exc.response.headers.get("retry-after")) from None
        except openai.APIError as exc:  # an error object inside a stream that began with 200
            error = exc.body if isinstance(exc.body, dict) else {}
            detail = bounded(str(error.get("message") or exc.message), self._key)
            kind = str(error.get("type") or error.get("code") or "error")
            raise status_error(self.name, _error_status(error), detail, in_stream=kind) from None
        except openai.OpenAIError as exc:
            raise ProviderError("bad_request", f"openai: {bounded(str(exc), self._key)}") from None

    async def _stream(self, request: dict[str, Any], on_text: TextSink) -> ModelReply:
        text: list[str] = []
        calls: dict[int, dict[str, Any]] = {}
        size = 0
        usage: Usage | None = None
        stream = await self.client.chat.completions.create(**request)
        async with stream:
            async for chunk in stream:
                reported = getattr(chunk, "usage", None)  # only endpoints that send it unasked: it is not requested
                counts = [getattr(reported, name, None) for name in ("prompt_tokens", "completion_tokens")]
                if all(isinstance(count, int) for count in counts):
                    usage = Usage(*counts)
                for choice in chunk.choices:
                    if choice.index != 0:
                        continue
                    delta = choice.delta
                    piece = (delta.content or "") + (delta.refusal or "")
                    if piece:
                        text.append(piece)
                        await on_text(piece)
                    for fragment in delta.tool_calls or ():
                        if fragment.index not in calls and len(calls) >= MAX_TOOL_CALLS:
                            raise ProviderError("server", f"openai sent more than {MAX_TOOL_CALLS} tool calls", True)
                        call = calls.setdefault(fragment.index, {"id": "", "name": "", "arguments": []})
                        if fragment.id:
                            call["id"] = fragment.id
                        if fragment.function is not None:
                            if fragment.function.name:
                                call["name"] = fragment.function.name
                            if fragment.function.arguments:
                                call["arguments"].append(fragment.function.arguments)
                                piece += fragment.function.arguments
                    size += len(piece)
                    if size > REPLY_CHARS:
                        raise ProviderError("server", "openai's reply exceeded the size limit", True)
        return ModelReply("".join(text), tuple(self._call(index, call) for index, call in sorted(calls.items())), usage)

    def _call(self, index: int, call: dict[str, Any]) -> ToolCall:
        raw = "".join(call["arguments"])
        try:
            arguments = json.loads(raw) if raw else {}
        except json.JSONDecodeError:
            raise ProviderError("server", f"openai sent unparsable arguments for {call['name']}", True) from None
        if not isinstance(arguments, dict):
            raise ProviderError("server", f"openai sent arguments for {call['name']} that are not an object", True)
        return ToolCall(id=call["id"] or f"call_{index}", name=call["name"], arguments=arguments)

    async def close(self) -> None:
        await self.client.close()
