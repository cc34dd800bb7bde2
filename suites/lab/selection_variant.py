"""A broken selection, for the negative control of `suites/lab/test_selection.py`: loaded into a child pytest
(`-p suites.lab.selection_variant`), it replaces the rule `suites.selection.backends_for` consults with one that
knows the contract suite but forgets the release proofs, so `make test` would run a proof on the default backend
only."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from suites import selection


def forgets_the_proofs(requirements: Iterable[str], path: Path) -> bool:
    return path.resolve().is_relative_to(selection.CONTRACT_SUITE)


selection.every_backend = forgets_the_proofs
