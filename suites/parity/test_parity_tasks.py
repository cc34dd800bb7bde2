"""Cross-backend parity: the same scripted task on every fixture scenario, run on each chosen backend with a runtime
of its own, must give the same outcome signature — lifecycle, permissions, reason codes, verification, ledger
writes, attacker hits, screenshots, focus calls, popups — except where the parity ledger declares a divergence.

The tests are not parametrized by backend: each compares the backends with one another, so each runs them all
(`--backend` narrows the set; with one backend the signature is still recorded and its own checks still hold).
The negative control swaps in a test-only adapter that maps `select` to a click and must be caught.
"""

from __future__ import annotations

import json

import allure
import pytest

from backends.playwright_mcp import PlaywrightMCPBackend
from fixtures_sites.server import FixtureServer
from lab.tap import CDPTap
from lab.workspace import Workspace
from runtime.app import default_backends
from runtime.backend import Element
from runtime.models import Action
from suites.conftest import BACKENDS
from suites.parity.tasks import TASKS, Signature, assert_same_outcomes, run_task


def chosen(config: pytest.Config) -> list[str]:
    return config.getoption("backend") or list(BACKENDS)


def report(task: str, signatures: dict[str, Signature]) -> None:
    table = {name: sig.as_json() for name, sig in signatures.items()}
    allure.attach(json.dumps(table, indent=2, ensure_ascii=False), f"parity signatures: {task}", "application/json")
    print(f"{task}: " + "; ".join(f"{n}: {len(s.steps)} steps, totals {s.totals()}" for n, s in signatures.items()))


@pytest.mark.parametrize(
    "task", [pytest.param(name, marks=pytest.mark.req(*task.reqs)) for name, task in TASKS.items()]
)
async def test_a_task_gives_every_backend_the_same_outcome_signature(
    task: str, request: pytest.FixtureRequest, tap: CDPTap, workspace: Workspace, fixture_server: FixtureServer
) -> None:
    signatures = {
        backend: await run_task(
            TASKS[task], backend, tap=tap, workspace=workspace, server=fixture_server, test_id=request.node.nodeid
        )
        for backend in chosen(request.config)
    }
    report(task, signatures)
    assert_same_outcomes(signatures)


class SelectAsClick(PlaywrightMCPBackend):
    """A deliberately broken adapter (negative control only): `select` becomes a click on the same element."""

    async def act(self, action: Action, element: Element | None) -> None:
        if action.type == "select":
            action = Action(type="click", ref=action.ref)
        await super().act(action, element)


@pytest.mark.negative_control
@pytest.mark.req("parity:dom_form", "action:select")
async def test_the_parity_check_catches_an_adapter_that_maps_select_to_a_click(
    request: pytest.FixtureRequest, tap: CDPTap, workspace: Workspace, fixture_server: FixtureServer
) -> None:
    backends = {**default_backends(), "select_as_click": SelectAsClick}
    signatures = {
        name: await run_task(
            TASKS["dom_form"],
            name,
            tap=tap,
            workspace=workspace,
            server=fixture_server,
            test_id=request.node.nodeid,
            backends=backends,
        )
        for name in ("playwright_mcp", "select_as_click")
    }
    report("dom_form (sabotaged select)", signatures)
    with pytest.raises(AssertionError, match="outcomes differ across backends") as caught:
        assert_same_outcomes(signatures)
    assert "the country holds" in str(caught.value)  # caught by verification, where the agent would see it
