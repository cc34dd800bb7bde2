"""The report (`python -m lab.report`): the run-wide evidence (cost summary, its plot, the parity table) travels
inside the single offline file as global attachments, and the tests are grouped by proof, backend, requirement."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from lab import report

pytestmark = pytest.mark.req("lab:report")


def one_result(results: Path) -> None:
    labels = [
        {"name": "epic", "value": "proof: page isolation"},
        {"name": "feature", "value": "playwright_mcp"},
        {"name": "story", "value": "isolation:b-untouched"},
    ]
    result = {"uuid": str(uuid.uuid4()), "name": "a test", "fullName": "suites.a_test", "status": "passed"}
    result |= {"start": 1, "stop": 2, "labels": labels}
    (results / f"{result['uuid']}-result.json").write_text(json.dumps(result), encoding="utf-8")


@pytest.mark.skipif(not report.ALLURE_CLI.is_file(), reason="the pinned Allure CLI is installed by `make setup`")
def test_the_cost_summary_its_plot_and_the_parity_table_are_carried_inside_the_report(tmp_path: Path) -> None:
    results, out = tmp_path / "results", tmp_path / "report"
    results.mkdir()
    one_result(results)
    summary, plot = tmp_path / "summary.txt", tmp_path / "budgets.svg"
    summary.write_text("cost summary: act-delta tokens=129, budget=150\n", encoding="utf-8")
    plot.write_text('<svg xmlns="http://www.w3.org/2000/svg"><text>budget</text></svg>\n', encoding="utf-8")
    files = [("cost summary", summary, "text/plain"), ("budgets (plot)", plot, "image/svg+xml")]
    files.append(("parity table", tmp_path / "missing.md", "text/markdown"))  # absent: skipped, not an error
    assert report.attach_globals(results, files) == ["cost summary", "budgets (plot)"]
    index = report.build(results, out)
    carried = report.embedded_files(index.read_text(encoding="utf-8")).values()
    assert summary.read_bytes() in carried
    assert plot.read_bytes() in carried


def test_the_report_is_grouped_by_proof_then_backend_then_requirement() -> None:
    assert 'groupBy: ["epic", "feature", "story"]' in report.CONFIG.read_text(encoding="utf-8")
