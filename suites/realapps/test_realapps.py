"""The real-apps corpus: each third-party app's task (`suites/realapps/tasks.py`) on every backend, first try only,
with the lab's own reading of the app's state after every step."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any

import allure
import pytest

from fixtures_sites.server import FixtureServer
from lab.tap import CDPTap
from lab.workspace import Workspace
from suites.harness import Agent, Desk
from suites.parity.ledger import LEDGER
from suites.parity.tasks import Run, Signature, run_task
from suites.realapps.tasks import DATATABLES, REQS, TASKS, Eyes, step_table


def apps() -> list[Any]:
    """Every app, naming its requirement; where the ledger declares a backend divergent on it (a runtime bug of
    issue 28), a strict xfail there, so the run turns red, to be un-marked, the day the fix lands."""
    params = []
    for app in TASKS:
        requirement = LEDGER[f"realapps:{app}"]
        marks = [pytest.mark.req(requirement.id)]
        if requirement.divergences:
            reason = "; ".join(f"{b}: {why}" for b, why in requirement.divergences.items())
            marks.append(pytest.mark.xfail_on(*requirement.divergences, reason=reason))
        params.append(pytest.param(app, marks=marks))
    return params


@pytest.mark.req(*REQS)
@pytest.mark.parametrize("app", apps())
async def test_a_real_app_task_passes_every_step_by_the_runtime_and_by_the_labs_own_reading(
    app: str, backend: str, request: pytest.FixtureRequest, tap: CDPTap, workspace: Workspace,
    fixture_server: FixtureServer,
) -> None:  # fmt: skip
    runs: list[Run] = []

    async def script(run: Run) -> None:
        runs.append(run)
        await TASKS[app].script(run)

    try:
        await run_task(replace(TASKS[app], script=script), backend, tap=tap, workspace=workspace,
                       server=fixture_server, test_id=request.node.nodeid, cost=True)  # fmt: skip
    finally:
        table = step_table(runs[0].signature) if runs else []
        report(app, backend, table)
    failed = [row for row in table if not row["pass"]]
    assert not failed, f"{app} on {backend}: steps failed: {json.dumps(failed, indent=1)[:3000]}"


def report(app: str, backend: str, table: list[dict[str, Any]]) -> None:
    allure.attach(json.dumps(table, indent=2, ensure_ascii=False), f"{app} on {backend}", "application/json")
    for row in table:
        print(
            f"STEP {app} {backend} | {row['step']} | {'pass' if row['pass'] else 'FAIL'} | {row['status']} "
            f"{row['reason_code']} verified={row['verified']} lab={row['lab']} | {json.dumps(row['seen'])[:300]}"
        )


@pytest.mark.negative_control
@pytest.mark.req("realapps:datatables")
async def test_the_labs_own_reading_catches_a_step_that_left_the_app_as_it_was(
    backend: str, one_page_desk: Callable[[str], Awaitable[Desk]], agent: Agent, fixture_server: FixtureServer
) -> None:
    """The lab's eyes are not a formality: a step said to have searched the table, when nothing was typed, is
    caught by the reading alone (the runtime's answer for the observe is ok)."""
    desk = await one_page_desk("/realapps/datatables/")
    run = Run(agent, desk, fixture_server, Signature(backend))
    await run.observe("observe the table", page="left")
    eyes = Eyes(run, DATATABLES)
    assert (await eyes.see("observe the table", shown=144, search="")).holds
    nothing = await eyes.see("search Osaka (never typed)", search="Osaka", shown=24)
    assert not nothing.holds
    assert (nothing.seen["search"], nothing.seen["shown"]) == ("", 144)
    assert [row["pass"] for row in step_table(run.signature)] == [True]
