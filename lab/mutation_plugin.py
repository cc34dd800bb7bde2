"""A pytest plugin for `make mutation`'s runs (`-p lab.mutation_plugin`, see lab/mutation.py): fastest test first.

mutmut hands pytest the tests that reached a mutant's function, in no particular order, with `-x`: the first failure
kills the mutant and ends the run. Ordering them by the duration mutmut recorded for each (`mutmut-stats.json`, in
the folder it runs pytest from) lets a unit test kill a mutant before any live suite starts its browser.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

STATS = Path("mutmut-stats.json")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    if not STATS.is_file():
        return
    durations = json.loads(STATS.read_text(encoding="utf-8")).get("duration_by_test", {})
    items.sort(key=lambda item: durations.get(item.nodeid, 0.0))
