"""Build the lab's Allure report as one offline HTML file: `python -m lab.report` (run from the repo root).

Why a single file: the report is the lab's evidence (tool-call traces, token counts, screenshots as
attachments). One self-contained `reports/allure-report/index.html` can be attached to a CI run, mailed or
opened from `file://` on a machine with no network and no web server, and it cannot lose an attachment the way
a directory of loose files can.

How: the Allure 3 CLI pinned in `backends/package.json` (`backends/node_modules/.bin/allure`) runs
`allure generate --config allurerc.mjs --output reports/allure-report reports/allure-results`; `allurerc.mjs`
enables only the Awesome plugin with `singleFile: true`. Allure 3.18's Awesome template always appends a
Google Analytics loader (there is no switch for it), so it is stripped from the written file: an offline
evidence file should not try to phone home when opened.

Missing CLI or missing results produce one plain line and a non-zero exit, not a traceback. On success it
prints a summary counted from the result JSON files, so the numbers do not depend on parsing the HTML.
"""

from __future__ import annotations

import argparse
import base64
import json
import re
import shutil
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "ALLURE_CLI",
    "CONFIG",
    "REPORT_DIR",
    "REPO_ROOT",
    "RESULTS_DIR",
    "ReportError",
    "Summary",
    "attach_globals",
    "build",
    "embedded_files",
    "main",
    "strip_analytics",
    "summarize",
]

REPO_ROOT = Path(__file__).resolve().parents[1]
ALLURE_CLI = REPO_ROOT / "backends" / "node_modules" / ".bin" / "allure"
CONFIG = REPO_ROOT / "allurerc.mjs"
RESULTS_DIR = REPO_ROOT / "reports" / "allure-results"
REPORT_DIR = REPO_ROOT / "reports" / "allure-report"

STATUSES = ("passed", "failed", "broken", "skipped", "unknown")
MUTATION_REPORTS = (REPO_ROOT / "reports" / "mutation" / "mutation.md", REPO_ROOT / "docs" / "mutation.md")
"""`make mutation`'s report: this machine's last run, else the one committed with the code it measured."""


def mutation_report() -> Path:
    return next((path for path in MUTATION_REPORTS if path.is_file()), MUTATION_REPORTS[-1])


GLOBALS = (
    ("cost summary", REPO_ROOT / "reports" / "costs" / "summary.txt", "text/plain"),
    ("mutation score and survivors (make mutation)", mutation_report(), "text/markdown"),
    ("budgets (plot)", REPO_ROOT / "reports" / "costs" / "budgets.svg", "image/svg+xml"),
    ("tokens by scenario and backend (plot)", REPO_ROOT / "reports" / "costs" / "scenarios.svg", "image/svg+xml"),
    (
        "tokens per task, ours beside the raw upstreams (plot)",
        REPO_ROOT / "reports" / "costs" / "task_cost.svg",
        "image/svg+xml",
    ),
    ("parity table", REPO_ROOT / "docs" / "parity.md", "text/markdown"),
)
"""Run-wide evidence attached to the report's front page (name, file, type); `make lab` writes the costs first."""

# The Awesome template's analytics: an external gtag.js loader plus the inline script that configures it.
_ANALYTICS = re.compile(
    r"\s*<script[^>]*\bsrc=\"https://www\.googletagmanager\.com/[^\"]*\"[^>]*>\s*</script>"
    r"(\s*<script>(?:(?!</script>).)*?\bgtag\(.*?</script>)?",
    re.DOTALL,
)
# Embedded report data in single-file mode: d("data/attachments/<id>.txt","<base64>").
_EMBEDDED = re.compile(r'\bd\("([^"]+)","([A-Za-z0-9+/=]*)"\)')
# Anything the page would fetch from the network when opened.
_EXTERNAL_FETCH = re.compile(r"<(?:script|link|img|iframe)\b[^>]*\b(?:src|href)=\"(https?://[^\"]+)\"", re.IGNORECASE)


class ReportError(Exception):
    """A precondition or the CLI failed; the message is the one line `main` prints, `exit_code` its exit status.

    2 means an input is missing (CLI not installed, no results), 1 that generation itself failed.
    """

    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        self.exit_code = exit_code


@dataclass(frozen=True)
class Summary:
    """Test outcomes counted from Allure result files, one per test (the last attempt wins, as in the report)."""

    passed: int = 0
    failed: int = 0
    broken: int = 0
    skipped: int = 0
    unknown: int = 0

    @property
    def total(self) -> int:
        return self.passed + self.failed + self.broken + self.skipped + self.unknown

    def line(self) -> str:
        counts = f"{self.passed} passed, {self.failed} failed, {self.broken} broken"
        extra = "".join(f", {n} {s}" for s, n in (("skipped", self.skipped), ("unknown", self.unknown)) if n)
        return f"{counts}{extra} ({self.total} tests)"


