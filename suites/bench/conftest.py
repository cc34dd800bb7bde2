"""`make test` runs with `--benchmark-skip` (timings and cost figures are not pass/fail): the task-cost suite then
runs its smoke task only, which proves the three drivers, the metering and the recording still work in about ten
seconds; `make bench` and `make lab` run the whole task set (a few minutes on two cores)."""

from __future__ import annotations

from pathlib import Path

import pytest

from suites.bench.tasks import SMOKE

TASK_COST = Path(__file__).with_name("test_task_cost.py")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not config.getoption("benchmark_skip", default=False):
        return
    for item in items:
        callspec = getattr(item, "callspec", None)
        if item.path == TASK_COST and callspec is not None and callspec.params.get("name") != SMOKE:
            item.add_marker(pytest.mark.skip(reason=f"make bench / make lab run every task; make test runs {SMOKE}"))
