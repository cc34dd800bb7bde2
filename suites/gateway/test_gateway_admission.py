"""The admission room, each check deciding on its own: a real aiohttp request on a real loopback socket (another
user's socket made by a real `nobody` process), in-process and without a browser, every refusal's status and words
asserted as a refused caller sees them. The live proofs (a page script, a second uid, against a runtime's gateways)
are in `suites/security`.
"""

from __future__ import annotations

import os
import socket
import subprocess
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, cast

import pytest
from aiohttp import web
from aiohttp.test_utils import make_mocked_request

from runtime.gateway import ScopedGateway
from runtime.gateway.admission import Admission
from runtime.gateway.allowlist import refusal_message
from runtime.gateway.records import RefusedCommand

BOUND = "A" * 32
HOSTPORT = "127.0.0.1:4242"
NOBODY = ("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "/usr/bin/python3", "-c")
"""Another local user (we run as root): `nobody`, with the system interpreter it can run."""
PEER_TIMEOUT = 20.0


def gateway() -> ScopedGateway:
    """A gateway bound to BOUND that believes it listens on HOSTPORT; nothing is started."""
    gw = ScopedGateway("http://127.0.0.1:9", BOUND)
    gw.admission.hostport = HOSTPORT
    return gw


# -- admission: a real request on a real loopback socket ----------------------------------------------------------


@dataclass
class Ends:
    """The two ends of the connection a request came on, as aiohttp's transport reports them."""

    peername: Any
    sockname: Any

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"peername": self.peername, "sockname": self.sockname}.get(name, default)


@pytest.fixture
def loopback() -> Iterator[Ends]:
    """A real TCP connection on 127.0.0.1 made by this process: its accepted end, as a gateway would see it."""
    with (
        socket.create_server(("127.0.0.1", 0)) as listener,
        socket.create_connection(listener.getsockname(), timeout=PEER_TIMEOUT),
    ):
        accepted, _ = listener.accept()
        with accepted:
            yield Ends(accepted.getpeername(), accepted.getsockname())


def request(path: str, ends: Any, headers: Mapping[str, str] | None = None, method: str = "GET") -> web.Request:
    sent = {"Host": HOSTPORT} if headers is None else dict(headers)
    return make_mocked_request(method, path, headers=sent, transport=ends)


@pytest.mark.req("gateway:local-user")
def test_a_caller_on_a_loopback_socket_of_the_gateways_own_uid_is_admitted(loopback: Ends) -> None:
    assert gateway().admission.check_caller(request("/x", loopback)) is None


@pytest.mark.req("gateway:local-user")
def test_a_caller_whose_address_is_not_known_is_refused(loopback: Ends) -> None:
    gw = gateway()
    unknown = "the caller's address is unknown"
    assert gw.admission.check_caller(request("/x", Ends(None, None))) == unknown
    assert gw.admission.check_caller(request("/x", Ends(loopback.peername, None))) == unknown
    assert gw.admission.check_caller(request("/x", Ends(None, loopback.sockname))) == unknown
    hung_up = request("/x", loopback)
    hung_up.protocol.transport = None  # what aiohttp leaves once the caller's connection is lost
    assert hung_up.transport is None
    assert gw.admission.check_caller(hung_up) == unknown


@pytest.mark.req("gateway:local-user")
def test_a_caller_with_no_socket_on_this_machine_is_refused_as_unknown() -> None:
    gw = gateway()
    with socket.create_server(("127.0.0.1", 0)) as listener:
        gone = Ends(("127.0.0.1", 1), listener.getsockname())
        assert gw.admission.check_caller(request("/x", gone)) == (
            "the caller's uid cannot be found (no such loopback socket: not a local process, or gone)"
        )


