"""A browser farm's endpoint: headers read from flags, a file and the environment, bounded, checked, and never
written out with their values (`runtime.endpoint`), and `serve`'s header flags refusing bad input before anything
starts."""

from __future__ import annotations

from pathlib import Path

import pytest

from runtime import cli
from runtime.endpoint import (
    HEADERS_ENV,
    MAX_HEADERS,
    BrowserEndpoint,
    HeaderError,
    endpoint_of,
    headers_from,
    parse_header,
    refused,
)

pytestmark = pytest.mark.req("remote:header-refused")


def test_headers_come_from_the_flags_the_file_and_the_environment_in_that_order(tmp_path: Path) -> None:
    file = tmp_path / "headers"
    file.write_text("# the farm's key\n\nX-From-File: two\n", encoding="utf-8")
    environ = {HEADERS_ENV: "X-From-Env: three\n"}
    assert headers_from(["Authorization: Bearer one"], file, environ) == (
        ("Authorization", "Bearer one"),
        ("X-From-File", "two"),
        ("X-From-Env", "three"),
    )
    assert headers_from((), None, {}) == ()


def test_a_header_that_is_not_name_colon_value_or_that_the_handshake_owns_is_refused_without_its_value() -> None:
    for line in ("Authorization Bearer s3cret", ": s3cret", "Two Words: s3cret"):
        with pytest.raises(HeaderError, match="must be 'Name: value'") as bad:
            parse_header(line)
        assert "s3cret" not in str(bad.value)
    with pytest.raises(HeaderError, match="set by the WebSocket handshake itself"):
        parse_header("Host: evil.test")
    with pytest.raises(HeaderError, match=f"at most {MAX_HEADERS}"):
        headers_from([f"X-{n}: v" for n in range(MAX_HEADERS + 1)], None, {})


def test_an_endpoint_prints_its_url_without_query_or_credentials_and_its_header_names_only() -> None:
    farm = BrowserEndpoint("wss://user:pw@farm.example:443/session/1/se/cdp?token=t0k", (("Authorization", "B s3"),))
    assert farm.websocket_only
    assert str(farm) == "wss://farm.example:443/session/1/se/cdp"
    assert repr(farm) == "BrowserEndpoint('wss://farm.example:443/session/1/se/cdp', headers: Authorization)"
    assert "s3" not in str(refused(farm, 403))
    assert "t0k" not in str(refused(farm, 403))
    assert "HTTP 403" in str(refused(farm, 403))
    assert not endpoint_of("http://127.0.0.1:9222").websocket_only
    assert str(endpoint_of("unix:/run/cdp.sock")) == "unix:/run/cdp.sock"


def test_serve_refuses_a_malformed_header_or_headers_with_launch_before_anything_starts(
    capsys: pytest.CaptureFixture[str],
) -> None:
    for argv, said in (
        (["--cdp-endpoint", "ws://127.0.0.1:9/x", "--cdp-header", "no colon here"], "must be 'Name: value'"),
        (["--launch", "--cdp-header", "A: b"], "go with --cdp-endpoint"),
    ):
        assert cli.main(["serve", *argv]) == 2
        err = capsys.readouterr().err
        assert said in err, err
        assert len(err.strip().splitlines()) == 1, err
