"""`python -m lab.costs`: the cost summary of the last run, from the figures suites left in reports/costs/.

One line per figure: tokens the model pays (tools/list, observations), screenshots, and the act latency ratio
against the raw upstream, each beside its budget.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

COSTS = Path("reports/costs")


BUDGETS = {"budget_ratio": "ratio", "budget_per_element": "tokens_per_element", "budget": "tokens"}
"""budget key -> the figure it bounds, as the suites record them."""


def over_budget(figures: dict[str, object]) -> list[str]:
    """The figures above their budget (a reviewer's first question; the suites report these, never assert them)."""
    over = []
    for budget_key, figure_key in BUDGETS.items():
        budget, figure = figures.get(budget_key), figures.get(figure_key)
        if isinstance(budget, int | float) and isinstance(figure, int | float) and figure > budget:
            over.append(f"{figure_key} {figure} > {budget}")
    return over


def _line(name: str, figures: dict[str, object]) -> str:
    shown = ", ".join(f"{key}={value}" for key, value in figures.items())
    over = over_budget(figures)
    return f"  {name:<38} {shown}" + (f"   OVER BUDGET: {'; '.join(over)}" if over else "")


def main() -> int:
    files = sorted(COSTS.glob("*.json")) if COSTS.is_dir() else []
    if not files:
        print("lab.costs: no cost figures in reports/costs (run the budgets and bench suites first)")
        return 2
    print("cost summary (o200k tokens; medians in seconds):")
    for path in files:
        print(_line(path.stem, json.loads(path.read_text(encoding="utf-8"))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
