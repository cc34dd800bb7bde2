"""What the suites exercise, per requirement and backend: collected from the test items themselves, and checked
against the parity ledger in both directions.

The check is about every suite on every backend, collected the same way every time: as `make lab` collects them
(`$SUITE_BACKENDS=all`, `suites/selection.py`), so a cell of the ledger is backed by a test `make lab` runs on that
backend. A session that collected the whole `suites/` tree that way with nothing deselected and no `--backend`
(`make lab`: each xdist worker collects every item) already holds exactly that, and `from_session()` reads it. Any
other session (`make test`, which collects most suites on the default backend only; `pytest suites/parity`, `-k`,
`-m`, `--backend`) collects in a child pytest (`collect()`): nothing of that session's plugins, options or
already-imported conftests leaks into it. This module is also the child's plugin (`-p suites.parity.inventory`):
after collection it writes one JSON record per test item.

Which backends a test exercises:
- parametrized by `backend` (the release proofs): that one — unless marked `before_any_backend` (its check stops
  before any backend call and asserts 0 CDP commands, so the backend is beside the point): every backend;
- `@pytest.mark.req(..., backend="name")` (possibly module-wide: `pytestmark = pytest.mark.req(backend=...)`):
  that one (backend adapter and gateway tests that drive one upstream directly);
- otherwise, every backend: the test does not depend on one (the lab, pure rules, protocol without a Page), or it
  runs each backend itself (the parity tasks).
Negative controls exercise a check, not a requirement, and tests expected to fail exercise nothing; neither counts
as coverage, but both must name requirements.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from suites.selection import SUITE_BACKENDS, every_suite_on_every_backend
from suites.shards import proof_options

ROOT = Path(__file__).resolve().parents[2]
SUITES = ROOT / "suites"
COLLECT_TIMEOUT = 300.0
BACKEND_MODULE = "test_{}_backend.py"
"""A backend's own adapter suite, `suites/backends/test_<name>_backend.py`: outside the ledger until the backend
joins `BACKENDS` (its author may still be writing it; its requirement markers come with joining)."""

DESELECTED_KEY = pytest.StashKey[bool]()
"""Set (by `suites/conftest.py`'s `pytest_deselected`) when this session deselected any item: its items are not
the whole tree."""
TABLE_KEY = pytest.StashKey[str]()
"""The requirement × backend table, stashed by the ledger check for the terminal summary."""


@dataclass(frozen=True)
class Item:
    nodeid: str
    ids: tuple[str, ...]
    backend_param: str | None = None
    backend_kwargs: tuple[str, ...] = ()
    xfail: bool = False
    negative_control: bool = False

    def backends(self, all_backends: Sequence[str]) -> list[str]:
        if self.backend_param is not None:
            return [self.backend_param]
        if self.backend_kwargs:
            return list(self.backend_kwargs)
        return list(all_backends)


@dataclass
class Inventory:
    items: list[Item]
    ignored: list[str] = field(default_factory=list)
    seconds: float = 0.0


LAB_DURATIONS = Path(__file__).resolve().parents[1] / "durations" / "make-lab.json"
"""`make lab`'s recorded durations (`make durations`), which its shards are split by."""
INVENTORY = "req-inventory"
"""The name under which one run shares `collect()`'s answer between its workers and its checks (`once_per_run`)."""


# -- the child's plugin ------------------------------------------------------------------------------------------


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--req-inventory", default=None, help="write the requirement inventory (JSON) to this path")


def _xfail(item: pytest.Item) -> bool:
    """Whether the item is expected to fail, conditions evaluated as pytest would at set-up."""
    try:
        from _pytest.skipping import evaluate_xfail_marks  # the one evaluator pytest itself uses

        return evaluate_xfail_marks(item) is not None
    except ImportError:  # pragma: no cover - a future pytest: fall back to the unconditional marker
        return any(not mark.args or mark.args[0] is True for mark in item.iter_markers("xfail"))


def record(item: pytest.Item) -> dict[str, Any]:
    marks = list(item.iter_markers("req"))
    callspec = getattr(item, "callspec", None)
    return {
        "nodeid": item.nodeid,
        "ids": sorted({str(i) for mark in marks for i in mark.args}),
        "backend_param": (
            callspec.params.get("backend")
            if callspec is not None and item.get_closest_marker("before_any_backend") is None
            else None
        ),
        "backend_kwargs": sorted({mark.kwargs["backend"] for mark in marks if "backend" in mark.kwargs}),
        "xfail": _xfail(item),
        "negative_control": item.get_closest_marker("negative_control") is not None,
    }


def pytest_collection_finish(session: pytest.Session) -> None:
    path = session.config.getoption("--req-inventory", None)
    if path:
        Path(path).write_text(json.dumps([record(item) for item in session.items]), encoding="utf-8")


# -- collecting ----------------------------------------------------------------------------------------------------


def unjoined_modules(backends: Iterable[str]) -> list[Path]:
    joined = {BACKEND_MODULE.format(name) for name in backends}
    return sorted(p for p in (SUITES / "backends").glob(BACKEND_MODULE.format("*")) if p.name not in joined)


def _item(raw: dict[str, Any]) -> Item:
    return Item(
        raw["nodeid"], tuple(raw["ids"]), raw["backend_param"], tuple(raw["backend_kwargs"]), raw["xfail"],
        raw["negative_control"],
    )  # fmt: skip


def whole_tree(session: pytest.Session) -> bool:
    """Whether this session collected the whole `suites/` tree with nothing deselected or ignored and no
    `--backend`: what a child pytest collecting `suites/` finds under the same `$SUITE_BACKENDS`."""
    config = session.config
    args = [Path(config.invocation_params.dir, arg.split("::")[0]).resolve() for arg in config.args]
    narrowed = (
        config.getoption("backend", None)
        or config.getoption("ignore", None)
        or config.getoption("ignore_glob", None)
        or config.stash.get(DESELECTED_KEY, False)
    )
    return args == [SUITES] and not narrowed and bool(session.items)


def from_session(session: pytest.Session, backends: Sequence[str]) -> Inventory | None:
    """The inventory of this session's own items, when they are what `collect()` would find: the whole `suites/`
    tree, every suite on every backend; None otherwise."""
    if not (whole_tree(session) and every_suite_on_every_backend()):
        return None
    started = time.monotonic()
    ignored = unjoined_modules(backends)
    items = [_item(record(item)) for item in session.items if item.path not in ignored]
    return Inventory(items, [str(p.relative_to(ROOT)) for p in ignored], time.monotonic() - started)


def collect(backends: Sequence[str]) -> str:
    """Collect every test under suites/ on every backend in a child pytest, as `make lab` does: its inventory as
    JSON (`from_json`), so that xdist workers can share one collection (`suites.harness.once_per_run`). The same
    child records where each test runs (`suites/selection.py`, under "selection": `selection_of`), which the
    selection check reads, and how pytest-split shards it (`suites/shards.py`, under "shards"), which the shard
    proof reads: `make test` collects `make lab`'s tree once, not once per check."""
    ignored = unjoined_modules(backends)
    started = time.monotonic()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "COV_"))} | {SUITE_BACKENDS: "all"}
    with tempfile.TemporaryDirectory(prefix="req-inventory-") as tmp:
        out, where = Path(tmp) / "inventory.json", Path(tmp) / "selection.json"
        sharding, split = proof_options(LAB_DURATIONS, Path(tmp))
        command = [
            sys.executable, "-m", "pytest", str(SUITES), "--collect-only", "-q", "-p", "no:cacheprovider",
            "-p", "suites.parity.inventory", "--req-inventory", str(out),
            "-p", "suites.selection", "--selection-record", str(where), *sharding,
        ]  # fmt: skip
        done = subprocess.run(
            command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=COLLECT_TIMEOUT, check=False
        )
        if done.returncode != 0 or not all(path.exists() for path in (out, where, split)):
            raise AssertionError(f"collecting suites/ failed ({done.returncode}):\n{done.stdout[-4000:]}{done.stderr}")
        raw = json.loads(out.read_text(encoding="utf-8"))
        selection = json.loads(where.read_text(encoding="utf-8"))
        shards = json.loads(split.read_text(encoding="utf-8"))
    ignored_names = [str(p.relative_to(ROOT)) for p in ignored]
    # A backend's own module for a backend this lab does not run is outside the ledger, as `from_session` has it.
    raw = [r for r in raw if r["nodeid"].split("::")[0] not in ignored_names]
    seconds = time.monotonic() - started
    return json.dumps(
        {"items": raw, "ignored": ignored_names, "seconds": seconds, "selection": selection, "shards": shards}
    )


