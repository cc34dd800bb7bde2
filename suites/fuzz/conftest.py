"""The fuzz suite's knobs and its runtime.

The example count is modest by default (what `make test` runs) and raised for the acceptance run: `FUZZ_EXAMPLES`
(the environment, which works from any invocation) or `--fuzz-examples N` (only when pytest is pointed at this
folder or a file in it: pytest reads the options of a sub-folder's conftest after the command line is parsed).
`FUZZ_SEED` / `--fuzz-seed` replays a run; otherwise a fresh seed is drawn and printed.

The fuzz run uses the default backend only: the boundary it fuzzes (argument validation, capability, reason codes)
is in front of every backend, and the release proofs already cover each backend behind it.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest

from lab.tap import CDPTap
from runtime.assembly import Runtime
from runtime.service import Settings

DEFAULT_EXAMPLES = 150


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("fuzz")
    group.addoption("--fuzz-examples", type=int, default=None, help="Hypothesis examples per fuzz test (FUZZ_EXAMPLES)")
    group.addoption("--fuzz-seed", type=int, default=None, help="replay the fuzz run with this seed (FUZZ_SEED)")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "fuzz: Hypothesis fuzzing of the MCP boundary (FUZZ_EXAMPLES / --fuzz-examples sets the count)"
    )


@dataclass(frozen=True)
class FuzzBudget:
    examples: int
    seed: int


@pytest.fixture(scope="session")
def fuzz_budget(pytestconfig: pytest.Config) -> FuzzBudget:
    examples = pytestconfig.getoption("fuzz_examples", None) or int(os.environ.get("FUZZ_EXAMPLES", DEFAULT_EXAMPLES))
    seed = pytestconfig.getoption("fuzz_seed", None)
    if seed is None:
        seed = int(os.environ["FUZZ_SEED"]) if "FUZZ_SEED" in os.environ else secrets.randbits(32)
    return FuzzBudget(examples, seed)


@pytest.fixture
async def runtime(tap: CDPTap) -> AsyncIterator[Runtime]:
    """The real runtime on the default backend, reaching Chromium through the tap (label "runtime")."""
    rt = await Runtime.connect(await tap.endpoint("runtime"), settings=Settings())
    yield rt
    await rt.close()
