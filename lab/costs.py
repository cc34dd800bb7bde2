"""`python -m lab.costs`: the cost summary of the last run, from the figures suites left in reports/costs/.

One line per figure: tokens the model pays (tools/list, observations, an act's changes), screenshots, and the act
latency ratio against the raw upstream, each beside its budget. Then a table per scenario × backend (the parity and
real-apps tasks: calls and tokens per task, mean tokens of an observe's and of an act's answer, screenshots, CDP
commands, median call time) and, beside it, what the raw upstreams cost for the same reads where the suites measured
them. The same text goes to `reports/costs/summary.txt`, a plot of every budgeted figure as a share of its budget to
`budgets.svg` and one of the scenario table to `scenarios.svg`; `lab.report` attaches all three to the Allure report
as global attachments.
"""

from __future__ import annotations

import html
import json
import sys
from pathlib import Path

COSTS = Path("reports/costs")
SUMMARY = "summary.txt"
PLOT = "budgets.svg"
SCENARIO_PLOT = "scenarios.svg"
TASK = "task-"
"""Records of a parity task's run on one backend (`suites/parity/tasks.py`: `task-<scenario>-<backend>`)."""
COLUMNS = (
    ("calls", "calls"),
    ("tokens", "tokens/task"),
    ("observe_tokens", "tokens/observe"),
    ("act_tokens", "tokens/act"),
    ("screenshots", "screenshots"),
    ("cdp_commands", "CDP commands"),
    ("p50_ms", "p50 ms/call"),
)

