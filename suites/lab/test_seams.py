"""Negative controls replace named, public seams only: no class in `suites/` overrides a private method of a class of
`runtime/`, `host/` or `backends/`.

A control that overrides `_something` breaks on every rename in the runtime, and a reader cannot tell a seam from an
accident. So the check reads the suites' source: for every class whose bases the file names (imported from
`runtime`/`host`/`backends`, or another class of the same file that is one), each method it defines whose name
starts with one underscore (not a dunder) must not be one a class of those packages in those bases' MRO defines. A
class built from a variable (`class ReportsSuccess(real)`) is not resolved; such classes in the suites override public
methods.
"""

from __future__ import annotations

import ast
import importlib
from dataclasses import dataclass
from pathlib import Path

import pytest

pytestmark = pytest.mark.req("lab:seams")

ROOT = Path(__file__).resolve().parents[2]
OWNED = ("runtime", "host", "backends")
"""The packages whose private methods a suite may not override."""
PENDING: dict[str, str] = {}
"""Modules whose classes are being rebuilt elsewhere, with why; each entry goes when its seams land (the second
check fails once an entry excuses nothing)."""


@dataclass(frozen=True)
class Override:
    where: str
    """path:line of the method."""
    cls: str
    method: str
    owner: str
    """The `runtime`/`host` class (module.qualname) whose private method it overrides."""


def _owned(module: str) -> bool:
    return module.split(".")[0] in OWNED


def _imports(tree: ast.Module) -> dict[str, tuple[str, str | None]]:
    """Local name → (module, attribute) for `from m import a`, (module, None) for `import m [as n]`."""
    names: dict[str, tuple[str, str | None]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            for alias in node.names:
                names[alias.asname or alias.name] = (node.module, alias.name)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    names[alias.asname] = (alias.name, None)
    return names


def overrides(source: str, path: str) -> list[Override]:
    """Every method of a class in `source` that overrides a private method of a `runtime`/`host`/`backends` class."""
    tree = ast.parse(source)
    imported = _imports(tree)
    classes = {node.name: node for node in ast.walk(tree) if isinstance(node, ast.ClassDef)}

    def resolve(expr: ast.expr, seen: frozenset[str]) -> list[type]:
        if isinstance(expr, ast.Name) and expr.id in classes and expr.id not in seen:
            return [base for b in classes[expr.id].bases for base in resolve(b, seen | {expr.id})]
        if isinstance(expr, ast.Name) and expr.id in imported:
            module, attribute = imported[expr.id]
            if attribute is not None and _owned(module):
                found = getattr(importlib.import_module(module), attribute, None)
                return [found] if isinstance(found, type) else []
        if isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name) and expr.value.id in imported:
            module, attribute = imported[expr.value.id]
            if attribute is None and _owned(module):
                found = getattr(importlib.import_module(module), expr.attr, None)
                return [found] if isinstance(found, type) else []
        return []

    found = []
    for cls in classes.values():
        bases = [base for expr in cls.bases for base in resolve(expr, frozenset({cls.name}))]
        for item in cls.body:
            if not isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            if not item.name.startswith("_") or item.name.startswith("__"):
                continue
            owner = next(
                (k for base in bases for k in base.__mro__ if item.name in vars(k) and _owned(k.__module__)), None
            )
            if owner is not None:
                where = f"{path}:{item.lineno}"
                found.append(Override(where, cls.name, item.name, f"{owner.__module__}.{owner.__qualname__}"))
    return found


def in_suites() -> list[Override]:
    return [
        found
        for path in sorted((ROOT / "suites").rglob("*.py"))
        for found in overrides(path.read_text(encoding="utf-8"), str(path.relative_to(ROOT)))
    ]


def pending(found: Override) -> bool:
    return any(found.owner.startswith(module + ".") for module in PENDING)


def test_no_suite_overrides_a_private_method_of_a_runtime_host_or_backend_class() -> None:
    found = in_suites()
    assert [f for f in found if not pending(f)] == []
    excused = {module for module in PENDING if any(f.owner.startswith(module + ".") for f in found)}
    assert excused == set(PENDING), f"PENDING excuses nothing for {set(PENDING) - excused}: remove the entry"


BROKEN = """
from runtime.commands.act import Act
import runtime.sessions as sessions


class Sneaky(Act):
    async def _latest(self, *args): ...

    async def send(self, *args): ...  # a public seam: allowed

    def _helper_of_its_own(self): ...  # no runtime class has it: allowed


class Deeper(Sneaky):
    async def _read(self, *args): ...


class Manager(sessions.SessionManager):
    def _end(self, *args): ...


class Unrelated:
    def _latest(self): ...
"""
"""A suite file as a careless control would write it."""


@pytest.mark.negative_control
def test_the_seam_check_flags_a_suite_class_that_overrides_a_private_runtime_method() -> None:
    found = overrides(BROKEN, "suites/broken.py")
    assert [(f.cls, f.method, f.owner) for f in found] == [
        ("Sneaky", "_latest", "runtime.commands.act.Act"),
        ("Deeper", "_read", "runtime.commands.act.Act"),
        ("Manager", "_end", "runtime.sessions.SessionManager"),
    ]
    assert found[0].where == "suites/broken.py:7"
