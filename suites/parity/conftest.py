"""The parity suite's report hook: when the ledger check ran, the terminal summary shows its requirement × backend
table (the Allure report carries the full Markdown table as an attachment)."""

from __future__ import annotations

import pytest

from suites.parity.inventory import TABLE_KEY


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, exitstatus: int, config: pytest.Config) -> None:
    table = config.stash.get(TABLE_KEY, None)
    if table is not None:
        terminalreporter.write_sep("=", "parity ledger: requirement × backend (docs/parity.md)")
        terminalreporter.write_line(table)