BUDGETS = {
    "budget_ratio": "ratio",
    "budget_per_element": "tokens_per_element",
    "line_budget_per_element": "line_tokens_per_element",
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
    lines += [_line(name, figures) for name, figures in records.items() if not name.startswith(TASK)]
    lines += ["", *scenario_table(records), "", *raw_beside(records)]
    return "\n".join(lines) + "\n"


def tasks(records: dict[str, dict[str, object]]) -> list[dict[str, object]]:
    """The parity tasks' cost records, by scenario then backend."""
    rows = [figures for name, figures in records.items() if name.startswith(TASK)]
    return sorted(rows, key=lambda row: (str(row.get("scenario")), str(row.get("backend"))))


def scenario_table(records: dict[str, dict[str, object]]) -> list[str]:
    rows = tasks(records)
    if not rows:
        return ["per scenario × backend: no parity task ran"]
    head = f"  {'scenario':<26} {'backend':<20}" + "".join(f" {title:>15}" for _, title in COLUMNS)
    lines = ["per scenario × backend (parity and real-apps tasks; tokens per task, and means per answer; o200k):", head]
    for row in rows:
        cells = "".join(f" {'-' if row.get(key) is None else row.get(key):>15}" for key, _ in COLUMNS)
        lines.append(f"  {row.get('scenario')!s:<26} {row.get('backend')!s:<20}{cells}")
    return lines


def raw_beside(records: dict[str, dict[str, object]]) -> list[str]:
    """Ours beside the raw upstream, for the reads the suites measured both ways."""
    lines = ["raw upstream beside ours (same Page, same read):"]
    prefixes = ("observe-raw-catalogue-", "observe-catalogue-", "act-vs-raw-")
    backends = sorted({name.removeprefix(p) for name in records for p in prefixes if name.startswith(p)})
    for backend in backends:
        raw = records.get(f"observe-raw-catalogue-{backend}", {})
        ours = records.get(f"observe-catalogue-{backend}", {})
        if raw or ours:
            lines.append(
                f"  catalogue, whole frame  {backend:<20} raw snapshot {raw.get('raw_tokens', '-')} tokens, "
                f"ours {ours.get('tokens', '-')} tokens in {ours.get('reads', '-')} reads"
            )
        act = records.get(f"act-vs-raw-{backend}", {})
        if act:
            lines.append(
                f"  dom_form, one click     {backend:<20} raw {act.get('raw_median_s')} s, "
                f"ours {act.get('runtime_median_s')} s (ratio {act.get('ratio')})"
            )
    return lines if len(lines) > 1 else [lines[0] + " not measured in this run"]


def scenario_plot(records: dict[str, dict[str, object]]) -> str:
    """An SVG: per scenario, one bar per backend for the mean tokens of an observe's answer and of an act's."""
    rows = tasks(records)
    bars = [
        (f"{row.get('scenario')} {row.get('backend')} {title}", float(row[key]))  # type: ignore[arg-type]
        for row in rows
        for key, title in COLUMNS[2:4]
        if isinstance(row.get(key), int | float)
    ]
    widest = max([value for _, value in bars] or [1.0])
    rows = [(label, value / widest, "#1d4e89", f"{value:g}") for label, value in bars]
    return _chart("Tokens per answer, by scenario and backend (parity tasks)", rows)


LABEL_W, BAR_W, ROW_H, TOP = 420, 360, 22, 40
"""Chart geometry in px: the label column, the widest bar, a row, the title band."""


def _chart(title: str, rows: list[tuple[str, float, str, str]], budget_at: float | None = None) -> str:
    """An SVG horizontal bar chart. `rows`: (label, bar length as a share of `BAR_W`, fill, text after the bar);
    `budget_at`: where a dashed budget line is drawn (a share of `BAR_W`), if any."""
    width, height = LABEL_W + BAR_W + 120, TOP + ROW_H * max(len(rows), 1) + 30
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" '
        'font-size="12">',
        f'<rect width="{width}" height="{height}" fill="white"/>',
        f'<text x="10" y="22" font-size="14" font-weight="bold">{html.escape(title)}</text>',
    ]
    if budget_at is not None:  # drawn first so bars and figures stay readable over it
        x = LABEL_W + budget_at * BAR_W
        out += [
            f'<line x1="{x:.1f}" y1="{TOP - 6}" x2="{x:.1f}" y2="{height - 20}" stroke="#9ca3af" '
            'stroke-dasharray="4 3"/>',
            f'<text x="{x:.1f}" y="{height - 6}" text-anchor="middle">budget</text>',
        ]
    for row, (label, share, fill, shown) in enumerate(rows):
        y, length = TOP + row * ROW_H, share * BAR_W
        out += [
            f'<text x="{LABEL_W - 8}" y="{y + 14}" text-anchor="end">{html.escape(label)}</text>',
            f'<rect x="{LABEL_W}" y="{y + 3}" width="{length:.1f}" height="{ROW_H - 8}" fill="{fill}"/>',
            f'<text x="{LABEL_W + length + 6:.1f}" y="{y + 14}">{html.escape(shown)}</text>',
        ]
    out.append("</svg>")
    return "\n".join(out) + "\n"


def plot(records: dict[str, dict[str, object]]) -> str:
    """An SVG bar chart: each budgeted figure as a share of its budget (the line at 100 %), over-budget bars red."""
    rows = []
    for name, figures in records.items():
        for key, figure, budget in budgeted(figures):
            share = figure / budget
            fill = "#c1121f" if share > 1 else "#2d6a4f"
            # 150 % of a budget spans the plot
            rows.append((f"{name} {key}", min(share, 1.5) / 1.5, fill, f"{figure:g} / {budget:g} ({share:.0%})"))
    return _chart("Each budgeted figure as a share of its budget", rows, budget_at=1 / 1.5)


def main() -> int:
    records = read()
    if not records:
        print("lab.costs: no cost figures in reports/costs (run the budgets and bench suites first)")
        return 2
    text = summary(records)
    (COSTS / SUMMARY).write_text(text, encoding="utf-8")
    (COSTS / PLOT).write_text(plot(records), encoding="utf-8")
    (COSTS / SCENARIO_PLOT).write_text(scenario_plot(records), encoding="utf-8")
    print(text, end="")
    print(f"written: {COSTS / SUMMARY}, {COSTS / PLOT}, {COSTS / SCENARIO_PLOT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
