"""The one-time `page_context_token`: what lets one tool call act on the Pages the user authorized.

The host (the app that owns the chat and the turn) mints a token per tool call; the runtime verifies it before
any backend call. A token binds: the MCP connection, the host, the turn, the provider request, the tool call, the
revisions of the authorized Pages and the access revision. It travels in the request's `_meta`, outside the
model's arguments, so a model can neither see nor forge it.

A token also expires: `expires_at` is the minting time on the store's clock plus the store's token lifetime
(`TOKEN_LIFETIME`, 120 s, unless the host sets another). The host mints right before each call, so a live call
never comes near it; a token that leaked (a log, a crash dump, a proxy) is worthless soon after, and the runtime
can forget spent token ids once they have expired instead of keeping them forever.

Format: `base64url(JSON claims) "." base64url(HMAC-SHA256(secret, claims))`. Single use is enforced by the
runtime's record of spent token ids.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
from dataclasses import asdict, dataclass

TOKEN_LIFETIME = 120.0
"""Seconds a token stays usable after it was minted (the default of `ContextStore.token_lifetime`)."""


class CapabilityError(Exception):
    """The token is missing, forged, expired, replayed or bound to something else. Never reaches a backend."""


@dataclass(frozen=True)
class Claims:
    token_id: str
    connection: str  # the MCP connection's nonce (see runtime.capability.verifier)
    host: str  # the host whose turn this is: each host's turns are independent of every other host's
    turn: str
    provider_request: str
    tool_call: str
    pages: dict[str, int]  # handle -> Page revision when the host snapshotted the Page Context
    access_revision: int
    expires_at: float  # on the clock of the store that minted it (monotonic seconds by default)


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def new_secret() -> bytes:
    return secrets.token_bytes(32)


def sign(claims: Claims, secret: bytes) -> str:
    body = json.dumps(asdict(claims), sort_keys=True, separators=(",", ":")).encode()
    mac = hmac.new(secret, body, hashlib.sha256).digest()
    return f"{_b64(body)}.{_b64(mac)}"


def open_token(token: object, secret: bytes) -> Claims:
    """Check the signature and shape; return the claims. Raises CapabilityError on anything else."""
    if not isinstance(token, str) or token.count(".") != 1:
        raise CapabilityError("the page_context_token is missing or malformed")
    body_text, mac_text = token.split(".")
    try:
        body, mac = _unb64(body_text), _unb64(mac_text)
    except ValueError:
        raise CapabilityError("the page_context_token is malformed") from None
    if not hmac.compare_digest(mac, hmac.new(secret, body, hashlib.sha256).digest()):
        raise CapabilityError("the page_context_token is not signed by this runtime's host")
    try:
        raw = json.loads(body)
        claims = Claims(**raw)
    except (ValueError, TypeError):
        raise CapabilityError("the page_context_token carries malformed claims") from None
    return claims
