"""`python -m lab.merge SHARD_DIR...` (`make report RESULTS="reports/shard-1 …"`): the folders of a sharded
`make lab` merged into the one Allure results folder and the one cost folder a single-machine run leaves, so that
`lab.costs` and `lab.report` build the one summary and the one offline report from them unchanged.

A shard's folder (`make lab SHARDS=N SHARD=i` writes `reports/shard-<i>/`) holds `allure-results/` (its tests'
results and attachments, every file named by a fresh uuid), `costs/` (one JSON record per cost figure, named by the
figure) and `shard.json`, written by the shard's pytest once it has split the collection (`suites/shards.py`): which
shard of how many, the tests it kept, and the size and digest of the whole collection it split. Merging is copying;
what it refuses, with one line each, is what would make the report differ from a single-machine run's: shards of a
run missing or given twice (a CI job whose folder was not copied back), a folder that is no shard's or has no results,
shards that collected different trees, a test that ran in two shards or in none (shards split by different durations
files or pytest-split versions), and a cost record two shards wrote differently (one would silently win).
"""

from __future__ import annotations

import argparse
import filecmp
import json
import shutil
import sys
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
RESULTS = REPO_ROOT / "reports" / "allure-results"
COSTS = REPO_ROOT / "reports" / "costs"
SHARD_RESULTS = "allure-results"
SHARD_COSTS = "costs"
MARKER = "shard.json"


class MergeError(Exception):
    """A shard set that would not give a single-machine run's report; the message is the one line `main` prints.
    `exit_code` 2: an input is missing; 1: the shards disagree."""

    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        self.exit_code = exit_code


@dataclass(frozen=True)
class Shard:
    """A shard's `shard.json`."""

    shard: int
    shards: int
    collected: int
    """How many tests the whole collection held, before the split."""
    collection: str
    """A digest of the whole collection's test ids: the same tree, collected the same way, gives the same one."""
    tests: tuple[str, ...]
    """The ids of the tests this shard kept."""


@dataclass(frozen=True)
class Merged:
    shards: int
    tests: int
    costs: int

    def line(self) -> str:
        return f"{self.shards} shards, {self.tests} tests, {self.costs} cost records"


def read_marker(folder: Path) -> Shard:
    try:
        marker = json.loads((folder / MARKER).read_text(encoding="utf-8"))
        return Shard(
            int(marker["shard"]), int(marker["shards"]), int(marker["collected"]), str(marker["collection"]),
            tuple(str(test) for test in marker["tests"]),
        )  # fmt: skip
    except (OSError, ValueError, KeyError, TypeError):
        raise MergeError(
            f"{folder / MARKER} is missing or unreadable: a shard's folder is what `make lab SHARDS=N SHARD=i` leaves "
            "in reports/shard-<i>/",
            2,
        ) from None


def check(shards: Sequence[Shard]) -> None:
    """Raise unless these are every shard of one split of one collection, each test in exactly one."""
    counts = sorted({shard.shards for shard in shards})
    if len(counts) > 1:
        raise MergeError(f"the folders are shards of runs split {' and '.join(map(str, counts))} ways", 2)
    numbers = sorted(shard.shard for shard in shards)
    if numbers != list(range(1, counts[0] + 1)):
        missing = sorted(set(range(1, counts[0] + 1)) - set(numbers)) or "none"
        twice = sorted({i for i in numbers if numbers.count(i) > 1}) or "none"
        raise MergeError(f"shards {numbers} of {counts[0]} given: missing {missing}, given twice {twice}", 2)
    if len({(shard.collected, shard.collection) for shard in shards}) > 1:
        sizes = ", ".join(f"shard {shard.shard}: {shard.collected} tests" for shard in shards)
        raise MergeError(f"the shards collected different trees ({sizes}): run every shard on the same commit")
    runs = Counter(test for shard in shards for test in shard.tests)
    twice = sorted(test for test, n in runs.items() if n > 1)
    none = shards[0].collected - len(runs)
    if twice or none:
        raise MergeError(
            f"{len(twice)} test(s) ran in two shards or more, {none} in none (first: {(twice or ['-'])[0]}): the "
            "shards split differently; every shard needs the same suites/durations/ file and pytest-split version"
        )


def merge(folders: Sequence[Path], results: Path = RESULTS, costs: Path = COSTS) -> Merged:
    """Check `folders` are every shard of one run, then copy their results into `results` and their cost records
    into `costs` (both emptied first)."""
    if not folders:
        raise MergeError('no shard folders given: make report RESULTS="reports/shard-1 reports/shard-2 …"', 2)
    shards = [read_marker(folder) for folder in folders]
    check(shards)
    for folder in folders:
        if not any((folder / SHARD_RESULTS).glob("*-result.json")):
            raise MergeError(f"no Allure results in {folder / SHARD_RESULTS}: were they copied back?", 2)
    outputs = (results.resolve(), costs.resolve())
    for folder in folders:
        if any(folder.resolve().is_relative_to(out) or out.is_relative_to(folder.resolve()) for out in outputs):
            raise MergeError(f"{folder} overlaps the merged folders {results} and {costs}: merge from copies", 2)
    for out in outputs:
        shutil.rmtree(out, ignore_errors=True)
        out.mkdir(parents=True)
    records = 0
    for folder in folders:
        _copy(sorted((folder / SHARD_RESULTS).iterdir()), results)
        found = sorted((folder / SHARD_COSTS).glob("*.json")) if (folder / SHARD_COSTS).is_dir() else []
        records += _copy(found, costs)
    return Merged(len(folders), sum(len(shard.tests) for shard in shards), records)


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
