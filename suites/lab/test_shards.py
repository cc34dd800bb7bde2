"""A sharded run (`make test SHARDS=N SHARD=i`, `make lab SHARDS=N SHARD=i`, `make report RESULTS=…`; docs/scale.md):
the shards hold every test of the run exactly once, and their merged results are the unsharded run's.

Shown with pytest-split's own plugin on `make lab`'s real collection for N = 2, 3 and 4 (`suites/shards.py`, in the one
child collection of that tree the ledger and the selection check read too: `suites.parity.inventory.collect`), and with
real child pytests on a subset of fast tests, one after the other: the whole subset, then its two shards, split as the
Makefile splits (`--splits 2 --group i --durations-path …`, the algorithm from pyproject.toml's addopts), their Allure
results and cost figures merged by `lab.merge` as `make report` merges them. Shards that read different durations
(a machine with another durations file) and a merge that lost a shard are caught by the same checks."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from lab import costs, merge
from lab.report import summarize
from suites.harness import BACKENDS, once_per_run
from suites.parity import inventory
from suites.parity.inventory import INVENTORY
from suites.selection import SUITE_BACKENDS
from suites.shards import PROOF_SHARDS, partition_problems, unrecorded

pytestmark = [pytest.mark.req("lab:shards"), pytest.mark.starts_early]

ROOT = Path(__file__).resolve().parents[2]
DURATIONS = ROOT / "suites" / "durations"
MAKEFILE = ROOT / "Makefile"
MAKEFILE_SHARDING = (
    "--splits $(SHARDS) --group $(SHARD) --durations-path suites/durations/$(1).json",
    "-p suites.shards --shards-record $(SHARD_DIR)/shard.json",
)
"""The Makefile's shard options (its `split` function) and a lab shard's record; the runs here pass the same."""
RUN_TIMEOUT = 120.0

COSTED = (
    "suites/protocol/test_schema.py::"
    "test_every_field_of_the_tool_schema_is_described_and_every_string_and_array_is_bounded"
)
SUBSET = (
    "suites/unit/test_capability.py",
    COSTED,
    "suites/budgets/test_budgets.py::test_a_model_reads_at_most_1100_tokens_of_the_tool_and_tools_list_costs_at_most_1450",
    # A soak test: skipped outside `make lab`, so the comparison covers a status other than passed.
    "suites/security/test_tokens_lifetime.py::test_the_size_check_catches_a_store_that_never_prunes[KeepsEveryContext]",
)
"""A few fast tests, three of which leave cost figures; `COSTED` has no recorded duration in the runs' file."""
MACHINE_LABELS = frozenset({"host", "thread"})
"""Allure labels that name the process a test ran in: different in every run, sharded or not."""


def child_env(**extra: str) -> dict[str, str]:
    """This environment without the parent's pytest, xdist and `make lab` switches (`SUITE_BACKENDS`)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "COV_")) and k != SUITE_BACKENDS}
    env.pop("LAB_COSTS_DIR", None)
    return env | extra


def pytest_child(args: Sequence[str], env: dict[str, str], timeout: float) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "suites.shards", *args],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout, check=False,
    )  # fmt: skip
    if done.returncode not in (0, 5):  # 5: a shard that holds no test
        raise AssertionError(f"child pytest failed ({done.returncode}):\n{done.stdout[-4000:]}{done.stderr[-2000:]}")


def durations_without(source: Path, dropped: set[str], into: Path) -> Path:
    durations = json.loads(source.read_text(encoding="utf-8"))
    into.write_text(json.dumps({k: v for k, v in durations.items() if k not in dropped}), encoding="utf-8")
    return into


# -- the real collection ---------------------------------------------------------------------------------------------


async def test_for_two_three_and_four_shards_every_collected_test_is_in_exactly_one_shard_one_with_no_duration_too(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    collect = lambda: inventory.collect(BACKENDS)  # noqa: E731 - the one producer every check of this tree shares
    lab = await once_per_run(tmp_path_factory, INVENTORY, collect, inventory.COLLECT_TIMEOUT)
    record = json.loads(lab)["shards"]  # the shared child's collection of make lab's tree, split by pytest-split
    committed = json.loads((DURATIONS / "make-lab.json").read_text(encoding="utf-8"))
    dropped = unrecorded(committed)
    collected: list[str] = record["tests"]
    new = [test for test in collected if test not in committed or test in dropped]
    assert len(new) >= len(collected) // 20, "the check needs tests without a recorded duration"
    kept = {test: committed[test] for test in collected if test in committed and test not in dropped}
    mean = sum(kept.values()) / len(kept)
    assert sorted(record["split"]) == sorted(PROOF_SHARDS.split(","))
    for n, shards in record["split"].items():
        assert len(shards) == int(n)
        assert partition_problems(collected, shards) == []
        assert all(shards), f"{n} shards: one is empty"
        estimates = [f"{len(shard)} tests ~{sum(kept.get(test, mean) for test in shard):,.0f} s" for shard in shards]
        print(f"{n} shards of {len(collected)} tests: {', '.join(estimates)}")


# -- real shards on a subset -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Run:
    """One child pytest's output: its folder (`allure-results/`, `costs/`, what `make lab` leaves) and its tests."""

    folder: Path
    tests: list[str]


