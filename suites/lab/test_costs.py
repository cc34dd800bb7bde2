"""The cost summary (`python -m lab.costs`): budgets are reported, never asserted, so the summary must make a figure
over its budget impossible to miss."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lab import costs
from suites import proofs

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
    lines = {line.split()[0]: line for line in capsys.readouterr().out.splitlines()[1:] if line.strip()}
    assert "OVER BUDGET" not in lines["fast"]
    assert "OVER BUDGET: ratio 1.3 > 1.1" in lines["slow"]


def test_a_cost_record_a_second_test_writes_is_refused_and_the_first_tests_figure_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(proofs, "COSTS", tmp_path)
    monkeypatch.setattr(proofs, "OWNERS", {})
    monkeypatch.setenv("PYTEST_CURRENT_TEST", "suites/a.py::test_one[x] (call)")
    proofs.record_cost("task-x-b", {"tokens": 1})
    proofs.record_cost("task-x-b", {"tokens": 2})  # its own test again (another backend's loop pass): rewritten
    monkeypatch.setenv("PYTEST_CURRENT_TEST", "suites/b.py::test_two (call)")
    with pytest.raises(AssertionError, match=r"by suites/a.py::test_one\[x\] and again by suites/b.py::test_two"):
        proofs.record_cost("task-x-b", {"tokens": 3})
    assert json.loads((tmp_path / "task-x-b.json").read_text()) == {"tokens": 2}


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


def test_the_scenario_table_shows_each_task_on_each_backend_and_the_raw_upstream_beside_ours(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    task = {"scenario": "catalogue", "calls": 5, "observe_tokens": 2790, "act_tokens": 137, "screenshots": 0}
    for backend, commands in (("playwright_mcp", 312), ("open_claude_chrome", 188)):
        figures = {**task, "backend": backend, "cdp_commands": commands, "p50_ms": 41}
        (tmp_path / f"task-catalogue-{backend}.json").write_text(json.dumps(figures))
    (tmp_path / "task-login-playwright_mcp.json").write_text(
        json.dumps({"scenario": "login", "backend": "playwright_mcp", "observe_tokens": 90, "act_tokens": None})
    )
    (tmp_path / "observe-raw-catalogue-playwright_mcp.json").write_text(json.dumps({"raw_tokens": 61000}))
    (tmp_path / "observe-catalogue-playwright_mcp.json").write_text(json.dumps({"tokens": 12287, "reads": 7}))
    monkeypatch.setattr(costs, "COSTS", tmp_path)
    assert costs.main() == 0
    out = capsys.readouterr().out
    rows = [line.split() for line in out.splitlines() if line.startswith(("  catalogue ", "  login "))]
    assert ["catalogue", "open_claude_chrome", "5", "-", "2790", "137", "0", "188", "41"] in rows
    assert ["catalogue", "playwright_mcp", "5", "-", "2790", "137", "0", "312", "41"] in rows
    assert ["login", "playwright_mcp", "-", "-", "90", "-", "-", "-", "-"] in rows
    assert "raw snapshot 61000 tokens, ours 12287 tokens in 7 reads" in out
    assert "task-catalogue" not in out  # the tasks are in the table, not repeated as lines
    svg = (tmp_path / "scenarios.svg").read_text()
    assert svg.count("<rect x=") == 5  # observe and act bars of two catalogue runs, observe of the login run
    assert "catalogue playwright_mcp tokens/observe" in svg


def task_cost(task: str, driver: str, tokens: int | None, calls: int = 2, **extra: object) -> dict[str, object]:
    record: dict[str, object] = {"task": task, "group": "eval", "driver": driver, "valid": tokens is not None}
    if tokens is not None:
        record |= {"tokens": tokens, "calls": calls}
    return record | extra


def write_task_costs(folder: Path, *records: dict[str, object]) -> None:
    for record in records:
        (folder / f"taskcost-{record['task']}-{record['driver']}.json").write_text(json.dumps(record))


def test_the_task_cost_table_shows_ours_beside_each_raw_upstream_with_ratios_totals_medians_and_goals(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    write_task_costs(
        tmp_path,
        task_cost("read", "ours", 1000), task_cost("read", "raw_playwright_mcp", 12000, 1),
        task_cost("read", "raw_chrome_devtools_mcp", 9000, 1),
        task_cost("buy", "ours", 2000, 4), task_cost("buy", "raw_playwright_mcp", 30000, 6),
        task_cost("buy", "raw_chrome_devtools_mcp", 20000, 5),
        task_cost("pay", "ours", 1500, 3),
        {**task_cost("pay", "raw_playwright_mcp", None), "valid": None, "na": "dialogs are the user's"},
    )  # fmt: skip
    monkeypatch.setattr(costs, "COSTS", tmp_path)
    assert costs.main() == 0
    out = capsys.readouterr().out
    rows = {line.split()[0]: line for line in out.splitlines() if line.startswith("  ")}
    assert rows["read"].split()[2:] == ["1,000", "(2)", "12,000", "(1)", "9,000", "(1)", "12.0x", "9.0x"]
    assert rows["buy"].split()[2:] == ["2,000", "(4)", "30,000", "(6)", "20,000", "(5)", "15.0x", "10.0x"]
    assert rows["pay"].split()[2:] == ["1,500", "(3)", "n/a", "-", "-", "-"]
    total = rows["total"].split()
    assert total[:5] == ["total", "(2", "tasks", "all", "did)"]  # pay is not a task every driver did
    assert total[5:] == ["3,000", "(6)", "42,000", "(7)", "29,000", "(6)", "14.0x", "9.7x"]
    assert "goal: median task ≤ 3,000 tokens for ours: 1,500, met" in out
    assert "goal: ≥ 10x fewer than raw @playwright/mcp on the same tasks: total 14.0x, met (median task 13.5x)" in out
    assert "  pay: n/a: dialogs are the user's" in out
    assert (tmp_path / costs.TASK_COST_PLOT).read_text().count("<rect x=") == 7  # n/a draws no bar


@pytest.mark.negative_control
def test_a_row_whose_driver_did_not_reach_the_answer_is_shown_failed_never_as_a_cost() -> None:
    """A doctored run: the raw driver "costs" 10 tokens on a task it never finished. Were its tokens taken as a
    cost, the table would show 10 and a ratio of 0.0x, and the goal would read as missed for the wrong reason."""
    records = {
        "taskcost-buy-ours": task_cost("buy", "ours", 2000, 4),
        "taskcost-buy-raw_playwright_mcp": {
            **task_cost("buy", "raw_playwright_mcp", 10, 1),
            "valid": False,
            "failure": "no element named 'Add to cart' in the snapshot",
        },
        "taskcost-buy-raw_chrome_devtools_mcp": task_cost("buy", "raw_chrome_devtools_mcp", 20000, 5),
    }
    lines = costs.task_cost_table(records)
    row = next(line for line in lines if line.startswith("  buy"))
    assert row.split()[2:] == ["2,000", "(4)", "FAILED", "20,000", "(5)", "-", "10.0x"]
    assert "10 (1)" not in "\n".join(lines)
    assert "  total (0 tasks all did)" in "\n".join(lines)
    assert "  buy raw_playwright_mcp: FAILED: no element named 'Add to cart' in the snapshot" in lines
    assert "  1 FAILED row(s): a task that did not happen has no cost" in lines
    svg = costs.task_cost_plot(records)
    assert ">FAILED</text>" in svg
    assert ">10</text>" not in svg
