"""`python -m lab.costs`: the cost summary of the last run, from the figures suites left in reports/costs/.

One line per figure: tokens the model pays (tools/list, observations, an act's changes), screenshots, and the act
latency ratio against the raw upstream, each beside its budget. The same lines go to `reports/costs/summary.txt`
and a plot of every budgeted figure as a share of its budget to `reports/costs/budgets.svg`; `lab.report` attaches
both to the Allure report as global attachments.
"""

from __future__ import annotations

import html
import json
import sys
from pathlib import Path

COSTS = Path("reports/costs")
SUMMARY = "summary.txt"
PLOT = "budgets.svg"

BUDGETS = {
    "budget_ratio": "ratio",
    "budget_per_element": "tokens_per_element",
    "budget": "tokens",
    "budget_ms": "overhead_ms",
}
"""budget key -> the figure it bounds, as the suites record them."""


def over_budget(figures: dict[str, object]) -> list[str]:
    """The figures above their budget (a reviewer's first question; the suites report these, never assert them)."""
    over = []
    for budget_key, figure_key in BUDGETS.items():
        budget, figure = figures.get(budget_key), figures.get(figure_key)
        if isinstance(budget, int | float) and isinstance(figure, int | float) and figure > budget:
            over.append(f"{figure_key} {figure} > {budget}")
    return over


def budgeted(figures: dict[str, object]) -> list[tuple[str, float, float]]:
    """(figure key, figure, budget) for every figure of a record that has a budget."""
    found = []
    for budget_key, figure_key in BUDGETS.items():
        budget, figure = figures.get(budget_key), figures.get(figure_key)
        if isinstance(budget, int | float) and isinstance(figure, int | float) and budget > 0:
            found.append((figure_key, float(figure), float(budget)))
    return found


def _line(name: str, figures: dict[str, object]) -> str:
    shown = ", ".join(f"{key}={value}" for key, value in figures.items())
    over = over_budget(figures)
    return f"  {name:<38} {shown}" + (f"   OVER BUDGET: {'; '.join(over)}" if over else "")


def read(costs: Path | None = None) -> dict[str, dict[str, object]]:
    """Every figure file of the last run (in `COSTS` unless told), by name."""
    costs = costs or COSTS
    files = sorted(costs.glob("*.json")) if costs.is_dir() else []
    return {path.stem: json.loads(path.read_text(encoding="utf-8")) for path in files}


def summary(records: dict[str, dict[str, object]]) -> str:
    lines = ["cost summary (o200k tokens; medians in seconds):"]
    lines += [_line(name, figures) for name, figures in records.items()]
    return "\n".join(lines) + "\n"


def plot(records: dict[str, dict[str, object]]) -> str:
    """An SVG bar chart: each budgeted figure as a share of its budget (the line at 100 %), over-budget bars red."""
    bars = [
        (f"{name} {key}", figure, budget)
        for name, figures in records.items()
        for key, figure, budget in budgeted(figures)
    ]
    label_w, bar_w, row_h, top = 420, 360, 22, 40
    width, height = label_w + bar_w + 120, top + row_h * max(len(bars), 1) + 30
    scale = bar_w / 1.5  # 150 % of a budget spans the plot
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" '
        'font-size="12">',
        f'<rect width="{width}" height="{height}" fill="white"/>',
        '<text x="10" y="22" font-size="14" font-weight="bold">Each budgeted figure as a share of its budget</text>',
    ]
    x = label_w + scale  # the budget line, drawn first so bars and figures stay readable over it
    out += [
        f'<line x1="{x:.1f}" y1="{top - 6}" x2="{x:.1f}" y2="{height - 20}" stroke="#9ca3af" stroke-dasharray="4 3"/>',
        f'<text x="{x:.1f}" y="{height - 6}" text-anchor="middle">budget</text>',
    ]
    for row, (label, figure, budget) in enumerate(bars):
        y = top + row * row_h
        share = figure / budget
        fill = "#c1121f" if share > 1 else "#2d6a4f"
        shown = f"{figure:g} / {budget:g} ({share:.0%})"
        length = min(share, 1.5) * scale
        out += [
            f'<text x="{label_w - 8}" y="{y + 14}" text-anchor="end">{html.escape(label)}</text>',
            f'<rect x="{label_w}" y="{y + 3}" width="{length:.1f}" height="{row_h - 8}" fill="{fill}"/>',
            f'<text x="{label_w + length + 6:.1f}" y="{y + 14}">{html.escape(shown)}</text>',
        ]
    out.append("</svg>")
    return "\n".join(out) + "\n"


def main() -> int:
    records = read()
    if not records:
        print("lab.costs: no cost figures in reports/costs (run the budgets and bench suites first)")
        return 2
    text = summary(records)
    (COSTS / SUMMARY).write_text(text, encoding="utf-8")
    (COSTS / PLOT).write_text(plot(records), encoding="utf-8")
    print(text, end="")
    print(f"written: {COSTS / SUMMARY}, {COSTS / PLOT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