@pytest.mark.req("gateway:local-user")
def test_a_caller_running_as_another_local_user_is_refused_naming_both_uids() -> None:
    """`nobody` connects from its own process; the accepted socket's peer is owned by uid 65534."""
    with socket.create_server(("127.0.0.1", 0)) as listener:
        port = listener.getsockname()[1]
        script = (
            "import socket,sys\n"
            f"s = socket.create_connection(('127.0.0.1', {port}), timeout={PEER_TIMEOUT})\n"
            "print('connected', flush=True)\nsys.stdin.read()\n"
        )
        with subprocess.Popen([*NOBODY, script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True) as other:
            try:
                listener.settimeout(PEER_TIMEOUT)
                accepted, _ = listener.accept()
                with accepted:
                    ends = Ends(accepted.getpeername(), accepted.getsockname())
                    reason = gateway().admission.check_caller(request("/x", ends))
            finally:
                assert other.stdin is not None
                other.stdin.close()
                other.wait(PEER_TIMEOUT)
    assert reason == f"the caller runs as uid 65534, not as the gateway's uid {os.geteuid()}"


@pytest.mark.req("gateway:secret-url")
def test_host_must_name_the_gateways_own_address_and_port() -> None:
    """A DNS-rebound page names its own host; another port on the same address is another server."""
    gw, ends = gateway(), Ends(None, None)
    assert gw.admission.check_host(request("/x", ends)) is None
    assert gw.admission.check_host(request("/x", ends, {"Host": "127.0.0.1:4243"})) == (
        "the request names Host '127.0.0.1:4243', not the gateway's 127.0.0.1:4242"
    )
    assert gw.admission.check_host(request("/x", ends, {"Host": "localhost:4242"})) is not None
    assert (
        gw.admission.check_host(request("/x", ends, {}))
        == "the request names Host '', not the gateway's 127.0.0.1:4242"
    )
    long_host = "h" * 150
    assert gw.admission.check_host(request("/x", ends, {"Host": long_host})) == (
        f"the request names Host {'h' * 100!r}, not the gateway's 127.0.0.1:4242"
    )


@pytest.mark.req("gateway:secret-url")
def test_an_origin_header_alone_marks_a_request_from_a_web_page() -> None:
    ends = Ends(None, None)
    assert Admission.check_web(request("/x", ends, {"Origin": "http://evil.test"})) == (
        "the request carries Origin 'http://evil.test': it comes from a web page"
    )
    long_origin = "http://" + "e" * 200
    assert Admission.check_web(request("/x", ends, {"Origin": long_origin})) == (
        f"the request carries Origin {long_origin[:100]!r}: it comes from a web page"
    )
    assert Admission.check_web(request("/x", ends, {"Origin": ""})) is not None


@pytest.mark.req("gateway:page-script-refused")
def test_any_sec_fetch_header_but_node_fetchs_mode_alone_marks_a_request_from_a_web_page() -> None:
    ends = Ends(None, None)

    def web_reason(**headers: str) -> str | None:
        return Admission.check_web(request("/x", ends, {k.replace("_", "-"): v for k, v in headers.items()}))

    assert web_reason() is None
    assert web_reason(Host=HOSTPORT, Connection="Upgrade") is None
    assert web_reason(**{"Sec-Fetch-Mode": "cors"}) is None
    assert web_reason(**{"SEC-FETCH-MODE": "cors"}) is None
    assert web_reason(**{"X-Sec-Fetch-Site": "cross-site"}) is None
    assert web_reason(**{"Sec-Fetch-Site": "cross-site"}) == (
        "the request carries Sec-Fetch-Site: it comes from a web page"
    )
    assert web_reason(**{"sec-fetch-user": "?1"}) == "the request carries sec-fetch-user: it comes from a web page"
    both = {"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Dest": "empty", "Sec-Fetch-Mode": "cors"}
    assert web_reason(**both) == "the request carries Sec-Fetch-Dest, Sec-Fetch-Site: it comes from a web page"
    many = {f"Sec-Fetch-{'x' * 30}{n}": "1" for n in range(5)}
    reason = web_reason(**many)
    assert reason == f"the request carries {', '.join(sorted(many))[:100]}: it comes from a web page"


@pytest.mark.req("gateway:secret-url")
def test_a_request_with_the_secret_from_the_gateways_own_user_is_admitted_to_the_path_after_it(
    loopback: Ends,
) -> None:
    gw = gateway()
    assert gw.admission.admit(request(f"/{gw.admission.secret}/json/version", loopback)) == "/json/version"
    assert gw.admission.admit(request(f"/{gw.admission.secret}", loopback)) == "/"
    assert (
        gw.admission.admit(request(f"/{gw.admission.secret}/devtools/page/{BOUND}", loopback))
        == f"/devtools/page/{BOUND}"
    )
    assert gw.refusals == []


def refused(answer: str | web.Response) -> tuple[int, str]:
    assert isinstance(answer, web.Response), answer
    return answer.status, cast(str, answer.text)


@pytest.mark.req("gateway:secret-url")
def test_a_request_without_the_secret_is_404_and_recorded_without_any_try_at_a_secret(loopback: Ends) -> None:
    """A try at a secret (16 characters or more) is never written down: it may be a near miss of the real one."""
    gw = gateway()
    wrong = "w" * 16
    assert refused(gw.admission.admit(request(f"/{wrong}/json/list", loopback))) == (
        404,
        "computer_use gateway: no such endpoint",
    )
    assert refused(gw.admission.admit(request(f"/{wrong[:15]}/json/list", loopback)))[0] == 404
    assert refused(gw.admission.admit(request("/json/list", loopback, method="POST")))[0] == 404
    why = "no or wrong gateway secret in the path"
    assert gw.refusals == [
        RefusedCommand(0, "HTTP GET /<not the secret>/json/list", why),
        RefusedCommand(0, f"HTTP GET /{wrong[:15]}/json/list", why),
        RefusedCommand(0, "HTTP POST /json/list", why),
    ]


@pytest.mark.req("gateway:secret-url")
def test_a_refused_requests_path_is_recorded_cut_to_200_characters(loopback: Ends) -> None:
    gw = gateway()
    path = "/x/" + "y" * 300
    refused(gw.admission.admit(request(path, loopback)))
    assert [r.method for r in gw.refusals] == [f"HTTP GET {path[:200]}"]


@pytest.mark.req("gateway:secret-url")
def test_each_admission_check_refuses_with_its_own_status_and_reason_and_never_records_the_secret(
    loopback: Ends,
) -> None:
    """Caller first (403), then Host (421), then web headers (403): each shown with every later check failing too."""
    gw = gateway()
    path = f"/{gw.admission.secret}/json/list"
    web_page = {"Host": "evil.test:4242", "Origin": "http://evil.test"}
    caller = "the caller's address is unknown"
    assert refused(gw.admission.admit(request(path, Ends(None, None), web_page))) == (
        403,
        refusal_message("GET request", caller),
    )
    host = "the request names Host 'evil.test:4242', not the gateway's 127.0.0.1:4242"
    assert refused(gw.admission.admit(request(path, loopback, web_page))) == (421, refusal_message("GET request", host))
    origin = "the request carries Origin 'http://evil.test': it comes from a web page"
    with_origin = {"Host": HOSTPORT, "Origin": "http://evil.test"}
    assert refused(gw.admission.admit(request(path, loopback, with_origin))) == (
        403,
        refusal_message("GET request", origin),
    )
    shown = "HTTP GET /<secret>/json/list"
    assert gw.refusals == [
        RefusedCommand(0, shown, caller),
        RefusedCommand(0, shown, host),
        RefusedCommand(0, shown, origin),
    ]
    assert refused(gw.admission.admit(request("/json/list", loopback, with_origin)))[0] == 403
