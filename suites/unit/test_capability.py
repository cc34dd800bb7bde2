"""Capability tokens: signed claims that cannot be forged, altered or read back as anything else."""

from __future__ import annotations

import pytest

from runtime.capability.token import CapabilityError, Claims, new_secret, open_token, sign

pytestmark = pytest.mark.req("unit:capability-token")

CLAIMS = Claims("t1", "conn-a", "turn-1", "turn-1-req-1", "call-1", {"page-1": 3}, 7)


def test_a_signed_token_opens_to_exactly_its_claims() -> None:
    secret = new_secret()
    assert open_token(sign(CLAIMS, secret), secret) == CLAIMS


@pytest.mark.parametrize("token", [None, "", "abc", "a.b.c", 42, "!!!.???"])
def test_a_missing_or_malformed_token_is_refused(token: object) -> None:
    with pytest.raises(CapabilityError):
        open_token(token, new_secret())


def test_a_token_signed_with_another_secret_is_refused() -> None:
    with pytest.raises(CapabilityError, match="not signed"):
        open_token(sign(CLAIMS, new_secret()), new_secret())


def test_a_token_whose_claims_were_edited_is_refused() -> None:
    secret = new_secret()
    token = sign(CLAIMS, secret)
    forged = sign(Claims("t1", "conn-a", "turn-1", "turn-1-req-1", "call-1", {"page-2": 3}, 7), new_secret())
    spliced = forged.split(".")[0] + "." + token.split(".")[1]
    with pytest.raises(CapabilityError, match="not signed"):
        open_token(spliced, secret)
