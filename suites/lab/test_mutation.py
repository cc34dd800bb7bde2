"""`make mutation` (`lab/mutation.py`): the security-critical set cannot shrink without a word, each group's suites
exist, and the report counts a mutant as killed only when mutmut says a test failed on it.

The run itself (mutmut over the set, ≤ 45 min) is `make mutation`; its last report is in `docs/mutation.md`.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from lab import mutation

pytestmark = pytest.mark.req("lab:mutation")


def test_every_function_named_in_the_security_set_exists_in_its_module() -> None:
    assert mutation.unmatched(mutation.GROUPS) == []


@pytest.mark.negative_control
def test_the_set_check_catches_a_function_renamed_away_from_its_name_in_the_set() -> None:
    gateway = next(g for g in mutation.GROUPS if g.name == "gateway")
    renamed = "runtime.gateway.admission.xǁAdmissionǁadmit_renamed__mutmut_*"
    broken = dataclasses.replace(gateway, mutants=(*gateway.mutants, renamed))
    assert mutation.unmatched([broken]) == [renamed]


def test_every_group_names_suites_that_exist_and_modules_that_exist() -> None:
    root = mutation.REPO_ROOT
    for group in mutation.GROUPS:
        assert all((root / test).exists() for test in group.tests), group.name
        assert all(list(root.glob(m if m.endswith(".py") else m + ".py")) for m in group.modules), group.name


def test_each_groups_configuration_names_its_modules_its_suites_and_the_default_backend() -> None:
    policy = next(g for g in mutation.GROUPS if g.name == "policy")
    config = mutation.mutmut_config(policy)
    assert 'only_mutate = ["runtime/policy.py", "runtime/sensitivity.py"]' in config
    assert '"suites/unit/test_policy_rules.py"' in config
    assert f'"--backend", "{mutation.BACKEND}"' in config


def mutants(*statuses: str) -> list[mutation.Mutant]:
    return [
        mutation.Mutant(f"runtime.policy.x_f__mutmut_{i}", "policy", "runtime/policy.py", status)
        for i, status in enumerate(statuses, 1)
    ]


def test_only_killed_counts_as_killed_timeouts_and_survivors_do_not_and_equivalents_are_counted_apart() -> None:
    found = mutants("killed", "killed", "survived", "timeout", "no tests", "survived")
    found[-1].equivalent = "sort_keys only orders a body the MAC is computed over as sent"
    score = mutation.score(found)
    assert (score.mutants, score.killed, score.survived, score.timed_out, score.other) == (6, 2, 2, 1, 1)
    assert score.equivalent == 1
    assert score.ratio == pytest.approx(2 / 6)
    assert score.ratio_without_equivalents == pytest.approx(2 / 5)


def test_the_report_shows_each_survivor_with_its_diff_and_marks_a_module_below_the_goal() -> None:
    found = mutants("killed", "survived")
    found[1].diff = "-    return a < b\n+    return a <= b"
    text = mutation.render(found, 60.0, "2026-12-05 03:00 UTC")
    assert "**Overall: 1 of 2 killed (50.0%)**" in text
    assert "| `runtime/policy.py` | 2 | 1 | 1 | 0 | 0 | 0 | 50.0% (below goal) |" in text
    assert "### `runtime.policy.x_f__mutmut_2` (survived)" in text
    assert "+    return a <= b" in text


def test_a_group_run_again_alone_keeps_the_whole_runs_wall_time_and_says_when_it_ran() -> None:
    text = mutation.render(mutants("killed"), 1842.0, "2026-12-05 05:28 UTC", {"capability": "06:05 UTC, 9.8 min"})
    assert "started 2026-12-05 05:28 UTC, wall time 30.7 min" in text
    assert "Run again alone since: capability (06:05 UTC, 9.8 min)." in text
    assert "Run again alone" not in mutation.render(mutants("killed"), 1842.0, "2026-12-05 05:28 UTC")


def test_equivalent_mutants_are_read_from_their_table_and_nothing_else(tmp_path: Path) -> None:
    doc = tmp_path / "lab.md"
    doc.write_text(
        "# The lab\n\n| `runtime.policy.x_other__mutmut_1` | a table elsewhere |\n\n"
        "### Equivalent mutants\n\n| mutant | why |\n|---|---|\n"
        "| `runtime.capability.token.x_new_secret__mutmut_1` | `token_bytes(None)` is its default, 32 bytes |\n"
        "\n## Next section\n\n| `runtime.policy.x_after__mutmut_1` | not in the table |\n",
        encoding="utf-8",
    )
    assert mutation.equivalents(doc) == {
        "runtime.capability.token.x_new_secret__mutmut_1": "`token_bytes(None)` is its default, 32 bytes"
    }


def test_every_equivalent_listed_in_docs_lab_md_is_a_mutant_of_the_security_set() -> None:
    from fnmatch import fnmatchcase

    patterns = [p for g in mutation.GROUPS for p in g.mutants]
    listed = mutation.equivalents()
    assert all(any(fnmatchcase(name, p) for p in patterns) for name in listed), listed
