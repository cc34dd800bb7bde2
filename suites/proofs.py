"""The checks release proofs share. Each is used by a proof and by its negative control, so the same code that
passes on the real runtime is shown to fail on a broken one."""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path
from typing import Any

import allure

from fixtures_sites.server import FixtureServer
from lab.tap import CDPTap

COSTS = Path(os.environ.get("LAB_COSTS_DIR") or Path(__file__).parent.parent / "reports" / "costs").resolve()
"""Where cost figures go: reports/costs/, or `$LAB_COSTS_DIR` (a shard of `make lab` keeps its own, merged later by
`make report`, lab/merge.py)."""


def report_figures(tap: CDPTap, names: dict[str, str]) -> dict[str, dict[str, int]]:
    """Per-target command counts by Page name, attached to the report and printed (`-s` shows them)."""
    by_target = tap.by_target()
    figures = {name: dict(by_target.get(target, Counter())) for name, target in names.items()}
    summary = {name: sum(calls.values()) for name, calls in figures.items()}
    allure.attach(json.dumps({"total": summary, "by_method": figures}, indent=2), "calls per Page", "application/json")
    print(f"CDP commands per Page: {summary}")
    return figures


OWNERS: dict[str, str] = {}
"""The test that wrote each cost record in this process (`record_cost`)."""


def record_cost(name: str, figures: dict[str, object]) -> None:
    """Keep a cost figure for `make lab`'s cost summary (reports/costs/) and the report.

    A figure has one owner: a second test writing the same record fails here, since it would overwrite the first
    (the last writer winning, by test order) and two shards of `make lab`, one test in each, would disagree on it
    (`lab.merge` refuses such shards: how the gateway allow-list check's runs of the parity tasks were found). Checked
    within a process: the whole of an unsharded `make lab`; under xdist, when both tests fall to one worker."""
    test = os.environ.get("PYTEST_CURRENT_TEST", "").rsplit(" (", 1)[0]
    owner = OWNERS.setdefault(name, test)
    if owner != test:
        raise AssertionError(f"cost record {name!r} is written by {owner} and again by {test}: a figure has one owner")
    COSTS.mkdir(parents=True, exist_ok=True)
    (COSTS / f"{name}.json").write_text(json.dumps(figures, indent=2), encoding="utf-8")
    allure.attach(json.dumps(figures, indent=2), name, "application/json")
    print(f"{name}: {figures}")


def assert_untouched(tap: CDPTap, targets: dict[str, str]) -> None:
    """Not one CDP command, from any client, reached these Pages."""
    by_target = tap.by_target()
    touched = {name: dict(by_target[t]) for name, t in targets.items() if by_target.get(t)}
    assert not touched, f"unauthorized Pages were touched: {touched}"


LATE_RELEASES = frozenset({"Runtime.releaseObject"})
"""Not a cost of the call being watched: Playwright's `JSHandle.dispose()` sends `Runtime.releaseObject` without
awaiting it, so a handle an earlier act took can be freed after that act's answer, inside the next call's window (the
fuzz run met one in CI, stop 25). Freeing a handle reads and changes nothing; a call that reached the backend or the
browser sends a read."""


def runtime_commands(tap: CDPTap, since: int = 0) -> list[str]:
    """The methods the runtime or a backend sent Chromium from record `since` on, an earlier call's late releases
    aside."""
    return [
        r.method
        for r in tap.records[since:]
        if r.kind == "command" and r.label == "runtime" and r.method not in LATE_RELEASES
    ]


def assert_no_runtime_calls(tap: CDPTap) -> None:
    """Nothing the runtime or a backend could send reached Chromium (an earlier call's late releases aside)."""
    sent = runtime_commands(tap)
    assert not sent, f"{len(sent)} CDP commands reached Chromium: {dict(Counter(sent))}"


def assert_no_writes(server: FixtureServer) -> None:
    writes = server.ledger.writes()
    assert writes == [], f"{len(writes)} real writes: {[w.path for w in writes]}"


def assert_handed_over(result: Any, what: str = "") -> None:
    """The call was handed to the user (`needs_user`), and said so in both fields."""
    assert result.status == "needs_user", f"{what} not handed to the user: {result}".lstrip()
    assert result.reason_code == "needs_user"
