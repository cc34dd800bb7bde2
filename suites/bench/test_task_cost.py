"""Task cost, measured side by side in one run (issue 31): every task of the cost set (`suites/bench/tasks.py`: the
parity tasks, the ten evaluation questions, five multi-step tasks on the realistic Pages) run by three drivers on
fresh Pages of the same fixture server and Chromium — our `computer_use`, the raw `@playwright/mcp` and the raw
`chrome-devtools-mcp` — each recording what the model read: the tool definitions once, every answer (text and
images), the calls. `python -m lab.costs` renders the table and the plot.

A row counts only if its driver reached the task's end (the answer read, the ledger's writes, the Page's state);
else it is recorded FAILED, and the test fails: a cost of a task that did not happen is not a figure. Our tool
must do every task; a raw upstream's hand-over steps (sign-in, CAPTCHA, payment) it simply does, and the row says so.

`make test` (`--benchmark-skip`) runs one smoke task (`SMOKE`); `make bench` and `make lab` run them all.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from fixtures_sites.server import FixtureServer
from lab.tap import CDPTap
from lab.workspace import Workspace
from suites.bench.drivers import Lab
from suites.bench.tasks import DRIVERS, OURS, RECORD, SMOKE, TASKS, na_figures, not_applicable
from suites.proofs import record_cost

pytestmark = pytest.mark.req("bench:task-cost")


@pytest.mark.parametrize("name", list(TASKS))
async def test_a_task_costs_ours_fewer_tokens_than_each_raw_upstream_doing_the_same_steps(
    name: str, request: pytest.FixtureRequest, tap: CDPTap, workspace: Workspace, fixture_server: FixtureServer
) -> None:
    task = TASKS[name]
    lab = Lab(workspace, tap, fixture_server, request.node.nodeid)
    failed = []
    for driver in DRIVERS:
        if not_applicable(task, driver):
            record_cost(f"{RECORD}{name}-{driver}", na_figures(task, driver))
            continue
        tally = await lab.run(task, driver)
        record_cost(f"{RECORD}{name}-{driver}", tally.figures("playwright_mcp" if driver == OURS else None))
        if tally.failure is not None:
            failed.append(f"{driver}: {tally.failure}")
    assert not failed, f"{name}: FAILED rows:\n" + "\n".join(failed)


@pytest.mark.negative_control
async def test_a_driver_that_never_sees_the_answer_is_a_failed_row_on_every_driver(
    request: pytest.FixtureRequest, tap: CDPTap, workspace: Workspace, fixture_server: FixtureServer
) -> None:
    """A doctored task: the form question with an answer the Page never shows. Each driver reads, then asks once
    more (ours `verify`, a raw upstream a snapshot), and its row must be FAILED with that reason, not a cost."""
    doctored = replace(TASKS[SMOKE], name="doctored", answer="Atlantis")
    lab = Lab(workspace, tap, fixture_server, request.node.nodeid)
    for driver in DRIVERS:
        tally = await lab.run(doctored, driver)
        figures = tally.figures()
        assert figures["valid"] is False, f"{driver}: {figures}"
        assert "'Atlantis'" in str(figures["failure"]), f"{driver}: {figures['failure']}"
        assert figures["calls"] == (3 if driver == OURS else 2)  # list_pages, observe, verify; or two snapshots