def summarize(results_dir: Path = RESULTS_DIR) -> Summary:
    """Count outcomes in `*-result.json`, keeping only the latest attempt per test (`historyId`).

    Read from the raw results rather than from the report so the summary is right even if generation fails,
    and so a rerun test counts once with its final status, matching what the report shows.
    """
    latest: dict[str, tuple[int, str]] = {}
    for path in sorted(results_dir.glob("*-result.json")):
        try:
            result = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError):
            continue  # a half-written file from an interrupted run is not a test outcome
        key = result.get("historyId") or result.get("uuid") or path.name
        stop = int(result.get("stop") or 0)
        status = result.get("status") if result.get("status") in STATUSES else "unknown"
        if key not in latest or stop >= latest[key][0]:
            latest[key] = (stop, status)
    counts = Counter(status for _, status in latest.values())
    return Summary(**{status: counts[status] for status in STATUSES})


def strip_analytics(html: str) -> str:
    """Remove the Google Analytics loader the Awesome template always adds, so opening the file makes no request."""
    return _ANALYTICS.sub("", html)


def embedded_files(html: str) -> dict[str, bytes]:
    """The data files a single-file report carries inline (`data/attachments/...`, `widgets/...`), decoded.

    Lets tests prove an attachment really travelled inside the file instead of trusting the report's UI.
    """
    return {name: base64.b64decode(data) for name, data in _EMBEDDED.findall(html)}


def build(
    results_dir: Path = RESULTS_DIR,
    report_dir: Path = REPORT_DIR,
    *,
    cli: Path = ALLURE_CLI,
    config: Path = CONFIG,
) -> Path:
    """Generate `report_dir/index.html` from `results_dir` with the pinned Allure 3 CLI; returns the file's path.

    Raises ReportError (with a one-line, actionable message) when the CLI, config or results are missing, when
    the CLI fails, or when the result would still fetch something from the network.
    """
    if not cli.is_file():
        raise ReportError(f"Allure CLI not found at {_rel(cli)}: run `cd backends && npm ci` first", 2)
    if not config.is_file():
        raise ReportError(f"Allure config not found at {_rel(config)}", 2)
    if not results_dir.is_dir() or not any(results_dir.glob("*-result.json")):
        raise ReportError(
            f"no Allure results in {_rel(results_dir)}: run pytest with `--alluredir {_rel(results_dir)}` first", 2
        )
    if report_dir.exists():
        if any(report_dir.iterdir()) and not (report_dir / "index.html").exists():
            raise ReportError(f"{_rel(report_dir)} exists and does not look like an Allure report; not replacing it")
        shutil.rmtree(report_dir)  # a stale report must never survive a failed generation
    attach_globals(results_dir)
    command = [str(cli), "generate", "--config", str(config), "--output", str(report_dir), str(results_dir)]
    proc = subprocess.run(command, cwd=REPO_ROOT, capture_output=True, text=True, check=False)
    index = report_dir / "index.html"
    if proc.returncode != 0 or not index.is_file():
        detail = (proc.stderr or proc.stdout).strip().splitlines()
        raise ReportError(f"allure generate failed (exit {proc.returncode}): {detail[-1] if detail else 'no output'}")
    html = strip_analytics(index.read_text(encoding="utf-8"))
    index.write_text(html, encoding="utf-8")
    external = _EXTERNAL_FETCH.findall(html)
    if external:
        raise ReportError(f"{_rel(index)} is not offline: it still loads {external[0]}")
    return index


def attach_globals(results_dir: Path, files: Sequence[tuple[str, Path, str]] | None = None) -> list[str]:
    """Put the run-wide evidence on the report's front page: Allure 3 reads `*-globals.json` in the results as the
    report's global attachments. Each file that exists is copied in; returns the names attached."""
    attached = []
    entries = []
    for name, path, mime in GLOBALS if files is None else files:
        if not path.is_file():
            continue
        source = f"{uuid.uuid4()}-attachment{path.suffix}"
        shutil.copyfile(path, results_dir / source)
        entries.append({"name": name, "source": source, "type": mime, "timestamp": int(time.time() * 1000)})
        attached.append(name)
    if entries:
        globals_file = results_dir / f"{uuid.uuid4()}-globals.json"
        globals_file.write_text(json.dumps({"attachments": entries, "errors": []}), encoding="utf-8")
    return attached


def _rel(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def main(argv: Sequence[str] | None = None) -> int:
    """CLI entry point; returns the process exit code (0 built, 1 generation failed, 2 missing inputs)."""
    parser = argparse.ArgumentParser(prog="python -m lab.report", description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, default=RESULTS_DIR, help="Allure results directory")
    parser.add_argument("--output", type=Path, default=REPORT_DIR, help="report directory (gets index.html)")
    args = parser.parse_args(argv)
    results, output = args.results.resolve(), args.output.resolve()
    try:
        index = build(results, output, cli=ALLURE_CLI, config=CONFIG)
    except ReportError as exc:
        print(f"lab.report: {exc}", file=sys.stderr)
        return exc.exit_code
    size_mb = index.stat().st_size / 1e6
    print(f"lab.report: {summarize(results).line()} -> {_rel(index)} ({size_mb:.1f} MB, single file, offline)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
