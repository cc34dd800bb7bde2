"""The runtime stays lean and the instruments stay independent: checked on the source, import by import."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.req("unit:dependencies")

ROOT = Path(__file__).resolve().parents[2]
# uvicorn arrives with mcp (its streamable HTTP server); the bearer check wraps that server
# re2 (google-re2): model-supplied patterns run in linear time, so a pattern cannot freeze the server
RUNTIME_MAY_IMPORT = {
    "mcp",
    "mcp_types",
    "pydantic",
    "aiohttp",
    "uvicorn",
    "re2",
    "runtime",
    "backends",
    "anyio",
    "pydantic_core",
}
"""anyio and pydantic_core are the MCP SDK's stream and JSON parts that the stdio transport (runtime/mcp/stdio.py)
plugs into; they come with mcp and pydantic."""
LAB_MAY_NOT_IMPORT = {"runtime", "backends", "host"}
HOST_MAY_NOT_IMPORT = {"backends", "lab", "fixtures_sites", "suites"}
"""The host uses the runtime's public API only; the provider SDKs (and httpx2, their transport, whose timeout
errors they let through) are optional extras it imports lazily."""
HOST_MAY_IMPORT = RUNTIME_MAY_IMPORT - {"backends"} | {"host", "anthropic", "openai", "httpx2"}


def imports(folder: str) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for path in (ROOT / folder).rglob("*.py"):
        if "node_modules" in path.parts:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            for name in names:
                found.setdefault(name.split(".")[0], set()).add(str(path.relative_to(ROOT)))
    return found


def third_party(found: dict[str, set[str]]) -> dict[str, set[str]]:
    return {name: where for name, where in found.items() if name not in sys.stdlib_module_names}


def test_the_runtime_imports_only_mcp_pydantic_aiohttp_re2_and_the_standard_library() -> None:
    extra = {n: w for n, w in third_party(imports("runtime")).items() if n not in RUNTIME_MAY_IMPORT}
    assert not extra, f"runtime/ imports {extra}"


def test_the_backends_import_only_what_the_runtime_may() -> None:
    extra = {n: w for n, w in third_party(imports("backends")).items() if n not in RUNTIME_MAY_IMPORT}
    assert not extra, f"backends/ imports {extra}"


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