def run_subset(folder: Path, shard: int | None = None, durations: Path | None = None) -> Run:
    """The subset, whole or (`shard`) one of its two shards split by `durations`, into `folder` as `make lab` writes
    a shard's folder."""
    marker = folder / merge.MARKER
    folder.mkdir(parents=True)
    args = [*SUBSET, "--alluredir", str(folder / merge.SHARD_RESULTS), "--shards-record", str(marker)]
    if shard is not None:
        args += ["--splits", "2", "--group", str(shard), "--durations-path", str(durations)]
    pytest_child(args, child_env(LAB_COSTS_DIR=str(folder / merge.SHARD_COSTS)), RUN_TIMEOUT)
    return Run(folder, list(merge.read_marker(folder).tests))


@dataclass(frozen=True)
class Runs:
    whole: Run
    shards: tuple[Run, Run]
    durations: Path


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Runs:
    """The subset unsharded, then its two shards one after the other, split by the committed make test durations
    less `COSTED`'s."""
    base = tmp_path_factory.mktemp("shards")
    durations = durations_without(DURATIONS / "make-test.json", {COSTED}, base / "durations.json")
    whole = run_subset(base / "whole")
    shards = (run_subset(base / "shard-1", 1, durations), run_subset(base / "shard-2", 2, durations))
    return Runs(whole, shards, durations)


def report_content(results: Path) -> dict[str, tuple[str, list[tuple[str, str]]]]:
    """What the report shows of each test: its status and the labels it is grouped by, keyed by its full name and
    parameters (the last attempt, as `lab.report.summarize` counts)."""
    content: dict[str, tuple[int, str, list[tuple[str, str]]]] = {}
    for path in results.glob("*-result.json"):
        result = json.loads(path.read_text(encoding="utf-8"))
        params = ",".join(f"{p['name']}={p['value']}" for p in result.get("parameters", []))
        key = f"{result['fullName']}[{params}]"
        labels = sorted((lb["name"], lb["value"]) for lb in result["labels"] if lb["name"] not in MACHINE_LABELS)
        if key not in content or result.get("stop", 0) >= content[key][0]:
            content[key] = (result.get("stop", 0), result["status"], labels)
    return {key: (status, labels) for key, (_, status, labels) in content.items()}


def differences(single: Path, merged: Path) -> list[str]:
    """Where a merged shards' folder would give another report or cost summary than one machine's run."""
    ours, theirs = report_content(merged / merge.SHARD_RESULTS), report_content(single / merge.SHARD_RESULTS)
    found = [f"{test}: not in the merged results" for test in theirs if test not in ours]
    found += [f"{test}: only in the merged results" for test in ours if test not in theirs]
    found += [
        f"{test}: {ours[test]} merged, {theirs[test]} alone"
        for test in theirs
        if test in ours and ours[test] != theirs[test]
    ]
    lines = [summarize(folder / merge.SHARD_RESULTS).line() for folder in (single, merged)]
    if lines[0] != lines[1]:
        found.append(f"report summary: {lines[1]} merged, {lines[0]} alone")
    summaries = [costs.summary(costs.read(folder / merge.SHARD_COSTS)) for folder in (single, merged)]
    if summaries[0] != summaries[1]:
        found.append(f"cost summary differs:\n{summaries[1]}merged, against alone:\n{summaries[0]}")
    return found


