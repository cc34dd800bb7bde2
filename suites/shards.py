"""The shards of a sharded run (`make test SHARDS=N SHARD=i`, `make lab SHARDS=N SHARD=i`; docs/scale.md), and the
check that they partition the run: each collected test in exactly one shard, none left out, none added.

pytest-split does the splitting: every shard collects the whole tree, then keeps the tests its group gets from the
durations file (a test with no recorded duration counts as the mean of those with one). Shards agree only if every
machine collects the same tree and reads the same durations file with the same pytest-split; `lab.merge` refuses
shards that did not, and `suites/lab/test_shards.py` holds real shards and a real collection to the same check.

This module is a pytest plugin (`-p suites.shards`). With `--shards-record PATH` it writes, once pytest-split has
kept this shard's tests, the record `lab.merge` reads as a shard's `shard.json`: which shard of how many, the tests
kept, and the size and digest of the whole collection (what was kept and what was deselected). `make lab SHARDS=N`
loads it. With `--shards-of 2,3,4` as well it adds, for each N, the N shards pytest-split's own plugin keeps of this
session's tests when run as `--splits N --group i` (`split`): one collection instead of one per shard.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import pytest
from pytest_split.plugin import PytestSplitPlugin

DESELECTED = pytest.StashKey[list[str]]()


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--shards-record", default=None, help="write this shard's record (JSON, lab.merge) to this path")
    parser.addoption("--shards-of", default="", help="also record the shards of the collection for these N (2,3,4)")


def pytest_deselected(items: Sequence[pytest.Item]) -> None:
    if items:
        items[0].config.stash.setdefault(DESELECTED, []).extend(item.nodeid for item in items)


def split(config: pytest.Config, items: Sequence[pytest.Item], shards: int, shard: int) -> list[str]:
    """The ids of the tests `--splits shards --group shard` keeps of `items`: pytest-split's plugin, with the
    algorithm and durations file of this session's options, run on a copy."""
    config.option.splits, config.option.group = shards, shard
    kept = list(items)
    PytestSplitPlugin(config).pytest_collection_modifyitems(config, kept)
    return [item.nodeid for item in kept]


@pytest.hookimpl(trylast=True)
def pytest_collection_finish(session: pytest.Session) -> None:
    config = session.config
    path = config.getoption("--shards-record", None)
    if not path:
        return
    kept = [item.nodeid for item in session.items]
    whole = sorted([*kept, *config.stash.get(DESELECTED, [])])
    record: dict[str, object] = {
        "shard": config.getoption("group") or 1,
        "shards": config.getoption("splits") or 1,
        "collected": len(whole),
        "collection": hashlib.sha256("\n".join(whole).encode()).hexdigest(),
        "tests": kept,
    }
    if counts := [int(n) for n in config.getoption("--shards-of").split(",") if n.strip()]:
        record["split"] = {n: [split(config, session.items, n, i) for i in range(1, n + 1)] for n in counts}
    Path(path).write_text(json.dumps(record), encoding="utf-8")


def partition_problems(collected: Sequence[str], shards: Sequence[Sequence[str]]) -> list[str]:
    """Where `shards` fail to partition `collected`: a test in two shards or more, in none, or in a shard but not
    collected."""
    runs = Counter(test for shard in shards for test in shard)
    whole = set(collected)
    problems = [f"{test}: in {n} shards" for test, n in runs.items() if n > 1]
    problems += [f"{test}: in no shard" for test in collected if test not in runs]
    problems += [f"{test}: in a shard, not collected" for test in runs if test not in whole]
    return problems


PROOF_SHARDS = "2,3,4"
"""The shard counts the proof splits `make lab`'s collection into."""
UNRECORDED_EVERY = 10
"""One recorded test in this many is dropped from the proof's durations, as if it were new."""


def unrecorded(durations: dict[str, float]) -> set[str]:
    """The tests the proof treats as new (no recorded duration): every `UNRECORDED_EVERY`-th, in sorted order."""
    return set(sorted(durations)[::UNRECORDED_EVERY])


def proof_options(durations: Path, folder: Path) -> tuple[list[str], Path]:
    """Options that make a child pytest collecting `make lab`'s tree also record its shards for `PROOF_SHARDS`, read
    from `durations` less `unrecorded()`'s tests (written to `folder`); and where the record will be."""
    recorded = json.loads(durations.read_text(encoding="utf-8"))
    dropped = unrecorded(recorded)
    kept = folder / "durations.json"
    kept.write_text(json.dumps({k: v for k, v in recorded.items() if k not in dropped}), encoding="utf-8")
    record = folder / "shards.json"
    return ["-p", "suites.shards", "--shards-record", str(record), "--shards-of", PROOF_SHARDS,
            "--durations-path", str(kept)], record  # fmt: skip
