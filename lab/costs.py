"""`python -m lab.costs`: the cost summary of the last run, from the figures suites left in reports/costs/.

One line per figure: tokens the model pays (tools/list, observations, an act's changes), screenshots, and the act
latency ratio against the raw upstream, each beside its budget. Then a table per scenario × backend (the parity and
real-apps tasks: calls and tokens per task, mean tokens of an observe's and of an act's answer, screenshots, CDP
commands, median call time) and, beside it, what the raw upstreams cost for the same reads where the suites measured
them. Last, the task-cost table (`suites/bench/test_task_cost.py`): per task, the tokens a model reads with ours and
with each raw upstream doing the same steps, the ratios, totals, medians and issue 31's goal lines. The same text goes
to `reports/costs/summary.txt`, a plot of every budgeted figure as a share of its budget to `budgets.svg`, one of the
scenario table to `scenarios.svg` and one of the task costs to `task_cost.svg`; `lab.report` attaches all four to the
Allure report as global attachments.
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
TASK_COST = "taskcost-"
"""Records of the task-cost bench (`suites/bench/test_task_cost.py`: `taskcost-<task>-<driver>`)."""
TASK_COST_PLOT = "task_cost.svg"
DRIVERS = (
    ("ours", "ours (computer_use)"),
    ("raw_playwright_mcp", "raw @playwright/mcp"),
    ("raw_chrome_devtools_mcp", "raw chrome-devtools-mcp"),
)
"""The task-cost drivers, in column order: ours first, then each raw upstream doing the same steps."""
MEDIAN_GOAL = 3000
"""Issue 31: the median task costs ours at most this many tokens."""
RATIO_GOAL = 10.0
"""Issue 31: the raw @playwright/mcp reads at least this many times more on the same tasks."""
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
    "budget_ms": "beyond_pointer_ms",
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
    lines += [_line(name, figures) for name, figures in records.items() if not name.startswith((TASK, TASK_COST))]
    lines += ["", *scenario_table(records), "", *raw_beside(records), "", *task_cost_table(records)]
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


def task_costs(records: dict[str, dict[str, object]]) -> dict[str, dict[str, dict[str, object]]]:
    """The task-cost records: task → driver → its record, tasks in the order they were recorded by name."""
    table: dict[str, dict[str, dict[str, object]]] = {}
    for name, figures in records.items():
        if name.startswith(TASK_COST):
            table.setdefault(str(figures.get("task")), {})[str(figures.get("driver"))] = figures
    return table


def cost_of(record: dict[str, object] | None) -> int | None:
    """A row's tokens if its driver did the task; None for a failed, missing or not-applicable row (never a cost)."""
    if record is None or record.get("valid") is not True or not isinstance(record.get("tokens"), int):
        return None
    return int(record["tokens"])  # type: ignore[call-overload]


def _cell(record: dict[str, object] | None) -> str:
    if record is None:
        return "-"
    if record.get("valid") is None:
        return "n/a"
    cost = cost_of(record)
    return "FAILED" if cost is None else f"{cost:,} ({record.get('calls')})"


def _median(values: list[float]) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


