"""Every top-level class and constant of the runtime, the host and the backends has a name of its own.

Two `Refused` (or a `Refusal` beside a `Refused`) make a reader open both to learn which one a line means, and a
class name travels: tracebacks, logs and annotations name it without its module. Checked on the source: classes,
and public UPPER_CASE constants. Type variables (`T = TypeVar("T")`) are parameters, not names of things, and are
left out. One exception, for constants only: sibling plugins (each backend's package under `backends/`, each model
provider under `host/providers/`) implement one interface and read their own upstream, so each may name its
reading of the same thing alike (`TIMEOUT`, `DEFAULT_MODEL`); a reader meets those through the plugin's module.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

pytestmark = pytest.mark.req("unit:unique-names")

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = ("runtime", "host", "backends")
PLUGIN_KINDS = ("backends", "host/providers")
"""Folders whose children are sibling plugins: `backends/<name>/…`, `host/providers/<name>.py`."""
SHARED = {"common", "__init__", "base"}
"""Children of a plugin folder that every sibling uses: a name there collides with each sibling's."""


def top_level_names(source: str) -> list[tuple[str, str]]:
    """(`class` or `constant`, name) for each top-level class and public UPPER_CASE constant of `source`."""
    found = []
    for node in ast.parse(source).body:
        if isinstance(node, ast.ClassDef):
            found.append(("class", node.name))
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            value = node.value
            if isinstance(value, ast.Call) and getattr(value.func, "id", "") == "TypeVar":
                continue
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            found += [
                ("constant", t.id)
                for t in targets
                if isinstance(t, ast.Name) and t.id.isupper() and not t.id.startswith("_")
            ]
    return found


def plugin_of(path: str) -> str | None:
    """`backends/playwright_mcp`, `host/providers/openai`…: the sibling plugin `path` belongs to, if any."""
    for kind in PLUGIN_KINDS:
        if path.startswith(kind + "/"):
            child = path[len(kind) + 1 :].split("/")[0].removesuffix(".py")
            return None if child in SHARED else f"{kind}/{child}"
    return None


def collisions(sources: dict[str, str]) -> list[str]:
    """`Name: path, path…` for every name defined twice, but constants of different sibling plugins."""
    defined: dict[tuple[str, str], list[str]] = {}
    for path, source in sorted(sources.items()):
        for kind, name in top_level_names(source):
            defined.setdefault((kind, name), []).append(path)
    found = []
    for (kind, name), paths in sorted(defined.items()):
        plugins = [plugin_of(path) for path in paths]
        if len(paths) < 2:
            continue
        if kind == "constant" and None not in plugins and len(set(plugins)) == len(plugins):
            continue
        found.append(f"{name}: {', '.join(paths)}")
    return sorted(found)


def sources() -> dict[str, str]:
    return {
        str(path.relative_to(ROOT)): path.read_text(encoding="utf-8")
        for folder in FOLDERS
        for path in sorted((ROOT / folder).rglob("*.py"))
        if "node_modules" not in path.parts
    }


def test_no_two_top_level_classes_or_constants_share_a_name() -> None:
    assert collisions(sources()) == []


@pytest.mark.negative_control
def test_the_name_check_flags_a_shared_name_and_passes_sibling_plugins_constants() -> None:
    files = {
        "runtime/reasons.py": "class Refused(Exception): ...\nLOST = 'gone'\nT = TypeVar('T')\n_ROLE = 1\n",
        "host/turns.py": "class Refused(Exception): ...\nT = TypeVar('T')\n_ROLE = 2\n",
        "runtime/reading/probe.py": "LOST = re.compile('closed')\n",
        "backends/one/errors.py": "TIMEOUT = 1\nclass FormatError(ValueError): ...\n",
        "backends/two/errors.py": "TIMEOUT = 2\nclass FormatError(ValueError): ...\n",
        "backends/common/child.py": "ELEMENT = 1\n",
        "backends/one/adapter.py": "ELEMENT = 2\n",
    }
    assert collisions(files) == [
        "ELEMENT: backends/common/child.py, backends/one/adapter.py",
        "FormatError: backends/one/errors.py, backends/two/errors.py",
        "LOST: runtime/reading/probe.py, runtime/reasons.py",
        "Refused: host/turns.py, runtime/reasons.py",
    ]
