"""What the host's agent loop needs from a model provider, and nothing more.

One provider request is one `complete` call: the system prompt, the transcript so far and the tools from the
runtime's `tools/list`, answered with the model's text (streamed through `on_text` as it arrives) and its tool
calls. The transcript is provider-neutral; each provider module turns it into its own wire format.

What never reaches a provider: capability tokens (they travel in each tool call's MCP `_meta`, which the host adds
after the model has spoken) and screenshots older than the latest tool results (the agent loop replaces them with
`IMAGE_PLACEHOLDER` before the request: an image enters the next model request only).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

KEY_ENV = {"anthropic": "ANTHROPIC_API_KEY", "openai": "OPENAI_API_KEY"}
BASE_URL_ENV = {"anthropic": "ANTHROPIC_BASE_URL", "openai": "OPENAI_BASE_URL"}

REPLY_CHARS = 1_000_000
"""The most text plus tool-call arguments one reply may stream: a compatible endpoint is not trusted to stop."""

MAX_TOOL_CALLS = 64

IMAGE_PLACEHOLDER = "[screenshot omitted: it was shown to the model in the request right after it was taken]"


@dataclass(frozen=True)
class ToolSpec:
    """A tool as `tools/list` describes it."""

    name: str
    description: str
    input_schema: dict[str, Any]


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    arguments: dict[str, Any]


@dataclass(frozen=True)
class Image:
    media_type: str  # "image/png"
    data: str  # base64


@dataclass(frozen=True)
class ToolResult:
    """The answer to one tool call, as the model reads it: the result's JSON text, and at most one image."""

    call_id: str
    text: str
    image: Image | None = None
    is_error: bool = False


@dataclass(frozen=True)
class UserText:
    text: str


@dataclass(frozen=True)
class AssistantTurn:
    text: str
    tool_calls: tuple[ToolCall, ...] = ()


@dataclass(frozen=True)
class ToolResults:
    results: tuple[ToolResult, ...]


Entry = UserText | AssistantTurn | ToolResults


@dataclass(frozen=True)
class Usage:
    """Tokens of one model call as the provider reported them (input includes cached input, where reported)."""

    input_tokens: int
    output_tokens: int

    def __add__(self, other: Usage) -> Usage:
        return Usage(self.input_tokens + other.input_tokens, self.output_tokens + other.output_tokens)


@dataclass(frozen=True)
class ModelReply:
    text: str
    tool_calls: tuple[ToolCall, ...] = ()
    usage: Usage | None = None
    """What the provider reported this call cost, if it reported it (the script provider does not)."""


ErrorKind = Literal["missing_key", "auth", "rate_limit", "server", "timeout", "bad_request", "script"]


@dataclass
class ProviderError(Exception):
    """A provider request that did not produce a reply. `retryable`: the same request may succeed later."""

    kind: ErrorKind
    message: str
    retryable: bool = field(default=False)

    def __str__(self) -> str:
        return f"{self.kind}: {self.message}"


TextSink = Callable[[str], Awaitable[None]]


class Provider(Protocol):
    name: str

    async def complete(
        self, system: str, transcript: Sequence[Entry], tools: Sequence[ToolSpec], on_text: TextSink
    ) -> ModelReply:
        """One model call. Raises `ProviderError` (never anything else) when there is no reply."""
        ...

    async def close(self) -> None: ...
