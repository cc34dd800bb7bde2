"""No import circle in any package of the tree (the runtime, the backends, the host, the lab, the fixture sites
and the suites): a reader can start at any module and reach the leaves.

Checked on the source, every import counted: those under `if TYPE_CHECKING:` and those inside a function too, since
a type-only circle is still a pair of modules that cannot be read one without the other. A module importing a
package's submodule does not count as importing the package's `__init__` (Python runs it, but nothing of it is
read there).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

pytestmark = pytest.mark.req("unit:import-graph")

ROOT = Path(__file__).resolve().parents[2]


def sources(folder: str) -> dict[str, str]:
    """Module name → source, for every module of the package `folder`."""
    found = {}
    for path in sorted((ROOT / folder).rglob("*.py")):
        if "node_modules" in path.parts:
            continue
        parts = path.relative_to(ROOT).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path.read_text(encoding="utf-8")
    return found


def edges(modules: dict[str, str]) -> dict[str, set[str]]:
    """Module → the modules of `modules` it imports anywhere in its source (`from p import m` names p.m if a module)."""
    graph: dict[str, set[str]] = {}
    for name, source in modules.items():
        targets = set()
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.Import):
                targets |= {alias.name for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                for alias in node.names:
                    child = f"{node.module}.{alias.name}"
                    targets.add(child if child in modules else node.module)
        graph[name] = {target for target in targets if target in modules and target != name}
    return graph


def circles(modules: dict[str, str]) -> list[list[str]]:
    """Every set of modules that import one another round a circle (strongly connected, more than one), sorted."""
    graph = edges(modules)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(module: str) -> None:  # Tarjan's strongly connected components
        index[module] = low[module] = len(index)
        stack.append(module)
        for target in sorted(graph[module]):
            if target not in index:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in stack:
                low[module] = min(low[module], index[target])
        if low[module] == index[module]:
            component = []
            while not component or component[-1] != module:
                component.append(stack.pop())
            if len(component) > 1:
                found.append(sorted(component))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return sorted(found)


@pytest.mark.parametrize("folder", ["runtime", "backends", "host", "lab", "fixtures_sites", "suites"])
def test_no_modules_of_the_package_import_one_another_in_a_circle(folder: str) -> None:
    assert circles(sources(folder)) == []


@pytest.mark.negative_control
def test_the_circle_check_flags_a_type_only_circle_and_passes_a_chain() -> None:
    chain = {
        "pkg": "from pkg.models import Page\n",
        "pkg.models": "from pkg.text import clean\n",
        "pkg.text": "import re\n",
    }
    assert circles(chain) == []
    typed = {
        **chain,
        "pkg.text": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.render import view\n",
        "pkg.render": "def view():\n    from pkg import models\n",
    }
    assert circles(typed) == [["pkg.models", "pkg.render", "pkg.text"]]
