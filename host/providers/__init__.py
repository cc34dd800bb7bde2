"""The model providers, and the one factory the CLI and the app choose them with.

Each SDK is imported only when its provider is chosen: the host (and the script provider, which the demo and the
acceptance suites use) runs without the optional provider extras installed. Whatever keeps a provider from
answering — a missing key, a missing SDK, an unreadable script — is a `ProviderError` with a message that says
what to set or install, so the console can show it instead of crashing.
"""

from __future__ import annotations

import os
from pathlib import Path

from host.providers.base import BASE_URL_ENV, KEY_ENV, Provider, ProviderError

PROVIDERS: tuple[str, ...] = ("anthropic", "openai", "script")


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