def task_cost_table(records: dict[str, dict[str, object]]) -> list[str]:
    """Per task: what a model reads with ours and with each raw upstream doing the same steps (tokens, and calls in
    brackets), the ratios, then totals and medians over the tasks every driver did, and the issue-31 goal lines. A
    row whose driver did not reach the task's end is FAILED, never a figure; a task a raw upstream has no
    equivalent for is n/a."""
    table = task_costs(records)
    if not table:
        return ["task cost: no task-cost figures in this run"]
    names = [key for key, _ in DRIVERS]
    head = f"  {'task':<18} {'group':<9}" + "".join(f" {title:>25}" for _, title in DRIVERS)
    head += "".join(f" {short + '/ours':>10}" for short in ("pw", "cdm"))
    lines = [
        "task cost (o200k tokens a model reads per task: the tool definitions once + every answer, text and images; "
        "calls in brackets):",
        head,
    ]
    notes = []
    for task, rows in table.items():
        costs = [cost_of(rows.get(name)) for name in names]
        ratios = [f"{raw / costs[0]:.1f}x" if costs[0] and raw is not None else "-" for raw in costs[1:]]
        group = next((str(r.get("group")) for r in rows.values()), "")
        cells = "".join(f" {_cell(rows.get(name)):>25}" for name in names)
        lines.append(f"  {task:<18} {group:<9}{cells}" + "".join(f" {ratio:>10}" for ratio in ratios))
        reasons = {f"n/a: {r['na']}" for r in rows.values() if r.get("na")}
        notes += [f"  {task}: {reason}" for reason in sorted(reasons)]
        notes += [f"  {task} {name}: FAILED: {r['failure']}" for name, r in rows.items() if r.get("failure")]
        notes += sorted({f"  {task}: {r['note']}" for r in rows.values() if r.get("note")})
    complete = [rows for rows in table.values() if all(cost_of(rows.get(name)) is not None for name in names)]
    totals = [sum(cost_of(rows.get(name)) or 0 for rows in complete) for name in names]
    calls = [sum(int(rows[name].get("calls") or 0) for rows in complete) for name in names]  # type: ignore[call-overload]
    medians = [_median([float(c) for rows in table.values() if (c := cost_of(rows.get(name))) is not None])
               for name in names]  # fmt: skip
    lines.append(
        f"  {'total (' + str(len(complete)) + ' tasks all did)':<28}"
        + "".join(f" {f'{t:,} ({c})':>25}" for t, c in zip(totals, calls, strict=True))
        + "".join(f" {f'{t / totals[0]:.1f}x' if totals[0] else '-':>10}" for t in totals[1:])
    )
    lines.append(
        f"  {'median (tasks each did)':<28}" + "".join(f" {'-' if m is None else f'{m:,.0f}':>25}" for m in medians)
    )
    pw_ratios = [
        raw / ours
        for rows in table.values()
        if (ours := cost_of(rows.get(names[0]))) and (raw := cost_of(rows.get(names[1]))) is not None
    ]
    # The goal is the task set's: on a one-read task both sides pay mostly their tool definitions, which cap that
    # task's ratio near the definitions' own ratio whatever a read costs; the median task's ratio is shown beside it.
    median_ratio = _median(pw_ratios)
    total_ratio = totals[1] / totals[0] if totals[0] else None
    ours_median = medians[0]
    lines.append(
        f"  goal: median task ≤ {MEDIAN_GOAL:,} tokens for ours: "
        + ("no figure" if ours_median is None else f"{ours_median:,.0f}, " + _met(ours_median <= MEDIAN_GOAL))
    )
    lines.append(
        f"  goal: ≥ {RATIO_GOAL:g}x fewer than raw @playwright/mcp on the same tasks: "
        + (
            "no figure"
            if median_ratio is None or total_ratio is None
            else f"total {total_ratio:.1f}x, " + _met(total_ratio >= RATIO_GOAL) + f" (median task {median_ratio:.1f}x)"
        )
    )
    failed = sum(1 for rows in table.values() for r in rows.values() if r.get("valid") is False)
    if failed:
        lines.append(f"  {failed} FAILED row(s): a task that did not happen has no cost")
    return lines + (["notes:", *notes] if notes else [])


def _met(ok: bool) -> str:
    return "met" if ok else "NOT MET"


def task_cost_plot(records: dict[str, dict[str, object]]) -> str:
    """An SVG: per task, one bar per driver for the tokens a model reads (log scale: the raw upstreams read up to
    a hundred times more); a FAILED row is a red mark with no length, n/a rows are left out."""
    import math

    table = task_costs(records)
    fills = dict(zip((key for key, _ in DRIVERS), ("#2d6a4f", "#1d4e89", "#7b2cbf"), strict=True))
    widest = max([cost_of(r) or 1 for rows in table.values() for r in rows.values()] or [1])
    top = math.log10(max(widest, 10))
    rows = []
    for task, drivers in table.items():
        for key, title in DRIVERS:
            record = drivers.get(key)
            if record is None or record.get("valid") is None:
                continue
            cost = cost_of(record)
            if cost is None:
                rows.append((f"{task} · {title}", 0.0, "#c1121f", "FAILED"))
            else:
                rows.append((f"{task} · {title}", math.log10(max(cost, 1)) / top, fills[key], f"{cost:,}"))
    return _chart("Tokens a model reads per task, ours beside the raw upstreams (log scale)", rows)


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
    (COSTS / TASK_COST_PLOT).write_text(task_cost_plot(records), encoding="utf-8")
    print(text, end="")
    print(f"written: {COSTS / SUMMARY}, {COSTS / PLOT}, {COSTS / SCENARIO_PLOT}, {COSTS / TASK_COST_PLOT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
