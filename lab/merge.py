"""`python -m lab.merge SHARD_DIR...` (`make report RESULTS="reports/shard-1 …"`): the folders of a sharded
`make lab` merged into the one Allure results folder and the one cost folder a single-machine run leaves, so that
`lab.costs` and `lab.report` build the one summary and the one offline report from them unchanged.

A shard's folder (`make lab SHARDS=N SHARD=i` writes `reports/shard-<i>/`) holds `shard.json` (`{"shard": i,
"shards": N}`), `allure-results/` (its tests' results and attachments, every file named by a fresh uuid) and `costs/`
(one JSON record per cost figure, named by the figure). Merging is copying; what it refuses, with one line each, is
what would make the report differ from a single-machine run's: shards of a run missing or given twice (a CI job whose
folder was not copied back), a shard folder without results (a shard that never ran), a test that ran in two shards
(shards split with different durations files or pytest-split versions: another test was then run by none), and a
cost record two shards wrote differently (one would silently win).
"""

from __future__ import annotations

import argparse
import filecmp
import json
import shutil
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import combinations
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
RESULTS = REPO_ROOT / "reports" / "allure-results"
COSTS = REPO_ROOT / "reports" / "costs"
SHARD_RESULTS = "allure-results"
SHARD_COSTS = "costs"
MARKER = "shard.json"
"""Which shard of how many a folder holds, written by `make lab SHARDS=N SHARD=i`."""


class MergeError(Exception):
    """A shard set that would not give a single-machine run's report; the message is the one line `main` prints.
    `exit_code` 2: an input is missing; 1: the shards disagree."""

    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        self.exit_code = exit_code


@dataclass(frozen=True)
class Merged:
    shards: int
    tests: int
    costs: int

    def line(self) -> str:
        return f"{self.shards} shards, {self.tests} tests, {self.costs} cost records"


def tests_in(results: Path) -> set[str]:
    """The tests a results folder has a result for (Allure's `historyId`: the same test has the same one in every
    run, on every machine)."""
    found = set()
    for path in results.glob("*-result.json"):
        try:
            result = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError):
            continue  # a half-written file from an interrupted shard is not a test
        found.add(str(result.get("historyId") or result.get("fullName") or path.name))
    return found


def merge(shards: Sequence[Path], results: Path = RESULTS, costs: Path = COSTS) -> Merged:
    """Copy every shard's results into `results` and its cost records into `costs` (both emptied first)."""
    if not shards:
        raise MergeError('no shard folders given: make report RESULTS="reports/shard-1 reports/shard-2 …"', 2)
    given = [_marker(shard) for shard in shards]
    counts = {n for _, n in given}
    if len(counts) > 1:
        raise MergeError(f"the folders are shards of runs split {' and '.join(map(str, sorted(counts)))} ways", 2)
    (count,) = counts
    numbers = sorted(i for i, _ in given)
    if numbers != list(range(1, count + 1)):
        missing = sorted(set(range(1, count + 1)) - set(numbers)) or "none"
        twice = sorted({i for i in numbers if numbers.count(i) > 1}) or "none"
        raise MergeError(f"shards {numbers} of {count} given: missing {missing}, given twice {twice}", 2)
    tests = {}
    for shard in shards:
        found = tests_in(shard / SHARD_RESULTS)
        if not found:
            raise MergeError(
                f"no Allure results in {shard / SHARD_RESULTS}: a shard's folder is what `make lab SHARDS=N SHARD=i` "
                "leaves in reports/shard-<i>/",
                2,
            )
        tests[shard] = found
    for (a, in_a), (b, in_b) in combinations(tests.items(), 2):
        if both := sorted(in_a & in_b):
            raise MergeError(
                f"{len(both)} test(s) ran in both {a} and {b}: the shards split differently (every shard needs the "
                "same suites/durations/ and pytest-split version), so others ran in none"
            )
    outputs = (results.resolve(), costs.resolve())
    for shard in shards:
        if any(shard.resolve().is_relative_to(out) or out.is_relative_to(shard.resolve()) for out in outputs):
            raise MergeError(f"{shard} overlaps the merged folders {results} and {costs}: merge from copies", 2)
    for out in outputs:
        shutil.rmtree(out, ignore_errors=True)
        out.mkdir(parents=True)
    records = 0
    for shard in shards:
        _copy(sorted((shard / SHARD_RESULTS).iterdir()), results)
        records += _copy(sorted((shard / SHARD_COSTS).glob("*.json")) if (shard / SHARD_COSTS).is_dir() else [], costs)
    return Merged(len(shards), sum(len(found) for found in tests.values()), records)


def _marker(shard: Path) -> tuple[int, int]:
    try:
        marker = json.loads((shard / MARKER).read_text(encoding="utf-8"))
        number, count = int(marker["shard"]), int(marker["shards"])
    except (OSError, ValueError, KeyError, TypeError):
        raise MergeError(
            f"{shard / MARKER} is missing or unreadable: a shard's folder is what `make lab SHARDS=N SHARD=i` leaves "
            "in reports/shard-<i>/",
            2,
        ) from None
    return number, count


def _copy(files: Sequence[Path], into: Path) -> int:
    copied = 0
    for path in files:
        target = into / path.name
        if target.exists():
            if filecmp.cmp(path, target, shallow=False):
                continue
            raise MergeError(f"two shards wrote {path.name} differently (the second: {path}): which is the run's?")
        shutil.copyfile(path, target)
        copied += 1
    return copied


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lab.merge", description=__doc__.splitlines()[0])
    parser.add_argument("shards", nargs="*", type=Path, help="shard folders (reports/shard-<i>/ of each shard)")
    args = parser.parse_args(argv)
    try:
        merged = merge(args.shards)
    except MergeError as exc:
        print(f"lab.merge: {exc}", file=sys.stderr)
        return exc.exit_code
    print(f"lab.merge: {merged.line()} -> {RESULTS.relative_to(REPO_ROOT)}, {COSTS.relative_to(REPO_ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
