"""The parity ledger holds in both directions: every suite test names requirements the ledger knows, and every
requirement is exercised on every backend in `BACKENDS` — or declares, with a reason, why that backend diverges,
and a test shows that divergence. A test expected to fail on a backend must be one of those. `docs/parity.md` is
the ledger's own rendering, never edited by hand.

The inventory is the whole `suites/` tree on every backend, as `make lab` runs it: the session's own items when it
collected exactly that (`make lab`), else a child pytest's (see `inventory.py`; `make test` collects most suites on
the default backend only), so the check means the same whether it runs alone (`pytest suites/parity`) or inside
either full run.
"""

from __future__ import annotations

import dataclasses

import allure
import pytest

from suites.harness import BACKENDS, once_per_run
from suites.parity import inventory
from suites.parity.inventory import COLLECT_TIMEOUT, Inventory, Item
from suites.parity.ledger import (
    DOC,
    LEDGER,
    RELEASE_PROOFS,
    REQUIREMENTS,
    SOURCES,
    Proof,
    markdown,
    sections,
    unsourced,
)

pytestmark = [pytest.mark.req("parity:ledger"), pytest.mark.starts_early]

DIVERGENCES = {r.id: r.divergences for r in LEDGER.values() if r.divergences}


def check(problems: list[str]) -> None:
    assert not problems, "\n".join(problems)


@pytest.fixture(scope="module")
async def collected(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Inventory:
    found = inventory.from_session(request.session, BACKENDS) or inventory.from_json(
        await once_per_run(tmp_path_factory, inventory.INVENTORY, lambda: inventory.collect(BACKENDS), COLLECT_TIMEOUT)
    )
    print(f"collected {len(found.items)} tests in {found.seconds:.1f}s; outside the ledger: {found.ignored or 'none'}")
    return found


def test_every_suite_test_names_at_least_one_requirement_the_ledger_knows(collected: Inventory) -> None:
    assert len(collected.items) > 100  # the whole tree, not just this folder
    check(inventory.unnamed(collected.items, LEDGER, BACKENDS))


def test_every_requirement_is_exercised_on_every_backend_unless_it_declares_a_divergence(
    collected: Inventory, request: pytest.FixtureRequest
) -> None:
    problems = inventory.uncovered(collected.items, LEDGER, DIVERGENCES, BACKENDS)
    table = markdown(BACKENDS)
    allure.attach(table, "parity ledger: requirement × backend", allure.attachment_type.TEXT)
    request.config.stash[inventory.TABLE_KEY] = inventory.terminal_table(LEDGER, DIVERGENCES, BACKENDS)
    assert not problems, "\n".join(problems)


def test_every_declared_divergence_is_shown_by_a_test_on_that_backend(collected: Inventory) -> None:
    check(inventory.unbacked(collected.items, DIVERGENCES, BACKENDS))


def test_a_test_expected_to_fail_on_a_backend_names_a_requirement_declaring_that_divergence(
    collected: Inventory,
) -> None:
    assert any(item.xfail for item in collected.items)  # the minimized-window proofs: the check has work to do
    check(inventory.unexplained_xfails(collected.items, DIVERGENCES, BACKENDS))


def uncontrolled(items: list[Item], proofs: tuple[Proof, ...]) -> list[str]:
    """Release proofs without a negative control naming one of their requirements, or naming unknown ones."""
    problems = [f"{p.name}: unknown requirement {i}" for p in proofs for i in p.requirements if i not in LEDGER]
    controlled = {i for item in items if item.negative_control for i in item.ids}
    problems += [
        f"{p.name}: no negative control names any of {', '.join(p.requirements)}"
        for p in proofs
        if not controlled & set(p.requirements)
    ]
    return problems


def test_every_release_proof_has_a_negative_control_and_names_known_requirements(collected: Inventory) -> None:
    assert len(RELEASE_PROOFS) == 10  # the ten of docs/requirements.md
    check(uncontrolled(collected.items, RELEASE_PROOFS))


def test_every_requirement_cites_a_section_of_docs_requirements_md_and_every_section_is_cited() -> None:
    check(unsourced(REQUIREMENTS, sections(SOURCES.read_text(encoding="utf-8"))))


def test_docs_parity_md_is_exactly_what_the_ledger_generates() -> None:
    assert DOC.read_text(encoding="utf-8") == markdown(BACKENDS), (
        "docs/parity.md is out of date: run `make parity-doc` (python -m suites.parity.ledger --write)"
    )


@pytest.mark.negative_control
def test_the_ledger_check_catches_an_unnamed_test_an_unexercised_requirement_an_unexplained_xfail_and_a_stray_source(
    collected: Inventory,
) -> None:
    # Doctor the real inventory: one test loses its markers, every select test loses chrome_devtools_mcp, and a
    # passing test is made to expect failure on a backend where nothing diverges.
    items = list(collected.items)
    items[0] = dataclasses.replace(items[0], ids=())
    items = [
        item for item in items if not ("action:select" in item.ids and "chrome_devtools_mcp" in item.backends(BACKENDS))
    ]
    items.append(Item("suites/made/up.py::test_x[playwright_mcp]", ("action:click",), "playwright_mcp", xfail=True))
    with pytest.raises(AssertionError, match=r"no @pytest\.mark\.req"):
        check(inventory.unnamed(items, LEDGER, BACKENDS))
    with pytest.raises(AssertionError, match="action:select: not exercised on chrome_devtools_mcp"):
        check(inventory.uncovered(items, LEDGER, DIVERGENCES, BACKENDS))
    with pytest.raises(AssertionError, match="expected to fail on playwright_mcp"):
        check(inventory.unexplained_xfails(items, DIVERGENCES, BACKENDS))
    visual = next(p for p in RELEASE_PROOFS if p.name == "visual limits")
    blind = [item for item in items if not (item.negative_control and set(visual.requirements) & set(item.ids))]
    with pytest.raises(AssertionError, match="visual limits: no negative control"):
        check(uncontrolled(blind, RELEASE_PROOFS))
    # A source outside the repository (as the ledger once cited the design page) and a section nothing cites.
    known = sections(SOURCES.read_text(encoding="utf-8"))
    outside = [
        dataclasses.replace(r, source="DESIGN §3.2") if r.source == "capability-token" else r for r in REQUIREMENTS
    ]
    with pytest.raises(AssertionError, match=r"capability:missing: its source 'DESIGN §3\.2' is not a section"):
        check(unsourced(outside, known))
    with pytest.raises(AssertionError, match="section 'Capability token' is the source of no requirement"):
        check(unsourced(outside, known))
