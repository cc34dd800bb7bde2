"""Which backends a backend-parametrized test is collected on (issue 31, decision 3), and the records that let
`suites/lab/test_selection.py` check that the suites' own collection follows it.

`make test` (no switch): a test that belongs to a release proof (`suites.parity.ledger.proof_of`: it names one of a
proof's requirements) or is a backend contract test (under `suites/backends/`: each adapter held to the `Backend`
contract of `runtime/backend.py`, flow by flow) is collected on every backend; any other test on the default backend
only. The proofs and the contract are where backends must be shown alike; the other suites exercise the runtime
above the backend, which is the same code whichever backend is under it, and on one backend cost a third.
`$SUITE_BACKENDS=all` (`make lab` sets it) collects every test on every backend; `--backend NAME` collects every test
on the named backends. `before_any_backend` and `backends(...)` narrow first, so a flow only some backends have runs
on the first of those.

A test left out is not collected at all (rather than collected and skipped): the parity ledger reads `make lab`'s
collection (`suites/parity/inventory.py` collects it with the switch), so its per-backend cells are backed by what
`make lab` runs.

This module is also the plugin of the child pytest the check runs (`-p suites.selection`): after collection it
writes one record per test item.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from suites.harness import BACKENDS
from suites.parity.ledger import proof_of

SUITE_BACKENDS = "SUITE_BACKENDS"
"""The environment variable that collects every suite on every backend ("all", what `make lab` sets)."""

ROOT = Path(__file__).resolve().parents[1]
SUITES = ROOT / "suites"
CONTRACT_SUITE = SUITES / "backends"
"""The backend contract tests: each adapter against real Chromium through the `Backend` protocol."""
COLLECT_TIMEOUT = 300.0


def every_suite_on_every_backend() -> bool:
    """Whether this run collects every test on every backend (`$SUITE_BACKENDS=all`)."""
    return os.environ.get(SUITE_BACKENDS, "").strip() == "all"


def every_backend(requirements: Iterable[str], path: Path) -> bool:
    """Whether a test (its `req` ids and its file) runs on every backend in `make test`: it belongs to a release
    proof, or it is a backend contract test."""
    return proof_of(requirements) is not None or path.resolve().is_relative_to(CONTRACT_SUITE)


def backends_for(metafunc: pytest.Metafunc) -> list[str]:
    """The backends a test taking the `backend` fixture is parametrized with (the module docstring's rule). The
    requirements are the function's, its class's and its module's: a parameter's own `req` marks come later, so a
    proof's requirement belongs on the function (the collection check flags one named on a parameter only)."""
    named = metafunc.config.getoption("backend")
    chosen = list(named or BACKENDS)
    definition = metafunc.definition
    if definition.get_closest_marker("before_any_backend"):
        chosen = chosen[:1]
    if only := definition.get_closest_marker("backends"):
        chosen = [name for name in chosen if name in only.args]
    requirements = [r for mark in definition.iter_markers("req") for r in mark.args]
    if named or every_suite_on_every_backend() or every_backend(requirements, definition.path):
        return chosen
    return chosen[:1]


# -- the child's plugin ------------------------------------------------------------------------------------------


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--selection-record", default=None, help="write each collected item's backend (JSON) to this path")


def record(item: pytest.Item) -> dict[str, Any]:
    callspec = getattr(item, "callspec", None)
    backend = callspec.params.get("backend") if callspec is not None else None
    only = item.get_closest_marker("backends")
    return {
        # The test without its backend parameter: the same check with the same other parameters.
        "test": re.sub(rf"(?<=[\[-]){re.escape(backend)}(?=[\]-])", "*", item.nodeid) if backend else item.nodeid,
        "backend": backend,
        "requirements": sorted({str(r) for mark in item.iter_markers("req") for r in mark.args}),
        "only": list(only.args) if only else None,
        "before_any_backend": item.get_closest_marker("before_any_backend") is not None,
    }


def pytest_collection_finish(session: pytest.Session) -> None:
    path = session.config.getoption("--selection-record", None)
    if path:
        Path(path).write_text(json.dumps([record(item) for item in session.items]), encoding="utf-8")


# -- collecting and checking -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Collected:
    test: str
    """The node id with its backend parameter as `*`."""
    backend: str | None
    requirements: tuple[str, ...]
    only: tuple[str, ...] | None = None
    before_any_backend: bool = False

    @property
    def path(self) -> Path:
        return ROOT / self.test.split("::")[0]


def collect(
    paths: Sequence[Path] = (SUITES,), *, every: bool, options: Sequence[str] = (), plugins: Sequence[str] = ()
) -> list[Collected]:
    """What a child pytest collects under `paths`: as `make lab` does (`every`) or as `make test` does."""
    return from_json(collect_json(paths, every=every, options=options, plugins=plugins))


def collect_json(
    paths: Sequence[Path] = (SUITES,), *, every: bool, options: Sequence[str] = (), plugins: Sequence[str] = ()
) -> str:
    """`collect()`'s records as JSON, so that xdist workers can share one collection (`harness.once_per_run`)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "COV_")) and k != SUITE_BACKENDS}
    if every:
        env[SUITE_BACKENDS] = "all"
    with tempfile.TemporaryDirectory(prefix="selection-") as tmp:
        out = Path(tmp) / "selection.json"
        command = [
            sys.executable, "-m", "pytest", *map(str, paths), "--collect-only", "-q", "-p", "no:cacheprovider",
            "-p", "suites.selection", "--selection-record", str(out), *(f"-p{p}" for p in plugins), *options,
        ]  # fmt: skip
        done = subprocess.run(
            command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=COLLECT_TIMEOUT, check=False
        )
        if done.returncode != 0 or not out.exists():
            raise AssertionError(f"collecting {paths} failed ({done.returncode}):\n{done.stdout[-4000:]}{done.stderr}")
        return out.read_text(encoding="utf-8")


def from_json(text: str) -> list[Collected]:
    return [collected(r) for r in json.loads(text)]


def collected(raw: dict[str, Any]) -> Collected:
    """A `record()` as the check reads it."""
    only = raw["only"]
    return Collected(
        raw["test"], raw["backend"], tuple(raw["requirements"]), tuple(only) if only else None,
        raw["before_any_backend"],
    )  # fmt: skip


def backends_of(collected: Iterable[Collected]) -> dict[str, list[str | None]]:
    """{test: the backends it is collected on, in `BACKENDS` order; [None] for a test without the parameter}"""
    tests: dict[str, list[str | None]] = {}
    for c in collected:
        tests.setdefault(c.test, []).append(c.backend)
    return {test: sorted(found, key=lambda b: -1 if b is None else BACKENDS.index(b)) for test, found in tests.items()}


def misplaced(make_test: Sequence[Collected], make_lab: Sequence[Collected]) -> list[str]:
    """Where `make test`'s collection departs from the rule, given `make lab`'s: a release-proof or contract test
    not on every backend `make lab` has it on, another test on more than the first of those, or a test `make lab`
    does not collect at all."""
    lab, test = backends_of(make_lab), backends_of(make_test)
    sample = {c.test: c for c in make_lab}
    problems = [f"{name}: collected by make test, not by make lab" for name in test if name not in lab]
    for name, backends in lab.items():
        belongs = every_backend(sample[name].requirements, sample[name].path)
        wanted = backends if belongs else backends[:1]
        if test.get(name, []) != wanted:
            why = "a release proof or contract test" if belongs else "neither a release proof nor a contract test"
            problems.append(f"{name}: on {test.get(name, [])} in make test, {wanted} wanted ({why})")
    return problems


def short_of_every_backend(make_lab: Sequence[Collected]) -> list[str]:
    """Backend-parametrized tests `make lab` does not collect on every backend they have: every one, or those of
    `backends(...)`, or the first one for `before_any_backend`."""
    lab = backends_of(make_lab)
    problems = []
    for c in {c.test: c for c in make_lab if c.backend is not None}.values():
        wanted = [name for name in BACKENDS if c.only is None or name in c.only]
        wanted = wanted[:1] if c.before_any_backend else wanted
        if lab[c.test] != wanted:
            problems.append(f"{c.test}: on {lab[c.test]} in make lab, {wanted} wanted")
    return problems
