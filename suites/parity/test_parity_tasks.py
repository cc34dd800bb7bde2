"""Parity, absolute and relative: the same scripted task on every fixture scenario, run on each chosen backend with
a runtime of its own, must give the outcome signature the task declares (`suites/parity/expected.py`) — lifecycle,
permissions, reason codes, verification, ledger writes, attacker hits, screenshots, focus calls, popups, facts —
and, as a second check, the same signature on every backend except where the parity ledger declares a divergence.

The absolute check is what makes `--backend x` prove something: a lone backend is held to the declared signature,
and backends wrong in the same way no longer agree their way through. A backend with a declared divergence is held
to the outcome declared for it, never xfailed.

The tests are not parametrized by backend: each runs every chosen backend itself (`--backend` narrows the set).
Negative controls: a test-only adapter that maps `select` to a click, run alone and next to a real backend; a
doctored expectation against the real runtime; doctored divergence data against the consistency check.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import replace

import allure
import pytest

from backends.playwright_mcp import PlaywrightMCPBackend
from fixtures_sites.server import FixtureServer
from lab.tap import CDPTap
from lab.workspace import Workspace
from runtime.assembly import default_backends
from runtime.backend import Element
from runtime.models import Action
from runtime.service import BackendFactory
from suites.harness import BACKENDS
from suites.parity.expected import (
    EXPECTED,
    Expectation,
    assert_declared_outcomes,
    disagreements,
    does_not_hold,
    expected_vs_got,
    mismatches,
    unstated_divergences,
)
from suites.parity.ledger import LEDGER
from suites.parity.tasks import TASKS, Signature, Task, assert_same_outcomes, run_task
from suites.tasks.taskfile import TaskFile

DIVERGENCES = {r.id: r.divergences for r in LEDGER.values() if r.divergences}


def chosen(config: pytest.Config) -> list[str]:
    return config.getoption("backend") or list(BACKENDS)


def report(task: str, signatures: Mapping[str, Signature], expectation: Expectation) -> None:
    table = {name: sig.as_json() for name, sig in signatures.items()}
    allure.attach(json.dumps(table, indent=2, ensure_ascii=False), f"parity signatures: {task}", "application/json")
    allure.attach(expected_vs_got(task, expectation, signatures), f"declared vs got: {task}", "text/plain")
    print(f"{task}: " + "; ".join(f"{n}: {len(s.steps)} steps, totals {s.totals()}" for n, s in signatures.items()))


async def run_each(
    task: Task, names: list[str], request: pytest.FixtureRequest, tap: CDPTap, workspace: Workspace,
    server: FixtureServer, backends: Mapping[str, BackendFactory] | None = None, cost: bool = False,
) -> dict[str, Signature]:  # fmt: skip
    return {
        name: await run_task(
            task,
            name,
            tap=tap,
            workspace=workspace,
            server=server,
            test_id=request.node.nodeid,
            backends=backends,
            cost=cost,
        )
        for name in names
    }


@pytest.mark.parametrize(
    "task", [pytest.param(name, marks=pytest.mark.req(*task.reqs)) for name, task in TASKS.items()]
)
async def test_a_task_gives_every_backend_its_declared_outcome_signature_and_the_same_as_the_others(
    task: str, request: pytest.FixtureRequest, tap: CDPTap, workspace: Workspace, fixture_server: FixtureServer
) -> None:
    signatures = await run_each(TASKS[task], chosen(request.config), request, tap, workspace, fixture_server, cost=True)
    report(task, signatures, EXPECTED[task])
    assert_declared_outcomes(task, signatures.values(), EXPECTED[task])
    assert_same_outcomes(signatures)


@pytest.mark.req("parity:absolute-expectations")
def test_every_task_declares_an_outcome_signature_naming_the_requirements_it_exercises() -> None:
    assert set(EXPECTED) == set(TASKS)
    for name, task in TASKS.items():
        named = {r for step in EXPECTED[name].steps for r in step.reqs}
        assert named <= set(task.reqs), f"{name}: declared steps name {sorted(named - set(task.reqs))}"


@pytest.mark.req("parity:absolute-expectations")
def test_every_task_files_labelled_steps_say_what_its_declared_signature_states() -> None:
    for name in TASKS:
        assert disagreements(TaskFile.load(name), EXPECTED[name]) == []


@pytest.mark.negative_control
@pytest.mark.req("parity:absolute-expectations")
def test_a_task_file_whose_call_expects_another_outcome_than_its_declared_signature_is_caught() -> None:
    """Doctored data: dom_form's false claim expected to hold, and its last step's label dropped."""
    task = TaskFile.load("dom_form")
    *replies, checks, save = task.replies()
    said_to_hold = replace(checks, calls=(*checks.calls[:-1], replace(checks.calls[-1], expect={})))
    assert disagreements(replace(task, steps=(*replies, said_to_hold, save)), EXPECTED["dom_form"]) == [
        "dom_form step 'a false claim does not hold': the task file says (('reason:verification_failed',), 'verify', "
        "'ok', None), the declared signature (('reason:verification_failed',), 'verify', 'failed', "
        "'verification_failed')"
    ]
    unlabelled = replace(save, calls=(save.calls[0], replace(save.calls[1], label=None, reqs=())))
    assert disagreements(replace(task, steps=(*replies, checks, unlabelled)), EXPECTED["dom_form"])[0].startswith(
        "dom_form: the task file's steps ["
    )


@pytest.mark.req("parity:absolute-expectations")
def test_every_ledger_divergence_on_a_task_step_declares_that_backends_outcome() -> None:
    assert unstated_divergences(EXPECTED, DIVERGENCES, BACKENDS) == []


class SelectAsClick(PlaywrightMCPBackend):
    """A deliberately broken adapter (negative control only): `select` becomes a click on the same element."""

    async def act(self, action: Action, element: Element | None) -> None:
        if action.type == "select":
            action = Action(type="click", ref=action.ref)
        await super().act(action, element)


@pytest.mark.negative_control
@pytest.mark.req("parity:dom_form", "action:select", "parity:absolute-expectations")
async def test_the_declared_signature_catches_a_lone_adapter_that_maps_select_to_a_click(
    request: pytest.FixtureRequest, tap: CDPTap, workspace: Workspace, fixture_server: FixtureServer
) -> None:
    backends = {**default_backends(), "select_as_click": SelectAsClick}
    signatures = await run_each(TASKS["dom_form"], ["select_as_click"], request, tap, workspace, fixture_server,
                                backends)  # fmt: skip
    report("dom_form (sabotaged select, alone)", signatures, EXPECTED["dom_form"])
    assert_same_outcomes(signatures)  # one backend: the relative check has nothing to compare, and passes
    with pytest.raises(AssertionError, match="outcomes differ from the declared signature") as caught:
        assert_declared_outcomes("dom_form", signatures.values(), EXPECTED["dom_form"])
    message = str(caught.value)
    assert (
        "dom_form on select_as_click: step 6 'the country holds', field verified: expected True, got False" in message
    )
    assert "total facts: expected {'submitted': {'full_name': 'Ada Lovelace', 'country': 'jp'" in message


@pytest.mark.negative_control
@pytest.mark.req("parity:dom_form", "action:select")
async def test_the_parity_check_catches_an_adapter_that_maps_select_to_a_click(
    request: pytest.FixtureRequest, tap: CDPTap, workspace: Workspace, fixture_server: FixtureServer
) -> None:
    backends = {**default_backends(), "select_as_click": SelectAsClick}
    signatures = await run_each(TASKS["dom_form"], ["playwright_mcp", "select_as_click"], request, tap, workspace,
                                fixture_server, backends)  # fmt: skip
    report("dom_form (sabotaged select)", signatures, EXPECTED["dom_form"])
    with pytest.raises(AssertionError, match="outcomes differ across backends") as caught:
        assert_same_outcomes(signatures)
    assert "the country holds" in str(caught.value)  # caught by verification, where the agent would see it


@pytest.mark.negative_control
@pytest.mark.req("parity:dom_form", "parity:absolute-expectations")
async def test_the_declared_signature_catches_a_doctored_expectation_on_the_real_runtime(
    request: pytest.FixtureRequest, tap: CDPTap, workspace: Workspace, fixture_server: FixtureServer
) -> None:
    backend = chosen(request.config)[0]
    signatures = await run_each(TASKS["dom_form"], [backend], request, tap, workspace, fixture_server)
    real = EXPECTED["dom_form"]
    assert mismatches("dom_form", signatures[backend], real) == []  # the real runtime meets the real expectation
    steps = list(real.steps)
    steps[7] = replace(steps[7], status="ok", reason_code=None, verified=True)  # "a false claim" said to hold
    doctored = replace(real, steps=tuple(steps), writes=("/dom_form/submit", "/dom_form/submit"))
    report("dom_form (doctored expectation)", signatures, doctored)
    with pytest.raises(AssertionError, match="outcomes differ from the declared signature") as caught:
        assert_declared_outcomes("dom_form", signatures.values(), doctored)
    message = str(caught.value)
    assert (
        f"dom_form on {backend}: total writes: expected ['/dom_form/submit', '/dom_form/submit'], "
        "got ['/dom_form/submit']" in message
    )
    assert f"dom_form on {backend}: step 8 'a false claim does not hold', field verified: expected True, got False" in (
        message
    )


@pytest.mark.negative_control
@pytest.mark.req("parity:absolute-expectations")
def test_a_divergence_without_its_declared_outcome_and_an_outcome_without_its_divergence_are_both_caught() -> None:
    """Doctored data: the ledger declares catalogue's verify:text divergent on one backend with no outcome stated,
    and an outcome is stated for a step whose requirements no divergence names."""
    backend = BACKENDS[0]
    catalogue = EXPECTED["catalogue"]
    stated = {backend: {"the cart says so": does_not_hold("the cart says so", "verify:text")}}
    problems = unstated_divergences(
        {"catalogue": catalogue, "login": replace(EXPECTED["login"], divergent=stated)},
        {**DIVERGENCES, "verify:text": {backend: "doctored"}},
        BACKENDS,
    )
    assert problems == [
        f"catalogue step 'the cart says so': the ledger declares {backend} divergent on ['verify:text'] but no "
        "outcome is declared for it",
        f"login: outcome declared for {backend} on 'the cart says so', which is not a step",
    ]
    orphan = replace(catalogue, divergent=stated)
    assert unstated_divergences({"catalogue": orphan}, DIVERGENCES, BACKENDS) == [
        f"catalogue step 'the cart says so': outcome declared for {backend}, but none of ['verify:text'] declares a "
        "divergence for it"
    ]


@pytest.mark.negative_control
@pytest.mark.req("parity:absolute-expectations")
def test_a_divergent_backend_is_held_to_its_own_declared_outcome_not_excused() -> None:
    """A backend whose declared divergent outcome is a refusal fails when it gives the common outcome instead, and
    passes when it gives the declared one; the other backends stay held to the common outcome."""
    catalogue = EXPECTED["catalogue"]
    instead = does_not_hold("the cart says so", "verify:text")
    declared = replace(catalogue, divergent={"diverging": {"the cart says so": instead}})

    def signature(backend: str, *, diverged: bool) -> Signature:
        steps = [instead if diverged and s.label == instead.label else s for s in catalogue.steps]
        return Signature(backend, steps, writes=list(catalogue.writes))

    assert mismatches("catalogue", signature("diverging", diverged=True), declared) == []
    assert mismatches("catalogue", signature("conforming", diverged=False), declared) == []
    assert mismatches("catalogue", signature("diverging", diverged=False), declared) == [
        "catalogue on diverging: step 3 'the cart says so', field status: expected 'failed', got 'ok'",
        "catalogue on diverging: step 3 'the cart says so', field reason_code: expected 'verification_failed', "
        "got None",
        "catalogue on diverging: step 3 'the cart says so', field verified: expected False, got True",
    ]
    assert mismatches("catalogue", signature("conforming", diverged=True), declared) != []