def merged(shards: Sequence[Run], into: Path) -> Path:
    merge.merge([run.folder for run in shards], into / merge.SHARD_RESULTS, into / merge.SHARD_COSTS)
    return into


def test_two_real_shards_merged_are_the_unsharded_runs_tests_statuses_and_cost_summary(
    runs: Runs, tmp_path: Path
) -> None:
    makefile = MAKEFILE.read_text(encoding="utf-8")
    assert all(options in makefile for options in MAKEFILE_SHARDING), "the Makefile no longer shards as these runs do"
    whole, shards = runs.whole, runs.shards
    assert partition_problems(whole.tests, [shard.tests for shard in shards]) == []
    assert all(shard.tests for shard in shards), "a shard of the subset is empty: the check would prove little"
    assert COSTED in whole.tests
    assert COSTED not in json.loads(runs.durations.read_text(encoding="utf-8"))
    into = merged(shards, tmp_path / "merged")
    assert differences(whole.folder, into) == []
    summary = summarize(into / merge.SHARD_RESULTS)
    assert summary.passed, summary.line()
    assert summary.skipped, summary.line()
    assert len(costs.read(into / merge.SHARD_COSTS)) == 3, "the three costed tests' figures"
    print(f"merged from {[len(shard.tests) for shard in shards]} tests: {summary.line()}")


@pytest.mark.negative_control
def test_shards_that_read_different_durations_are_caught_running_a_test_twice_and_refused_by_the_merge(
    runs: Runs, tmp_path: Path
) -> None:
    """The second shard's machine has another durations file: one where the first shard's first test took 1,000 s.
    pytest-split then gives that test a group to itself and every other test to the second: the tests the first
    shard ran besides it run twice."""
    first, _ = runs.shards
    slow = json.loads(runs.durations.read_text(encoding="utf-8")) | {first.tests[0]: 1000.0}
    other = tmp_path / "durations.json"
    other.write_text(json.dumps(slow), encoding="utf-8")
    stale = run_subset(tmp_path / "shard-2", 2, other)
    problems = partition_problems(runs.whole.tests, [first.tests, stale.tests])
    assert problems
    assert {problem.rsplit(": ", 1)[1] for problem in problems} == {"in 2 shards"}
    with pytest.raises(merge.MergeError, match=r"\d+ test\(s\) ran in two shards or more, 0 in none .* differently"):
        merged([first, stale], tmp_path / "merged")


@pytest.mark.negative_control
def test_a_merge_that_lost_a_shard_is_caught_differing_from_the_unsharded_run_and_refused_by_the_merge(
    runs: Runs, tmp_path: Path
) -> None:
    first, second = runs.shards
    lossy = tmp_path / "lossy"  # what copying one shard's folders alone would give
    shutil.copytree(first.folder / merge.SHARD_RESULTS, lossy / merge.SHARD_RESULTS)
    if (first.folder / merge.SHARD_COSTS).is_dir():
        shutil.copytree(first.folder / merge.SHARD_COSTS, lossy / merge.SHARD_COSTS)
    found = differences(runs.whole.folder, lossy)
    assert len([line for line in found if line.endswith(": not in the merged results")]) == len(second.tests)
    assert any(line.startswith("report summary: ") for line in found)
    with pytest.raises(merge.MergeError, match=r"shards \[1\] of 2 given: missing \[2\], given twice none"):
        merged([first], tmp_path / "merged")
    with pytest.raises(merge.MergeError, match=r"shards \[1, 1\] of 2 given: missing \[2\], given twice \[1\]"):
        merged([first, first], tmp_path / "merged")


# -- the merge's refusals ---------------------------------------------------------------------------------------------