def selection_of(text: str) -> str:
    """Where each test of `make lab`'s tree runs, from `collect()`'s JSON, as `suites.selection.from_json` reads it."""
    return json.dumps(json.loads(text)["selection"])


def from_json(text: str) -> Inventory:
    found = json.loads(text)
    return Inventory([_item(r) for r in found["items"]], found["ignored"], found["seconds"])


# -- the checks (pure: the negative control feeds them a doctored inventory) -------------------------------------


Divergences = Mapping[str, Mapping[str, str]]
"""{requirement id: {backend: reason}}"""


def unnamed(items: Iterable[Item], known: Iterable[str], backends: Sequence[str]) -> list[str]:
    """Tests that name no requirement, or one the ledger does not know, or a backend this lab does not run."""
    known = set(known)
    problems = []
    for item in items:
        if not item.ids:
            problems.append(f"{item.nodeid}: no @pytest.mark.req")
        for unknown in sorted(set(item.ids) - known):
            problems.append(f"{item.nodeid}: unknown requirement {unknown!r}")
        for name in item.backend_kwargs:
            if name not in backends:
                problems.append(f"{item.nodeid}: req backend={name!r} is not in BACKENDS")
        if item.backend_kwargs and item.backend_param is not None:
            problems.append(f"{item.nodeid}: req backend= on a test already parametrized by backend")
    return problems


