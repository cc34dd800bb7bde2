"""The shards of a sharded run (`make test SHARDS=N SHARD=i`, `make lab SHARDS=N SHARD=i`; docs/scale.md), and the
check that they partition the run: each collected test in exactly one shard, none left out, none added.

pytest-split does the splitting: every shard collects the whole tree, then keeps the tests its group gets from the
durations file (a test with no recorded duration counts as the mean of those with one). Shards agree only if every
machine collects the same tree and reads the same durations file with the same pytest-split; the check is what
`suites/lab/test_shards.py` holds real shards and a real collection to.

This module is also the plugin of the child pytest the check runs (`-p suites.shards`). With `--shards-record PATH`
it writes, after collection, the items the session kept: in a shard (`--splits N --group i`), that shard's tests.
With `--shards-of 2,3,4` as well it writes the whole collection and, for each N, the N shards pytest-split's own
plugin keeps from it when run as `--splits N --group i` (`split`): one collection instead of one per shard.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import pytest
from pytest_split.plugin import PytestSplitPlugin


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--shards-record", default=None, help="write the collected test ids (JSON) to this path")
    parser.addoption("--shards-of", default="", help="also record the shards of the collection for these N (2,3,4)")


def split(config: pytest.Config, items: Sequence[pytest.Item], shards: int, shard: int) -> list[str]:
    """The ids of the tests `--splits shards --group shard` keeps of `items`: pytest-split's plugin, with the
    algorithm and durations file of this session's options, run on a copy."""
    config.option.splits, config.option.group = shards, shard
    kept = list(items)
    PytestSplitPlugin(config).pytest_collection_modifyitems(config, kept)
    return [item.nodeid for item in kept]


@pytest.hookimpl(trylast=True)
def pytest_collection_finish(session: pytest.Session) -> None:
    path = session.config.getoption("--shards-record", None)
    if not path:
        return
    record: dict[str, object] = {"collected": [item.nodeid for item in session.items]}
    counts = [int(n) for n in session.config.getoption("--shards-of").split(",") if n.strip()]
    if counts:
        record["shards"] = {n: [split(session.config, session.items, n, i) for i in range(1, n + 1)] for n in counts}
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
