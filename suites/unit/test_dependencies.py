"""The runtime stays lean and the instruments stay independent: checked on the source, import by import."""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.req("unit:dependencies")

ROOT = Path(__file__).resolve().parents[2]
# uvicorn arrives with mcp (its streamable HTTP server); the bearer check wraps that server, and the listener
# bounds (runtime/listeners.py) extend uvicorn's h11 protocol, so they read h11's connection states
# re2 (google-re2): model-supplied patterns run in linear time, so a pattern cannot freeze the server
RUNTIME_MAY_IMPORT = {
    "mcp",
    "mcp_types",
    "pydantic",
    "aiohttp",
    "uvicorn",
    "h11",
    "re2",
    "runtime",
    "anyio",
    "pydantic_core",
}
"""anyio and pydantic_core are the MCP SDK's stream and JSON parts that the stdio transport
(runtime/transports/mcp/stdio.py) plugs into; they come with mcp and pydantic."""
LAB_MAY_NOT_IMPORT = {"runtime", "backends", "host"}
HOST_MAY_NOT_IMPORT = {"backends", "lab", "fixtures_sites", "suites"}
"""The host uses the runtime's public API only; the provider SDKs (and httpx2, their transport, whose timeout
errors they let through) are optional extras it imports lazily."""
HOST_MAY_IMPORT = RUNTIME_MAY_IMPORT - {"backends"} | {"host", "anthropic", "openai", "httpx2"}


BACKEND_INTERFACE = ("runtime.backend", "runtime.cdp", "runtime.models", "runtime.roles")
"""All a backend may use of the runtime: what a third-party backend, installed beside it, would build on (the role
vocabulary included: an observation's role words are the ones verify takes)."""


def imports(folder: str, whole: bool = False) -> dict[str, set[str]]:
    """Module → the files of `folder` importing it: top-level names, or `whole` dotted names."""
    found: dict[str, set[str]] = {}
    for path in (ROOT / folder).rglob("*.py"):
        if "node_modules" in path.parts:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            for name in names:
                found.setdefault(name if whole else name.split(".")[0], set()).add(str(path.relative_to(ROOT)))
    return found


def third_party(found: dict[str, set[str]]) -> dict[str, set[str]]:
    return {name: where for name, where in found.items() if name not in sys.stdlib_module_names}


def test_the_runtime_imports_only_mcp_pydantic_aiohttp_re2_and_the_standard_library() -> None:
    extra = {n: w for n, w in third_party(imports("runtime")).items() if n not in RUNTIME_MAY_IMPORT}
    assert not extra, f"runtime/ imports {extra}"


def test_the_backends_import_only_what_the_runtime_may() -> None:
    extra = {n: w for n, w in third_party(imports("backends")).items() if n not in RUNTIME_MAY_IMPORT | {"backends"}}
    assert not extra, f"backends/ imports {extra}"


def beyond_the_interface(found: dict[str, set[str]]) -> dict[str, set[str]]:
    return {
        name: where
        for name, where in found.items()
        if name.split(".")[0] == "runtime"
        and not any(name == part or name.startswith(part + ".") for part in BACKEND_INTERFACE)
    }


def test_the_runtime_never_imports_a_backend() -> None:
    assert "backends" not in imports("runtime"), f"runtime/ imports backends: {imports('runtime')['backends']}"


def test_the_backends_use_only_the_runtime_s_backend_interface() -> None:
    extra = beyond_the_interface(imports("backends", whole=True))
    assert not extra, f"backends/ imports {extra}"


@pytest.mark.negative_control
def test_the_interface_check_sees_a_module_beyond_the_interface() -> None:
    assert "runtime.service" in beyond_the_interface(imports("suites/reliability", whole=True))


def test_the_instruments_never_import_what_they_measure() -> None:
    leaks = {n: w for n, w in imports("lab").items() if n in LAB_MAY_NOT_IMPORT}
    assert not leaks, f"lab/ imports {leaks}"


def test_the_runtime_never_imports_the_host() -> None:
    assert "host" not in imports("runtime"), f"runtime/ imports host: {imports('runtime')['host']}"


def test_the_host_imports_the_runtime_and_never_a_backend_or_the_lab() -> None:
    found = imports("host")
    leaks = {n: w for n, w in found.items() if n in HOST_MAY_NOT_IMPORT}
    extra = {n: w for n, w in third_party(found).items() if n not in HOST_MAY_IMPORT | HOST_MAY_NOT_IMPORT}
    assert not leaks, f"host/ imports {leaks}"
    assert not extra, f"host/ imports {extra}"


@pytest.mark.negative_control
def test_the_import_check_sees_a_forbidden_import() -> None:
    found = imports("suites/unit")  # this very file imports pytest, which the runtime may not
    assert "pytest" in third_party(found)


TEST_ONLY = re.compile(r"sabotage|negative.control", re.I)
"""Words that would mark a test-only switch: the broken runtimes live in `suites/sabotage.py`, never in the code
they break."""


def switches_in(folder: str) -> list[str]:
    """`path:line` of every line of `folder`'s Python that names a test-only switch."""
    return [
        f"{path.relative_to(ROOT)}:{number}"
        for path in sorted((ROOT / folder).rglob("*.py"))
        if "node_modules" not in path.parts
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if TEST_ONLY.search(line)
    ]


def test_the_runtime_and_the_backends_hold_no_test_only_switch() -> None:
    assert switches_in("runtime") + switches_in("backends") == []


@pytest.mark.negative_control
def test_the_switch_check_sees_a_test_only_switch() -> None:
    assert any(hit.startswith("suites/sabotage.py:") for hit in switches_in("suites"))
