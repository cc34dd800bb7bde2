"""Where each test runs (`suites/selection.py`): `make test` collects release proofs and backend contract tests on
every backend and the other tests on the default one; `make lab` (`$SUITE_BACKENDS=all`) every test on every backend
it has; `--backend NAME` every test on the named one. Shown by pytest's own collection of the real tree in a child
pytest, both ways, and failing against a rule that forgets the proofs (`suites/lab/selection_variant.py`)."""

from __future__ import annotations

import pytest

from suites.harness import BACKENDS, once_per_run
from suites.parity import inventory
from suites.parity.inventory import INVENTORY, whole_tree
from suites.parity.ledger import RELEASE_PROOFS
from suites.selection import (
    COLLECT_TIMEOUT,
    SUITES,
    Collected,
    backends_of,
    collect,
    collect_json,
    collected,
    every_backend,
    every_suite_on_every_backend,
    from_json,
    misplaced,
    record,
    short_of_every_backend,
)

pytestmark = [pytest.mark.req("lab:selection"), pytest.mark.starts_early]

PW = BACKENDS[0]
NOT_A_PROOF = "suites/policy/test_policy.py::test_a_login_form_is_the_users_to_fill_and_submit"
A_PROOF = "suites/isolation/test_isolation.py::test_with_a_authorized_observe_act_verify_never_touch_b_the_chat_or_"
A_CONTRACT_TEST = "suites/backends/test_backends.py::test_an_unknown_ref_is_refused_and_a_selector_is_an_element_error"


def check(problems: list[str]) -> None:
    assert not problems, "\n".join(problems)


def on(collected: list[Collected], prefix: str) -> list[str | None]:
    """The backends the one test whose id starts with `prefix` is collected on."""
    (found,) = [backends for test, backends in backends_of(collected).items() if test.startswith(prefix)]
    return found


async def collection(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, *, every: bool
) -> list[Collected]:
    """What `make test` (or, `every`, `make lab`) collects: this session's own items when it is that run (each
    xdist worker collects every item), else a child pytest's, one per run."""
    if whole_tree(request.session) and every_suite_on_every_backend() == every:
        return [collected(record(item)) for item in request.session.items]
    if every:  # the ledger's child collection of make lab's tree records this too: one child for both checks
        lab = await once_per_run(tmp_path_factory, INVENTORY, lambda: inventory.collect(BACKENDS), COLLECT_TIMEOUT)
        return from_json(inventory.selection_of(lab))
    return from_json(
        await once_per_run(tmp_path_factory, "selection-make-test", lambda: collect_json(every=False), COLLECT_TIMEOUT)
    )


@pytest.fixture(scope="module")
async def make_test(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> list[Collected]:
    return await collection(request, tmp_path_factory, every=False)


@pytest.fixture(scope="module")
async def make_lab(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> list[Collected]:
    return await collection(request, tmp_path_factory, every=True)


def test_a_test_runs_on_every_backend_when_it_names_a_release_proofs_requirement_or_is_a_contract_test() -> None:
    elsewhere = SUITES / "policy" / "test_policy.py"
    assert all(every_backend([r], elsewhere) for proof in RELEASE_PROOFS for r in proof.requirements)
    assert every_backend(["action:type", "isolation:b-untouched"], elsewhere)  # one proof requirement is enough
    assert not every_backend(["policy:login", "reason:needs_user"], elsewhere)
    # The ledger check cites the parity proof's section of docs/requirements.md but is none of its requirements.
    assert not every_backend(["parity:ledger"], SUITES / "parity" / "test_ledger.py")
    assert every_backend([], SUITES / "backends" / "test_backends.py")
    assert every_backend(["adapter:element-errors"], SUITES / "backends" / "test_playwright_mcp_backend.py")
    assert not every_backend([], SUITES.parent / "backends" / "playwright_mcp" / "adapter.py")


def test_make_test_collects_proofs_and_contract_tests_on_every_backend_and_the_rest_on_the_default_one(
    make_test: list[Collected], make_lab: list[Collected]
) -> None:
    check(misplaced(make_test, make_lab))
    assert on(make_test, NOT_A_PROOF) == [PW]
    assert on(make_test, A_PROOF) == list(BACKENDS)
    assert on(make_test, A_CONTRACT_TEST) == list(BACKENDS)
    print(f"make test collects {len(make_test)} tests, make lab {len(make_lab)}")


def test_make_lab_collects_every_test_on_every_backend_it_has(make_lab: list[Collected]) -> None:
    check(short_of_every_backend(make_lab))
    assert on(make_lab, NOT_A_PROOF) == list(BACKENDS)
    # A flow only some backends have stays on those; a check that stops before any backend call runs once.
    assert on(make_lab, "suites/parity/test_submit.py::test_the_focus_check_catches") == list(BACKENDS[1:])
    assert on(make_lab, "suites/isolation/test_isolation.py::test_forged_replayed_cross_connection") == [PW]


def test_backend_names_the_backends_every_test_runs_on() -> None:
    chosen = BACKENDS[1]
    collected = collect(
        [SUITES / "policy" / "test_policy.py", SUITES / "isolation" / "test_isolation.py"],
        every=False,
        options=["--backend", chosen],
    )
    assert on(collected, NOT_A_PROOF) == [chosen]
    assert on(collected, A_PROOF) == [chosen]


@pytest.mark.negative_control
def test_the_selection_checks_catch_a_rule_that_runs_a_release_proof_on_the_default_backend_only(
    make_test: list[Collected], make_lab: list[Collected]
) -> None:
    files = [SUITES / "isolation" / "test_isolation.py", SUITES / "backends" / "test_backends.py"]
    broken = collect(files, every=False, plugins=["suites.lab.selection_variant"])
    assert on(broken, A_CONTRACT_TEST) == list(BACKENDS)  # the variant breaks the proofs only
    lab = [c for c in make_lab if c.path in files]
    with pytest.raises(AssertionError, match=rf"{A_PROOF}.*: on \['{PW}'\] in make test, .* \(a release proof"):
        check(misplaced(broken, lab))
    # The make lab check, fed make test's collection: a test on the default backend only is short of the others.
    with pytest.raises(AssertionError, match=rf"{NOT_A_PROOF}\[\*\]: on \['{PW}'\] in make lab"):
        check(short_of_every_backend(make_test))
    # And the other direction: a test that is no proof, collected on every backend by make test.
    with pytest.raises(AssertionError, match=rf"{NOT_A_PROOF}\[\*\]: on .* \(neither a release proof"):
        check(misplaced(make_lab, make_lab))