def test_the_merge_refuses_in_one_line_a_folder_that_is_no_shard_and_a_cost_record_two_shards_wrote_differently(
    runs: Runs, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    first = runs.shards[0]
    stray = tmp_path / "stray"
    stray.mkdir()
    assert merge.main([str(first.folder), str(stray)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert f"{stray / merge.MARKER} is missing or unreadable" in err
    shutil.copy(runs.shards[1].folder / merge.MARKER, stray)  # a shard's record, its results left behind
    assert merge.main([str(first.folder), str(stray)]) == 2
    assert f"no Allure results in {stray / merge.SHARD_RESULTS}" in capsys.readouterr().err
    assert merge.main([]) == 2
    assert 'make report RESULTS="reports/shard-1' in capsys.readouterr().err

    def with_record(name: str, **change: object) -> Path:
        """The second shard's folder with its record changed."""
        folder = tmp_path / name
        shutil.copytree(runs.shards[1].folder, folder, symlinks=True)
        record = json.loads((folder / merge.MARKER).read_text(encoding="utf-8")) | change
        (folder / merge.MARKER).write_text(json.dumps(record), encoding="utf-8")
        return folder

    other_tree = with_record("other-tree", collected=len(runs.whole.tests) + 1)
    assert merge.main([str(first.folder), str(other_tree)]) == 1
    n = len(runs.whole.tests)
    assert f"collected different trees (shard 1: {n} tests, shard 2: {n + 1} tests)" in capsys.readouterr().err
    one_short = with_record("one-short", tests=runs.shards[1].tests[1:])
    assert merge.main([str(first.folder), str(one_short)]) == 1
    assert "0 test(s) ran in two shards or more, 1 in none" in capsys.readouterr().err

    doctored = []
    for shard in (1, 2):
        folder = tmp_path / f"doctored-{shard}"
        (folder / merge.SHARD_COSTS).mkdir(parents=True)
        shutil.copy(runs.shards[shard - 1].folder / merge.MARKER, folder)
        (folder / merge.SHARD_RESULTS).symlink_to(runs.shards[shard - 1].folder / merge.SHARD_RESULTS)
        (folder / merge.SHARD_COSTS / "tools-list.json").write_text(json.dumps({"tokens": shard}), encoding="utf-8")
        doctored.append(Run(folder, runs.shards[shard - 1].tests))
    with pytest.raises(merge.MergeError, match=r"two shards wrote tools-list.json differently"):
        merged(doctored, tmp_path / "merged")


# -- the command a fleet runs ----------------------------------------------------------------------------------------


def make_lab_shard_command(folder: Path) -> str:
    """`make lab SHARDS=2 SHARD=1`'s pytest command as make would run it (`make -n` prints it, runs nothing), with
    the shard's folder moved to `folder` and told to collect only: what the recipe starts, not what a proof thinks
    it starts."""
    outer = ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")  # `make test`'s own flags and overrides are not the fleet's
    env = {k: v for k, v in child_env().items() if k not in outer}
    dry = subprocess.run(
        ["make", "-n", "lab", "SHARDS=2", "SHARD=1"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60,
        check=False,
    )  # fmt: skip
    assert dry.returncode == 0, dry.stderr[-2000:]
    lines = dry.stdout.replace("\\\n", " ").splitlines()
    (command,) = [line for line in lines if " suites --alluredir=" in line]
    return command.replace("reports/shard-1", str(folder)) + " --collect-only -q"


def started(command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "-c", command], cwd=ROOT, env=child_env(), capture_output=True, text=True, timeout=RUN_TIMEOUT,
        check=False,
    )  # fmt: skip


def test_make_labs_shard_command_as_the_makefile_writes_it_loads_its_plugin_and_collects_its_shard(
    tmp_path: Path,
) -> None:
    done = started(make_lab_shard_command(tmp_path))
    assert done.returncode == 0, f"make lab's shard command does not start:\n{done.stdout[-2000:]}{done.stderr[-2000:]}"
    assert "tests collected" in done.stdout


@pytest.mark.negative_control
def test_the_command_check_catches_a_recipe_that_runs_the_pytest_script_which_cannot_import_the_suites(
    tmp_path: Path,
) -> None:
    """Broken as the recipe first was: `.venv/bin/pytest` puts only its own folder on sys.path, so `-p suites.shards`
    fails before any test (the proof's children run `python -m pytest` and never saw it)."""
    command = make_lab_shard_command(tmp_path)
    assert "/bin/python -m pytest suites" in command
    done = started(command.replace("/bin/python -m pytest suites", "/bin/pytest suites"))
    assert done.returncode != 0
    assert "No module named 'suites'" in done.stderr
