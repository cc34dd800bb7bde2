"""The cost summary (`python -m lab.costs`): budgets are reported, never asserted, so the summary must make a figure
over its budget impossible to miss."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lab import costs

pytestmark = pytest.mark.req("lab:costs")


def test_a_figure_over_its_budget_is_flagged_and_one_within_it_is_not() -> None:
    assert costs.over_budget({"ratio": 1.199, "budget_ratio": 1.1}) == ["ratio 1.199 > 1.1"]
    assert costs.over_budget({"tokens_per_element": 15.01, "budget_per_element": 15.0}) == [
        "tokens_per_element 15.01 > 15.0"
    ]
    assert costs.over_budget({"tokens": 1101, "budget": 1100}) == ["tokens 1101 > 1100"]
    assert costs.over_budget({"ratio": 1.1, "budget_ratio": 1.1, "tokens": 1095, "budget": 1100}) == []
    assert costs.over_budget({"elements": 978, "reads": 7}) == []  # no budget, nothing to judge


def test_the_summary_prints_every_recorded_figure_and_marks_the_ones_over_budget(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "fast.json").write_text(json.dumps({"ratio": 0.99, "budget_ratio": 1.1}))
    (tmp_path / "slow.json").write_text(json.dumps({"ratio": 1.3, "budget_ratio": 1.1}))
    monkeypatch.setattr(costs, "COSTS", tmp_path)
    assert costs.main() == 0
    lines = {line.split()[0]: line for line in capsys.readouterr().out.splitlines()[1:]}
    assert "OVER BUDGET" not in lines["fast"]
    assert "OVER BUDGET: ratio 1.3 > 1.1" in lines["slow"]


def test_no_recorded_figures_is_an_error_not_an_empty_summary(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(costs, "COSTS", tmp_path / "missing")
    assert costs.main() == 2


def test_the_plot_draws_every_budgeted_figure_against_its_budget_and_marks_the_ones_over_it() -> None:
    svg = costs.plot(
        {"act-delta": {"tokens": 129, "budget": 150}, "latency": {"ratio": 1.3, "budget_ratio": 1.1}, "n": {"x": 1}}
    )
    assert svg.count("<rect x=") == 2  # one bar per budgeted figure; a record without a budget draws none
    assert "129 / 150 (86%)" in svg
    assert "1.3 / 1.1 (118%)" in svg
    assert svg.count('fill="#c1121f"') == 1  # only the figure over its budget is red
