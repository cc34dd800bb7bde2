"""The model providers, and the one factory the CLI and the app choose them with.

Each SDK is imported only when its provider is chosen: the host (and the script provider, which the demo and the
acceptance suites use) runs without the optional provider extras installed. Whatever keeps a provider from
answering — a missing key, a missing SDK, an unreadable script — is a `ProviderError` with a message that says
what to set or install, so the console can show it instead of crashing.
"""

from __future__ import annotations

import os
from pathlib import Path

from host.providers.base import ErrorKind, Provider, ProviderError

PROVIDERS: tuple[str, ...] = ("anthropic", "openai", "script")

KEY_ENV = {"anthropic": "ANTHROPIC_API_KEY", "openai": "OPENAI_API_KEY"}
BASE_URL_ENV = {"anthropic": "ANTHROPIC_BASE_URL", "openai": "OPENAI_BASE_URL"}

DETAIL_CHARS = 300
"""How much of a provider's own error text a `ProviderError` carries (it is shown in the console)."""

REPLY_CHARS = 1_000_000
"""The most text plus tool-call arguments one reply may stream: a compatible endpoint is not trusted to stop."""

MAX_TOOL_CALLS = 64


def make_provider(
    name: str, *, model: str | None = None, script: Path | None = None, base_url: str | None = None
) -> Provider:
    """The provider called `name`, ready to answer; `ProviderError` if it cannot be.

    `base_url` (else `ANTHROPIC_BASE_URL` / `OPENAI_BASE_URL`, as the SDKs read them) points a provider at a
    compatible endpoint. The script provider without a script answers every request with a message saying how to
    configure a model.
    """
    if name == "script":
        from host.providers.script import ScriptProvider

        return ScriptProvider.load(script) if script is not None else ScriptProvider.unconfigured()
    if name not in KEY_ENV:
        raise ProviderError("bad_request", f"unknown provider {name!r}: choose one of {', '.join(PROVIDERS)}")
    key = os.environ.get(KEY_ENV[name], "").strip()
    if not key:
        raise ProviderError(
            "missing_key",
            f"The {name} provider needs an API key: set {KEY_ENV[name]} in the environment of `computer-use app` "
            "and start it again (or choose --provider script).",
        )
    url = base_url or os.environ.get(BASE_URL_ENV[name]) or None
    try:
        if name == "anthropic":
            from host.providers.anthropic import AnthropicProvider

            return AnthropicProvider(api_key=key, model=model, base_url=url)
        from host.providers.openai import OpenAIProvider

        return OpenAIProvider(api_key=key, model=model, base_url=url)
    except ModuleNotFoundError as exc:
        if exc.name != name:
            raise
        raise ProviderError(
            "bad_request",
            f"The {name} provider needs the official `{name}` SDK, which is not installed: "
            f"pip install 'computer-use-lab[providers]' (or pip install {name}).",
        ) from None


def bounded(text: str, secret: str = "") -> str:
    """A provider's error text as the console may show it: one line, short, and without the API key (some
    endpoints echo the key they refused)."""
    if secret:
        text = text.replace(secret, "***")
    text = " ".join(text.split())
    return text if len(text) <= DETAIL_CHARS else text[: DETAIL_CHARS - 1] + "…"


def status_error(
    provider: str, status: int, detail: str, retry_after: str | None = None, *, in_stream: str | None = None
) -> ProviderError:
    """An HTTP status from a provider as the host's error kinds: only what may succeed later is retryable.

    `in_stream`: the error type of an error that arrived inside a stream which had begun with 200; `status` is then
    the status that type stands for.
    """
    kind: ErrorKind
    if status in (401, 403):
        kind, retryable = "auth", False
        detail = f"{detail} — check {KEY_ENV.get(provider, 'the API key')}"
    elif status == 429:
        kind, retryable = "rate_limit", True
        if retry_after:
            detail = f"{detail} (retry after {bounded(retry_after)[:20]} s)"
    elif status == 408:
        kind, retryable = "timeout", True
    elif status >= 500:
        kind, retryable = "server", True
    else:
        kind, retryable = "bad_request", False
    where = (
        f"{provider}'s stream failed ({bounded(in_stream)[:40]})" if in_stream else f"{provider} answered HTTP {status}"
    )
    return ProviderError(kind, f"{where}: {detail}", retryable)