def exercised(items: Iterable[Item], backends: Sequence[str], *, counting: bool) -> dict[str, set[str]]:
    """{requirement: backends a test names it on}; `counting`: only tests that can show it met (neither negative
    controls nor tests expected to fail)."""
    table: dict[str, set[str]] = {}
    for item in items:
        if item.negative_control or (counting and item.xfail):
            continue
        for requirement in item.ids:
            table.setdefault(requirement, set()).update(item.backends(backends))
    return table


def uncovered(items: Sequence[Item], requirements: Iterable[str], divergences: Divergences,
              backends: Sequence[str]) -> list[str]:  # fmt: skip
    """Requirements some backend neither exercises nor declares a divergence for."""
    covered = exercised(items, backends, counting=True)
    problems = []
    for requirement in requirements:
        for backend in backends:
            if backend not in covered.get(requirement, set()) and backend not in divergences.get(requirement, {}):
                problems.append(f"{requirement}: not exercised on {backend} and no divergence declared")
    return problems


def unbacked(items: Sequence[Item], divergences: Divergences, backends: Sequence[str]) -> list[str]:
    """Declared divergences no test shows (on that backend), or declared for a backend this lab does not run."""
    shown = exercised(items, backends, counting=False)
    problems = []
    for requirement, by_backend in divergences.items():
        for backend in by_backend:
            if backend not in backends:
                problems.append(f"{requirement}: divergence declared for {backend!r}, which is not in BACKENDS")
            elif backend not in shown.get(requirement, set()):
                problems.append(f"{requirement}: divergence on {backend} is declared but no test shows it")
    return problems


def unexplained_xfails(items: Iterable[Item], divergences: Divergences, backends: Sequence[str]) -> list[str]:
    """Tests expected to fail on a backend without naming a requirement that declares that backend's divergence."""
    problems = []
    for item in items:
        if not item.xfail:
            continue
        for backend in item.backends(backends):
            if not any(backend in divergences.get(requirement, {}) for requirement in item.ids):
                problems.append(f"{item.nodeid}: expected to fail on {backend}, but none of {list(item.ids)} "
                                f"declares a divergence for it")  # fmt: skip
    return problems


def terminal_table(requirements: Iterable[str], divergences: Divergences, backends: Sequence[str]) -> str:
    """The requirement × backend table for the terminal: ✓, or ✗ where a divergence is declared."""
    requirements = list(requirements)
    width = max(len(r) for r in requirements)
    lines = [" " * width + "  " + "  ".join(backends)]
    for requirement in requirements:
        cells = [("✗ diverges" if b in divergences.get(requirement, {}) else "✓").ljust(len(b)) for b in backends]
        lines.append(requirement.ljust(width) + "  " + "  ".join(cells))
    return "\n".join(lines)
