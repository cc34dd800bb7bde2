"""The ten-question run goes ahead on the default backend in `make test`, on every backend in `make lab`
(`suites.harness.whole_run_backends`): the runner is what it proves, and each run takes most of a minute."""

from __future__ import annotations

from pathlib import Path

import pytest

from suites.harness import skip_other_backends

HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    skip_other_backends(config, items, HERE, "the ten-question run")
