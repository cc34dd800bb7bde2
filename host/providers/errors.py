"""A provider's failure as the console shows it: one bounded line without the key, and whether it may be retried.

Shared by the providers that speak HTTP (anthropic, openai); the package's factory never imports it, so no provider
module needs the package that chooses it.
"""

from __future__ import annotations

from host.providers.base import KEY_ENV, ErrorKind, ProviderError

DETAIL_CHARS = 300
"""How much of a provider's own error text a `ProviderError` carries (it is shown in the console)."""


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
